"""The runtime half of the print sink (``planner/connectors/print_sink.py``): changes to stdout.

Each row is one line, the change's op and the values, as Flink's print
connector writes them::

    +I[1, a, 2024-01-01 10:00:00.000]
    -U[2, b, null]
    id> +U[2, c, null]        (with 'print-identifier' = 'id')

Values are rendered as the file sinks render them (``encode.py``: TIMESTAMP
``YYYY-MM-DD HH:MM:SS.fff``, exact DECIMAL digits), strings as they are,
NULL as ``null``; an append-only result prints ``+I`` rows. One DuckDB
query renders a batch, and the batch's lines go out in one write.

Printed lines cannot be taken back: after a restore from a checkpoint the
rows since the checkpoint are printed again (at least once).
"""

from __future__ import annotations

import sys

import pyarrow as pa

from ..changelog import OP
from .base import SinkWriter, WriteRequest
from .encode import BATCH, Renderer, ident, literal, text_bytes, timestamp_text_sql


def _value_sql(name: str, dtype: pa.DataType) -> str:
    col = ident(name)
    if pa.types.is_timestamp(dtype):  # a TIMESTAMP_LTZ as its UTC instant with a Z, as the file formats write it
        return timestamp_text_sql(col, dtype)
    if pa.types.is_date(dtype):
        return f"strftime({col}, '%Y-%m-%d')"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return f"to_base64({col})"
    return f"CAST({col} AS VARCHAR)"


def print_lines_sql(schema: pa.Schema, updating: bool, identifier: str | None) -> str:
    """A query over ``__sink_batch`` giving one column of lines (each ending in a newline)."""
    op = (f"CASE {ident(OP)} WHEN 1 THEN '-U' WHEN 2 THEN '+U' WHEN 3 THEN '-D' ELSE '+I' END"
          if updating else "'+I'")
    values = " || ', ' || ".join(f"coalesce({_value_sql(f.name, f.type)}, 'null')" for f in schema) or "''"
    prefix = literal(f"{identifier}> ") + " || " if identifier else ""
    return f"SELECT {prefix}{op} || '[' || {values} || ']' || chr(10) AS line FROM {BATCH}"


class PrintSink:
    """A SinkWriter printing each row (see the module docstring); its position counts rows."""

    def __init__(self, schema: pa.Schema, updating: bool, identifier: str | None, stream, rows: int = 0):
        self.schema = pa.schema([f for f in schema if f.name != OP])
        self.sql = print_lines_sql(self.schema, updating, identifier)
        self.stream = stream
        self.rows = rows
        self.renderer = Renderer()

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        lines = self.renderer.run(self.sql, table).column("line")
        out = getattr(self.stream, "buffer", None)
        if out is not None:
            self.stream.flush()  # what was printed as text goes first
        for piece in text_bytes(lines):
            if out is not None:
                out.write(piece)
            else:
                self.stream.write(bytes(piece).decode("utf-8"))
        self.rows += table.num_rows

    def flush(self) -> None:
        self.stream.flush()

    @property
    def position(self) -> dict:
        return {"rows": self.rows}

    def truncate(self, position: dict) -> None:
        self.rows = int(position.get("rows", 0))  # printed lines stay printed: at least once

    def close(self) -> None:
        self.flush()
        self.renderer.close()


def open_sink(req: WriteRequest) -> SinkWriter:
    stream = sys.stderr if req.options.get("standard-error", "false").lower() == "true" else sys.stdout
    rows = int((req.position or {}).get("rows", 0))
    return PrintSink(req.schema, req.updating, req.options.get("print-identifier"), stream, rows)
