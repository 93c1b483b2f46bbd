#!/usr/bin/env python3
"""run_readme.py README.md DOC.md...: runs the shell examples (the ```sh
blocks) of README.md and then of each docs/ file, in the order given, as
pasted, in order within a file, in one bash per file, each file against a
fresh `dpgate serve` with an admin key in $KEY, from a directory laid out as
.ci/serve lays out a clone (build/server/dpgate, dpgate-data/dpgate.db).
`localhost:8080`, the address the docs use, is rewritten to the server's
port.

Every command must succeed (`set -euo pipefail`), and every curl must be
answered 2XX: a `curl` ahead of the real one on PATH adds
`--write-out '%{stderr}...%{http_code}'`, logs the status and fails the
run on any other, or on a curl that fails (keys are shown as dpg_... in
the log).  Blocks that install, build or serve are skipped, and
only those: SKIPPED lists their lines per file, and a block is skipped only
when all its lines are listed; a block that mixes listed and other lines
fails.  Every docs/*.md beside README.md must be given, so that a new page's
examples cannot go unrun."""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from dpgate_server import Server, time_scale  # noqa: E402

# The lines of the blocks this test does not run (comments stripped), per
# file: the quick start's install-build-serve and test commands, and the
# build and test instructions.  This test is itself the server they would
# start.
SKIPPED = {
    "README.md": {
        "bash .ci/serve",
        "bash .ci/test",
    },
    "HACKING.md": {
        "bash .ci/install-deps",
        "meson setup build && ninja -C build",
        "meson test -C build --print-errorlogs",
        "meson test -C build --print-errorlogs readme_examples",
        "bash .ci/run",
    },
}
RUN_LIMIT_S = 240.0  # one file's blocks together (the training example's wait included)

CURL_WRAPPER = r'''#!/usr/bin/env bash
# The README test's curl: the real one, with the answer's status checked.
log=$DPGATE_README_CURL_LOG
status_file=$(mktemp)
trap 'rm -f "$status_file"' EXIT
rc=0
"$DPGATE_README_REAL_CURL" "$@" \
  --write-out '%{stderr}\ndpgate-readme-status %{http_code}\n' 2>"$status_file" || rc=$?
code=$(sed -n 's/^dpgate-readme-status //p' "$status_file" | tail -n 1)
sed '/^dpgate-readme-status /d; /^$/d' "$status_file" >&2
# One write per answer: curls that finish together (a long-poll and the
# write that wakes it) must not interleave their lines in the log.
line=$(printf '%s %s curl' "${code:-none}" "$rc"; printf ' %q' "$@")
printf '%s\n' "$line" >>"$log"
case $rc/$code in
  0/2??) exit 0 ;;
esac
echo "README test: curl exited $rc, answered ${code:-nothing}: curl $*" >&2
# A failed curl ends the whole run, also where bash's -e does not reach
# (an `until` condition, which would otherwise poll until the time limit).
kill -TERM 0
exit 1
'''


def strip_comment(line):
    # The README's blocks put a comment after whitespace and '# '.
    return re.sub(r"\s+#\s.*$", "", line).strip()


def sh_blocks(text):
    """(first line number, text) of each ```sh fenced block."""
    blocks, cur, start = [], None, 0
    for n, line in enumerate(text.splitlines(), 1):
        if cur is None and line.strip() == "```sh":
            cur, start = [], n + 1
        elif cur is not None and line.strip() == "```":
            blocks.append((start, "\n".join(cur) + "\n"))
            cur = None
        elif cur is not None:
            cur.append(line)
    if cur is not None:
        raise AssertionError(f"line {start - 1}: ```sh block never closed")
    return blocks


