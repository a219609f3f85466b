"""Kafka messages -> Arrow tables, a batch at a time, with the file connector's codecs.

A batch of messages is decoded as one block: the values joined with
newlines go through the JSON or CSV line codec (``pyarrow.json`` /
``pyarrow.csv`` underneath), the keys likewise when columns come from the
key, and metadata columns (``topic``, ``partition``, ``offset``,
``timestamp``) are built from the messages' arrays. Only the error path
looks at messages one by one: a block that fails is split in halves
(``salvage.py``) until the bad messages are found, and each is reported
with its topic, partition and offset.

Layout of a source's columns::

    key fields   (key.format)    <- the message key      (upsert-kafka: always; kafka: value.fields-include = EXCEPT_KEY)
    metadata     (METADATA FROM) <- the message itself
    the others   (value.format)  <- the message value
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from .csv_source import CsvCodec
from .json_source import JsonCodec
from .kafka_avro import AvroCodec
from .line_source import LineCodec
from .salvage import BadInput, salvage


@dataclass
class Messages:
    """The parts of a batch of messages that decoding needs, as parallel lists and arrays."""

    topics: list
    partitions: np.ndarray  # int32
    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64 milliseconds
    keys: list
    values: list

    def __len__(self) -> int:
        return len(self.values)

    def take(self, rows: np.ndarray) -> Messages:
        return Messages([self.topics[i] for i in rows], self.partitions[rows], self.offsets[rows],
                        self.timestamps[rows], [self.keys[i] for i in rows], [self.values[i] for i in rows])

    @staticmethod
    def of(msgs: list, *, topic: str | None = None, keys: bool = True, timestamps: bool = True) -> Messages:
        """From confluent-kafka messages (the only per-message Python: reading their fields).

        Only the fields that will be used are read: ``topic`` when every message has it, keys and
        timestamps when something needs them.
        """
        n = len(msgs)
        return Messages([topic] * n if topic is not None else [m.topic() for m in msgs],
                        np.fromiter((m.partition() for m in msgs), np.int32, n),
                        np.fromiter((m.offset() for m in msgs), np.int64, n),
                        np.fromiter((m.timestamp()[1] for m in msgs), np.int64, n) if timestamps
                        else np.zeros(n, np.int64),
                        [m.key() for m in msgs] if keys else [None] * n, [m.value() for m in msgs])


@dataclass
class BadMessage:
    topic: str
    partition: int
    offset: int
    column: str | None
    error: str
    raw: bytes | None


def line_codec(fmt: str, name: str, schema: pa.Schema, not_null: tuple, delimiter: str) -> LineCodec | None:
    """The line codec of one side of a message (key or value); None for 'raw' and 'avro'."""
    if fmt == "json":
        return JsonCodec(schema, not_null)
    if fmt == "csv":
        codec = CsvCodec(name, schema, not_null, delimiter)
        codec.header = list(schema.names)  # Flink's csv: the fields in declared order, no header
        return codec
    return None


class SideDecoder:
    """Decodes the keys or the values of a batch of messages into some of the source's columns."""

    def __init__(self, fmt: str, name: str, schema: pa.Schema, not_null: tuple, delimiter: str,
                 whole: pa.Schema | None = None):
        if fmt == "raw" and len(schema) != 1:
            raise ValueError(f"format 'raw' reads one column, but {len(schema)} come from this side of the "
                             f"message ({', '.join(schema.names)})")
        self.fmt, self.schema = fmt, schema
        self.codec = line_codec(fmt, name, schema, not_null, delimiter)
        # Avro: a datum per message, read whole (``whole``: every column this side holds, as declared).
        self.avro = AvroCodec(whole if whole is not None else schema, schema, not_null) if fmt == "avro" else None

    def decode(self, data: list) -> pa.Table:
        """Whole messages -> rows (one each); raises BadInput when any message cannot be read."""
        if not self.schema:
            return pa.table({"__rows": pa.nulls(len(data))}).drop_columns(["__rows"])
        if self.avro is not None:
            return self.avro.decode(data)
        if self.codec is None:  # raw: the bytes (or their text) are the column
            column = pa.array(data, pa.binary())
            target = self.schema.field(0).type
            if not (pa.types.is_binary(target) or pa.types.is_large_binary(target)):
                try:
                    column = column.cast(pa.string()).cast(target)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise BadInput(str(e)) from None
            return pa.Table.from_arrays([column], schema=self.schema)
        if any(v is None for v in data):
            raise BadInput("a message has no value")
        block = b"\n".join(data) + b"\n"
        if block.count(b"\n") != len(data):  # a value spans lines (pretty-printed JSON): one line each
            block = b"\n".join(v.replace(b"\r", b" ").replace(b"\n", b" ") for v in data) + b"\n"
        table = self.codec.decode(block)
        if table.num_rows != len(data):
            raise BadInput("a message does not hold exactly one record")
        return table

    def diagnose(self, value: bytes | None) -> tuple[str | None, str]:
        if value is None:
            return None, "the message has no value"
        if self.avro is not None:
            return self.avro.diagnose(value)
        if self.codec is None:
            return self.schema.field(0).name, f"cannot read the bytes as {self.schema.field(0).type}"
        return self.codec.diagnose(value.replace(b"\n", b" "))


