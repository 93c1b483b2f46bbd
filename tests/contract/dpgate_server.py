"""A real `dpgate serve` for the contract tests, laid out as .ci/serve lays
out a clone: `build/server/dpgate` (a symlink to $DPGATE_BIN) and
`dpgate-data/dpgate.db` under a temporary directory, an admin key made the
way .ci/serve makes it, and the server on a loopback port the kernel picks
(`--listen 127.0.0.1:0`; the port is read from the URL it logs), so that
tests running side by side never race for a port."""
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

START_LIMIT_S = 20.0   # listening and answering /healthz
STOP_LIMIT_S = 20.0    # exit after SIGTERM


def time_scale():
    """The slow-down a sanitizer build asks for (.ci/tsan sets it)."""
    try:
        return max(1.0, float(os.environ.get("DPGATE_TEST_TIME_SCALE", "1")))
    except ValueError:
        return 1.0


class Server:
    def __init__(self):
        self.bin = os.environ.get("DPGATE_BIN")
        if not self.bin:
            raise SystemExit("DPGATE_BIN is not set (run through meson test)")
        self.root = tempfile.mkdtemp(prefix="dpgate-contract-")
        os.makedirs(os.path.join(self.root, "build", "server"))
        os.symlink(self.bin, os.path.join(self.root, "build", "server", "dpgate"))
        self.data = os.path.join(self.root, "dpgate-data")
        os.mkdir(self.data)
        self.db = os.path.join(self.data, "dpgate.db")
        self.log = os.path.join(self.root, "server.log")
        self.proc = None
        self.port = 0
        self.key = ""

    def __enter__(self):
        out = subprocess.run([self.bin, "keys", "create", "--db", self.db, "--role", "admin",
                              "--if-none", "--note", "created by .ci/serve"],
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True).stdout
        self.key = out.strip().splitlines()[-1]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [self.bin, "serve", "--db", self.db, "--data-dir", self.data,
                 "--listen", "127.0.0.1:0"],
                cwd=self.root, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_LIMIT_S * time_scale()
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"dpgate serve exited ({self.proc.returncode}):\n{self.log_text()}")
            m = re.search(r'"url":"http://127\.0\.0\.1:(\d+)', self.log_text())
            if m:
                self.port = int(m.group(1))
                try:
                    if self.call("GET", "/healthz")[0] == 200:
                        return self
                except OSError:
                    pass
            time.sleep(0.02)
        self.__exit__(None, None, None)
        raise AssertionError(f"dpgate serve did not answer /healthz:\n{self.log_text()}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_LIMIT_S * time_scale())
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if exc[0] is None:
            shutil.rmtree(self.root, ignore_errors=True)
        return False

    def log_text(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def call(self, method, target, body=None, key=None, content_type=None):
        """One request, its body JSON unless a content type is given (then
        text as it is); returns (status, parsed JSON body or None)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30 * time_scale())
        headers = {}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        if body is not None:
            body = body if content_type else json.dumps(body)
            headers["Content-Type"] = content_type or "application/json"
        try:
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        finally:
            conn.close()
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return resp.status, parsed
