"""DuckDB SQL for MATCH_RECOGNIZE, run when the watermark releases rows.

Two statements, both vectorized; only the walk of the pattern between them
is sequential (runtime/operators/match_nfa.py):

- ``conditions`` runs over ``__rows`` (the rows kept from before, ``__new``
  false, then the released ones, each with its ``__seq`` arrival number)
  and returns them in match order (partition, time, arrival) with
  ``__pid`` (a partition number), one boolean ``__c<i>`` per pattern
  variable (its DEFINE condition; PREV becomes LAG over the partition) and
  ``__rev`` (the row's rank from the partition's newest row, to keep the
  rows a later PREV reaches)::

      PREV(v, 1) over partition k:   k=a: 10 12 | 11   -> LAG: NULL 10 12 | 11 ...

- ``measures`` runs over ``__rows`` and ``__map`` (``__match``, ``__seq``,
  ``__var``: which rows each match took, as which variable) and returns one
  row per match: the partition columns, then the measures, where
  ``LAST(A.v, n)`` is the (n+1)-th last of A's values in time order and
  ``SUM(A.v)`` sums A's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..aggregate_kinds import AVG
from ..bind.expressions import infer_type
from ..logical.match import ALL_ROWS, PREV, MatchRecognize, is_nav, nav_parts
from ..types import Schema, sum_type
from .sqlgen import cast, render, typed
from .sqlgen_group import q, sql_type

SEQ, NEW, PID, REV, MATCH, VAR = "__seq", "__new", "__pid", "__rev", "__match", "__var"


def cond_column(i: int) -> str:
    return f"__c{i}"


@dataclass(frozen=True)
class MatchSql:
    conditions: str
    measures: str


def match_sql(node: MatchRecognize) -> MatchSql:
    schema = node.input.schema
    P = [q(p) for p in node.partition_by]
    T = q(node.order_by)
    part = f"PARTITION BY {', '.join(P)} " if P else ""
    pid = f"dense_rank() OVER (ORDER BY {', '.join(P)}) - 1" if P else "0"
    conds = []
    for i, d in enumerate(node.defines):
        text = "TRUE" if d is None else render(_with_lag(typed(d, schema), f"{part}ORDER BY {T}, {SEQ}"))
        conds.append(f"COALESCE(({text}), FALSE) AS {cond_column(i)}")
    conditions = (f"SELECT {SEQ}, {NEW}, {T}, {''.join(p + ', ' for p in P)}{pid} AS {PID}, {', '.join(conds)}, "
                  f"row_number() OVER ({part}ORDER BY {T} DESC, {SEQ} DESC) AS {REV} "
                  f"FROM __rows ORDER BY {PID}, {T}, {SEQ}")
    items = [f"any_value({p}) AS {p}" for p in P]
    for (name, e), f in zip(node.measures, node.measure_fields):
        body = e.copy().transform(lambda n: _nav_sql(n, schema, T) if is_nav(n) else n)
        items.append(f"{render(cast(body, f.type))} AS {q(name)}")
    measures = (f"SELECT {', '.join(items)} FROM __map JOIN __rows USING ({SEQ}) "
                f"GROUP BY {MATCH} ORDER BY {MATCH}")
    return MatchSql(conditions, measures)


def _with_lag(cond: exp.Expression, window: str) -> exp.Expression:
    def lag(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Anonymous) and n.name == PREV:
            arg, off = n.expressions
            return exp.maybe_parse(f"LAG({render(arg)}, {off.name}) OVER ({window})", dialect="duckdb")
        return n
    return cond.transform(lag)


def _nav_sql(node: exp.Expression, schema: Schema, time: str) -> exp.Expression:
    how, var, arg, n = nav_parts(node)
    where = f" FILTER (WHERE {VAR} = {var})" if var != ALL_ROWS else ""
    a = render(typed(arg, schema)) if arg is not None else "*"
    if how in ("FIRST", "LAST"):
        index = n + 1 if how == "FIRST" else -(n + 1)
        text = f"(list({a} ORDER BY {time}, {SEQ}){where})[{index}]"  # match order: time, then arrival
    elif how == "AVG":
        arg_type = infer_type(arg, schema)
        out = AVG.result_type(arg_type)
        if pa.types.is_integer(out):
            st = sql_type(sum_type(arg_type))
            text = f"CAST(CAST(sum({a}){where} AS {st}) // NULLIF(count({a}){where}, 0) AS {sql_type(out)})"
        else:
            text = f"avg({a}){where}"
    else:
        text = f"{how.lower()}({a}){where}"
    return exp.maybe_parse(f"({text})", dialect="duckdb")
