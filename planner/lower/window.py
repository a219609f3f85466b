"""Lowering windows and aggregates: window TVFs, window aggregates, sessions, group aggregates.

Windows are assigned by the window kind's builder, the one every route
uses (``planner/windows``: ``assign_windows``), with the runtime's integer
arithmetic on epoch microseconds: a TUMBLE start is the event time floored
to the size; a HOP or CUMULATE row is repeated once per window with
``explode(sequence(...))`` (DuckDB: ``unnest(generate_series(...))``)::

    HOP(slide 10 s, size 30 s), t = 47 s    starts 20, 30, 40  (last = floor(t, 10), first = last - 20)
    CUMULATE(step 10 s, size 30 s), t = 47 s start 30, ends 50, 60

Sessions are gaps and islands per partition, in event-time order: a row
starts a session when its time is more than the gap after every earlier
row (sessions that touch merge, as in the runtime), the running count of
starts numbers the sessions, and a session spans its first time to its
last time plus the gap::

    gap 10, times   1   3   14  40      max before + gap    -  11  13  24
    starts          1   0   0   1       (14 <= 13 + 10: the same session)
    sessions        [1, 24)     [40, 50)

A window's result is one row per window and key (``window_time`` is the
end minus 1 ms); the emission policy (EMIT CHANGES, ALLOWED LATENESS)
changes when the runtime emits, not the final rows. Aggregates have
Flink's types: SUM of integers is BIGINT, AVG of integers is an integer
truncated toward zero.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from .. import windows
from ..aggregate_kinds import FOLD
from ..logical import nodes as L
from .sql import (
    FILE,
    ORDER,
    ROW,
    add,
    alias,
    and_,
    asc,
    c,
    cast,
    micros,
    minus,
    open_window,
    rows_frame,
    sub,
    timestamp,
    window,
)
from .sqlgen import lit, window_bound_columns
from .stream import W as STRUCT
from .stream import stream_window_bounds, stream_window_ends, stream_window_rows

WS, WE, T = "__ws", "__we", "__t"


def assign_windows(lw, w: L.WindowSpec, src) -> exp.Select:
    """The rows of ``src`` with ``__ws`` and ``__we`` (window bounds in microseconds), one row per window."""
    if w.type.merging:
        return sessions(lw, w, src)
    keep = src.cols(order=True)
    return windows.assign_windows(w, lw.use(src), keep, lambda start, end: [alias(start, WS), alias(end, WE)])


def sessions(lw, w: L.WindowSpec, src) -> exp.Select:
    """Gaps and islands (see the module docstring): the rows with their session's ``__ws`` and ``__we``."""
    part = [c(p) for p in w.partition_by]
    names = list(src.columns) + (list(ORDER) if src.ordered else [])
    before = window(exp.Max(this=c(T)), part, [asc(c(T))], rows_frame(None, "1 PRECEDING"))
    starts = exp.Case(ifs=[exp.If(this=exp.LTE(this=c(T), expression=add(before, w.gap)), true=lit(0))],
                      default=lit(1))
    timed = exp.select(*[c(n) for n in names], alias(micros(c(w.time_col)), T)).from_(lw.use(src))
    flagged = exp.select("*", alias(starts, "__new")).from_(sub(timed, "e"))
    # Among rows with the same time the one that starts a session comes first.
    numbered = exp.select("*", alias(window(exp.Sum(this=c("__new")), part, [asc(c(T)), exp.Ordered(
        this=c("__new"), desc=True)], rows_frame(None)), "__sid")).from_(sub(flagged, "f"))
    span = part + [c("__sid")]
    bounds = [alias(window(exp.Min(this=c(T)), span), WS), alias(add(window(exp.Max(this=c(T)), span), w.gap), WE)]
    return exp.select(*[c(n) for n in names], c("__sid"), *bounds).from_(sub(numbered, "i"))


