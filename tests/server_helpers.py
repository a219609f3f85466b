"""A real `dsms server` process for tests: started on a free port, stopped by its pid."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
PSQL = "/usr/bin/psql" if os.path.exists("/usr/bin/psql") else "psql"


class DsmsServer:
    """``dsms server --port 0`` in ``workdir``; the port is read from its log line.

    Its stdout and stderr go to ``server.log``; with ``log_file`` the server logs there instead
    (``--log-file``) and that is the log read.
    """

    def __init__(self, workdir: str, *args: str, state_dir: str = "state", log_file: str | None = None):
        self.workdir = workdir
        self.state_dir = state_dir
        self.args = list(args) + (["--log-file", log_file] if log_file else [])
        self.console_path = os.path.join(workdir, "server.log")
        self.log_path = os.path.join(workdir, log_file) if log_file else self.console_path
        self.proc: subprocess.Popen | None = None
        self.port = self.metrics_port = None

    def start(self, timeout: float = 60.0) -> "DsmsServer":
        self._log = open(self.console_path, "a")
        self._offset = os.path.getsize(self.log_path) if os.path.exists(self.log_path) else 0
        self.proc = subprocess.Popen([DSMS, "server", "--state-dir", self.state_dir, "--port", "0",
                                      "--metrics-port", "0", *self.args], cwd=self.workdir,
                                     stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = self.log()
            found = re.search(r"listening on postgresql://[\d.]+:(\d+)", text)
            if found:
                self.port = int(found.group(1))
                metrics = re.search(r"metrics on http://[\d.]+:(\d+)", text)
                self.metrics_port = int(metrics.group(1)) if metrics else None
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"dsms server exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("dsms server did not start:\n" + self.log())

    def log(self) -> str:
        if not os.path.exists(self.log_path):
            return ""
        with open(self.log_path) as f:
            f.seek(self._offset)
            return f.read()

    def url(self, user: str = "dsms", password: str | None = None) -> str:
        auth = f"{user}:{password}" if password else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/dsms"

    def psql(self, *args: str, input: str | None = None, password: str | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
        env = dict(os.environ, PGPASSWORD=password or "", PGCONNECT_TIMEOUT="10", PAGER="", PSQL_PAGER="")
        out = subprocess.run([PSQL, "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "dsms", "-d", "dsms",
                              *args], input=input, capture_output=True, text=True, env=env, timeout=120,
                             cwd=self.workdir)
        if check and out.returncode != 0:
            raise AssertionError(f"psql failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
        return out

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        """Send ``sig`` to the server (by its pid) and wait for it to exit; its exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def __enter__(self) -> "DsmsServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()
