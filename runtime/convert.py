"""Turning rows a program hands in (dicts, tuples, pandas, Arrow) into typed Arrow tables."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .errors import RowError


def to_timestamp(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Timestamps from strings ('YYYY-MM-DD HH:MM:SS[.fff]', ISO 'T', trailing 'Z'),
    epoch milliseconds (integers) or any Arrow timestamp, as naive microseconds."""
    t = column.type
    if pa.types.is_timestamp(t):
        if t.tz is not None:
            column = column.cast(pa.timestamp(t.unit))
        return column.cast(pa.timestamp("us"))
    if pa.types.is_integer(t):
        return pc.multiply(column.cast(pa.int64()), 1000).cast(pa.timestamp("us"))
    if pa.types.is_floating(t):
        return pc.multiply(column, 1000).cast(pa.int64()).cast(pa.timestamp("us"))
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        text = pc.replace_substring_regex(column, r"Z$", "")
        return text.cast(pa.timestamp("us"))
    if pa.types.is_date(t):
        return column.cast(pa.timestamp("us"))
    return column.cast(pa.timestamp("us"))


def cast_column(column, target: pa.DataType, name: str):
    if column.type == target:
        return column
    try:
        if pa.types.is_timestamp(target):
            return to_timestamp(column)
        if pa.types.is_null(column.type):
            return pa.nulls(len(column), target)
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise RowError(f"column '{name}': cannot convert {column.type} to {target}: {e}") from None


def to_table(rows, schema: pa.Schema, columns: list[str] | None = None) -> pa.Table:
    """Rows in any common shape -> a table with exactly ``schema``'s columns and types.

    ``rows`` may be a pyarrow Table or RecordBatch, a pandas DataFrame, a list of
    dicts (missing keys are NULL), or a list of tuples in ``columns`` order
    (default: the schema's order). Columns not given are NULL.
    """
    table = _as_arrow(rows, schema, list(columns) if columns is not None else schema.names)
    by_lower = {n.lower(): n for n in table.column_names}
    arrays = []
    for f in schema:
        present = by_lower.get(f.name.lower())
        if present is None:
            arrays.append(pa.nulls(table.num_rows, f.type))
        else:
            arrays.append(cast_column(table.column(present), f.type, f.name))
    return pa.Table.from_arrays(arrays, schema=schema)


def _as_arrow(rows, schema: pa.Schema, names: list[str]) -> pa.Table:
    """``rows`` as an Arrow table of the columns it gives (not yet cast to the schema)."""
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    if isinstance(rows, pa.Table):
        return rows
    if hasattr(rows, "to_dict") and hasattr(rows, "columns"):  # pandas
        return pa.Table.from_pandas(rows, preserve_index=False)
    rows = list(rows)
    if rows and isinstance(rows[0], dict):
        return _from_dicts(rows, schema)
    return _from_tuples(rows, schema, names)


def _from_dicts(rows: list[dict], schema: pa.Schema) -> pa.Table:
    keys = {k.lower(): k for r in rows for k in r}
    unknown = [k for k in keys if schema.get_field_index(_match(schema, k)) < 0]
    if unknown:
        raise RowError(f"unknown column '{keys[unknown[0]]}'; columns are {', '.join(schema.names)}")
    return pa.table({f.name: _array([_get(r, f.name) for r in rows], f) for f in schema})


def _from_tuples(rows: list, schema: pa.Schema, names: list[str]) -> pa.Table:
    width = len(names)
    for r in rows:
        if len(r) != width:
            raise RowError(f"a row has {len(r)} values, expected {width} ({', '.join(names)})")
    cols = list(zip(*rows)) if rows else [[] for _ in names]

    def field(name: str) -> pa.Field | None:
        index = schema.get_field_index(_match(schema, name.lower()))
        return schema.field(index) if index >= 0 else None

    return pa.table({n: _array(list(c), field(n)) for n, c in zip(names, cols)})


def _array(values: list, field: pa.Field | None) -> pa.Array:
    """Python values as an Arrow array; nested values (dicts, lists, maps) are built with the column's type."""
    if not any(x is not None for x in values):
        return pa.nulls(len(values))
    if field is None or not pa.types.is_nested(field.type):
        return pa.array(values)
    try:
        return pa.array(values, type=field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, KeyError) as e:
        raise RowError(f"column '{field.name}': a value does not fit {field.type}: {e}") from None


def _match(schema: pa.Schema, key: str) -> str:
    return next((n for n in schema.names if n.lower() == key), key)


def _get(row: dict, name: str):
    if name in row:
        return row[name]
    lowered = name.lower()
    return next((v for k, v in row.items() if k.lower() == lowered), None)
