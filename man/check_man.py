#!/usr/bin/env python3
"""check_man.py DPGATE MANPAGE: the man page documents the command line.

Every command `dpgate --help` lists has a section in MANPAGE, and each
section names only commands that exist.  For every command, the options
`dpgate CMD --help` mentions are exactly those its man page section
mentions, and the top-level options of `dpgate --help` are exactly those
of the OPTIONS section.  The databases `dpgate serve --help` accepts are
named in the serve line of `dpgate --help` and in the DESCRIPTION.  Exit
0 when all agree, 1 with the differences."""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "common"))
from check_report import finish  # noqa: E402

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# The stores serve can run on; each one serve's help names must be named
# wherever serve is summed up in one line, or a reader takes it for the only.
DATABASES = ("SQLite", "PostgreSQL")


def run_help(binary, args):
    done = subprocess.run([binary] + args, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        sys.exit(f"dpgate {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def commands_and_options(top):
    """The command names and the option text of `dpgate --help`."""
    commands, section, options = [], None, []
    for line in top.splitlines():
        if line in ("commands:", "options:"):
            section = line
        elif not line.strip():
            section = None
        elif section == "commands:":
            m = re.match(r"  ([a-z][a-z-]*)(\s|$)", line)
            if m and m.group(1) != "help":
                commands.append(m.group(1))
        elif section == "options:":
            options.append(line)
    return commands, set(OPTION.findall("\n".join(options)))


def serve_line(top):
    """The one-line summary of serve in `dpgate --help`."""
    for line in top.splitlines():
        if re.match(r"  serve\s", line):
            return line
    return ""


def database_problems(binary, top, sections):
    """The databases serve accepts that a summary of serve leaves out."""
    accepted = [db for db in DATABASES if db in run_help(binary, ["serve", "--help"])]
    summaries = {"the serve line of dpgate --help": serve_line(top),
                 "the man page's DESCRIPTION": sections.get("DESCRIPTION", "")}
    return [f"{where} does not name {db}, which dpgate serve --help accepts"
            for where, text in summaries.items() for db in accepted if db not in text]


def man_sections(text):
    """{heading: plain text} for every .SH and .SS of a roff man page."""
    plain = re.sub(r"\\f[BIRP]|\\\(..|\\&", "", text).replace("\\-", "-")
    sections, heading = {}, None
    for line in plain.splitlines():
        m = re.match(r'\.S[HS]\s+"?([^"]*)"?\s*$', line)
        if m:
            heading = m.group(1).strip()
            sections[heading] = ""
        elif heading is not None and not line.startswith('.\\"'):
            sections[heading] += line + "\n"
    return sections


def main():
    binary, manpage = sys.argv[1], sys.argv[2]
    problems = []
    top = run_help(binary, ["--help"])
    commands, top_options = commands_and_options(top)
    if len(commands) < 2:
        sys.exit(f"found only {commands} in dpgate --help: is its format still parsed here?")
    sections = man_sections(open(manpage, encoding="utf-8").read())

    by_command = {}
    for heading, body in sections.items():
        if not heading.startswith("dpgate "):
            continue
        for name in heading[len("dpgate "):].split("|"):
            name = name.strip()
            if name not in commands:
                problems.append(f"man section '{heading}': no command '{name}' in dpgate --help")
            elif name in by_command:
                problems.append(f"command '{name}' has two man sections")
            by_command[name] = set(OPTION.findall(body))

    for name in commands:
        if name not in by_command:
            problems.append(f"command '{name}' has no man section (.SS \"dpgate {name}\")")
            continue
        helped = set(OPTION.findall(run_help(binary, [name, "--help"])))
        for opt in sorted(helped - by_command[name]):
            problems.append(f"dpgate {name} --help lists {opt}; the man page does not")
        for opt in sorted(by_command[name] - helped):
            problems.append(f"the man page lists {opt} for {name}; dpgate {name} --help does not")

    man_top = set(OPTION.findall(sections.get("OPTIONS", "")))
    for opt in sorted(top_options - man_top):
        problems.append(f"dpgate --help lists {opt}; the man page's OPTIONS do not")
    for opt in sorted(man_top - top_options):
        problems.append(f"the man page's OPTIONS list {opt}; dpgate --help does not")

    problems += database_problems(binary, top, sections)
    return finish(problems, f"{len(commands)} commands checked, {len(problems)} problems")


if __name__ == "__main__":
    sys.exit(main())
