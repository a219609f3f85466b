"""The ``avro`` format of the Kafka connectors: messages as schemaless Avro binary, through fastavro.

As Flink's ``avro`` format, a message holds one Avro datum without a
schema or a header, written with a record schema **derived from the
declared columns** (the source's, or the sink's result columns)::

    BOOLEAN boolean      TINYINT/SMALLINT/INT int     BIGINT long      FLOAT float   DOUBLE double
    VARCHAR string       VARBINARY bytes             DATE int (date)
    TIMESTAMP long (timestamp-millis, the UTC wall clock)              DECIMAL(p, s) bytes (decimal p, s)
    a nullable column: the union ["null", type]; NOT NULL: the type alone

so a producer that writes with the same schema (fastavro, Flink, Avro's
Java ``GenericDatumWriter``) is read, and dsms's messages are read back by
anyone holding that schema (:func:`avro_schema` gives it).

fastavro decodes and encodes a datum at a time (in C): Avro's binary
encoding has no columnar form to hand to Arrow, so this format costs a
Python call per message, where ``json`` and ``csv`` parse a whole batch in
one Arrow call. A datum that does not decode, leaves bytes over, or has
NULL in a NOT NULL column is a bad message (``on_error``).
"""

from __future__ import annotations

import io

import pyarrow as pa

from .salvage import BadInput

_INTS = {pa.int8(): "int", pa.int16(): "int", pa.int32(): "int", pa.int64(): "long"}


def _avro_type(t: pa.DataType):
    if pa.types.is_boolean(t):
        return "boolean"
    if t in _INTS:
        return _INTS[t]
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-millis"}
    if pa.types.is_decimal(t):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale}
    raise ValueError(f"format 'avro' cannot hold a column of type {t}")


def avro_schema(schema: pa.Schema, name: str = "record") -> dict:
    """The Avro record schema of ``schema``'s columns (JSON, as a dict); a non-nullable field is NOT NULL.

    Example:
        >>> avro_schema(pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp("us"))]))["fields"]
        [{'name': 'id', 'type': 'long'}, {'name': 'ts', 'type': ['null', {'type': 'long', 'logicalType': 'timestamp-millis'}], 'default': None}]
    """
    fields = []
    for f in schema:
        t = _avro_type(f.type)
        fields.append({"name": f.name, "type": ["null", t], "default": None} if f.nullable else
                      {"name": f.name, "type": t})
    return {"type": "record", "name": name, "fields": fields}


class AvroCodec:
    """Messages <-> rows in schemaless Avro binary (see the module docstring).

    Args:
        schema: every column the datum holds, in order, as declared (its record schema; Avro is positional,
            so a datum is read whole even when fewer columns are asked for).
        read: the columns to give, with their types (default: all of ``schema``).
        not_null: columns of ``read`` that must not be NULL (a NULL makes the message bad).
    """

    def __init__(self, schema: pa.Schema, read: pa.Schema | None = None, not_null: tuple[str, ...] = ()):
        import fastavro

        self.schema, self.read = schema, read if read is not None else schema
        self.not_null = tuple(c for c in not_null if c in self.read.names)
        self.parsed = fastavro.parse_schema(avro_schema(schema))
        self._nullable = pa.schema([f.with_nullable(True) for f in schema])
        self._reader, self._writer = fastavro.schemaless_reader, fastavro.schemaless_writer

    def decode(self, data: list) -> pa.Table:
        """Messages -> rows, one each; raises BadInput when any message cannot be read."""
        rows = [self._datum(value) for value in data]  # a C call per message: Avro has no batch decoder
        try:
            whole = pa.Table.from_pylist(rows, schema=self._nullable)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            raise BadInput(str(e)) from None
        for c in self.not_null:
            if whole.column(c).null_count:
                raise BadInput(f"NULL in NOT NULL column '{c}'")
        return pa.Table.from_arrays([whole.column(f.name) for f in self.read], schema=self.read)

    def _datum(self, value: bytes | None) -> dict:
        if value is None:
            raise BadInput("a message has no value")
        buffer = io.BytesIO(value)
        try:
            row = self._reader(buffer, self.parsed, None)
        except Exception as e:  # noqa: BLE001 - fastavro raises many kinds on bytes that are not its datum
            raise BadInput(f"not an Avro datum of the declared columns ({type(e).__name__}: {e})") from None
        if buffer.tell() != len(value):
            raise BadInput(f"not an Avro datum of the declared columns ({len(value) - buffer.tell()} bytes left over)")
        return row

    def diagnose(self, value: bytes | None) -> tuple[str | None, str]:
        """The column (if known) and the reason one message is bad."""
        try:
            self.decode([value])
        except BadInput as e:
            column = next((c for c in self.not_null if f"'{c}'" in str(e)), None)
            return column, str(e)
        return None, "the message cannot be read as Avro"

    def encode(self, table: pa.Table) -> list[bytes]:
        """Rows -> one Avro datum each (a C call per row)."""
        out = []
        for row in table.select(self.schema.names).to_pylist():
            buffer = io.BytesIO()
            self._writer(buffer, self.parsed, row)
            out.append(buffer.getvalue())
        return out
