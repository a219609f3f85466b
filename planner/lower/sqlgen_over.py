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

Window functions (:class:`~logical.over.OverCall`): FIRST_VALUE / LAST_VALUE
are the argument at the smallest / largest (time, arrival) of the frame
among its non-NULL values (Flink's skip NULLs); a RANGE frame holds the
current row's peers, so peers share the last one's value, as in Flink.
ROW_NUMBER counts on from the carried row count; RANK and DENSE_RANK are,
as Flink's streaming OVER computes them (it passes them no order key), the
number of rows so far, peers included. LAG (always the default RANGE UNBOUNDED frame, as in Flink) reads
the rows before it in (time, arrival) order, the last ``offset`` rows of
each partition kept in ``__hist``; its default also replaces a NULL there,
and peers take the last peer's value, as Flink's LAG does.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..logical.nodes import AggCall
from ..logical.over import OverCall, OverFrame
from ..types import Schema, sum_type
from .sqltree import (
    alias,
    asc,
    call,
    cast,
    col,
    cols,
    desc,
    lit,
    render,
    same,
    select_from,
    star,
    sub,
    table,
    union_all,
)

SEQ = "__seq"
W = "__w"  # the frame every aggregate is computed over (a named WINDOW)
LAST = "__last"  # the last time (epoch microseconds) a partition released rows


@dataclass(frozen=True)
class OverSql:
    compute: str
    retain: str | None  # ROWS n PRECEDING, LAG: the rows to keep
    carry: str | None  # UNBOUNDED: the new running totals
    carry_schema: pa.Schema | None
    # Bounded frames on event time (Flink's late rule, docs/time.md): ``__last`` holds per partition the last
    # time released. ``last_of_rows``: for each row of ``__rows`` (in ``__seq`` order) its partition's;
    # ``advance_last``: ``__last`` after the release ``__ready``, without the partitions whose state Flink
    # has cleaned up by the watermark ``?`` (RANGE: 1.5 times the frame after their last row, none of them
    # still in ``__pending``);
    # ``retain_by_partition`` (RANGE): the rows of ``__hist`` and ``__ready`` within the frame of the
    # partition's last time.
    last_of_rows: str | None = None
    advance_last: str | None = None
    last_schema: pa.Schema | None = None
    retain_by_partition: str | None = None


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
             aggs: tuple[AggCall | OverCall, ...], schema: Schema) -> OverSql:
    if frame.preceding is not None:
        return _bounded_over_sql(columns, partition, order, frame, aggs, schema)
    return _unbounded_over_sql(columns, partition, order, frame, aggs, schema)


def _bounded_over_sql(columns: list[str], partition: tuple[str, ...], order: str, frame: OverFrame,
                      aggs: tuple[AggCall | OverCall, ...], schema: Schema) -> OverSql:
    """A bounded frame: a window over the rows kept (``__hist``) and the released ones (``__ready``)."""
    P = list(partition)
    arrival = [asc(order), asc(exp.column(SEQ))]
    items = [alias(_window_item(a, schema, order), a.name) for a in aggs]
    union = _by_name(select_from("__hist", None, star(), exp.alias_(exp.false(), "__new")),
                     select_from("__ready", None, star(), exp.alias_(exp.true(), "__new")))
    framed = _with_frame(select_from(sub(union, "u"), None, star(), *items), _frame(P, order, frame))
    compute = select_from(sub(framed, "r"), None, *cols(columns), *cols(a.name for a in aggs)) \
        .where(exp.column("__new")).order_by(*arrival)
    both = _both()
    retain = _latest_rows(P, order, frame.preceding) if frame.kind == "ROWS" else None
    return OverSql(render(compute), retain, None, None, **_last_released(partition, order, frame, schema, both))


def _unbounded_over_sql(columns: list[str], partition: tuple[str, ...], order: str, frame: OverFrame,
                        aggs: tuple[AggCall | OverCall, ...], schema: Schema) -> OverSql:
    """UNBOUNDED PRECEDING: running totals before this release, plus a window over the released rows."""
    P = list(partition)
    parts: list[tuple[str, exp.Expression, exp.Expression, type, pa.DataType]] = []  # (name, per-row window,
    finals: list[exp.Expression] = []  # batch total, merge, type)
    lags: list[tuple[exp.Expression, str]] = []  # LAG: (value over __hist and __ready, name), joined by __seq
    for i, a in enumerate(aggs):
        if isinstance(a, OverCall):
            value = _carried_call(a, i, P, order, parts, lags)
        else:
            value = _carried_aggregate(a, i, schema, parts)
        finals.append(alias(cast(value, a.type), a.name))
    framed = _with_frame(select_from("__ready", None, star(), *[alias(w, "__r_" + n[2:]) for n, w, _, _, _ in parts]),
                         _frame(P, order, frame))
    compute = select_from(sub(framed, "r"), None, *cols(columns, "r"), *finals)
    if lags:
        compute = compute.join(sub(_lagged(P, order, frame, lags), "g"), join_type="inner",
                               on=exp.EQ(this=col(SEQ, "g"), expression=col(SEQ, "r")))
    compute = compute.join(table("__carry", "c"), on=same("r", "c", P), join_type="left") \
        .order_by(asc(col(order, "r")), asc(exp.column(SEQ, "r")))
    offsets = [a.offset for a in aggs if isinstance(a, OverCall) and a.func == "lag" and a.offset > 0]
    retain = _latest_rows(P, order, max(offsets)) if offsets else None
    keys = [pa.field(p, schema.find(p).type) for p in partition]
    if not parts:  # only LAG: nothing to carry but the rows kept in __hist
        nothing = select_from("__ready", None, *cols(P), alias(lit(0), "__none")).where(exp.false())
        return OverSql(render(compute), retain, render(nothing), pa.schema(keys + [pa.field("__none", pa.int32())]))
    carry = _advanced_carry(P, parts)
    carry_schema = pa.schema(keys + [pa.field(n, ty) for n, _, _, _, ty in parts])
    return OverSql(render(compute), retain, render(carry), carry_schema)


