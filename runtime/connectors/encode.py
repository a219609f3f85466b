"""Rendering result rows as text, vectorized: one DuckDB query per batch, no Python per row.

The JSON formats build each line by SQL string concatenation (keys in
column order; DuckDB's ``to_json`` escapes strings) and the CSV format
formats the columns that CSV cannot take as they are. Values:

* TIMESTAMP: ``"YYYY-MM-DD HH:MM:SS.fff"`` (milliseconds, truncated, as
  Flink's TIMESTAMP(3));
* DATE: ``"YYYY-MM-DD"``;
* DECIMAL: a JSON number with all of its digits (rendered from the
  decimal's text, not through a double);
* FLOAT/DOUBLE: a JSON number, NULL for NaN and ±infinity (JSON has
  neither); FLOAT uses its own shortest text (``0.1``, not ``0.1000000015``);
* VARBINARY: base64 text;
* NULL: ``null``.

The changelog formats:

* ``changelog-json``: ``{"op": "+I", "col": ..., ...}`` with op ``+I``,
  ``-U``, ``+U`` or ``-D``;
* ``debezium-json``: ``{"before": row|null, "after": row|null, "op": "c"|"d"}``;
  ``+I``/``+U`` give ``op: "c"`` with ``after``, ``-U``/``-D`` give
  ``op: "d"`` with ``before`` (as Flink's debezium-json encoder).
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pyarrow as pa

from ...planner.vocabulary import OP, RETRACTIONS, ChangeOp, sql_codes
from ..duck import registered

BATCH = "__sink_batch"
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%g"  # %g: milliseconds, zero-padded


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def json_value_sql(name: str, dtype: pa.DataType) -> str:
    """SQL giving the JSON text of column ``name``'s value (NULL when the value is NULL)."""
    col = ident(name)
    if pa.types.is_timestamp(dtype):
        return f"'\"' || strftime({col}, '{TIMESTAMP_FORMAT}') || '\"'"
    if pa.types.is_date(dtype):
        return f"'\"' || strftime({col}, '%Y-%m-%d') || '\"'"
    if pa.types.is_floating(dtype):
        # Shortest round-trip text (0.1, 1e+20); JSON has no NaN or infinity.
        return f"CASE WHEN isfinite({col}) THEN CAST({col} AS VARCHAR) END"
    if pa.types.is_integer(dtype) or pa.types.is_decimal(dtype) or pa.types.is_boolean(dtype):
        return f"CAST({col} AS VARCHAR)"  # decimals keep every digit: no detour through a double
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return f"'\"' || to_base64({col}) || '\"'"
    return f"CAST(to_json({col}) AS VARCHAR)"  # strings: DuckDB escapes them


def row_object_sql(schema: pa.Schema, first: tuple[tuple[str, str], ...] = ()) -> str:
    """SQL concatenating a JSON object: ``first`` (key, SQL JSON text) pairs, then the columns.

    Built by string concatenation rather than ``json_object`` so that each
    value's text is exactly ours (``json_object`` re-parses numbers: DECIMAL
    ``12.50`` would come out as ``12.5``).
    """
    pairs = list(first) + [(f.name, json_value_sql(f.name, f.type)) for f in schema]
    if not pairs:
        return "'{}'"
    parts = []
    for i, (key, value) in enumerate(pairs):
        prefix = ("{" if i == 0 else ",") + json.dumps(key, ensure_ascii=False) + ":"
        parts.append(f"{literal(prefix)} || coalesce({value}, 'null')")
    return " || ".join(parts) + " || '}'"


def json_lines_sql(schema: pa.Schema, fmt: str) -> str:
    """A query over ``__sink_batch`` giving one column of text lines (each ending in a newline)."""
    if fmt == "json":
        line = row_object_sql(schema)
    elif fmt == "changelog-json":
        kinds = " ".join(f"WHEN {o.sql} THEN '\"{o.short}\"'" for o in ChangeOp if o is not ChangeOp.INSERT)
        op = f"CASE {ident(OP)} {kinds} ELSE '\"{ChangeOp.INSERT.short}\"' END"
        line = row_object_sql(schema, (("op", op),))
    elif fmt == "debezium-json":
        row = row_object_sql(schema)
        retract = f"{ident(OP)} IN {sql_codes(RETRACTIONS)}"
        line = (f"'{{\"before\":' || CASE WHEN {retract} THEN {row} ELSE 'null' END || "
                f"',\"after\":' || CASE WHEN {retract} THEN 'null' ELSE {row} END || "
                f"',\"op\":' || CASE WHEN {retract} THEN '\"d\"' ELSE '\"c\"' END || '}}'")
    else:
        raise ValueError(f"not a JSON format: {fmt}")
    return f"SELECT {line} || chr(10) AS line FROM {BATCH}"


def csv_columns_sql(schema: pa.Schema) -> str:
    """A query over ``__sink_batch`` giving the columns as CSV should print them.

    Numbers, booleans and strings are left to ``pyarrow.csv``; only the
    types whose text form is ours to choose are rendered here.
    """
    exprs = []
    for f in schema:
        col = ident(f.name)
        if pa.types.is_timestamp(f.type):
            col = f"strftime({col}, '{TIMESTAMP_FORMAT}')"
        elif pa.types.is_date(f.type):
            col = f"strftime({col}, '%Y-%m-%d')"
        elif pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type):
            col = f"to_base64({col})"
        exprs.append(f"{col} AS {ident(f.name)}")
    return f"SELECT {', '.join(exprs)} FROM {BATCH}"


class Renderer:
    """Runs rendering queries over batches on its own DuckDB connection."""

    def __init__(self):
        self.con = duckdb.connect()

    def run(self, sql: str, table: pa.Table) -> pa.Table:
        with registered(self.con, **{BATCH: table}):
            return self.con.sql(sql).to_arrow_table()

    def close(self) -> None:
        self.con.close()


def text_bytes(column: pa.ChunkedArray) -> list[memoryview]:
    """The UTF-8 bytes of a text column, concatenated in order, as zero-copy slices.

    A string array stores its values back to back in one data buffer, so the
    lines of a batch are already the bytes to write; no Python per row.
    """
    pieces = []
    for chunk in column.chunks:
        if not (pa.types.is_string(chunk.type) or pa.types.is_large_string(chunk.type)):
            chunk = chunk.cast(pa.large_string())
        if chunk.null_count:
            raise ValueError("a rendered line is NULL")
        if not len(chunk):
            continue
        offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], offset_type)
        start, end = int(offsets[chunk.offset]), int(offsets[chunk.offset + len(chunk)])
        pieces.append(memoryview(chunk.buffers()[2])[start:end])
    return pieces
