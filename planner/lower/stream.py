"""The Spark continuous route: which plans Structured Streaming can run, and what its lowering changes.

A query on the ``spark`` route whose sources include watched files
(``watch = 'true'``: unbounded) runs as a Spark Structured Streaming query.
It is lowered by the same lowering as the batch routes (``lower/plan.py``),
with three differences, all made here:

* a scan of a watched source is a *streaming* relation: Spark reads new
  files as they appear, puts a watermark on the source's time column
  (``withWatermark``) and judges late events itself, per micro-batch;
* a window aggregate over a stream groups by Spark's ``window()`` (TUMBLE,
  HOP, and CUMULATE's largest window) or ``session_window()`` struct, the
  grouping key that carries the watermark, so the aggregate runs in append
  mode: each window is emitted once, when the watermark passes its end;
* an interval join of two streams states its time bounds on the
  timestamps themselves (``r.ts BETWEEN l.ts + INTERVAL ... AND ...``),
  from which Spark derives when a row can leave its state and when an
  outer row is final.

Everything else is the batch lowering, run over the streaming relations
(filters, projections, window table functions, UNION ALL of streams) or
over bounded files read once (the static side of a stream-static join,
e.g. a temporal join with a versioned table from a bounded file).

What Structured Streaming cannot run over a stream is refused when the
query is planned, naming the operator and the routes that can: an updating
result (group aggregates, regular joins of streams, EMIT CHANGES, ALLOWED
LATENESS), Top-N and deduplication, OVER, CQL relations, ``LATE(s)``,
distinct aggregates, window joins, session rows without an aggregate, a
window over a window's results, joins with a stream on the side an outer
join pads, unions of a stream with bounded input, tables read as changes
from watched files and single watched files (Spark reads whole new files
in a directory; the runtime also follows a file as it grows).

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'file', path = 'in/', format = 'json', watch = 'true')")
    >>> p = plan_query("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
    ...                "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end", catalog)
    >>> check_stream(p.optimized)  # nothing refused
    >>> p = plan_query("SELECT k, COUNT(*) AS n FROM s GROUP BY k", catalog)
    >>> try:
    ...     check_stream(p.optimized)
    ... except LoweringRefused as refused:
    ...     print(refused)  # doctest: +ELLIPSIS
    the spark route cannot run the group aggregate Aggregate(keys=[k], ...) over the unbounded stream 's': ...
"""

from __future__ import annotations

import os

from sqlglot import exp

from ..catalog import SourceDef
from ..logical import nodes as L
from ..logical.cql import SnapshotDiff, StreamOf
from ..logical.join import Join
from ..logical.late import LateScan
from ..logical.over import OverAggregate
from ..logical.rank import TopN
from .sql import RUNTIME, LoweringRefused, alias, c, micros

BATCH_TOO = "and over bounded files (watch = 'false') the duckdb and spark batch routes can"
W = "__w"  # the window struct a streaming window aggregate groups by
WE = "__we"  # beside it, the end of each window of the struct (CUMULATE's steps)


def unbounded_sources(root: L.Node) -> list[SourceDef]:
    """The watched file sources a plan reads (they make it a continuous query on Spark)."""
    found: dict[str, SourceDef] = {}
    for n in L.walk(root):
        if isinstance(n, (L.Scan, LateScan)) and n.source.descriptor.replayable and not n.source.bounded:
            found.setdefault(n.source.name.lower(), n.source)
    return list(found.values())


def streaming_nodes(root: L.Node) -> dict[int, str]:
    """The nodes with a watched source below them, each with the name of one such source."""
    out: dict[int, str] = {}
    for n in L.walk(root):  # inputs first
        if isinstance(n, (L.Scan, LateScan)):
            if n.source.descriptor.replayable and not n.source.bounded:
                out[id(n)] = n.source.name
            continue
        below = [out[id(i)] for i in n.inputs if id(i) in out]
        if below:
            out[id(n)] = below[0]
    return out


