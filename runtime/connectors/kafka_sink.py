"""The Kafka sink: results as messages, exactly once across crashes on any broker.

Formats: ``json``, ``csv``, ``raw`` (append-only results), ``changelog-json``
and ``debezium-json`` (any result, each change a message), and the
``upsert-kafka`` connector (each key's latest row; a delete is a tombstone,
a message with the key and no value; ``-U`` is not written, as Flink).

Exactly-once (``sink.delivery-guarantee = 'exactly-once'``, the default,
with a state directory) is a write-ahead log bound to checkpoints::

    turn ... turn | checkpoint n saved (state, source offsets, staged rows) | produce staged rows, flush
                  |<------------------- epoch n ------------------------>|

Results are staged in memory until the job is checkpointed; the staged
rows go into the checkpoint with the rest of the job, and only once the
checkpoint is on disk are they produced, each message with the headers
``dsms.sink`` (the sink's name), ``dsms.epoch`` (the checkpoint's epoch)
and ``dsms.seq`` (its index in the epoch). After a crash the job restarts
from its last checkpoint, whose staged rows may be partly in the topic: the
sink reads the topic back from where the previous epoch ended, finds the
``dsms.seq`` of its epoch already there, and produces only the others.
Rows computed after that checkpoint were never produced, and are computed
again. So every result is in the topic exactly once, whatever the broker
does with transactions (the test broker, Tansu, accepts them but does not
hide aborted records from ``read_committed`` readers), as long as the
producer is the only writer of its epoch's messages. The price is latency:
results appear at each checkpoint (``SET 'checkpoint.interval'``).

Without a state directory (nothing survives a crash anyway), or with
``'at-least-once'``/``'none'``, rows are produced as they come and flushed
at each checkpoint and at the end.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ..changelog import DELETE, INSERT, OP, UPDATE_BEFORE
from .base import SinkError
from .encode import Renderer, csv_columns_sql, json_lines_sql, row_object_sql
from .kafka_avro import AvroCodec
from .kafka_client import end_offsets, list_partitions, producer, read_range
from .kafka_config import KafkaOptions

SINK_HEADER, EPOCH_HEADER, SEQ_HEADER = "dsms.sink", "dsms.epoch", "dsms.seq"


class KafkaEncoder:
    """Result batches -> (keys, values) lists of bytes, rendered vectorized by DuckDB."""

    def __init__(self, opts: KafkaOptions, schema: pa.Schema, upsert: bool):
        self.opts, self.upsert = opts, upsert
        self.schema = pa.schema([f for f in schema if f.name != OP])
        self.fmt = "json" if upsert and opts.value_format not in ("csv", "raw", "avro") else opts.value_format
        self.renderer = Renderer()
        self.key_schema = pa.schema([self.schema.field(c) for c in opts.key_fields]) if opts.key_fields else None
        value_names = [f.name for f in self.schema
                       if opts.value_fields_include == "all" or f.name not in opts.key_fields]
        self.value_schema = pa.schema([self.schema.field(c) for c in value_names])
        if self.fmt == "raw" and len(self.value_schema) != 1:
            raise SinkError(f"format 'raw' writes one column, but the result has {len(self.value_schema)}")
        try:  # Avro's record schemas, derived from the result's columns (kafka_avro.py)
            self.avro = {side: AvroCodec(part) for side, part, fmt in (
                ("key", self.key_schema, opts.key_format), ("value", self.value_schema, self.fmt))
                if fmt == "avro" and part is not None}
        except ValueError as e:
            raise SinkError(str(e)) from None

    def encode(self, table: pa.Table) -> tuple[list, list]:
        """Keys (None without key.fields) and values (None: a tombstone) of the messages for ``table``."""
        ops = table.column(OP) if OP in table.column_names else None
        if self.upsert and ops is not None:  # -U is implied by the +U that follows it
            table = table.filter(pc.not_equal(ops, UPDATE_BEFORE))
            ops = table.column(OP)
        n = table.num_rows
        keys = self._render(table, self.key_schema, self.opts.key_format or "json", "key") if self.key_schema \
            else [None] * n
        values = self._render(table, self.value_schema, self.fmt, "value")
        if self.upsert and ops is not None:
            deleted = pc.equal(ops, DELETE).to_pylist()
            values = [None if d else v for v, d in zip(values, deleted)]
        return keys, values

    def _render(self, table: pa.Table, schema: pa.Schema, fmt: str, side: str) -> list:
        columns = [table.column(f.name) if table.column(f.name).type == f.type else table.column(f.name).cast(f.type)
                   for f in schema]
        part = pa.Table.from_arrays(columns, schema=schema)
        if fmt == "avro":
            return self.avro[side].encode(part)
        if fmt in ("changelog-json", "debezium-json"):
            op = table.column(OP) if OP in table.column_names else pa.array([INSERT] * table.num_rows, pa.int8())
            part = part.append_column(OP, op)
        if fmt == "raw":
            column = part.column(0)
            if not (pa.types.is_binary(column.type) or pa.types.is_string(column.type)):
                column = column.cast(pa.string())
            return [None if v is None else (v if isinstance(v, bytes) else v.encode()) for v in column.to_pylist()]
        if fmt == "csv":
            rendered = self.renderer.run(csv_columns_sql(schema), part)
            buf = io.BytesIO()
            pcsv.write_csv(rendered, buf, write_options=pcsv.WriteOptions(
                include_header=False, delimiter=self.opts.delimiter, quoting_style="needed"))
            lines = buf.getvalue().split(b"\n")[:-1]
            if len(lines) != table.num_rows:
                raise SinkError("a CSV value holds a line break, which a Kafka csv message cannot carry")
            return lines
        sql = json_lines_sql(schema, fmt) if fmt != "json" else \
            f"SELECT {row_object_sql(schema)} AS line FROM __sink_batch"
        return [line.rstrip("\n").encode() for line in self.renderer.run(sql, part).column(0).to_pylist()]

    def close(self) -> None:
        self.renderer.close()


class KafkaSink:
    """A SinkWriter into a Kafka topic, write-ahead when exactly-once (see the module docstring).

    Args:
        name: the sink's name (the ``dsms.sink`` header).
        write_ahead: stage rows until a checkpoint covers them (exactly-once with a state directory).
        position, staged: the checkpoint to continue from, and the rows it kept.
    """

    def __init__(self, name: str, opts: KafkaOptions, schema: pa.Schema, updating: bool, *, upsert: bool,
                 write_ahead: bool, position: dict | None = None, staged: pa.Table | None = None):
        self.name, self.opts, self.upsert = name, opts, upsert
        if updating and not upsert and opts.value_format in ("json", "csv", "raw", "avro"):
            raise SinkError(f"format '{opts.value_format}' needs an append-only result, but this query's result is "
                            "updating; use format = 'changelog-json' or 'debezium-json', or connector = "
                            "'upsert-kafka'")
        if upsert and not opts.key_fields:
            raise SinkError("an upsert-kafka sink needs 'key.fields' (the columns of the message key, ';'-separated)")
        self.topic = opts.topics[0]
        self.encoder = KafkaEncoder(opts, schema, upsert)
        self.staged_schema = self.encoder.schema.append(pa.field(OP, pa.int8()))
        self.producer = producer(opts.client, name)
        self.write_ahead = write_ahead
        self.staged: list[pa.Table] = []
        self.epoch = 0
        self.pending: tuple[int, pa.Table] | None = None  # checkpointed but not yet produced
        self.errors: list[str] = []
        self.closing = self.released = False
        partitions = list_partitions(self.producer, name).get(self.topic)
        if partitions is None:
            raise SinkError(f"sink '{name}': Kafka topic {self.topic} does not exist on "
                            f"{opts.client['bootstrap.servers']}")
        self.partitions = [(self.topic, p) for p in partitions]
        self.ends = end_offsets(opts.client, self.partitions) if self.write_ahead else {}
        if position is not None:
            self._restore(position, staged)

    # -- the SinkWriter protocol ----------------------------------------------------------------

    def write(self, table: pa.Table) -> None:
        if self.write_ahead:
            self.staged.append(self._staged_form(table))
        else:
            self._produce(table)

    def flush(self) -> None:
        if not self.write_ahead:
            self._flush()

    @property
    def position(self) -> dict:
        if not self.write_ahead:
            return {}
        return {"epoch": self.epoch, "offsets": _keyed(self.ends)}

    def truncate(self, position: dict) -> None:
        """Nothing to cut: what a checkpoint does not cover was never produced (write-ahead)."""

    def close(self) -> None:
        if self.write_ahead:  # the final checkpoint holds and then produces what is staged
            self.closing = True
            return
        self._flush()
        self._release()

    def _release(self) -> None:
        if not self.released:
            self.released = True
            self.encoder.close()
            self.producer.close()

    # -- write-ahead: connectors/base.py WriteAheadSink ---------------------------------------------

    def prepare_checkpoint(self) -> tuple[dict, pa.Table | None]:
        """Seal the rows since the last checkpoint as the next epoch; the checkpoint keeps them."""
        staged = self._seal()
        return self.position, staged

    def _seal(self) -> pa.Table | None:
        if not self.write_ahead or self.released:
            return None
        self.epoch += 1
        staged = pa.concat_tables(self.staged) if self.staged else self.staged_schema.empty_table()
        self.staged = []
        self.pending = (self.epoch, staged)
        return staged

    def checkpoint_complete(self, position: dict | None = None) -> None:
        """The checkpoint that holds the pending rows is on disk: produce them."""
        if self.pending is None:
            return
        epoch, staged = self.pending
        self._produce(staged, epoch)
        self._flush()
        self.pending = None
        if self.closing and not self.staged:
            self._release()

    def _restore(self, position: dict, staged: pa.Table | None) -> None:
        """Continue after a restart from a checkpoint: produce what of its epoch is not in the topic yet."""
        if not self.write_ahead or "epoch" not in position:
            return
        self.epoch = int(position["epoch"])
        self.ends.update(_unkeyed(position.get("offsets", {})))
        if staged is None or not staged.num_rows:
            return
        written = set()
        for m in read_range(self.opts.client, dict(self.ends)):
            headers = dict(m.headers() or [])
            if headers.get(SINK_HEADER) == self.name.encode() and headers.get(EPOCH_HEADER) == str(self.epoch).encode():
                written.add(int(headers[SEQ_HEADER]))
        self._produce(staged, self.epoch, skip=written)
        self._flush()

    # -- producing ------------------------------------------------------------------------------

    def _staged_form(self, table: pa.Table) -> pa.Table:
        columns = [table.column(f.name) if table.column(f.name).type == f.type else table.column(f.name).cast(f.type)
                   for f in self.encoder.schema]
        ops = table.column(OP) if OP in table.column_names else pa.array([INSERT] * table.num_rows, pa.int8())
        return pa.Table.from_arrays(columns + [ops], schema=self.staged_schema)

    def _produce(self, table: pa.Table, epoch: int | None = None, skip: set | None = None) -> None:
        if not table.num_rows:
            return
        if epoch is not None and OP in table.column_names and not (self.upsert or self.opts.value_format in
                                                                   ("changelog-json", "debezium-json")):
            table = table.drop_columns([OP])  # staged append-only rows carry +I only
        keys, values = self.encoder.encode(table)
        produce, topic, on_delivery = self.producer.produce, self.topic, self._delivered
        name = self.name.encode()
        for seq, (key, value) in enumerate(zip(keys, values)):  # the client takes one message per call
            if skip and seq in skip:
                continue
            headers = None if epoch is None else [(SINK_HEADER, name), (EPOCH_HEADER, str(epoch).encode()),
                                                   (SEQ_HEADER, str(seq).encode())]
            while True:
                try:
                    produce(topic, value=value, key=key, headers=headers, on_delivery=on_delivery)
                    break
                except BufferError:  # the client's queue is full: let it send
                    self.producer.poll(0.05)
        self.producer.poll(0)
        self._raise_errors()

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            tp = (msg.topic(), msg.partition())
            self.ends[tp] = max(self.ends.get(tp, 0), msg.offset() + 1)

    def _flush(self) -> None:
        left = self.producer.flush(60)
        if left:
            raise SinkError(f"sink '{self.name}': {left} message(s) not delivered to Kafka within 60 s")
        self._raise_errors()

    def _raise_errors(self) -> None:
        if self.errors:
            first, self.errors = self.errors[0], []
            raise SinkError(f"sink '{self.name}': Kafka did not take a message: {first}")


def _keyed(offsets: dict) -> dict:
    return {f"{t}:{p}": o for (t, p), o in offsets.items()}


def _unkeyed(offsets: dict) -> dict:
    out = {}
    for key, offset in offsets.items():
        topic, _, part = key.rpartition(":")
        out[(topic, int(part))] = int(offset)
    return out