def run_file(path, real_curl):
    """Runs one file's blocks on a fresh server; returns its errors."""
    name = os.path.basename(path)
    skip = SKIPPED.get(name, set())
    with open(path, encoding="utf-8") as f:
        blocks = sh_blocks(f.read())
    run, skipped, errors = [], [], []
    seen_skips = set()
    for line_no, text in blocks:
        lines = [strip_comment(s) for s in text.splitlines() if strip_comment(s)]
        listed = [s for s in lines if s in skip]
        seen_skips.update(listed)
        if listed and len(listed) == len(lines):
            skipped.append(line_no)
        elif listed:
            errors.append(f"{name} line {line_no}: a block mixes skipped lines {listed} with others")
        else:
            run.append((line_no, text))
    for s in sorted(skip - seen_skips):
        errors.append(f"SKIPPED lists {s!r} for {name}, which no block there holds any more")
    if not run and name == "README.md":
        errors.append("README.md: no ```sh block to run")
    if errors or not run:
        print(f"\n{name}: {len(run)} blocks to run, {len(skipped)} skipped")
        return errors

    with Server() as srv:
        bindir = os.path.join(srv.root, "readme-bin")
        os.mkdir(bindir)
        with open(os.path.join(bindir, "curl"), "w", encoding="utf-8") as f:
            f.write(CURL_WRAPPER)
        os.chmod(os.path.join(bindir, "curl"), 0o755)
        curl_log = os.path.join(srv.root, "curl.log")
        open(curl_log, "w").close()

        script = ["set -euo pipefail",
                  f"trap 'echo \"{name} line $README_LINE: failed (exit $?): $BASH_COMMAND\" >&2' ERR"]
        curls = 0
        for line_no, text in run:
            text = text.replace("localhost:8080", f"localhost:{srv.port}")
            curls += len(re.findall(r"(?:^|[\s|;&(])curl\s", text))
            script.append(f"README_LINE={line_no}")
            script.append(f"echo; echo '== {name} line {line_no}'")
            script.append(text)
        env = dict(os.environ, KEY=srv.key, PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                   DPGATE_README_REAL_CURL=real_curl, DPGATE_README_CURL_LOG=curl_log)
        proc = subprocess.Popen(["bash", "-c", "\n".join(script)], cwd=srv.root, env=env,
                                start_new_session=True)
        try:
            rc = proc.wait(RUN_LIMIT_S * time_scale())
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
        with open(curl_log, encoding="utf-8") as f:
            calls = f.read().splitlines()
        print(f"\n{name}: {len(run)} blocks run (lines {[n for n, _ in run]}), "
              f"{len(skipped)} skipped (lines {skipped}); {len(calls)} curl answers:")
        calls = [re.sub(r"dpg_[0-9a-f]{16}_[0-9a-f]{64}", "dpg_...", c) for c in calls]
        for c in calls:
            print("  " + c[:160])
        if rc is None:
            errors.append(f"{name}: the blocks did not finish within {RUN_LIMIT_S * time_scale():.0f} s")
        elif rc != 0:
            errors.append(f"{name}: the blocks failed (exit {rc}); see above")
        bad = [c for c in calls if not re.match(r"2\d\d 0 ", c)]
        if bad:
            errors.append(f"{name}: curl answers that are not 2XX: {bad}")
        if len(calls) < curls:
            errors.append(f"{name}: {curls} curl commands in the blocks, {len(calls)} answers checked")
        if errors:
            print("server log:\n" + srv.log_text()[-4000:])
    return errors


def main():
    paths = sys.argv[1:]
    errors = []
    if not paths or os.path.basename(paths[0]) != "README.md":
        print("usage: run_readme.py README.md [docs/NAME.md...]")
        return 1
    docs_dir = os.path.join(os.path.dirname(os.path.abspath(paths[0])), "docs")
    given = {os.path.abspath(p) for p in paths}
    if os.path.isdir(docs_dir):
        for n in sorted(os.listdir(docs_dir)):
            if n.endswith(".md") and os.path.join(docs_dir, n) not in given:
                errors.append(f"docs/{n} is not among the files this test runs")
    names = {os.path.basename(p) for p in paths}
    for n in sorted(set(SKIPPED) - names):
        errors.append(f"SKIPPED names {n}, which is not among the files this test runs")
    real_curl = shutil.which("curl")
    if not real_curl:
        errors.append("curl not found")
    if errors:
        print("\n".join(errors))
        return 1
    for path in paths:
        errors += run_file(path, real_curl)
    print("\n".join(errors) if errors else "\nevery block ran, every curl answered 2XX")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
