"""Lowering OVER aggregates, Top-N, deduplication and CQL relations.

* OVER: the same window functions the runtime runs when the watermark
  releases rows; a ROWS frame counts rows in arrival order, so rows with
  the same time are ordered by the source order (``__file``, ``__row``);
  a RANGE frame of ``n`` microseconds orders by the time in microseconds
  (peers included).
* Top-N: ``ROW_NUMBER()`` in the query's order, NULLs smallest, ties
  broken by the other columns the runtime keeps (so the chosen rows are
  the runtime's); the rows numbered up to N. Over bounded input a global
  Top-N's final rows are the top of the final input.
* Deduplication: the first (last) row per key by time, ties by arrival
  (the source order; after a join or union, which have none, by the other
  columns).
* CQL ``[RANGE ... SLIDE ...]`` relations: ISTREAM (DSTREAM) is, for each
  instant, the rows present then but not one slide before (after), as
  multisets; the relation itself is empty once every instant has passed.
"""

from __future__ import annotations

from sqlglot import exp

from ..logical.cql import SnapshotDiff
from ..logical.over import OverAggregate
from ..logical.rank import TopN, window_end_column
from .sql import ORDER, alias, and_, asc, c, desc, micros, null_safe_eq, open_window, rows_frame, sub, window
from .sqlgen import lit
from .window import aggregate


def lower_over(lw, node: OverAggregate):
    src = lw.rel(node.input)
    part = [c(p) for p in node.partition_by]
    frame = node.frame
    if frame.kind == "RANGE" and frame.preceding is not None:
        order = [asc(micros(c(node.order_by)))]
        spec = rows_frame(frame.preceding, kind="RANGE")
    else:
        order = [asc(c(node.order_by))] + (_arrival(src, node.input.schema.names, [node.order_by])
                                           if frame.kind == "ROWS" else [])
        spec = rows_frame(frame.preceding if frame.kind == "ROWS" else None, kind=frame.kind)
    over = window(exp.Null(), part, order, spec)
    items = src.cols(order=True) + [alias(aggregate(a, node.input.schema, over=over), a.name) for a in node.aggs]
    return lw.add(exp.select(*items).from_(lw.use(src)), node.schema.names, src.ordered)


def _arrival(src, names, used, descending: bool = False) -> list[exp.Ordered]:
    """The order in which the runtime receives rows: the source order, or (without one) the other columns."""
    key = list(ORDER) if src.ordered else [n for n in names if n not in used]
    return [desc(c(n)) if descending else asc(c(n)) for n in key]


def lower_topn(lw, node: TopN):
    src = lw.rel(node.input)
    names = node.input.schema.names
    part = [c(p) for p in node.partition_by]
    if node.kind in ("first", "last"):
        time_col, _ = node.order_by[0]
        last = node.kind == "last"
        order = [desc(c(time_col)) if last else asc(c(time_col))] + _arrival(src, names, [time_col], last)
        limit = 1
    else:
        keep = lw.needed(node) | set(node.partition_by) | {col for col, _ in node.order_by}
        kept = names if node.kind == "global" else [n for n in names if n in keep]
        order = [desc(c(col), nulls_first=False) if d else asc(c(col)) for col, d in node.order_by]
        ordered = {col for col, _ in node.order_by}
        order += [asc(c(n)) for n in kept if n not in ordered]
        limit = node.limit
    ranked = exp.select(*[c(n) for n in names], alias(window(exp.RowNumber(), part, order), node.rank_name)) \
        .from_(lw.use(src))
    if node.kind == "window" and src.ordered:  # a row whose window had fired when it arrived is late
        ranked = ranked.where(open_window(micros(c(window_end_column(node.input, node.partition_by)))))
    query = exp.select(*[c(n) for n in node.schema.names]).from_(sub(ranked, "r")).where(
        exp.LTE(this=c(node.rank_name), expression=lit(limit)))
    return lw.add(query, node.schema.names)


def lower_snapshot_diff(lw, node: SnapshotDiff):
    src = lw.rel(node.input)
    names = node.schema.names
    if node.kind == "relation":  # after the last instant every row has left
        return lw.add(exp.select(*[c(n) for n in names]).from_(lw.use(src)).where(exp.false()), names)
    counts_q = exp.select(*[c(n) for n in names], alias(micros(c(node.instant)), "__i"),
                          alias(exp.Count(this=exp.Star()), "__n")).from_(lw.use(src)).group_by(
        *[c(n) for n in names], c(node.instant))
    counts = lw.add(counts_q, list(names) + ["__i", "__n"])
    # ISTREAM at t: R(t) - R(t - slide); DSTREAM at t + slide: R(t) - R(t + slide).
    step = -node.slide_us if node.kind == "insert" else node.slide_us
    same = and_(exp.EQ(this=c("__i", "b"), expression=exp.Add(this=c("__i", "a"), expression=lit(step))),
                *[null_safe_eq(c(n, "a"), c(n, "b")) for n in names])
    diff = exp.select(*[c(n, "a") for n in names],
                      alias(exp.Sub(this=c("__n", "a"), expression=exp.Coalesce(this=c("__n", "b"),
                                                                                expressions=[lit(0)])), "__d")) \
        .from_(lw.use(counts, "a")).join(lw.use(counts, "b"), on=same, join_type="LEFT")
    copies = exp.select(*[c(n) for n in names], alias(exp.Explode(this=exp.GenerateSeries(
        start=lit(1), end=c("__d"))), "__k")).from_(sub(diff, "d")).where(exp.GT(this=c("__d"), expression=lit(0)))
    return lw.add(exp.select(*[c(n) for n in names]).from_(sub(copies, "x")), names)
