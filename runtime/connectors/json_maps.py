"""Columns holding a MAP (at any depth) read from JSON lines, vectorized in DuckDB.

``pyarrow.json`` reads a JSON object only into a struct of known fields,
so a column whose type holds a MAP is read apart: DuckDB takes the
column's JSON text from every line (``json_extract``) and builds the value
with one SQL expression made from the declared type, as Flink's JSON
format reads it:

* ``MAP<STRING, V>``: a JSON object; its member names are the keys, its
  member values converted to ``V`` (``null`` a NULL value); a JSON
  ``null`` (or no member) is a NULL map. Keys must be strings (the DDL
  refuses other key types, as Flink does);
* ``ROW<...>``: a JSON object, its fields by name (others ignored, an
  absent one NULL); ``ARRAY<T>``: a JSON array; nested to any depth;
* a scalar: DuckDB's cast from JSON (``"12"`` is read as a number, as Flink
  reads it; a value that does not convert fails); a STRING takes a JSON
  string's text, or another value's JSON text.

A value of another shape, a repeated key or a value that does not convert
fails the block (:class:`BadInput`), and the line source then finds the bad
lines one by one, blaming the column (``json_source.JsonCodec.check``)::

    {"id": 1, "m": {"a": 1, "b": null}}     m = {a: 1, b: NULL}
    {"id": 2, "m": null}                    m = NULL
    {"id": 3, "m": [1, 2]}                  a bad line: m is not an object
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.types import sql_name
from .salvage import BadInput


def has_map(dtype: pa.DataType) -> bool:
    """Whether a MAP is anywhere in ``dtype``."""
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(has_map(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return has_map(dtype.value_type)
    return False


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _member(x: str, name: str) -> str:
    """The JSON member ``name`` of the JSON object ``x`` (any characters: a quoted path step)."""
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    path = _quote('$."' + escaped + '"')
    return f"json_extract({x}, {path})"


def _shaped(x: str, kind: str, what: str, body: str) -> str:
    """``body`` where ``x`` is JSON of ``kind`` (OBJECT, ARRAY); NULL for a JSON null; an error otherwise."""
    return (f"CASE WHEN {x} IS NULL OR json_type({x}) = 'NULL' THEN NULL WHEN json_type({x}) = '{kind}' "
            f"THEN {body} ELSE error({_quote(f'expected a JSON {what}')} || ', found ' || {x}::VARCHAR) END")


def convert_sql(x: str, dtype: pa.DataType, depth: int = 0) -> str:
    """SQL turning the JSON value ``x`` into ``dtype`` (see the module docstring)."""
    if pa.types.is_map(dtype):
        # The member names and values in the object's order, as a STRUCT(k, v) of two lists: DuckDB's map() is
        # slow, so the Arrow map is made from them afterwards (_as_declared).
        e = f"__e{depth}"
        keys = f"json_keys({x})"
        values = f"list_transform(json_extract({x}, '$.*'), lambda {e}: {convert_sql(e, dtype.item_type, depth + 1)})"
        once = f"CASE WHEN len(list_distinct({keys})) = len({keys}) THEN {{'k': {keys}, 'v': {values}}} " \
               f"ELSE error('a key appears twice in ' || {x}::VARCHAR) END"
        return _shaped(x, "OBJECT", "object", once)
    if pa.types.is_struct(dtype):
        fields = ", ".join(f'"{f.name.replace(chr(34), chr(34) * 2)}" := '
                           f"{convert_sql(_member(x, f.name), f.type, depth + 1)}" for f in dtype)
        return _shaped(x, "OBJECT", "object", f"struct_pack({fields})")
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        e = f"__e{depth}"
        body = f"list_transform(json_extract({x}, '$[*]'), lambda {e}: {convert_sql(e, dtype.value_type, depth + 1)})"
        return _shaped(x, "ARRAY", "array", body)
    kinds, value = _leaf(x, dtype)
    allowed = ", ".join(f"'{k}'" for k in kinds)
    return (f"CASE WHEN {x} IS NULL OR json_type({x}) = 'NULL' THEN NULL WHEN json_type({x}) IN ({allowed}) "
            f"THEN {value} ELSE error('cannot convert ' || {x}::VARCHAR || ' to {sql_name(dtype)}') END")


_INTEGER, _NUMBER = ("BIGINT", "UBIGINT"), ("BIGINT", "UBIGINT", "DOUBLE")


def _leaf(x: str, dtype: pa.DataType) -> tuple[tuple[str, ...], str]:
    """The JSON kinds (``json_type``) a scalar of ``dtype`` takes, and the SQL converting them, by the rules of
    the other JSON columns (convert.py): integers from JSON integers, floating point from numbers, DECIMAL from
    numbers or strings, BOOLEAN from booleans, strings from strings, DATE from text, VARBINARY from base64
    text, TIMESTAMP from text or epoch milliseconds."""
    text = f"({x} ->> '$')"
    if pa.types.is_integer(dtype):
        return _INTEGER, f"CAST({x} AS {sql_name(dtype)})"
    if pa.types.is_floating(dtype):
        return _NUMBER, f"CAST({x} AS {sql_name(dtype)})"
    if pa.types.is_decimal(dtype):  # at most its scale's decimals: a value that would be rounded fails
        exact = f"CAST({text} AS {sql_name(dtype)})"
        kept = f"CAST({text} AS DOUBLE) = CAST({exact} AS DOUBLE)"
        return _NUMBER + ("VARCHAR",), f"CASE WHEN {kept} THEN {exact} ELSE error('{sql_name(dtype)} rounds ' || {text}) END"
    if pa.types.is_boolean(dtype):
        return ("BOOLEAN",), f"CAST({x} AS BOOLEAN)"
    if pa.types.is_date(dtype):
        return ("VARCHAR",), f"CAST({text} AS DATE)"
    if pa.types.is_binary(dtype):
        return ("VARCHAR",), f"from_base64({text})"
    if pa.types.is_timestamp(dtype):
        epoch = f"make_timestamp(CAST({x} AS BIGINT) * 1000)"  # epoch milliseconds
        if dtype.tz is not None:  # an instant: a text's zone applies (none: UTC, the connection's zone)
            parsed, epoch = f"CAST({text} AS TIMESTAMPTZ)", f"timezone('UTC', {epoch})"
        else:
            parsed = f"CAST(rtrim({text}, 'Z') AS TIMESTAMP)"
        return _INTEGER + ("VARCHAR",), f"CASE WHEN json_type({x}) = 'VARCHAR' THEN {parsed} ELSE {epoch} END"
    return ("VARCHAR",), text  # STRING (and any other type: its text, cast by Arrow afterwards)


def map_problem(line: bytes, field: pa.Field) -> str | None:
    """Why ``field`` of one JSON line does not read, if it does not (the error path: the same SQL as a block)."""
    try:
        read_map_columns(line, [field], 1)
    except BadInput as e:
        return str(e)
    return None


def read_map_columns(data: bytes, fields: list[pa.Field], rows: int) -> dict[str, pa.Array]:
    """The ``fields`` (each holding a MAP) of the ``rows`` JSON lines in ``data``, by name.

    Raises:
        BadInput: a line's value for one of them does not read (the caller finds which line).
    """
    lines = pc.split_pattern(pa.array([data.decode("utf-8")]), "\n").flatten()
    lines = lines.filter(pc.not_equal(pc.utf8_trim_whitespace(lines), ""))  # as pyarrow.json skips blank lines
    if len(lines) != rows:
        raise BadInput(f"expected {rows} JSON lines, found {len(lines)}")
    members = ", ".join(f"{_member('line', f.name)} AS c{i}" for i, f in enumerate(fields))  # each line parsed once
    items = ", ".join(f"{convert_sql(f'c{i}', f.type)} AS c{i}" for i, f in enumerate(fields))
    with duckdb.connect() as con:
        con.execute("SET TimeZone = 'UTC'")  # a TIMESTAMP_LTZ written without a zone is UTC
        con.execute("SET enable_progress_bar = false")
        con.register("__lines", pa.table({"line": lines}))
        try:
            out = con.sql(f"SELECT {items} FROM (SELECT {members} FROM __lines)").to_arrow_table()
        except duckdb.Error as e:
            raise BadInput(str(e).splitlines()[0]) from None
    try:
        return {f.name: _as_declared(out.column(f"c{i}").combine_chunks(), f.type).cast(f.type)
                for i, f in enumerate(fields)}
    except (pa.ArrowException, ValueError) as e:
        raise BadInput(str(e)) from None


def _lengths(lists: pa.Array) -> pa.Array:
    """Offsets from the lengths of ``lists`` (a NULL list: none)."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    return pa.array(np.concatenate([[0], np.cumsum(lengths)]), pa.int32())


def _as_declared(array: pa.Array, dtype: pa.DataType) -> pa.Array:
    """DuckDB's answer with each MAP built from its STRUCT(k, v) of lists (see convert_sql), at any depth."""
    if not has_map(dtype):
        return array
    if pa.types.is_map(dtype):
        keys, values = array.flatten()  # a NULL map: NULL lists
        return pa.MapArray.from_arrays(_lengths(keys), keys.flatten(), _as_declared(values.flatten(), dtype.item_type),
                                       mask=keys.is_null())
    if pa.types.is_struct(dtype):
        children = [_as_declared(c, f.type) for c, f in zip(array.flatten(), dtype)]
        return pa.StructArray.from_arrays(children, names=[f.name for f in dtype], mask=array.is_null())
    elements = _as_declared(array.flatten(), dtype.value_type)
    return pa.ListArray.from_arrays(_lengths(array), elements, mask=array.is_null())
