"""DuckDB SQL for OVER aggregates, run when the watermark releases rows.

The runtime registers the rows the watermark released as ``__ready`` and,
for a bounded frame, the rows kept from before as ``__hist`` (both with
a ``__seq`` arrival number, so equal times keep their arrival order);
:attr:`OverSql.compute` returns the released rows with their aggregates,
in time order. ``retain`` keeps, of ``__hist`` and ``__ready``, what a
later row's ROWS frame can still reach (RANGE frames are trimmed by time
in the runtime). An UNBOUNDED frame keeps no rows but running totals per
partition (``__carry``), which ``carry`` advances::

    ROWS 2 PRECEDING, partition a      hist: r1 r2 | ready: r3 r4
    r3 = agg(r1, r2, r3); r4 = agg(r2, r3, r4); kept: r3 r4
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..logical.nodes import AggCall
from ..logical.over import OverFrame
from ..types import Schema, sum_type
from .sqltree import alias, asc, cast, col, cols, desc, lit, render, same, select_from, star, sub, table

SEQ = "__seq"
W = "__w"  # the frame every aggregate is computed over (a named WINDOW)


@dataclass(frozen=True)
class OverSql:
    compute: str
    retain: str | None  # ROWS n PRECEDING: the rows to keep
    carry: str | None  # UNBOUNDED: the new running totals
    carry_schema: pa.Schema | None


def _over(func: exp.Expression) -> exp.Window:
    """``func OVER __w``."""
    return exp.Window(this=func, alias=exp.to_identifier(W), over="OVER")


def _by_name(a: exp.Expression, b: exp.Expression) -> exp.Union:
    """``a UNION ALL BY NAME b``: rows of both, columns matched by name."""
    return exp.Union(this=a, expression=b, distinct=False, by_name=True)


def _frame(partition: list[str], order: str, frame: OverFrame) -> exp.Window:
    """``WINDOW __w AS (...)``: a RANGE frame includes the rows with the same time (peers); ROWS counts rows in
    arrival order."""
    if frame.preceding is None:
        start: exp.Expression | str = "UNBOUNDED"
    elif frame.kind == "ROWS":
        start = lit(frame.preceding)
    else:
        start = exp.Interval(this=exp.Literal.string(f"{frame.preceding} microseconds"))
    keys = [asc(order), asc(exp.column(SEQ))] if frame.kind == "ROWS" else [asc(order)]
    return exp.Window(this=exp.to_identifier(W), partition_by=cols(partition) or None,
                      order=exp.Order(expressions=keys),
                      spec=exp.WindowSpec(kind=frame.kind, start=start, start_side="PRECEDING", end="CURRENT ROW"))


def _with_frame(query: exp.Select, window: exp.Window) -> exp.Select:
    query.set("windows", [window])
    return query


def over_sql(columns: list[str], partition: tuple[str, ...], order: str, frame: OverFrame,
             aggs: tuple[AggCall, ...], schema: Schema) -> OverSql:
    P = list(partition)
    window = _frame(P, order, frame)
    arrival = [asc(order), asc(exp.column(SEQ))]

    if frame.preceding is not None:
        items = [alias(_window_agg(a, schema), a.name) for a in aggs]
        union = _by_name(select_from("__hist", None, star(), exp.alias_(exp.false(), "__new")),
                         select_from("__ready", None, star(), exp.alias_(exp.true(), "__new")))
        framed = _with_frame(select_from(sub(union, "u"), None, star(), *items), window)
        compute = select_from(sub(framed, "r"), None, *cols(columns), *cols(a.name for a in aggs)) \
            .where(exp.column("__new")).order_by(*arrival)
        retain = None
        if frame.kind == "ROWS":
            both = _by_name(select_from("__hist", None, star()), select_from("__ready", None, star()))
            latest = select_from(sub(both, "u"), None, star(), exp.alias_(exp.Window(
                this=exp.RowNumber(), partition_by=cols(P) or None,
                order=exp.Order(expressions=[desc(order), desc(exp.column(SEQ))])), "__rk"))
            retain = render(select_from(sub(latest, "k"), None, exp.Star(except_=[exp.column("__rk")]))
                            .where(exp.LTE(this=exp.column("__rk"), expression=lit(frame.preceding))))
        return OverSql(render(compute), retain, None, None)

    # UNBOUNDED PRECEDING: running totals before this release, plus a window over the released rows.
    parts: list[tuple[str, exp.Expression, exp.Expression, type, pa.DataType]] = []  # (name, per-row window,
    finals: list[exp.Expression] = []  # batch total, merge, type)
    for i, a in enumerate(aggs):
        arg = col(a.arg) if a.arg else exp.Star()
        if a.func in ("count", "avg"):
            parts.append((f"__c{i}", _over(exp.Count(this=arg.copy())), exp.Count(this=arg.copy()), exp.Sum,
                          pa.int64()))
        if a.func in ("sum", "avg"):
            st = a.type if a.func == "sum" else sum_type(schema.find(a.arg).type)
            parts.append((f"__s{i}", cast(_over(exp.Sum(this=arg.copy())), st), cast(exp.Sum(this=arg.copy()), st),
                          exp.Sum, st))
        if a.func in ("min", "max"):
            func = exp.Min if a.func == "min" else exp.Max
            parts.append((f"__m{i}", _over(func(this=arg.copy())), func(this=arg.copy()), func,
                          schema.find(a.arg).type))
        carried, released = exp.column(f"__c{i}", "c"), exp.column(f"__r_c{i}", "r")
        count = exp.Paren(this=exp.Add(this=exp.func("COALESCE", carried, lit(0)), expression=released))
        cs, rs = exp.column(f"__s{i}", "c"), exp.column(f"__r_s{i}", "r")
        total = exp.Case(ifs=[exp.If(this=exp.Is(this=cs, expression=exp.Null()), true=rs.copy()),
                              exp.If(this=exp.Is(this=rs.copy(), expression=exp.Null()), true=cs.copy())],
                         default=exp.Add(this=cs.copy(), expression=rs.copy()))
        if a.func == "count":
            value: exp.Expression = count
        elif a.func == "sum":
            value = total
        elif a.func == "avg":
            value = _average(total, count, a.type)
        else:
            pick = exp.Least if a.func == "min" else exp.Greatest
            value = pick(this=exp.column(f"__m{i}", "c"), expressions=[exp.column(f"__r_m{i}", "r")], ignore_nulls=True)
        finals.append(alias(cast(value, a.type), a.name))
    framed = _with_frame(select_from("__ready", None, star(), *[alias(w, "__r_" + n[2:]) for n, w, _, _, _ in parts]),
                         window)
    compute = select_from(sub(framed, "r"), None, *cols(columns, "r"), *finals) \
        .join(table("__carry", "c"), on=same("r", "c", P), join_type="left") \
        .order_by(asc(col(order, "r")), asc(exp.column(SEQ, "r")))
    totals = select_from("__ready", None, *cols(P), *[exp.alias_(t, n) for n, _, t, _, _ in parts])
    if P:
        totals = totals.group_by(*cols(P))
    merged = [exp.alias_(cast(merge(this=exp.column(n)), ty), n) for n, _, _, merge, ty in parts]
    carry = select_from(sub(_by_name(select_from("__carry", None, star()), totals), "u"), None, *cols(P), *merged)
    if P:
        carry = carry.group_by(*cols(P))
    carry_schema = pa.schema([pa.field(p, schema.find(p).type) for p in partition] +
                             [pa.field(n, ty) for n, _, _, _, ty in parts])
    return OverSql(render(compute), None, render(carry), carry_schema)


def _window_agg(a: AggCall, schema: Schema) -> exp.Expression:
    arg = col(a.arg) if a.arg else exp.Star()
    if a.func == "count":
        return _over(exp.Count(this=arg))
    if a.func == "avg":
        st = sum_type(schema.find(a.arg).type)
        return _average(cast(_over(exp.Sum(this=arg)), st), _over(exp.Count(this=arg.copy())), a.type)
    func = {"sum": exp.Sum, "min": exp.Min, "max": exp.Max}[a.func]
    return cast(_over(func(this=arg)), a.type)


def _average(total: exp.Expression, count: exp.Expression, dtype: pa.DataType) -> exp.Expression:
    """AVG with Flink's type: an integer column's average is an integer, truncated toward zero."""
    nonzero = exp.Nullif(this=count, expression=lit(0))
    if pa.types.is_integer(dtype):
        return cast(exp.IntDiv(this=exp.Paren(this=total), expression=nonzero), dtype)
    return cast(exp.Div(this=cast(total, pa.float64()), expression=nonzero), dtype)