def from_source_time(node: L.Node, col: str) -> bool:
    """Whether ``col`` of ``node`` is a source's watermarked time column passed on as it is."""
    if isinstance(node, L.Scan):
        wm = node.source.watermark
        return wm is not None and wm.column == col
    if isinstance(node, L.Filter):
        return from_source_time(node.input, col)
    if isinstance(node, L.Project):
        e = dict(node.exprs).get(col)
        return isinstance(e, exp.Column) and from_source_time(node.input, e.name)
    if isinstance(node, L.Union):
        i = node.schema.names.index(col)
        return all(from_source_time(child, child.schema.names[i]) for child in node.inputs)
    if isinstance(node, Join):
        side, inner = node.input_name(col)
        return from_source_time(node.inputs[side], inner)
    return False


def _refuse(what: str, stream: str | None, why: str, batch_too: bool = True) -> LoweringRefused:
    where = what + (f" over the unbounded stream '{stream}'" if stream else "")
    routes = RUNTIME + (f", {BATCH_TOO}" if batch_too else "")
    return LoweringRefused(f"the spark route cannot {where}: {why}; {routes}", where, why)


def check_stream(root: L.Node) -> None:
    """Raise :class:`LoweringRefused` for the first operator over a stream that Spark cannot run."""
    streams = streaming_nodes(root)
    for n in L.walk(root):
        stream = streams.get(id(n))
        if stream is None:
            continue
        _check_node(n, stream, streams)


def _check_node(n: L.Node, stream: str, streams: dict[int, str]) -> None:
    if isinstance(n, L.Scan):
        src = n.source
        if src.kind == "table":
            raise _refuse(f"read the table '{src.name}' as changes from watched files", None,
                          "Structured Streaming's file sources are append-only", batch_too=False)
        path = src.path or ""
        if os.path.isfile(path):
            raise _refuse(f"follow the single watched file {src.options.get('path')} of '{src.name}'", None,
                          "Spark reads whole new files as they appear in a directory, not lines appended to a "
                          "file; watch a directory (or a glob) and add files to it", batch_too=False)
        return
    if isinstance(n, L.Aggregate):
        raise _refuse(f"run the group aggregate {n.label()}", stream,
                      "a group aggregate without a window never closes, so append mode never emits it")
    if isinstance(n, (TopN, OverAggregate, SnapshotDiff, StreamOf, LateScan)):
        why = {TopN: "Structured Streaming cannot rank or deduplicate the rows of a stream by an order",
               OverAggregate: "Structured Streaming has no OVER windows over a stream",
               SnapshotDiff: "Structured Streaming has no CQL relations",
               StreamOf: "Structured Streaming has no CQL relations",
               LateScan: "Spark drops late events without handing them on"}[type(n)]
        raise _refuse(f"run {n.label()}", stream, why, batch_too=not isinstance(n, StreamOf))
    if isinstance(n, L.WindowTVF) and n.window.type.merging:
        raise _refuse(f"run {n.label()} without an aggregate", stream,
                      "Spark assigns sessions only when it aggregates them (session_window)")
    if isinstance(n, L.WindowAggregate):
        _check_window_aggregate(n, stream)
    if isinstance(n, L.Union) and any(id(i) not in streams for i in n.inputs):
        raise _refuse(f"run {n.label()} of a stream and bounded input", stream,
                      "Structured Streaming cannot union a stream with a bounded relation")
    if isinstance(n, Join):
        _check_join(n, stream, streams)
    if n.changelog == L.UPDATING:
        raise _refuse(f"run {n.label()}", stream,
                      "its result is updating (rows are retracted and replaced), and Structured Streaming's "
                      "append mode writes each row once")