def _carried_aggregate(a: AggCall, i: int, schema: Schema, parts: list) -> exp.Expression:
    """COUNT / SUM / AVG / MIN / MAX under an UNBOUNDED frame: this release's window over ``__ready`` (alias r)
    on top of what is carried per partition (alias c); adds the carried parts to ``parts``."""
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
        return count
    if a.func == "sum":
        return total
    if a.func == "avg":
        return _average(total, count, a.type)
    pick = exp.Least if a.func == "min" else exp.Greatest
    return pick(this=exp.column(f"__m{i}", "c"), expressions=[exp.column(f"__r_m{i}", "r")], ignore_nulls=True)


def _advanced_carry(P: list[str], parts: list) -> exp.Select:
    """``__carry`` merged with this release's totals per partition: the new running totals."""
    # __ord: the carried values before this release's (FIRST_VALUE keeps the older, LAST_VALUE the newer)
    totals = select_from("__ready", None, *cols(P), *[exp.alias_(t, n) for n, _, t, _, _ in parts],
                         alias(lit(1), "__ord"))
    if P:
        totals = totals.group_by(*cols(P))
    merged = [exp.alias_(cast(merge(this=exp.column(n)), ty), n) for n, _, _, merge, ty in parts]
    carried = select_from("__carry", None, star(), alias(lit(0), "__ord"))
    carry = select_from(sub(_by_name(carried, totals), "u"), None, *cols(P), *merged)
    if P:
        carry = carry.group_by(*cols(P))
    return carry


def _both() -> exp.Union:
    """The rows kept from before and the released ones."""
    return _by_name(select_from("__hist", None, star()), select_from("__ready", None, star()))


def _latest_rows(P: list[str], order: str, n: int) -> str:
    """Of ``__hist`` and ``__ready``, the last ``n`` rows of each partition (what a later row reaches back to)."""
    latest = select_from(sub(_both(), "u"), None, star(), exp.alias_(exp.Window(
        this=exp.RowNumber(), partition_by=cols(P) or None,
        order=exp.Order(expressions=[desc(order), desc(exp.column(SEQ))])), "__rk"))
    return render(select_from(sub(latest, "k"), None, exp.Star(except_=[exp.column("__rk")]))
                  .where(exp.LTE(this=exp.column("__rk"), expression=lit(n))))


def _ordering(order: str, table_: str | None = None) -> exp.Expression:
    """(time, arrival) as a struct: ordered by time, then arrival."""
    return exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("t"), expression=col(order, table_)),
                                   exp.PropertyEQ(this=exp.to_identifier("s"), expression=col(SEQ, table_))])


def _unless_null(arg: exp.Expression, value: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=exp.Is(this=arg.copy(), expression=exp.Null()), true=exp.Null())],
                    default=value)


def _nonnull_arg(first: bool, arg: str, order: str) -> exp.Expression:
    """arg_min / arg_max of ``arg`` by (time, arrival) over its non-NULL values (NULL orderings are skipped)."""
    return (exp.ArgMin if first else exp.ArgMax)(this=col(arg), expression=_unless_null(col(arg), _ordering(order)))


