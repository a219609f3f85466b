"""Backfill then live: which plans can take their history from a batch route, and what the seam needs.

With ``SET 'backfill' = 'duckdb'`` (or ``'spark'``), a query on the
runtime over watched files (``watch = 'true'``) first runs as one batch
statement over the files present when it starts (the *history*), then
continues on the runtime from where that statement stopped (the *seam*).
At the seam every source's watermark is where the runtime's would be
after reading the history: its largest event time minus its delay.

* The statement emits exactly what the runtime would have emitted by the
  seam: every row of a per-row operator and of an inner interval join
  (emitted when both sides are there), and each window whose end is at or
  before its operator's watermark at the seam, i.e. whose last millisecond
  is (a *cut* on every window aggregate: ``__we - 1 ms <= W``, with ``W``
  computed in the statement from the
  sources' largest times, :func:`watermark_at_seam`).
* The runtime then rebuilds the state of what is still open at the seam
  by reading again, with its output muted, the last stretch of the
  history that the state can reach: events at or after ``W_min - reach``,
  where ``reach`` (:func:`state_reach`) is how far behind the watermark a
  plan's state can reach (a window's size, a join's time bounds, added
  along the plan). Windows that close within that stretch are emitted by
  the statement, not again; late events are judged as in one run, since
  the replay starts with the history's running maximum.

Refused (with a message naming the operator, :func:`check_backfill`):
plans whose state reaches back without bound (group aggregates, regular
joins, deduplication and Top-N, OVER, sessions, which can chain without
end), outer interval joins and window joins (their rows depend on the
watermark at the seam, which the statement does not cut yet), updating
results, tables, bounded or memory sources beside the watched ones,
sources with an ``idle_timeout``, and ``LATE(s)``.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'file', path = 'in/', format = 'json', watch = 'true')")
    >>> p = plan_query("SELECT window_start, COUNT(*) AS n FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), "
    ...                "INTERVAL '10' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end", catalog)
    >>> check_backfill(p.optimized, "duckdb")  # nothing refused
    >>> state_reach(p.optimized)
    60000000
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L
from ..logical.join import Join
from ..logical.late import LateScan
from ..lower.sql import LoweringRefused, micros
from ..lower.sqlgen import lit

NO_EVENTS = -(2**62)  # a source without events holds the watermark back (below every time)


def _refuse(route: str, what: str, why: str) -> LoweringRefused:
    message = (f"cannot backfill on {route} and continue live: {what}: {why}; "
               "SET 'backfill' = 'off' reads the whole history on the runtime")
    return LoweringRefused(message, what, why)


def check_backfill(root: L.Node, route: str) -> None:
    """Raise :class:`LoweringRefused` for what a backfill cannot hand over to the runtime at a seam."""
    if root.changelog == L.UPDATING:
        raise _refuse(route, "the result is updating", "its rows change as events arrive, so its state reaches "
                      "back over the whole history")
    for n in L.walk(root):
        if isinstance(n, (L.Scan, LateScan)):
            src = n.source
            if isinstance(n, LateScan):
                raise _refuse(route, f"{n.label()}", "the late events of the history are not kept")
            if not src.descriptor.replayable or src.bounded:
                raise _refuse(route, f"'{src.name}' is not a watched file source",
                              "a backfill reads the history of watched files (watch = 'true'); run a query over "
                              "bounded files on a batch route (SET 'engine')")
            if src.kind == "table":
                raise _refuse(route, f"the table '{src.name}'", "a table's state reaches back over its whole history")
            if "idle_timeout" in src.options:
                raise _refuse(route, f"'{src.name}' has an idle_timeout", "idleness depends on processing time")
            continue
        if isinstance(n, (L.Filter, L.Project, L.Union)):
            continue
        if isinstance(n, (L.WindowTVF, L.WindowAggregate)) and not n.window.type.merging:
            continue
        if isinstance(n, Join) and n.strategy == "interval" and n.kind == "inner":
            continue
        why = {L.WindowTVF: "a session can chain without end, so its state reaches back without bound",
               L.WindowAggregate: "a session can chain without end, so its state reaches back without bound",
               Join: "only inner interval joins are handed over at a seam (an outer one's padded rows and a "
                     "window join's rows wait for the watermark; other joins keep every row)",
               L.Aggregate: "a group aggregate's state reaches back over the whole history"}.get(
            type(n), "its state reaches back over the whole history (or it depends on arrival)")
        raise _refuse(route, n.label(), why)


def state_reach(node: L.Node) -> int:
    """How far behind its input watermark a plan's state can reach, in microseconds (see the module doc)."""
    below = max((state_reach(i) for i in node.inputs), default=0)
    if isinstance(node, L.WindowAggregate):
        return below + node.window.type.longest(node.window)
    if isinstance(node, Join) and node.bounds is not None:
        b = node.bounds
        return below + (b.upper - b.lower) + max(b.upper, 0) + max(-b.lower, 0)
    return below


def watermark_at_seam(node: L.Node, scan_max) -> exp.Expression:
    """The watermark of ``node``'s output at the seam, in SQL, as the runtime derives it.

    ``scan_max(scan) -> expression``: the largest event time of a scan's history (NULL: none).
    """
    if isinstance(node, L.Scan):
        wm = node.source.watermark
        if wm is None:
            return lit(NO_EVENTS)
        return exp.Sub(this=exp.Coalesce(this=scan_max(node), expressions=[lit(NO_EVENTS + wm.delay_us)]),
                       expression=lit(wm.delay_us))
    marks = [watermark_at_seam(i, scan_max) for i in node.inputs]
    low = marks[0] if len(marks) == 1 else exp.Least(this=marks[0], expressions=marks[1:])
    if isinstance(node, Join) and node.bounds is not None and node.bounds.delay:
        return exp.Sub(this=low, expression=lit(node.bounds.delay))
    return low


def max_event_time(time_column: str) -> exp.Expression:
    return exp.Max(this=micros(exp.column(time_column, quoted=True)))
