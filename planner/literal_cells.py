"""VALUES cells that are a literal cast to a column's type, typed without sqlglot's type annotation.

``INSERT ... VALUES`` casts every value to its column's type. Typing a cell
through sqlglot's ``annotate_types`` costs about a millisecond, so a
1,000-row INSERT would spend seconds planning. A cell that is ``CAST(<literal>
AS <type>)`` (a number, a string, a boolean, NULL, or a ``DATE``/``TIME``/
``TIMESTAMP 'text'`` literal) needs none: its type is the cast's, and no
type-dependent lowering (``functions.lower_functions``) rewrites it, so it
renders as written.

Example:
    >>> from sqlglot import parse_one
    >>> plain_cast_type(parse_one("CAST(12 AS BIGINT)"))
    DataType(int64)
    >>> plain_cast_type(parse_one("CAST(1.5 AS INT)")) is None  # Flink truncates: lowered
    True
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from .types import InvalidType, from_sql_type

T = exp.DataType.Type
_TEMPORAL_LITERALS = {T.DATE, T.TIME, T.TIMESTAMP}
_NESTED_OR_ZONED = {T.ARRAY, T.LIST, T.MAP, T.STRUCT, T.TIMESTAMPTZ, T.TIMESTAMPLTZ}


def _literal_kind(v: exp.Expression) -> str | None:
    """'number', 'integer', 'string', 'temporal' or 'other' (NULL, TRUE, FALSE) for a plain literal, else None."""
    if isinstance(v, exp.Neg):
        v = v.this
        if not isinstance(v, exp.Literal) or v.is_string:
            return None
    if isinstance(v, exp.Literal):
        return "string" if v.is_string else ("integer" if v.is_int else "number")
    if isinstance(v, (exp.Null, exp.Boolean)):
        return "other" if isinstance(v, exp.Null) else "boolean"
    if (type(v) is exp.Cast and isinstance(v.this, exp.Literal) and v.this.is_string
            and v.to.this in _TEMPORAL_LITERALS):
        return "temporal"
    return None


def plain_cast_type(cell: exp.Expression) -> pa.DataType | None:
    """The Arrow type of a ``CAST(<literal> AS <type>)`` that renders as written, or None (type it the slow way)."""
    if type(cell) is not exp.Cast:
        return None
    kind, to = _literal_kind(cell.this), cell.to
    if kind is None or to.this in _NESTED_OR_ZONED:
        return None
    if to.this in exp.DataType.INTEGER_TYPES and kind == "number":
        return None  # truncated toward zero, as Flink does (a lowering)
    if to.this in exp.DataType.TEXT_TYPES and kind not in ("string", "other"):
        return None  # Flink's text of a timestamp or boolean (a lowering)
    try:
        return from_sql_type(to)
    except InvalidType:
        return None  # the slow way reports it, at the cell
