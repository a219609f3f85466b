"""The Flink side of the benchmarks: a separate venv with PyFlink, and running jobs in it.

PyFlink pins its own pandas, pyarrow and numpy, so it lives in its own venv
(benchmarks/.venv-flink, git-ignored), created on first use from
requirements.txt beside this file. Jobs run in a child process with that
venv's Python (runner.py): a JVM with a local mini-cluster per job.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
VENV = os.environ.get("FLINK_VENV", os.path.join(BENCHMARKS, ".venv-flink"))
PYTHON = os.path.join(VENV, "bin", "python")
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
STAMP = os.path.join(VENV, ".installed")


def _requirements_hash() -> str:
    with open(REQUIREMENTS, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def ensure_venv(base_python: str | None = None) -> str:
    """Create the Flink venv (or update it when requirements.txt changed); return its Python."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise SystemExit("Flink needs a Java runtime (17): install one (apt-get install openjdk-17-jre-headless)")
    wanted = _requirements_hash()
    if os.path.exists(STAMP) and open(STAMP).read().strip() == wanted:
        return PYTHON
    base = base_python or shutil.which("python3.11") or shutil.which("python3") or sys.executable
    print(f"creating the Flink venv {VENV} (PyFlink and its own pandas/pyarrow; a few minutes)", file=sys.stderr)
    if not os.path.exists(PYTHON):
        subprocess.run([base, "-m", "venv", VENV], check=True)
    subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "-r", REQUIREMENTS], check=True)
    with open(STAMP, "w") as f:
        f.write(wanted + "\n")
    return PYTHON


def run(spec: dict, log: str | None = None) -> dict:
    """Run a spec (see runner.py) in the Flink venv; return its result.

    Flink's own output (log4j, warnings) goes to ``log`` (default: discarded
    unless the run fails, when its tail is printed).
    """
    python = ensure_venv()
    with tempfile.TemporaryDirectory(prefix="dsms-flink-") as tmp:
        spec_path, result_path = os.path.join(tmp, "spec.json"), os.path.join(tmp, "result.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        out_path = log or os.path.join(tmp, "flink.log")
        with open(out_path, "w") as out:
            proc = subprocess.run([python, os.path.join(HERE, "runner.py"), spec_path, result_path],
                                  stdout=out, stderr=subprocess.STDOUT)
        if proc.returncode != 0 or not os.path.exists(result_path):
            with open(out_path) as f:
                sys.stderr.write(f.read()[-4000:])
            raise SystemExit(f"the Flink runner failed (exit {proc.returncode})")
        with open(result_path) as f:
            return json.load(f)


class Stepped:
    """A Flink runner that runs the spec's jobs one at a time, when asked (``next()``)."""

    def __init__(self, spec: dict, log: str):
        self.python = ensure_venv()
        self.tmp = tempfile.TemporaryDirectory(prefix="dsms-flink-")
        self.spec_path = os.path.join(self.tmp.name, "spec.json")
        self.result_path = os.path.join(self.tmp.name, "result.json")
        self.names = [j["name"] for j in spec["jobs"]]
        with open(self.spec_path, "w") as f:
            json.dump({**spec, "stepped": True}, f)
        self.log = open(log, "w")
        self.proc = subprocess.Popen([self.python, os.path.join(HERE, "runner.py"), self.spec_path, self.result_path],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.done = 0

    def next(self) -> dict:
        """Run the next job; return its result."""
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("@@done "):
                break
            self.log.write(line)
        else:
            self.close()
            raise SystemExit(f"the Flink runner stopped (exit {self.proc.wait()}); see {self.log.name}")
        with open(self.result_path) as f:
            self.result = json.load(f)
        self.done += 1
        return self.result["jobs"][-1]

    def close(self) -> dict:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
        self.log.close()
        self.tmp.cleanup()
        return getattr(self, "result", {})
