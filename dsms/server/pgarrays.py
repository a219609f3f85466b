"""ARRAY columns as PostgreSQL arrays: the array type OIDs and the text and binary forms of their values.

An ARRAY of a scalar type goes out with PostgreSQL's array type of that
element (``bigint[]`` is 1016), so drivers hand a list to the program
(psycopg: ``[1, 2]``) and psql prints ``{1,2}``. The elements are encoded
column-wise by the scalar encoders (``pgtypes``), then joined per row:

    text    {1,NULL,3}   {"a b","x\\"y",NULL}   (quoted when empty, NULL, or holding {}",\\ or space)
    binary  ndim, has-null flag, element OID, (length, lower bound 1), then each element's length and bytes

An ARRAY of arrays, rows or maps stays JSON text (PostgreSQL's arrays are
rectangular and have no row or map elements to match). So does every
ARRAY of a prepared statement the client described before binding it
(asyncpg, JDBC): such a client reads results by the types of that
description, and would ask the catalog how to decode an array type
(asyncpg's type introspection), which the server does not emulate.
"""

from __future__ import annotations

import re
import struct

import pyarrow as pa

from .pgtypes import (
    BOOL,
    BYTEA,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    INTERVAL,
    NUMERIC,
    TEXT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    TYPE_NAMES,
    TYPE_SIZES,
    VARCHAR,
    binary_column,
    text_column,
    type_oid,
)

ARRAY_OF = {BOOL: 1000, BYTEA: 1001, INT2: 1005, INT4: 1007, TEXT: 1009, VARCHAR: 1015, INT8: 1016, FLOAT4: 1021,
            FLOAT8: 1022, TIMESTAMP: 1115, DATE: 1182, TIME: 1183, TIMESTAMPTZ: 1185, INTERVAL: 1187, NUMERIC: 1231}
ELEMENT_OF = {array: element for element, array in ARRAY_OF.items()}
_NEEDS_QUOTES = re.compile(rb'^$|^[Nn][Uu][Ll][Ll]$|[{}",\\\s]')


def array_oid(t: pa.DataType) -> int | None:
    """The PostgreSQL array type of an Arrow list of scalars, or None."""
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return None
    return ARRAY_OF.get(type_oid(t.value_type))


def column_oid(t: pa.DataType) -> int:
    """A result column's PostgreSQL type: an array type for a list of scalars, else the scalar mapping."""
    return array_oid(t) or type_oid(t)


def field_description(name: str, t: pa.DataType, binary: bool, arrays: bool = True) -> tuple[str, int, int, int]:
    """A RowDescription field: name, type OID, type size, format (0 text, 1 binary). ``arrays`` False: lists go
    out as JSON (see ``column_text``)."""
    oid = column_oid(t) if arrays else type_oid(t)
    return name, oid, TYPE_SIZES.get(oid, -1), 1 if binary else 0


def array_type_rows() -> list[tuple[int, str, int, str]]:
    """pg_type's array types: (OID, typname, element OID, name as format_type gives it)."""
    short = {BOOL: "bool", BYTEA: "bytea", INT2: "int2", INT4: "int4", TEXT: "text", VARCHAR: "varchar",
             INT8: "int8", FLOAT4: "float4", FLOAT8: "float8", TIMESTAMP: "timestamp", DATE: "date", TIME: "time",
             TIMESTAMPTZ: "timestamptz", INTERVAL: "interval", NUMERIC: "numeric"}
    return [(array, "_" + short[element], element, TYPE_NAMES[element] + "[]") for element, array in ARRAY_OF.items()]


def column_text(col: pa.ChunkedArray, arrays: bool = True) -> list:
    """Every value of a column in PostgreSQL's text format (arrays as ``{...}``), as bytes. ``arrays`` False:
    a list goes out as JSON text, as a client that described the prepared statement before binding it was told
    (asyncpg then knows its type without asking the catalog)."""
    if not arrays or array_oid(col.type) is None:
        return text_column(col)
    return [None if items is None else b"{" + b",".join(_quoted(v) for v in items) + b"}"
            for items in _per_row(col, text_column)]


def column_binary(col: pa.ChunkedArray, arrays: bool = True) -> list:
    """Every value of a column in PostgreSQL's binary format (arrays as array_send writes them), as bytes."""
    oid = array_oid(col.type) if arrays else None
    if oid is None:
        return binary_column(col)
    element = ELEMENT_OF[oid]
    out = []
    for items in _per_row(col, binary_column):
        if items is None:
            out.append(None)
            continue
        if not items:  # an empty array has no dimensions
            out.append(struct.pack("!iiI", 0, 0, element))
            continue
        has_null = any(v is None for v in items)
        parts = [struct.pack("!iiIii", 1, int(has_null), element, len(items), 1)]
        parts += [struct.pack("!i", -1) if v is None else struct.pack("!i", len(v)) + v for v in items]
        out.append(b"".join(parts))
    return out


def _quoted(value: bytes | None) -> bytes:
    if value is None:
        return b"NULL"
    if _NEEDS_QUOTES.search(value):
        return b'"' + value.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'
    return value


def _per_row(col: pa.ChunkedArray, encode) -> list:
    """Each row's elements, encoded by ``encode`` over all the column's elements at once (None for a NULL row)."""
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if isinstance(arr, pa.ChunkedArray):  # no chunks
        arr = pa.array([], col.type)
    offsets = arr.offsets.to_pylist()
    start, end = offsets[0], offsets[-1]
    values = encode(pa.chunked_array([arr.values.slice(start, end - start)], arr.type.value_type))
    valid = arr.is_valid().to_pylist()
    return [values[offsets[i] - start:offsets[i + 1] - start] if ok else None for i, ok in enumerate(valid)]
