"""What bounds each stateful operator's state, and ``SET 'state.ttl'`` applied to a plan.

EXPLAIN shows, for every operator that keeps state, what keeps that state
from growing without end::

    window aggregates, window joins, window Top-N   the watermark (a window's rows go when it closes)
    interval joins, temporal joins, OVER            the watermark and the time bounds
    lookup joins, ChangelogNormalize                the size of the table
    regular joins, group aggregates,                nothing (they grow with the input or its keys),
      deduplication, global Top-N                     unless SET 'state.ttl' bounds them

``state.ttl`` (Flink's ``table.exec.state.ttl``) bounds the last group:
a state row that has not been written for longer than the TTL, in
processing time, is dropped, as Flink does (its TTL is updated on create
and write, and expired rows are never read).

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'memory')")
    >>> state_bound(plan_query("SELECT k, COUNT(*) AS n FROM s GROUP BY k", catalog).optimized.input)
    "a row per key (grows with the keys; SET 'state.ttl' bounds it)"
    >>> catalog.settings["state.ttl"] = "1 h"
    >>> state_bound(plan_query("SELECT k, COUNT(*) AS n FROM s GROUP BY k", catalog).optimized.input)
    'a row per key, until the key is not written for 1h (state.ttl)'
"""

from __future__ import annotations

from dataclasses import replace

from ..logical import nodes as L
from ..logical.cql import SnapshotDiff
from ..logical.join import Join, duration
from ..logical.over import OverAggregate
from ..logical.rank import TopN

GROWS = "SET 'state.ttl' bounds it"


def ttl_applies(node: L.Node) -> bool:
    """Whether ``state.ttl`` bounds ``node``'s state: the operators whose state otherwise grows without end."""
    if isinstance(node, Join):
        return node.strategy == "regular"
    if isinstance(node, TopN):
        return node.kind != "window"
    return isinstance(node, L.Aggregate)


def apply_state_ttl(root: L.Node, ttl_us: int | None) -> L.Node:
    """``root`` with ``ttl_us`` set on every operator it bounds (shared sub-plans stay shared)."""
    if not ttl_us:
        return root
    done: dict[int, L.Node] = {}

    def visit(n: L.Node) -> L.Node:
        if id(n) not in done:
            inputs = tuple(visit(i) for i in n.inputs)
            out = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.with_inputs(inputs)
            done[id(n)] = replace(out, ttl=ttl_us) if ttl_applies(out) else out
        return done[id(n)]

    return visit(root)


def state_bound(node: L.Node) -> str | None:
    """What bounds ``node``'s state, in words (None: it keeps none)."""
    if isinstance(node, Join):
        return node.retention()
    if isinstance(node, L.Aggregate):
        return f"a row per key, until the key is not written for {duration(node.ttl)} (state.ttl)" if node.ttl else \
            f"a row per key (grows with the keys; {GROWS})"
    if isinstance(node, L.WindowAggregate):
        late = f" + allowed lateness {duration(node.emit.lateness_us)}" if node.emit.lateness_us else ""
        if node.window.type.merging:
            return f"open sessions until the watermark passes their end{late}"
        return f"panes of open windows, until the watermark passes the window's end{late}"
    if isinstance(node, L.WindowTVF) and node.window.type.merging:
        return "open sessions until the watermark passes their end"
    if isinstance(node, TopN):
        # Over an append-only input a row that leaves the top never returns: only the top is kept.
        rows = f"the top {node.limit} rows of each partition" if node.input.changelog == L.APPEND else \
            "every row of each partition"
        what = {"first": "the first row per key", "last": "the last row per key", "global": rows}.get(node.kind)
        if node.ttl:
            return f"{what}, until its {'partition' if node.kind == 'global' else 'key'} is not touched for " \
                   f"{duration(node.ttl)} (state.ttl)"
        grows = "the input" if rows.startswith("every") and node.kind == "global" else "the keys"
        return {"window": "rows of open windows, until the watermark passes the window's end"}.get(
            node.kind, f"{what} (grows with {grows}; {GROWS})")
    if isinstance(node, OverAggregate):
        if node.frame.preceding is None:
            return "rows until the watermark passes them, and a running total per partition"
        reach = duration(node.frame.preceding) if node.frame.kind == "RANGE" else f"{node.frame.preceding} rows"
        return f"rows until the watermark passes them, and the last {reach} per partition"
    if isinstance(node, SnapshotDiff):
        return "the rows of the last instant, until the watermark passes the next"
    return None
