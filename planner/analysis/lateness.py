"""Which operators judge late events themselves, and which scans they judge for (docs/time.md).

A scan under an operator that acts on event time drops late events; where
every such operator above it judges them itself (Flink's rule for that
operator: per window, per session, per OVER partition), the scan drops
nothing and its source cuts its batches before events behind the
watermark, so each operator sees the watermark as it stood when the event
arrived. The runtime and the batch routes ask with their own ``judge``.
"""

from __future__ import annotations

from ..logical import nodes as L
from ..logical.cql import SnapshotDiff
from ..logical.join import Join
from ..logical.over import OverAggregate
from ..logical.rank import TopN


def is_session_tvf(node: L.Node) -> bool:
    return isinstance(node, L.WindowTVF) and node.window.type.merging


def uses_event_time(node: L.Node) -> bool:
    """Whether an operator acts on the watermark: it would drop or mis-place events behind it.

    A TUMBLE, HOP or CUMULATE table function only labels rows with their
    windows (Flink's ``AlignedWindowTableFunctionOperator`` drops nothing);
    what consumes the windows judges lateness. Keep-last deduplication (a
    CQL row window's aggregates are its latest row per key) keeps the row
    with the largest time per key whenever it arrives, as Flink's
    ``RowTimeDeduplicateFunction``: nothing is late for it.
    """
    if getattr(node, "acts_on_event_time", False):  # nodes that say it themselves (logical/sort.py)
        return True
    if isinstance(node, L.WindowTVF):
        return node.window.type.merging
    if isinstance(node, (L.WindowAggregate, OverAggregate, SnapshotDiff)):
        return True
    if isinstance(node, TopN):  # keep-last deduplication compares each row's time with the kept row's, never
        return node.kind in ("window", "first")  # the watermark (Flink's RowTimeDeduplicateFunction)
    if isinstance(node, Join):
        return node.strategy in ("interval", "window", "temporal")
    return False


def scans_under_event_time(root: L.Node) -> set[int]:
    """The scans with an event-time operator above them: only they drop late events.

    A query that never acts on event time (a projection, a filter, a group
    aggregate, a lookup join) keeps every event, as in Flink, where only
    operators that fire on the watermark drop late data.
    """
    timed: set[int] = set()

    def visit(node: L.Node, under: bool, seen: set) -> None:
        key = (id(node), under)
        if key in seen:
            return
        seen.add(key)
        if isinstance(node, L.Scan):
            if under:
                timed.add(id(node))
            return
        below = under or uses_event_time(node)
        for child in node.inputs:
            visit(child, below, seen)

    visit(root, False, set())
    return timed


def judges_per_window(node: L.Node) -> bool:
    """An event-time operator that judges late events itself, per window, as Flink's window operators do.

    A TUMBLE / HOP / CUMULATE aggregate emitting final results
    (``SlicingWindowAggProcessor``) and a per-window Top-N or deduplication
    (``WindowRankProcessor``, ``RowTimeWindowDeduplicateProcessor``) drop
    an event from a window only when that window had fired when the event
    arrived; the event still counts in the windows that are open.
    """
    if isinstance(node, L.WindowAggregate):
        return not node.window.type.merging and not node.emit.updating
    return isinstance(node, TopN) and node.kind == "window"


def judges_with_lateness(node: L.Node) -> bool:
    """A TUMBLE / HOP / CUMULATE aggregate that emits early (``EMIT CHANGES``) or corrects fired windows
    (``ALLOWED LATENESS``, a source's ``'allowed_lateness'``): it drops an event from a window only when
    the window's cleanup time, its last millisecond plus the allowed lateness, was at or below the
    watermark when the event arrived (Flink's group window ``WindowOperator`` with
    ``table.exec.emit.allow-lateness``: ``isWindowLate``); a late event within the lateness updates the
    fired window.
    """
    if not isinstance(node, L.WindowAggregate) or node.window.type.merging or not node.emit.updating:
        return False
    return not node.input.schema.find(node.window.time_col).proctime


def judges_late_events(node: L.Node) -> bool:
    """A runtime operator that judges late events itself, with its Flink operator's rule (docs/time.md).

    The window operators of :func:`judges_per_window` and :func:`judges_with_lateness`; a session window
    (aggregated or not) emitting final results, which drops an event only
    when the session it merges into had closed (``MergingWindowProcessFunction``);
    and an OVER aggregate, which drops a row at or below the watermark
    (unbounded frames, ``AbstractRowTimeUnboundedPrecedingOver``) or at or
    below the last time it emitted for the row's partition (bounded frames,
    ``RowTimeRangeBoundedPrecedingFunction``).

    And the time-bounded joins (:func:`judges_join`): window, interval and
    event-time temporal joins, each row judged against its own input's
    watermark. A join's watermark is the minimum over its inputs as they
    stand when a row arrives, which depends on how the inputs interleave, so
    no rule over it gives the same rows whatever the batch sizes.
    """
    return (judges_per_window(node) or judges_with_lateness(node) or judges_per_session(node)
            or isinstance(node, OverAggregate) or judges_join(node))


def judges_join(node: L.Node) -> bool:
    """A window, interval or event-time temporal join that judges late rows itself (:func:`judged_inputs`)."""
    return judges_window_join(node) or judges_interval_join(node) or judges_temporal_join(node)


def judges_interval_join(node: L.Node) -> bool:
    """An interval join without allowed lateness, judging as Flink's ``TimeIntervalJoin``: a row behind the
    watermark still joins the rows of the other input that are still held, and waits for partners while the
    other input's time has not passed the last time one could have (docs/time.md)."""
    return isinstance(node, Join) and node.strategy == "interval" and not node.lateness


