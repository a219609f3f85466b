"""A Spark standalone cluster for tests: one master and one worker on 127.0.0.1, from the pyspark install.

The pyspark wheel carries Spark's jars and ``bin/spark-class``, which
starts the standalone master and worker (as ``sbin/start-master.sh`` does,
without daemonizing). Both bind free ports; the worker runs its executors
with an environment that has no ``PYTHONPATH``, so what their Python
workers can import is what their interpreter has plus what the driver
ships.

From Python::

    with SparkCluster(worker_memory="1g") as cluster:
        print(cluster.master_url)      # 'spark://127.0.0.1:PORT'

As a script, ``python devtools/spark_cluster.py`` prints the master URL on
its first line and serves until it is killed.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


class ClusterUnavailable(RuntimeError):
    """pyspark or Java is missing, or the cluster did not start (tests skip with this reason)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> str:
    try:
        import pyspark
    except ImportError:
        raise ClusterUnavailable("pyspark is not installed") from None
    home = os.path.dirname(pyspark.__file__)
    if not os.path.exists(os.path.join(home, "bin", "spark-class")):
        raise ClusterUnavailable(f"pyspark at {home} has no bin/spark-class")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise ClusterUnavailable("Java is not installed (Spark needs a JVM)")
    return home


class SparkCluster:
    """A standalone master and one worker (``cores``, ``worker_memory``), in a temporary folder."""

    def __init__(self, cores: int = 1, worker_memory: str = "1g", startup_timeout: float = 90.0):
        self.cores, self.worker_memory, self.startup_timeout = cores, worker_memory, startup_timeout
        self.port = free_port()
        self.folder = tempfile.mkdtemp(prefix="dsms-spark-cluster-")
        self.work_dir = os.path.join(self.folder, "work")
        self.processes: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen:
        """The master (serve.py watches it)."""
        return self.processes[0]

    def _env(self, home: str) -> dict:
        keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        env.update(SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=self.folder,
                   SPARK_NO_DAEMONIZE="1")
        return env

    def _start(self, home: str, name: str, args: list[str]) -> None:
        log = open(os.path.join(self.folder, f"{name}.log"), "wb")
        self.processes.append(subprocess.Popen(
            [os.path.join(home, "bin", "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
            env=self._env(home), cwd=self.folder, start_new_session=True))
        log.close()

    def start(self) -> SparkCluster:
        home = spark_home()
        self._start(home, "master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", str(self.port), "--webui-port", str(free_port())])
        self._wait_for("master", "I have been elected leader")
        self._start(home, "worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                     "--webui-port", str(free_port()), "--cores", str(self.cores),
                                     "--memory", self.worker_memory, "--work-dir", self.work_dir, self.master_url])
        self._wait_for("worker", "Successfully registered with master")
        return self

    def _wait_for(self, name: str, line: str) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                text = self.log(name)
                self.stop()
                raise ClusterUnavailable(f"the Spark {name} exited: {text[-1500:]}")
            if line in self.log(name):
                return
            time.sleep(0.2)
        text = self.log(name)
        self.stop()
        raise ClusterUnavailable(f"the Spark {name} did not start within {self.startup_timeout:.0f} s: {text[-1500:]}")

    def log(self, name: str) -> str:
        try:
            with open(os.path.join(self.folder, f"{name}.log"), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def executor_files(self) -> list[str]:
        """Every file under the worker's work folder (the applications' executors: their logs, shipped files)."""
        return [os.path.join(d, f) for d, _, files in os.walk(self.work_dir) for f in files]

    def stop(self) -> None:
        for p in reversed(self.processes):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.processes = []

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.cleanup()


def main() -> int:
    from serve import serve

    return serve("spark_cluster", __doc__, lambda: SparkCluster().start(), lambda c: c.master_url, ClusterUnavailable)


if __name__ == "__main__":
    sys.exit(main())