def window_columns(w: L.WindowSpec, start: exp.Expression | None = None,
                   end: exp.Expression | None = None) -> list[exp.Expression]:
    """window_start, window_end and window_time from a window's bounds in microseconds (``__ws``, ``__we``).

    Over a TIMESTAMP_LTZ attribute the bounds are instants: window_start and
    window_end are shown in local time (``local_shift`` later) and window_time
    stays an instant (``lower.sqlgen.window_bound_columns``).
    """
    start, end = start or c(WS), end or c(WE)
    return window_bound_columns(w, start, end, timestamp)


def lower_window_tvf(lw, node: L.WindowTVF):
    src = lw.rel(node.input)
    assigned = lw.add(assign_windows(lw, node.window, src),
                      list(src.columns) + [WS, WE], src.ordered)
    items = [c(n) for n in src.columns] + window_columns(node.window) + ([c(n) for n in ORDER] if src.ordered else [])
    return lw.add(exp.select(*items).from_(lw.use(assigned)), node.schema.names, src.ordered)


def lower_window_aggregate(lw, node: L.WindowAggregate):
    src = lw.rel(node.input)
    w = node.window
    if lw.streaming(node):
        return _stream_window_aggregate(lw, node, src)
    assigned = lw.add(assign_windows(lw, w, src), list(src.columns) + [WS, WE], src.ordered)
    group = [c(WS), c(WE)] + ([c("__sid")] if w.type.merging else []) + [c(k) for k in node.keys]
    seq = _in_panes(w, arrival(src))
    counted = open_window(c(WE)) if src.ordered and not w.type.merging else None
    rows, firsts = first_arrivals(lw, assigned, group, node.aggs, seq, counted)
    items = window_columns(node.window) + [c(k) for k in node.keys] + \
        [alias(aggregate(a, node.input.schema, seq=seq, first=firsts.get(a.name)), a.name) for a in node.aggs]
    query = exp.select(*items).from_(lw.use(rows)).group_by(*group)
    if counted is not None:  # each row counts in the windows still open when it arrived
        query = query.where(counted)
    if lw.history:  # a backfill: only the windows the runtime has emitted by the seam
        # fired by then: the watermark reached the window's last millisecond (as WindowAggLogic fires)
        seam = exp.LTE(this=minus(c(WE), L.WINDOW_TIME_OFFSET_US), expression=lw.watermark_at_seam(node.input))
        query = query.where(and_(query.args["where"].this, seam) if query.args.get("where") else seam)
    return lw.add(query, node.schema.names)


_PANE_PLACE = 10 ** 15  # arrival numbers (file * 10**12 + row) stay below it for up to 1000 files


def _in_panes(w, seq: exp.Expression | None) -> exp.Expression | None:
    """The arrival order ``seq`` of a window's rows with the row's pane put first, as the runtime takes a window's
    panes for ARRAY_AGG and LISTAGG (newest first for HOP, oldest first for CUMULATE: Flink's slice merges)."""
    if seq is None or w.type.merging or w.pane >= w.type.longest(w) or w.type.longest(w) // w.pane > 9000:
        return seq  # one pane per window (TUMBLE), or too many to count above the arrival numbers
    t = micros(c(w.time_col))  # the bounds __ws and __we are microseconds already
    since = minus(c(WE), 1) if w.type.newest_pane_first else c(WS)
    offset = exp.Sub(this=since, expression=t) if w.type.newest_pane_first else exp.Sub(this=t, expression=since)
    place = exp.IntDiv(this=exp.Paren(this=offset), expression=lit(w.pane))
    return add(exp.Mul(this=place, expression=lit(_PANE_PLACE)), seq)


def _stream_window_aggregate(lw, node: L.WindowAggregate, src):
    """Over a stream: grouped by Spark's window struct, which carries the watermark (``lower/stream.py``)."""
    w = node.window
    rows = lw.add(stream_window_rows(lw, w, src), list(src.columns) + [STRUCT] + stream_window_ends(w))
    start, end, group = stream_window_bounds(w)
    items = window_columns(w, start, end) + [c(k) for k in node.keys] + \
        [alias(aggregate(a, node.input.schema), a.name) for a in node.aggs]
    query = exp.select(*items).from_(lw.use(rows)).group_by(*group, *[c(k) for k in node.keys])
    return lw.add(query, node.schema.names)