def judges_temporal_join(node: L.Node) -> bool:
    """An event-time temporal join of an append-only stream without allowed lateness, judging its left rows
    as Flink's ``TemporalRowTimeJoinOperator``: a left row behind the watermark joins the versions still kept.
    The versioned table's changes are judged at their source."""
    return (isinstance(node, Join) and node.strategy == "temporal" and not node.lateness
            and node.left.changelog == L.APPEND)


def judges_row_join(node: L.Node) -> bool:
    """An interval or event-time temporal join that judges late rows itself (each row, not each window)."""
    return judges_interval_join(node) or judges_temporal_join(node)


def judged_inputs(node: L.Node) -> tuple[bool, ...]:
    """Which inputs of an operator that judges late rows itself it judges: all of them, except a temporal
    join's versioned table (judged at its source)."""
    if judges_temporal_join(node):
        return (True, False)
    return (True,) * len(node.inputs)


def judges_window_join(node: L.Node) -> bool:
    """A window join without allowed lateness: it drops a row only when the row's window had fired for
    the row's own input when it arrived (Flink's ``WindowJoinOperator`` drops a row whose window fired).

    Judged against the watermark of the row's own input as it stood before the row, not the join's (the
    minimum over both inputs, which depends on how they interleave), so the rows do not depend on batch
    sizes. A window that fired for the join had fired for both inputs, so no row reaches a fired window.
    """
    return isinstance(node, Join) and node.strategy == "window" and not node.lateness


def judges_per_session(node: L.Node) -> bool:
    """A session window (aggregated or not) emitting final results: it judges late events per session."""
    if isinstance(node, L.WindowAggregate):
        return node.window.type.merging and not node.emit.updating
    return is_session_tvf(node)


def judges_on_batch_routes(node: L.Node) -> bool:
    """The operators that judge late events themselves on the batch routes too: per window (window
    aggregates, with or without allowed lateness, Top-N and joins), OVER, and interval and temporal joins."""
    return (judges_per_window(node) or judges_with_lateness(node) or isinstance(node, OverAggregate)
            or judges_join(node))


def scans_judged_per_window(root: L.Node, judge=judges_per_window) -> set[int]:
    """The scans under event time whose every event-time operator above judges lateness itself (``judge``:
    per window on the batch routes, :func:`judges_late_events` on the runtime).

    Their sources drop nothing: they cut their batches before each event
    behind the watermark, so that the operators above see the watermark
    as it stood when the event arrived (docs/time.md). A join that judges
    lateness itself judges each row against its own input's watermark, so
    its inputs do not fan in (a temporal join's versioned table is judged at
    its source: :func:`judged_inputs`).
    """
    timed = scans_under_event_time(root)
    other: set[int] = set()

    def visit(node: L.Node, clean: bool, seen: set, timed_above: bool) -> None:
        key = (id(node), clean, timed_above)
        if key in seen:
            return
        seen.add(key)
        if isinstance(node, L.Scan):
            if not clean:
                other.add(id(node))
            return
        # Under a union or a join the operator's watermark is the minimum over its inputs, which depends on
        # how they interleave: the scans below judge at the source, against their own watermark. A union
        # that no event-time operator reads (GROUPING SETS of window aggregates) passes its rows on as they are.
        # An interval or temporal join under another event-time operator leaves late rows to its sources:
        # the late pairs it would emit reach that operator behind its watermark, by an amount that
        # depends on when the join's watermark moved, which the batch routes cannot reproduce.
        judged = judge(node) and not (timed_above and judges_row_join(node))
        fans_in = len(node.inputs) > 1 and not judged and not (isinstance(node, L.Union) and not timed_above)
        below = clean and not fans_in and (judged or not uses_event_time(node) or _reads_a_window_judge(node))
        judged_here = judged_inputs(node) if judged else (True,) * len(node.inputs)
        for child, own in zip(node.inputs, judged_here):
            visit(child, below and own, seen, timed_above or uses_event_time(node))

    visit(root, True, set(), False)
    return timed - other


# A grid every microsecond lies on: an event exactly at the watermark can be late (an OVER aggregate).
EVERY_INSTANT = (1, 0)


def window_grids(root: L.Node, judge=judges_per_window) -> tuple[tuple[int, int], ...]:
    """The (width, offset) of every window grid that an operator judging lateness per window uses: every
    window end lies on one. An OVER aggregate judges an event at the watermark late: ``EVERY_INSTANT``."""
    grids = []
    for n in L.walk(root):
        if not judge(n):
            continue
        if isinstance(n, OverAggregate):
            grids.append(EVERY_INSTANT)
            continue
        if not (judges_per_window(n) or judges_with_lateness(n) or (isinstance(n, Join) and n.strategy == "window")):
            continue
        spec = n.window if isinstance(n, L.WindowAggregate) else None
        below = list(n.inputs)
        while spec is None and below:
            node = below.pop(0)
            if isinstance(node, L.WindowTVF):
                if not node.window.type.merging and (node.window.pane, node.window.offset) not in grids:
                    grids.append((node.window.pane, node.window.offset))
                continue
            below.extend(node.inputs)
        if spec is not None and (spec.pane, spec.offset) not in grids:
            grids.append((spec.pane, spec.offset))
    return tuple(dict.fromkeys(grids))


def _reads_a_window_judge(node: L.Node) -> bool:
    """A CQL snapshot operator over a window aggregate: the window judges lateness, the snapshot reads its
    results (which are never late)."""
    if not isinstance(node, SnapshotDiff):
        return False
    below = node.input
    while not judges_per_window(below) and len(below.inputs) == 1 and not uses_event_time(below):
        below = below.inputs[0]
    return judges_per_window(below)