class MessageDecoder:
    """Turns batches of messages into tables of exactly ``schema`` (the columns a query reads).

    Args:
        schema: the columns wanted, in order, with their types.
        key_columns: the columns read from the message key (with ``key_format``).
        metadata: column -> metadata key (``partition``, ``offset``, ``timestamp``, ``topic``).
        not_null: columns declared NOT NULL.
    """

    def __init__(self, name: str, schema: pa.Schema, *, value_format: str, key_format: str | None,
                 key_columns: tuple[str, ...], metadata: dict[str, str], not_null: tuple = (),
                 delimiter: str = ",", value_columns: tuple[str, ...] | None = None,
                 declared: pa.Schema | None = None):
        self.name, self.schema, self.metadata = name, schema, metadata
        fields = {f.name: f for f in schema}
        self.key_columns = tuple(c for c in key_columns if c in fields)
        read_value = [c for c in (value_columns or schema.names) if c in fields and c not in metadata
                      and c not in self.key_columns]

        def whole(columns) -> pa.Schema | None:  # a side's declared columns (``declared``: the source's)
            if declared is None:
                return None
            return pa.schema([declared.field(c) for c in columns if c in declared.names and c not in metadata])

        self.value = SideDecoder(value_format, name, pa.schema([fields[c] for c in read_value]),
                                 tuple(c for c in not_null if c in read_value), delimiter,
                                 whole(value_columns or schema.names))
        self.key = SideDecoder(key_format, name, pa.schema([fields[c] for c in self.key_columns]),
                               tuple(c for c in not_null if c in self.key_columns), delimiter, whole(key_columns)) \
            if self.key_columns else None

    def decode(self, batch: Messages) -> tuple[pa.Table, np.ndarray, list[BadMessage]]:
        """(rows, which messages they came from, the messages that could not be read)."""
        try:
            return self._decode(batch), np.arange(len(batch)), []
        except BadInput:
            pass
        found = salvage(len(batch), lambda lo, hi: self._decode(batch.take(np.arange(lo, hi))))
        bad = set(found.bad)
        good = np.array([i for i in range(len(batch)) if i not in bad], dtype=np.int64)
        table = pa.concat_tables(found.tables) if found.tables else self.schema.empty_table()
        return table, good, [self._why(batch, i) for i in found.bad]

    def _decode(self, batch: Messages) -> pa.Table:
        values = self.value.decode(batch.values)
        keys = self.key.decode(batch.keys) if self.key is not None else None
        columns = []
        for f in self.schema:
            if f.name in self.metadata:
                columns.append(_metadata_column(self.metadata[f.name], batch, f.type))
            elif keys is not None and f.name in self.key_columns:
                columns.append(keys.column(f.name))
            else:
                columns.append(values.column(f.name))
        return pa.Table.from_arrays(columns, schema=self.schema)

    def _why(self, batch: Messages, i: int) -> BadMessage:
        if self.key is not None:
            try:
                self.key.decode([batch.keys[i]])
            except BadInput:
                column, message = self.key.diagnose(batch.keys[i])
                return BadMessage(batch.topics[i], int(batch.partitions[i]), int(batch.offsets[i]), column,
                                  f"in the key: {message}", batch.keys[i])
        column, message = self.value.diagnose(batch.values[i])
        return BadMessage(batch.topics[i], int(batch.partitions[i]), int(batch.offsets[i]), column, message,
                          batch.values[i])


def _metadata_column(key: str, batch: Messages, dtype: pa.DataType) -> pa.Array:
    if key == "topic":
        array = pa.array(batch.topics, pa.string())
    elif key == "partition":
        array = pa.array(batch.partitions)
    elif key == "offset":
        array = pa.array(batch.offsets)
    else:  # timestamp: milliseconds since the epoch
        array = pa.array(batch.timestamps * 1000).cast(pa.timestamp("us"))
    return array if array.type == dtype else array.cast(dtype)
