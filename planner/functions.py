"""Which functions a query may call.

Scalar functions are the ones the dsms dialect parses into a typed sqlglot
expression (so they render correctly for DuckDB and Spark and have a known
result type). A name sqlglot does not know parses as ``exp.Anonymous`` and
is refused here with the closest known names.
"""

from __future__ import annotations

from sqlglot import exp

from ..grammar import Diagnostic, SqlError
from ..grammar.diagnostics import did_you_mean
from .timeutil import node_span

AGGREGATES = {"COUNT", "SUM", "AVG", "MIN", "MAX"}

# Functions users reach for, listed for suggestions and SHOW FUNCTIONS.
SCALAR_FUNCTIONS = sorted({
    "ABS", "CEIL", "CEILING", "FLOOR", "ROUND", "MOD", "POWER", "SQRT", "EXP", "LN", "LOG10", "LOG2", "SIGN",
    "GREATEST", "LEAST", "COALESCE", "NULLIF", "IFNULL", "IF", "CAST", "TRY_CAST",
    "UPPER", "LOWER", "TRIM", "LTRIM", "RTRIM", "CHAR_LENGTH", "CHARACTER_LENGTH", "LENGTH", "SUBSTRING", "SUBSTR",
    "CONCAT", "CONCAT_WS", "REPLACE", "POSITION", "LPAD", "RPAD", "REPEAT", "REVERSE", "INITCAP", "LEFT", "RIGHT",
    "REGEXP_EXTRACT", "REGEXP_REPLACE", "SPLIT_INDEX", "MD5",
    "EXTRACT", "YEAR", "QUARTER", "MONTH", "WEEK", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE", "SECOND",
    "DATE_FORMAT", "TO_TIMESTAMP", "TO_DATE", "FROM_UNIXTIME", "UNIX_TIMESTAMP", "TIMESTAMPADD", "TIMESTAMPDIFF",
    "CURRENT_TIMESTAMP", "LOCALTIMESTAMP", "NOW", "PROCTIME",
})

# sqlglot functions that have no stable meaning in a continuous query.
_REFUSED = {
    exp.Rand: "RAND() gives different results on every route and replay",
}


def check_function(node: exp.Func, source: str | None) -> None:
    """Raise a SqlError if ``node`` is not a function dsms can evaluate."""
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        raise SqlError(Diagnostic(f"unknown function '{node.name}'", node_span(node), source,
                                  help=did_you_mean(name, SCALAR_FUNCTIONS + sorted(AGGREGATES))))
    for cls, why in _REFUSED.items():
        if isinstance(node, cls):
            raise SqlError(Diagnostic(f"function {node.sql_name()} is not supported: {why}", node_span(node), source))
