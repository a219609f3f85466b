"""Flink SQL function spellings, parsed into sqlglot's typed expressions.

sqlglot already knows most scalar functions under their usual names; this
table adds the names and argument orders Flink uses, so that a query
renders with the same meaning for DuckDB and Spark and its result type is
known when it is planned.
"""

from __future__ import annotations

from sqlglot import exp

# name -> builder(args) -> expression
FLINK_FUNCTIONS: dict = {
    "CHARACTER_LENGTH": lambda args: exp.Length(this=args[0]),
    "IFNULL": lambda args: exp.Coalesce(this=args[0], expressions=args[1:]),
}