# Marks a condition that only gives the lowered SQL the runtime's streaming answer.
STREAM_ONLY = "stream_only"


def lower_aggregate(lw, node: L.Aggregate):
    src = lw.rel(node.input)
    rows, firsts = first_arrivals(lw, src, [c(k) for k in node.keys], node.aggs, arrival(src))
    items = [c(k) for k in node.keys] + [alias(aggregate(a, node.input.schema, seq=arrival(src),
                                                         first=firsts.get(a.name)), a.name) for a in node.aggs]
    query = exp.select(*items).from_(lw.use(rows))
    if node.keys:
        query = query.group_by(*[c(k) for k in node.keys])
    else:  # no input rows, no row (as the runtime: a global aggregate appears with its first row)
        first_row = exp.GT(this=exp.Count(this=exp.Star()), expression=lit(0))
        first_row.meta[STREAM_ONLY] = True  # a pull query, answering as batch SQL, drops it (dsms/pull.py)
        query = query.having(first_row)
    return lw.add(query, node.schema.names)


def arrival(src) -> exp.Expression | None:
    """The rows' arrival order as one number (file, then row), for FIRST_VALUE, LAST_VALUE and LISTAGG."""
    if not src.ordered:
        return None
    return exp.Add(this=exp.Mul(this=cast(c(FILE), pa.int64()), expression=lit(10 ** 12)), expression=c(ROW))


def first_arrivals(lw, src, group: list[exp.Expression], aggs, seq: exp.Expression | None,
                   where: exp.Expression | None = None):
    """ARRAY_AGG(DISTINCT x) lists a value where it first arrives in its group: ``src`` (the rows ``where``
    keeps) with a column per such aggregate, true on that row in the order ``seq``; and those columns by the
    aggregate's name. Without such an aggregate: ``src`` and no columns."""
    distinct = [a for a in aggs if a.kind.ordered and a.kind.distinct]
    if not distinct or seq is None:
        return src, {}
    firsts = {a.name: f"__first{i}" for i, a in enumerate(distinct)}
    flags = [alias(exp.EQ(this=window(exp.RowNumber(), [g.copy() for g in group] + [c(a.arg)], [asc(seq.copy())]),
                          expression=lit(1)), firsts[a.name]) for a in distinct]
    query = exp.select(exp.Star(), *flags).from_(lw.use(src))
    if where is not None:
        query = query.where(where.copy())
    rows = lw.add(query, list(src.columns) + list(firsts.values()), src.ordered)
    return rows, {name: c(flag) for name, flag in firsts.items()}


def aggregate(a: L.AggCall, schema, over: exp.Expression | None = None,
              seq: exp.Expression | None = None, first: exp.Expression | None = None) -> exp.Expression:
    """``a`` as a SQL aggregate with Flink's result type (``over``: as a window function over it; ``seq``:
    the arrival order, for the aggregates that read it; ``first``: true on the row where a value first
    arrives, for ARRAY_AGG(DISTINCT x): see first_arrivals)."""

    def agg(func: exp.Expression) -> exp.Expression:
        if over is None:
            return func
        w = over.copy()
        w.set("this", func)
        return w

    if a.arg is None:  # COUNT(*)
        return agg(exp.Count(this=exp.Star()))
    if a.kind.ordered:  # lower/plan.py refuses these where the rows have no source order
        return a.kind.over_ordered(c(a.arg), seq, a.type, first)
    value = a.kind.over_values(c(a.arg), a.arg_type, a.type, a.distinct)
    if over is None:
        return value
    return value.transform(lambda n: agg(n) if n.meta.get(FOLD) else n)
