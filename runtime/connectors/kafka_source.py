"""The Kafka source: topics read by partition assignment, offsets in checkpoints.

dsms assigns the partitions itself (as Flink's Kafka source does) rather
than joining a consumer group: the group id is used to read and commit
offsets (``scan.startup.mode = 'group-offsets'``, and for monitoring).

Position: the next offset of every partition. A checkpoint stores it, and a
restore seeks each partition there, so the records after the checkpoint are
read again and nothing before it (exactly-once replay). Once a checkpoint
is on disk its offsets are also committed to the consumer group
(asynchronously; for monitoring tools such as ``kafka-consumer-groups``,
never read back by a restore), as Flink commits on checkpoint completion.

Watermarks per partition: every batch says which partition each row came
from (``batch_partitions``, indexes into ``partitions``), and the source
operator keeps a watermark per partition (runtime/operators/source.py).

Bounded reads (``scan.bounded.mode``) stop each partition at an offset
fixed when the source opens; ``read`` returns None when all have stopped.
"""

from __future__ import annotations

import os
import re

import numpy as np
import pyarrow as pa
from confluent_kafka import KafkaException, TopicPartition

from ..changelog import DELETE, INSERT, OP
from .base import SourceError
from .dead_letter import DeadLetter
from .kafka_client import consumer, end_offsets, list_partitions
from .kafka_config import KafkaOptions
from .kafka_decode import BadMessage, MessageDecoder, Messages
from .salvage import BadInput