def _carried_call(a: OverCall, i: int, P: list[str], order: str, parts: list, lags: list) -> exp.Expression:
    """A window function under an UNBOUNDED frame: this release's window over ``__ready`` (alias r) on top of
    what is carried per partition (alias c); adds the carried parts to ``parts``, LAG's values to ``lags``."""
    if a.func in ("row_number", "rank", "dense_rank"):
        if a.func == "row_number":
            numbered: exp.Expression = exp.Window(this=exp.RowNumber(), partition_by=cols(P) or None,
                                                  order=exp.Order(expressions=[asc(order), asc(exp.column(SEQ))]))
        else:  # Flink's streaming RANK / DENSE_RANK get no order key: the rows so far, peers included
            numbered = _over(exp.Count(this=exp.Star()))
        parts.append((f"__c{i}", numbered, exp.Count(this=exp.Star()), exp.Sum, pa.int64()))
        return exp.Paren(this=exp.Add(this=exp.func("COALESCE", exp.column(f"__c{i}", "c"), lit(0)),
                                      expression=exp.column(f"__r_c{i}", "r")))
    if a.func in ("first_value", "last_value"):
        first = a.func == "first_value"
        pick = exp.ArgMin if first else exp.ArgMax

        def merge(this: exp.Expression) -> exp.Expression:
            return pick(this=this, expression=_unless_null(this, exp.column("__ord")))

        parts.append((f"__f{i}", _over(_nonnull_arg(first, a.arg, order)), _nonnull_arg(first, a.arg, order), merge,
                      a.type))
        older, newer = exp.column(f"__f{i}", "c"), exp.column(f"__r_f{i}", "r")
        return exp.func("COALESCE", *((older, newer) if first else (newer, older)))
    value: exp.Expression = exp.Window(this=exp.Lag(this=col(a.arg), offset=lit(a.offset)),
                                       partition_by=cols(P) or None,
                                       order=exp.Order(expressions=[asc(order), asc(exp.column(SEQ))]))
    if a.default is not None:  # Flink: the default also stands for a NULL value at the offset
        value = exp.func("COALESCE", value, cast(a.default.copy(), a.type))
    lags.append((value, f"__lag{i}"))
    return exp.column(f"__lag{i}", "g")


def _lagged(P: list[str], order: str, frame: OverFrame, lags: list) -> exp.Select:
    """LAG's values by arrival number, over ``__hist`` and ``__ready``; under a RANGE frame the rows with the same
    time take the last one's value (Flink's LAG)."""
    values = select_from(sub(_both(), "b"), None, star(), *[alias(v, n) for v, n in lags])
    if frame.kind != "RANGE":
        return select_from(sub(values, "u"), None, col(SEQ), *cols(n for _, n in lags))
    every = exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="UNBOUNDED",
                           end_side="FOLLOWING")
    peers = [alias(exp.Window(this=exp.LastValue(this=col(n)), partition_by=cols(P + [order]),
                              order=exp.Order(expressions=[asc(exp.column(SEQ))]), spec=every), n) for _, n in lags]
    return select_from(sub(values, "u"), None, col(SEQ), *peers)


MIN_TIME = -(2**63)


def _last_released(partition: tuple[str, ...], order: str, frame: OverFrame, schema: Schema,
                   both: exp.Expression) -> dict:
    """The statements of a bounded frame's per-partition late rule (see OverSql)."""
    P = list(partition)
    if P:
        last_of_rows = select_from("__rows", "r", alias(exp.func("COALESCE", col(LAST, "l"), lit(MIN_TIME)), LAST)) \
            .join(table("__last", "l"), on=same("r", "l", P), join_type="left").order_by(asc(col(SEQ, "r")))
    else:
        latest = exp.Subquery(this=select_from("__last", None, exp.Max(this=col(LAST))))
        last_of_rows = select_from("__rows", None, alias(exp.func("COALESCE", latest, lit(MIN_TIME)), LAST)) \
            .order_by(asc(col(SEQ)))
    # Flink's RowTimeRangeBoundedPrecedingFunction clears an idle partition's state (and so its last time)
    # once the watermark reaches its cleanup timer, 1.5 frames (in ms) and 1 ms after its last row.
    cleanup = ((frame.preceding // 1000) * 3 // 2 + 1) * 1000 if frame.kind == "RANGE" else None
    times = union_all(select_from("__last", None, *cols(P), col(LAST)),
                      select_from("__ready", None, *cols(P), alias(call("epoch_us", col(order)), LAST)))
    advance = select_from(sub(times, "u"), None, *cols(P), alias(exp.Max(this=col(LAST)), LAST))
    if P:
        advance = advance.group_by(*cols(P))
    if cleanup is not None:  # a partition with rows still pending has a later row: not due
        due = exp.GT(this=exp.Add(this=col(LAST, "g"), expression=lit(cleanup)), expression=exp.Placeholder())
        pending = exp.Exists(this=select_from("__pending", "p", lit(1)).where(same("p", "g", P)))
        advance = select_from(sub(advance, "g"), None, star()).where(exp.or_(due, pending))
    last_schema = pa.schema([pa.field(p, schema.find(p).type) for p in partition] + [pa.field(LAST, pa.int64())])
    retain = None
    if frame.kind == "RANGE":
        reach = exp.GTE(this=call("epoch_us", col(order, "r")),
                        expression=exp.Sub(this=col(LAST, "l"), expression=lit(frame.preceding)))
        retain = render(select_from(sub(both.copy(), "r"), None, star("r"))
                        .join(table("__last", "l"), on=same("r", "l", P), join_type="inner").where(reach))
    return dict(last_of_rows=render(last_of_rows), advance_last=render(advance), last_schema=last_schema,
                retain_by_partition=retain)


def _window_item(a: AggCall | OverCall, schema: Schema, order: str) -> exp.Expression:
    """An aggregate or FIRST_VALUE / LAST_VALUE over ``__w`` (a bounded frame, over __hist and __ready)."""
    if isinstance(a, OverCall):
        return _over(_nonnull_arg(a.func == "first_value", a.arg, order))
    return _window_agg(a, schema)


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
