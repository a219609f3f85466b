"""Vectorized conversion of parsed columns to the declared column types.

Every source parses a file into Arrow columns of whatever type the file
holds and then calls :func:`conform_table`, so all formats convert values
the same way:

* TIMESTAMP (``timestamp[us]``, no time zone): strings
  ``YYYY-MM-DD HH:MM:SS[.f…ffffff]`` (``T`` separator and a trailing ``Z``
  accepted, as is anything else Arrow's ISO-8601 parser takes without a zone
  offset, e.g. a bare date), integers and all-digit strings as epoch
  milliseconds, timestamps of any unit and zone as their UTC wall clock.
* TIMESTAMP_LTZ (``timestamp[us, tz=UTC]``, an instant): the same forms; a
  string's zone offset (``Z``, ``+08:00``, ``-0500``) is applied, a string
  without one is UTC (Flink's JSON format writes ``...Z``), epoch
  milliseconds are instants.
* DATE and TIMESTAMP values must lie in the years 0001 to 9999 (Flink's
  range starts at year 0000, which Python cannot hold): others are bad.
* DATE from ``YYYY-MM-DD`` strings; VARBINARY from base64 strings (as
  Flink's JSON and CSV formats); everything else by Arrow's safe cast, which
  rejects overflow and lossy conversions (``300`` as TINYINT, ``1.5`` as
  BIGINT).

A value that does not convert raises :class:`BadInput` for the whole batch.
Conversion is value by value, so :func:`convert_rows` can then find the bad
rows in the already parsed table without parsing the input again.
"""

from __future__ import annotations

from typing import Callable

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.types import sql_name
from .salvage import BadInput, salvage

TIMESTAMP = pa.timestamp("us")
_INSTANT = pa.timestamp("us", tz="UTC")
_TRUNCATE_US = pc.CastOptions(TIMESTAMP, allow_time_truncate=True)


def is_text(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)


def conform_table(table: pa.Table, schema: pa.Schema, not_null: tuple[str, ...] = ()) -> pa.Table:
    """``table``'s columns named in ``schema``, converted to its types, in its order.

    Args:
        table: parsed columns (any subset of types); must hold every field.
        schema: the declared columns.
        not_null: columns that must not hold NULL.

    Raises:
        BadInput: a value does not convert, or a NOT NULL column holds NULL.
    """
    columns = []
    for field in schema:
        column = conform_column(table.column(field.name), field.type)
        if field.name in not_null and column.null_count:
            raise BadInput(f"NULL in NOT NULL column '{field.name}'")
        columns.append(column)
    if not columns:
        # A zero-column table still has to carry the row count.
        return table.select([])
    return pa.Table.from_arrays(columns, schema=schema)


def convert_rows(raw: pa.Table, schema: pa.Schema, not_null: tuple[str, ...], show: Callable[[object], str],
                 null_message: str) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
    """Convert a parsed table, leaving out the rows that do not convert (the error path).

    Conversion is value by value, so each column's *distinct* values are
    converted (halving the failing sets, see ``salvage.py``) and the rows
    holding a bad value are masked with ``is_in``: a column where every row
    holds the same bad value costs a few calls, not one per row.

    Args:
        raw: the parsed table (every field of ``schema``, any types).
        schema: the declared columns.
        not_null: columns that must not be NULL.
        show: how a raw value is quoted in a message.
        null_message: the message for a NULL in a NOT NULL column.

    Returns:
        The good rows converted to ``schema``, and for each bad row its
        index in ``raw`` -> (column, message), naming the first bad column.
    """
    bad: dict[int, tuple[str, str]] = {}
    columns, keep = [], np.ones(raw.num_rows, dtype=bool)
    for field in schema:
        column = raw.column(field.name)
        try:
            converted, failed = conform_column(column, field.type), None
        except BadInput:
            failed = _bad_values_mask(column, field.type)
            converted = conform_column(pc.if_else(pa.array(failed), pa.scalar(None, column.type), column), field.type)
            for row in np.flatnonzero(failed):
                bad.setdefault(int(row), (field.name, f"cannot convert {show(column[int(row)].as_py())} "
                                                      f"to {sql_name(field.type)}"))
            keep &= ~failed
        if field.name in not_null and converted.null_count:
            nulls = converted.is_null().to_numpy(zero_copy_only=False)
            if failed is not None:
                nulls &= ~failed
            for row in np.flatnonzero(nulls):
                bad.setdefault(int(row), (field.name, null_message))
            keep &= ~nulls
        columns.append(converted)
    mask = pa.array(keep)
    if not columns:
        return raw.select([]).filter(mask), bad
    return pa.Table.from_arrays(columns, schema=schema).filter(mask), bad


def _bad_values_mask(column, target: pa.DataType) -> np.ndarray:
    """Which rows of ``column`` hold a value that does not convert to ``target``."""
    values = pc.unique(column.drop_null())
    result = salvage(len(values), lambda lo, hi: conform_column(values.slice(lo, hi - lo), target))
    bad_values = values.take(pa.array(result.bad, pa.int64()))
    return pc.fill_null(pc.is_in(column, value_set=bad_values), False).to_numpy(zero_copy_only=False)