class KafkaSource:
    """A SourceReader over Kafka partitions.

    Args:
        opts: the connector's options.
        decoder: turns batches of messages into the requested columns.
        batch_rows: most messages per batch.
        upsert: read as an upsert-kafka table: a null value deletes its key.
        dead_letter_path: where rejected messages go under on_error = 'skip'.
    """

    def __init__(self, opts: KafkaOptions, decoder: MessageDecoder, batch_rows: int, *, upsert: bool = False,
                 dead_letter_path: str | None = None, poll_timeout: float = 0.05):
        self.opts, self.decoder, self.batch_rows, self.upsert = opts, decoder, batch_rows, upsert
        self.poll_timeout = poll_timeout
        self.consumer = consumer(opts.client, opts.name)
        self.partitions = self._partitions()
        self.slot = {tp: i for i, tp in enumerate(self.partitions)}
        self.next: dict[tuple[str, int], int] | None = None  # decided on the first read, unless seek() says
        self.stop: dict[tuple[str, int], int] = {}
        self.done_slots: set[int] = set()
        self.batch_partitions: np.ndarray | None = None
        self.dead_letter = DeadLetter(dead_letter_path, opts.name) if opts.on_error == "skip" else None
        self._skipped = 0
        self._assigned = False
        self._not_before = opts.startup_timestamp_ms if opts.startup_mode == "timestamp" else None
        self._bound_ts = opts.bounded_timestamp_ms if opts.bounded_mode == "timestamp" else None
        topics = {t for t, _ in self.partitions}
        self._only_topic = next(iter(topics)) if len(topics) == 1 else None
        self._needs_keys = upsert or decoder.key is not None
        self._needs_timestamps = opts.startup_mode == "timestamp" or self._bound_ts is not None or \
            "timestamp" in decoder.metadata.values()

    # -- the SourceReader protocol ------------------------------------------------------------

    def read(self) -> pa.Table | None:
        if not self._assigned:
            self._assign()
        if self.opts.bounded_mode is not None and len(self.done_slots) == len(self.partitions):
            return None
        # What the client has fetched already, without waiting; wait a little only when it has nothing.
        msgs = self.consumer.consume(num_messages=self.batch_rows, timeout=0) or \
            self.consumer.consume(num_messages=self.batch_rows, timeout=self.poll_timeout)
        good = []
        for m in msgs:
            err = m.error()
            if err is None:
                good.append(m)
            elif not err.retriable() and err.fatal():
                raise SourceError(f"Kafka: {err.str()}", source=self.opts.name)
        if not good:
            if self.opts.bounded_mode is not None:
                self._finish_passed()
            self.batch_partitions = np.empty(0, np.int32)
            return self._empty()
        batch = Messages.of(good, topic=self._only_topic, keys=self._needs_keys, timestamps=self._needs_timestamps)
        batch = self._advance(batch)
        if not len(batch):
            self.batch_partitions = np.empty(0, np.int32)
            return self._empty()
        table, rows = self._decode(batch)
        self.batch_partitions = self._slots(batch, rows)
        return table

    @property
    def position(self) -> dict:
        self._resolve_start()  # a checkpoint before the first read pins where reading starts (and stops)
        position = {"offsets": {f"{t}:{p}": o for (t, p), o in self.next.items()}}
        if self.opts.bounded_mode is not None:
            position["stop"] = {f"{t}:{p}": o for (t, p), o in self.stop.items()}
        return position

    def checkpoint_complete(self, position: dict) -> None:
        """A checkpoint holding ``position`` is on disk: commit its offsets to the group (for monitoring)."""
        if self._assigned and position.get("offsets"):
            self._commit(_unkeyed(position["offsets"]))

    def backlog(self) -> tuple[int, str] | None:
        """Consumer lag: messages between this reader's positions and the partitions' high watermarks, as
        the client last heard them from the broker (it fetches ahead in the background), so asking is cheap."""
        if not self.next or not self._assigned:
            return None
        lag = 0
        for (t, p), off in self.next.items():
            if self.slot[(t, p)] not in self.done_slots:
                high = self.consumer.get_watermark_offsets(TopicPartition(t, p), cached=True)
                if high is not None and high[1] >= 0:
                    lag += max(0, high[1] - off)
        return lag, "messages"

    def seek(self, position: dict) -> None:
        offsets = position.get("offsets")
        if not offsets:
            return
        self._resolve_start()
        self.next.update({tp: o for tp, o in _unkeyed(offsets).items() if tp in self.next})
        if "stop" in position:  # a bounded read stops where it was told to when it first opened
            self.stop.update(_unkeyed(position["stop"]))
        self._assigned = False
        self._not_before = None  # the restored offsets are past the startup filter's records already

    @property
    def skipped(self) -> int:
        return self._skipped

    def close(self) -> None:
        try:
            if self.next:
                self._commit(self.next, asynchronous=False)
        finally:
            self.consumer.close()
            if self.dead_letter is not None:
                self.dead_letter.close()

    def _slots(self, batch: Messages, rows: np.ndarray) -> np.ndarray:
        """The partition slot (index into ``partitions``) of each row."""
        parts = batch.partitions[rows]
        topics = set(batch.topics)
        if len(topics) == 1:
            topic = next(iter(topics))
            lut = np.zeros(int(parts.max(initial=0)) + 1, np.int32)
            for (t, p), slot in self.slot.items():
                if t == topic and p < len(lut):
                    lut[p] = slot
            return lut[parts]
        return np.array([self.slot[(batch.topics[i], int(batch.partitions[i]))] for i in rows], np.int32)

    # -- partitions and offsets ----------------------------------------------------------------

    def _partitions(self) -> list[tuple[str, int]]:
        found = list_partitions(self.consumer, self.opts.name)
        if self.opts.topic_pattern is not None:
            pattern = re.compile(self.opts.topic_pattern)
            topics = sorted(t for t in found if pattern.fullmatch(t))
        else:
            topics = list(self.opts.topics)
            missing = [t for t in topics if t not in found]
            if missing:
                raise SourceError(f"Kafka topic(s) {', '.join(missing)} do not exist on "
                                  f"{self.opts.client['bootstrap.servers']}", source=self.opts.name)
        parts = [(t, p) for t in topics for p in sorted(found.get(t, ()))]
        if not parts:
            raise SourceError(f"no Kafka topic matches '{self.opts.topic_pattern}'", source=self.opts.name)
        return parts

    def _resolve_start(self) -> None:
        """Pin where reading starts (``scan.startup.mode``) and, for a bounded read, where it stops."""
        if self.next is not None:
            return
        self.next, ends = self._start_offsets(self.opts.startup_mode)
        self.stop = self._stop_offsets(self.opts.bounded_mode, ends)

    def _low(self, t: str, p: int) -> int:
        return self.consumer.get_watermark_offsets(TopicPartition(t, p), timeout=10)[0]

    def _start_offsets(self, mode: str) -> tuple[dict, dict | None]:
        """The first offset to read per partition, and the end offsets when finding it needed them."""
        if mode == "earliest-offset":
            return {(t, p): self._low(t, p) for t, p in self.partitions}, None
        if mode == "timestamp":
            # The broker's answer is a lower bound (Tansu answers 0): records before the time are also
            # left out one by one as they are read (_advance).
            ends = end_offsets(self.opts.client, self.partitions)
            found = self.consumer.offsets_for_times(
                [TopicPartition(t, p, self.opts.startup_timestamp_ms) for t, p in self.partitions], timeout=10)
            return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else ends[(tp.topic, tp.partition)]
                    for tp in found}, ends
        if mode == "latest-offset":
            ends = end_offsets(self.opts.client, self.partitions)
            return dict(ends), ends
        if mode == "specific-offsets":
            return {(t, p): self.opts.startup_offsets.get(p, self._low(t, p)) for t, p in self.partitions}, None
        # group-offsets: where the group left off; the earliest offset where it has not committed
        committed = self.consumer.committed([TopicPartition(t, p) for t, p in self.partitions], timeout=10)
        return {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else self._low(tp.topic, tp.partition)
                for tp in committed}, None

    def _stop_offsets(self, bounded: str | None, ends: dict | None) -> dict:
        """Where a bounded read (``scan.bounded.mode``) stops per partition (an unbounded one keeps what it has)."""
        if bounded in ("latest-offset", "timestamp"):
            return ends if ends is not None else end_offsets(self.opts.client, self.partitions)
        if bounded == "group-offsets":
            committed = self.consumer.committed([TopicPartition(t, p) for t, p in self.partitions], timeout=10)
            return {(tp.topic, tp.partition): max(tp.offset, 0) for tp in committed}
        if bounded == "specific-offsets":
            ends = end_offsets(self.opts.client, self.partitions)
            return {(t, p): self.opts.bounded_offsets.get(p, ends[(t, p)]) for t, p in self.partitions}
        return self.stop

    def _assign(self) -> None:
        self._resolve_start()
        if self.opts.bounded_mode is not None:
            for tp, off in self.next.items():
                if off >= self.stop.get(tp, 0):
                    self.done_slots.add(self.slot[tp])
        self.consumer.assign([TopicPartition(t, p, self.next[(t, p)]) for t, p in self.partitions
                              if self.slot[(t, p)] not in self.done_slots])
        self._assigned = True

    def _advance(self, batch: Messages) -> Messages:
        """Move the positions past ``batch``; leave out what the startup and bounded modes exclude."""
        keep = np.ones(len(batch), dtype=bool)
        for topic, part in _distinct(batch):
            tp = (topic, int(part))
            rows = np.flatnonzero((batch.partitions == part) & _topic_mask(batch, topic))
            offsets = batch.offsets[rows]
            if self.opts.bounded_mode is not None:
                stop = self.stop.get(tp, 0)
                past = offsets >= stop
                if self._bound_ts is not None:
                    late = batch.timestamps[rows] > self._bound_ts
                    if late.any():  # the partition ends at its first record after the bound
                        stop = min(stop, int(offsets[np.argmax(late)]))
                        past |= offsets >= stop
                keep[rows[past]] = False
                if (offsets + 1 >= stop).any() or past.any():
                    self._finish(tp)
            self.next[tp] = max(self.next.get(tp, 0), int(offsets.max()) + 1)
        if self._not_before is not None:
            keep &= batch.timestamps >= self._not_before
        return batch if keep.all() else batch.take(np.flatnonzero(keep))

    def _finish_passed(self) -> None:
        """Finish the partitions whose fetch position has reached their stop without a record there: the last
        offsets of a partition that transactional producers wrote are commit markers, which consumers never see."""
        waiting = [TopicPartition(t, p) for (t, p), slot in self.slot.items() if slot not in self.done_slots]
        if not waiting:
            return
        for tp in self.consumer.position(waiting):
            key = (tp.topic, tp.partition)
            if tp.offset >= 0 and tp.offset >= self.stop.get(key, 0):
                self.next[key] = max(self.next.get(key, 0), tp.offset)
                self._finish(key)

    def _finish(self, tp: tuple[str, int]) -> None:
        slot = self.slot[tp]
        if slot not in self.done_slots:
            self.done_slots.add(slot)
            self.consumer.pause([TopicPartition(*tp)])

    def _commit(self, offsets: dict[tuple[str, int], int], asynchronous: bool = True) -> None:
        if not self._assigned:
            return
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                 asynchronous=asynchronous)
        except KafkaException:
            pass  # committed offsets are for monitoring only: the checkpoint holds the positions

    # -- decoding --------------------------------------------------------------------------------

    def _decode(self, batch: Messages) -> tuple[pa.Table, np.ndarray]:
        if not self.upsert:
            keep = np.array([v is not None for v in batch.values], dtype=bool)  # tombstones carry no row
            if not keep.all():
                batch = batch.take(np.flatnonzero(keep))
            table, rows, bad = self.decoder.decode(batch)
            self._reject(bad)
            return table, rows
        deletes = np.array([v is None for v in batch.values], dtype=bool)
        up_rows, del_rows = np.flatnonzero(~deletes), np.flatnonzero(deletes)
        ups, up_kept, bad = self.decoder.decode(batch.take(up_rows)) if len(up_rows) else (None, up_rows, [])
        self._reject(bad)
        parts, order = [], []
        if ups is not None:
            parts.append(ups.append_column(OP, pa.array(np.full(ups.num_rows, INSERT, np.int8))))
            order.append(up_rows[up_kept])
        if len(del_rows):
            dels, kept, bad = self._decode_deletes(batch.take(del_rows))
            self._reject(bad)
            parts.append(dels)
            order.append(del_rows[kept])
        table = pa.concat_tables(parts)
        rows = np.concatenate(order)
        by_offset = np.argsort(rows, kind="stable")  # message order: a key's upsert and delete stay in order
        return table.take(pa.array(by_offset)), rows[by_offset]

    def _decode_deletes(self, batch: Messages) -> tuple[pa.Table, np.ndarray, list[BadMessage]]:
        """Tombstones: the key's columns from the message key, the others NULL."""
        schema = self.decoder.schema
        kept, bad, keys = [], [], None
        try:
            keys = self.decoder.key.decode(batch.keys)
            kept = np.arange(len(batch))
        except BadInput:
            keys = None
        if keys is None:  # the error path: message by message
            good = []
            for i in range(len(batch)):
                try:
                    self.decoder.key.decode([batch.keys[i]])
                    good.append(i)
                except BadInput:
                    bad.append(BadMessage(batch.topics[i], int(batch.partitions[i]), int(batch.offsets[i]), None,
                                          "the key of a delete (a message without a value) cannot be read",
                                          batch.keys[i]))
            kept = np.array(good, dtype=np.int64)
            keys = self.decoder.key.decode([batch.keys[i] for i in good]) if good else None
        n = len(kept)
        columns = [keys.column(f.name) if keys is not None and f.name in keys.column_names else pa.nulls(n, f.type)
                   for f in schema]
        table = pa.Table.from_arrays(columns, schema=schema).append_column(OP, pa.array(np.full(n, DELETE, np.int8)))
        return table, kept, bad

    def _reject(self, bad: list[BadMessage]) -> None:
        if not bad:
            return
        if self.dead_letter is None:
            b = bad[0]
            raise SourceError(f"{b.error} (topic {b.topic}, partition {b.partition}, offset {b.offset}); "
                              "set 'on_error' = 'skip' to dead-letter bad messages", source=self.opts.name,
                              column=b.column)
        self._skipped += len(bad)
        self.dead_letter.write_records([
            {"topic": b.topic, "partition": b.partition, "offset": b.offset, "column": b.column, "error": b.error,
             "raw": None if b.raw is None else b.raw.decode("utf-8", errors="replace")} for b in bad])

    def _empty(self) -> pa.Table:
        table = self.decoder.schema.empty_table()
        return table.append_column(OP, pa.array([], pa.int8())) if self.upsert else table


def _distinct(batch: Messages) -> list[tuple[str, int]]:
    if len(set(batch.topics[:1])) and batch.topics.count(batch.topics[0]) == len(batch.topics):
        return [(batch.topics[0], int(p)) for p in np.unique(batch.partitions)]
    return sorted({(t, int(p)) for t, p in zip(batch.topics, batch.partitions)})


def _topic_mask(batch: Messages, topic: str) -> np.ndarray:
    if batch.topics and batch.topics.count(topic) == len(batch.topics):
        return np.ones(len(batch), dtype=bool)
    return np.array([t == topic for t in batch.topics], dtype=bool)


def _unkeyed(offsets: dict) -> dict[tuple[str, int], int]:
    """{'topic:partition': offset} (as checkpoints keep it) -> {(topic, partition): offset}."""
    out = {}
    for key, offset in offsets.items():
        topic, _, part = key.rpartition(":")
        out[(topic, int(part))] = int(offset)
    return out


def default_dead_letter(name: str, base_dir: str | None) -> str:
    return os.path.join(base_dir or os.getcwd(), f"{name}.dead_letter.jsonl")
