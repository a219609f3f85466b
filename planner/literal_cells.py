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

from dataclasses import dataclass
from functools import lru_cache

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


@dataclass(frozen=True)
class LiteralColumn:
    """One VALUES column whose cells are all plain literals: their texts, read as ``source`` then cast.

    Reading the texts as ``source`` (a string literal as VARCHAR, ``1.25`` as
    an exact DECIMAL, ``TIMESTAMP '…'`` as TIMESTAMP) gives the value the
    literal has in SQL, so ``CAST(CAST(text AS source) AS column type)`` is
    the cell's ``CAST(literal AS column type)``, for a whole column at once.
    """

    texts: list[str | None]
    source: exp.DataType


_MAX_DIGITS = 38  # DuckDB's widest exact number (HUGEINT, DECIMAL(38, s))


@lru_cache(maxsize=64)
def _type(sql: str) -> exp.DataType:
    """A parsed SQL type; shared, so callers copy it before putting it in a tree."""
    return exp.DataType.build(sql)


def _cell_text(v: exp.Expression, kind: str) -> str:
    if kind == "temporal":
        return v.this.this
    if isinstance(v, exp.Neg):
        return "-" + v.this.this
    if isinstance(v, exp.Boolean):
        return "true" if v.this else "false"
    return v.this


def _source_type(kind: str, cells: list[exp.Expression], texts: list[str | None]) -> exp.DataType | None:
    """The SQL type the column's literal texts are read as, or None (not one exact type for them all)."""
    if kind == "string":
        return _type("VARCHAR")
    if kind == "boolean":
        return _type("BOOLEAN")
    if kind == "temporal":
        types = {c.to for c in cells if not isinstance(c, exp.Null)}
        return types.pop() if len(types) == 1 else None
    digits = [t.lstrip("-") for t in texts if t is not None]
    if kind == "integer":
        return _type("HUGEINT") if max(map(len, digits)) <= _MAX_DIGITS else None
    if any("e" in d.lower() for d in digits):  # 1e3 is a DOUBLE literal; 1.25 an exact DECIMAL
        return _type("DOUBLE") if all("e" in d.lower() for d in digits) else None
    whole = max(len(d.split(".")[0]) for d in digits)
    scale = max(len(d.split(".")[1]) if "." in d else 0 for d in digits)
    return _type(f"DECIMAL({_MAX_DIGITS}, {scale})") if whole + scale <= _MAX_DIGITS else None


def literal_columns(tree: exp.Values, columns: list[exp.DataType]) -> list[LiteralColumn] | None:
    """The columns of ``tree`` (VALUES cast to ``columns``) as literal texts, or None when a cell needs the
    planner: an expression, a lowered cast (``CAST(2.5 AS INT)`` truncates), or a column mixing literal kinds."""
    rows = [r.expressions if isinstance(r, exp.Tuple) else [r] for r in tree.expressions]
    if any(len(r) != len(columns) for r in rows):
        return None
    out = []
    for i, to in enumerate(columns):
        cells = [r[i] for r in rows]
        values = [c for c in cells if not isinstance(c, exp.Null)]
        kinds = {_literal_kind(c) for c in values}
        if kinds == {"integer", "number"}:
            kinds = {"number"}  # 3 and 2.5 in one column: both exact decimals
        if None in kinds or len(kinds) > 1:
            return None  # an expression, or two kinds of literal in one column
        kind = kinds.pop() if kinds else "string"
        if values and plain_cast_type(exp.Cast(this=values[0].copy(), to=to)) is None:
            return None
        texts = [None if isinstance(c, exp.Null) else _cell_text(c, kind) for c in cells]
        source = _source_type(kind, values, texts) if values else _type("VARCHAR")
        if source is None:
            return None
        out.append(LiteralColumn(texts, source))
    return out


def literal_rows_sql(columns: list[LiteralColumn], types: list[pa.DataType]) -> str:
    """One statement over the columns' texts (``c0``, ``c1``, … of the input) that gives the typed rows."""
    from .lower import sqlgen as S  # the lowering, not needed to type cells

    items = [exp.alias_(S.cast(exp.Cast(this=exp.column(f"c{i}", quoted=True), to=c.source.copy()), t),
                        f"c{i}", quoted=True)
             for i, (c, t) in enumerate(zip(columns, types))]
    return S.render(exp.select(*items).from_(S.batch_table()))