def conform_column(column: pa.ChunkedArray | pa.Array, target: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """``column`` as ``target``.

    Raises:
        BadInput: a value does not convert.
    """
    if column.type == target and not _dated(target):
        return column
    try:
        if pa.types.is_timestamp(target) and target.tz is not None:
            return _in_range(to_instant(column), target)
        if pa.types.is_timestamp(target):
            return _in_range(to_timestamp(column), target)
        if pa.types.is_binary(target) and is_text(column.type):
            return from_base64(column)
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        return _in_range(column.cast(target), target) if _dated(target) else column.cast(target)
    except (pa.ArrowException, ValueError, OverflowError) as e:
        raise BadInput(str(e)) from None


def _dated(dtype: pa.DataType) -> bool:
    return pa.types.is_timestamp(dtype) or pa.types.is_date(dtype)


# DATE and TIMESTAMP hold the years 0001 to 9999 (Flink allows year 0000, but
# Python, which prints and returns values, has no year 0).
_LIMITS = {"date": (pa.scalar(-719162, pa.int32()), pa.scalar(2932896, pa.int32())),
           "timestamp": (pa.scalar(-62135596800000000, pa.int64()), pa.scalar(253402300799999999, pa.int64()))}


def _in_range(column, target: pa.DataType):
    low, high = _LIMITS["date" if pa.types.is_date(target) else "timestamp"]
    ints = column.cast(low.type)
    bounds = pc.min_max(ints)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if lo is not None and (lo < low.as_py() or hi > high.as_py()):
        raise BadInput("a date outside the years 0001 to 9999")
    return column


def to_timestamp(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Event times as naive ``timestamp[us]`` (see the module docstring for the forms)."""
    dtype = column.type
    if pa.types.is_timestamp(dtype):
        if dtype.tz is not None:
            # Dropping the zone keeps the stored UTC instant: its UTC wall clock.
            column = column.cast(pa.timestamp(dtype.unit))
        return pc.cast(column, options=_TRUNCATE_US)
    if pa.types.is_integer(dtype):
        return _from_epoch_ms(column)
    if pa.types.is_date(dtype):
        return column.cast(TIMESTAMP)
    if pa.types.is_dictionary(dtype):
        return to_timestamp(column.cast(dtype.value_type))
    if not is_text(dtype):
        raise BadInput(f"cannot read {dtype} as a timestamp")
    # Epoch milliseconds may come as digit strings (CSV, or JSON numbers read
    # as text when a file mixes both forms): split them off first.
    unsigned = pc.if_else(pc.starts_with(column, "-"), pc.utf8_slice_codeunits(column, 1), column)
    digits = pc.ascii_is_decimal(unsigned)
    if pc.any(digits).as_py():
        epoch = _from_epoch_ms(pc.if_else(digits, column, None).cast(pa.int64()))
        text = pc.if_else(digits, None, column)
    else:
        epoch, text = None, column
    if pc.any(pc.ends_with(text, "Z")).as_py():
        # Arrow refuses a zone designator for a naive timestamp; Z is UTC, which is what we keep.
        text = pc.if_else(pc.ends_with(text, "Z"), pc.utf8_slice_codeunits(text, 0, -1), text)
    parsed = text.cast(TIMESTAMP)
    return parsed if epoch is None else pc.coalesce(epoch, parsed)


_ZONE_SUFFIX = r"(Z|[+-]\d\d(:?\d\d)?)$"


def to_instant(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Instants (``timestamp[us, tz=UTC]``): strings with their zone offset (none: UTC), epoch milliseconds."""
    dtype = column.type
    if pa.types.is_dictionary(dtype):
        return to_instant(column.cast(dtype.value_type))
    if pa.types.is_timestamp(dtype) and dtype.tz is not None:
        return pc.cast(column, options=_TRUNCATE_US).cast(_INSTANT)
    if not is_text(dtype):  # epoch milliseconds, or a timestamp without a zone: its UTC wall clock
        return to_timestamp(column).cast(_INSTANT)
    unsigned = pc.if_else(pc.starts_with(column, "-"), pc.utf8_slice_codeunits(column, 1), column)
    digits = pc.ascii_is_decimal(unsigned)
    epoch = None
    if pc.any(digits).as_py():
        epoch = _from_epoch_ms(pc.if_else(digits, column, None).cast(pa.int64())).cast(_INSTANT)
        column = pc.if_else(digits, None, column)
    zoned = pc.match_substring_regex(column, _ZONE_SUFFIX)
    text = pc.if_else(zoned, column, pc.binary_join_element_wise(column, "Z", ""))
    parsed = pc.cast(text.cast(pa.timestamp("ns", tz="UTC")), options=_TRUNCATE_US).cast(_INSTANT)
    return parsed if epoch is None else pc.coalesce(epoch, parsed)


def _from_epoch_ms(column) -> pa.Array:
    micros = pc.multiply_checked(column.cast(pa.int64()), 1000)
    return micros.cast(TIMESTAMP)


def from_base64(column) -> pa.ChunkedArray:
    """Decode base64 text to bytes (vectorized in DuckDB: Arrow has no base64 kernel)."""
    with duckdb.connect() as con:
        con.register("b64", pa.table({"v": column}))
        try:
            out = con.sql("SELECT from_base64(v) AS v FROM b64").to_arrow_table()
        except duckdb.Error as e:
            raise BadInput(str(e).splitlines()[0]) from None
    return out.column("v").cast(pa.binary())