def _check_window_aggregate(n: L.WindowAggregate, stream: str) -> None:
    w = n.window
    if any(a.distinct for a in n.aggs):
        raise _refuse(f"run {n.label()}", stream, "Structured Streaming has no distinct aggregates")
    if not from_source_time(n.input, w.time_col):
        raise _refuse(f"run {n.label()}", stream,
                      f"its time column '{w.time_col}' is not a source's watermarked column, and Spark "
                      "carries a watermark only on those (a window over a window's results needs Spark's "
                      "own window_time)")
    if w.type.stream_window(w, c(w.time_col)) is None:
        raise _refuse(f"run {n.label()}", stream, f"Spark has no streaming window for {w.kind} windows")
    if w.partition_by and not set(w.partition_by) <= set(n.keys):
        raise _refuse(f"run {n.label()}", stream,
                      "Spark keeps sessions per grouping key, so the session's PARTITION BY columns must be "
                      "grouped by")


def _check_join(n: Join, stream: str, streams: dict[int, str]) -> None:
    left, right = (id(i) in streams for i in n.inputs)
    if left and right:
        if n.strategy != "interval":
            raise _refuse(f"run the {n.strategy} join {n.label()}", stream,
                          "Spark joins two streams only with time bounds on both sides (an interval join)")
        for side, name in ((0, n.bounds.left_time), (1, n.bounds.right_time)):
            _, inner = n.input_name(name)
            if not from_source_time(n.inputs[side], inner):
                raise _refuse(f"run the interval join {n.label()}", stream,
                              f"'{name}' is not a source's watermarked time column")
        return
    padded = {"left": (False, True), "right": (True, False), "full": (True, True), "inner": (False, False)}[n.kind]
    if (left and padded[0]) or (right and padded[1]):
        raise _refuse(f"run the {n.kind} join {n.label()}", stream,
                      "Spark can pad only the bounded side of a stream-static join with NULLs")
    if n.strategy == "temporal" and not left:
        raise _refuse(f"run {n.label()}", stream,
                      "a temporal join over a versioned table read from watched files needs the table's "
                      "changes as a stream")


# -- lowering pieces ---------------------------------------------------------------------------


def interval(us: int) -> exp.Interval:
    return exp.Interval(this=exp.Literal.string(str(us)), unit=exp.Var(this="MICROSECOND"))


def struct_field(name: str) -> exp.Expression:
    return exp.Dot(this=c(W), expression=exp.Identifier(this=name, quoted=True))


def stream_window_ends(w: L.WindowSpec) -> list[str]:
    """The column of each window's end beside the struct, for kinds with several windows per struct."""
    return [WE] if w.type.stream_window(w, c(w.time_col)).each is not None else []


def stream_window_rows(lw, w: L.WindowSpec, src) -> exp.Select:
    """The rows of a stream with their window struct (and, for CUMULATE, each step window's end ``__we``)."""
    found = w.type.stream_window(w, c(w.time_col))
    items = [c(n) for n in src.columns] + [alias(found.struct, W)]
    query = exp.select(*items).from_(lw.use(src))
    if found.each is None:
        return query
    ends = found.each(c(w.time_col), micros(struct_field("start")))
    return exp.select(*[c(n) for n in src.columns], c(W), alias(exp.Explode(this=ends), WE)).from_(
        exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("a"))))


def stream_window_bounds(w: L.WindowSpec) -> tuple[exp.Expression, exp.Expression, list[exp.Expression]]:
    """A window's start and end in microseconds, and what a streaming window aggregate groups by."""
    start = micros(struct_field("start"))
    if stream_window_ends(w):
        return start, c(WE), [c(W), c(WE)]
    return start, micros(struct_field("end")), [c(W)]


def interval_bound(left_time: str, right_time: str, lower: int, upper: int) -> exp.Expression:
    """``r.t BETWEEN l.t + lower AND l.t + upper`` on timestamps, as Spark reads a join's time bounds."""
    lt = c(left_time)
    return exp.Between(this=c(right_time), low=exp.Add(this=lt, expression=interval(lower)),
                       high=exp.Add(this=lt.copy(), expression=interval(upper)))
