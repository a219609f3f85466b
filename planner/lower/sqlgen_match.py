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
from .sqltree import alias, asc, call, col, desc, lit, row_number, table

SEQ, NEW, PID, REV, MATCH, VAR = "__seq", "__new", "__pid", "__rev", "__match", "__var"


def cond_column(i: int) -> str:
    return f"__c{i}"


@dataclass(frozen=True)
class MatchSql:
    conditions: str
    measures: str


def match_sql(node: MatchRecognize) -> MatchSql:
    schema = node.input.schema
    parts = [col(p) for p in node.partition_by]
    in_order = [asc(node.order_by), asc(SEQ)]  # match order: time, then arrival
    pid = (exp.Sub(this=exp.Window(this=exp.DenseRank(), order=exp.Order(expressions=[asc(p) for p in parts])),
                   expression=lit(1)) if parts else lit(0))
    conds = []
    for i, d in enumerate(node.defines):
        cond = exp.true() if d is None else _with_lag(typed(d, schema), parts, in_order)
        conds.append(alias(exp.Coalesce(this=exp.Paren(this=cond), expressions=[exp.false()]), cond_column(i)))
    newest_first = row_number(parts, [desc(node.order_by), desc(SEQ)])
    conditions = (exp.select(col(SEQ), col(NEW), col(node.order_by), *parts, alias(pid, PID), *conds,
                             alias(newest_first, REV))
                  .from_(table("__rows")).order_by(asc(PID), *in_order))
    items = [alias(call("any_value", p), p.name) for p in parts]
    for (name, e), f in zip(node.measures, node.measure_fields):
        body = e.copy().transform(lambda n: _nav_sql(n, schema, in_order) if is_nav(n) else n)
        items.append(alias(cast(body, f.type), name))
    measures = (exp.select(*items).from_(table("__map")).join(table("__rows"), using=[SEQ])
                .group_by(col(MATCH)).order_by(asc(MATCH)))
    return MatchSql(render(conditions), render(measures))


def _with_lag(cond: exp.Expression, parts: list[exp.Expression], order: list[exp.Ordered]) -> exp.Expression:
    """PREV(v, n) as LAG(v, n) over the partition in match order."""
    def lag(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Anonymous) and n.name == PREV:
            arg, off = n.expressions
            return exp.Window(this=exp.Lag(this=arg, offset=off), partition_by=[p.copy() for p in parts] or None,
                              order=exp.Order(expressions=[o.copy() for o in order]))
        return n
    return cond.transform(lag)


def _nav_sql(node: exp.Expression, schema: Schema, order: list[exp.Ordered]) -> exp.Expression:
    how, var, arg, n = nav_parts(node)
    a = typed(arg, schema) if arg is not None else exp.Star()

    def only_var(agg: exp.Expression) -> exp.Expression:
        if var == ALL_ROWS:
            return agg
        return exp.Filter(this=agg, expression=exp.Where(this=exp.EQ(this=col(VAR), expression=lit(var))))

    if how in ("FIRST", "LAST"):
        index = n + 1 if how == "FIRST" else -(n + 1)
        values = only_var(exp.ArrayAgg(this=exp.Order(this=a, expressions=[o.copy() for o in order])))
        return exp.Bracket(this=exp.Paren(this=values), expressions=[lit(index)], offset=1)  # 1-based, as written
    if how == "AVG":
        arg_type = infer_type(arg, schema)
        out = AVG.result_type(arg_type)
        if not pa.types.is_integer(out):
            return exp.Paren(this=only_var(exp.Avg(this=a)))
        total = cast(only_var(exp.Sum(this=a.copy())), sum_type(arg_type))
        count = exp.Nullif(this=only_var(exp.Count(this=a.copy())), expression=lit(0))
        return exp.Paren(this=cast(exp.IntDiv(this=total, expression=count), out))
    return exp.Paren(this=only_var(call(how.lower(), a)))
