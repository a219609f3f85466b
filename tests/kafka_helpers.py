"""Helpers for the Kafka tests (a real Tansu broker from the ``kafka_broker`` fixture; holds no tests)."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "devtools"))

from kafka_broker import create_topic  # noqa: E402

_names = itertools.count()


def new_topic(bootstrap: str, prefix: str, partitions: int = 1, config: dict | None = None) -> str:
    """A topic name no other test uses, created with ``partitions``."""
    name = f"{prefix}-{os.getpid()}-{next(_names)}"
    create_topic(bootstrap, name, partitions, config)
    return name


def produce(bootstrap: str, topic: str, records, partition_of=None) -> None:
    """Produce ``records``: dicts (as JSON), bytes, or (key, value) pairs; ``partition_of(i, record)`` picks."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, r in enumerate(records):
        key, value = r if isinstance(r, tuple) else (None, r)
        kwargs = {}
        if partition_of is not None:
            kwargs["partition"] = partition_of(i, r)
        p.produce(topic, value=_bytes(value), key=_bytes(key), **kwargs)
    assert p.flush(30) == 0


def _bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return json.dumps(v).encode()


def consume_all(bootstrap: str, topic: str, *, quiet: float = 1.5, timeout: float = 60.0, expect: int | None = None):
    """Every message of ``topic`` from the start, read until ``expect`` arrived or none came for ``quiet`` s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    meta = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
    found, last, start = [], time.monotonic(), time.monotonic()
    try:
        while time.monotonic() - start < timeout:
            msgs = [m for m in c.consume(10000, 0.2) if m.error() is None]
            found += msgs
            if msgs:
                last = time.monotonic()
            if expect is not None and len(found) >= expect and time.monotonic() - last > 0.3:
                break
            if expect is None and time.monotonic() - last > quiet:
                break
        return [(m.partition(), m.offset(), m.key(), m.value(), dict(m.headers() or [])) for m in found]
    finally:
        c.close()


def values(messages) -> list:
    """The JSON values of consumed messages (None for tombstones)."""
    return [None if v is None else json.loads(v) for _, _, _, v, _ in messages]
