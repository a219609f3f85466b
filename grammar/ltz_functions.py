"""TO_TIMESTAMP_LTZ: an epoch number as a TIMESTAMP_LTZ (an instant), built as portable sqlglot.

Flink 2.x: ``TO_TIMESTAMP_LTZ(numeric[, precision])``, where the precision
says the unit of the number, 10^-precision seconds (0: seconds, 3, the
default: milliseconds, 6: microseconds); NULL in, NULL out.

Example:
    >>> from sqlglot import parse_one
    >>> from dsms.grammar.dialect import Dsms
    >>> parse_one("TO_TIMESTAMP_LTZ(ts, 0)", read=Dsms).sql("duckdb")
    "CAST(MAKE_TIMESTAMP(CAST(CAST(ts AS DECIMAL(38, 9)) * 1000000 AS BIGINT)) AT TIME ZONE 'UTC' AS TIMESTAMPTZ)"
"""

from __future__ import annotations

from sqlglot import exp

from .sqlbuild import _arity, _cast, _div, _int_literal, _mul, _num, _refuse


@_arity("TO_TIMESTAMP_LTZ", 1, 2, "(numeric[, precision])")
def to_timestamp_ltz(n: exp.Expression, precision: exp.Expression | None = None):
    p = 3 if precision is None else _int_literal(precision)
    if p is None or not 0 <= p <= 9:
        return _refuse("TO_TIMESTAMP_LTZ takes the precision as a whole number from 0 to 9 (0: epoch seconds, "
                       "3: epoch milliseconds)", [precision])
    exact = _cast(n, "DECIMAL(38, 9)")  # no INT overflow, and fractional epochs keep their fraction
    micros = _mul(exact, _num(10 ** (6 - p))) if p <= 6 else _div(exact, _num(10 ** (p - 6)))
    # The UTC wall clock of the instant, then read as UTC (AT TIME ZONE: DuckDB's timezone('UTC', ts)).
    utc = exp.AtTimeZone(this=exp.UnixToTime(this=_cast(micros, "BIGINT"), scale=exp.UnixToTime.MICROS),
                         zone=exp.Literal.string("UTC"))
    return _cast(utc, "TIMESTAMPLTZ")
