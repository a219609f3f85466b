"""Analysis: an aggregate grouped by a window TVF's bounds is a WindowAggregate.

Rewrites::

    Aggregate(keys=[window_start, window_end, k], aggs)
      Project / Filter ...          (not computing on the window columns)
        WindowTVF(HOP(ts, slide=10s, size=1min))
          X

into::

    Project(rename to the Aggregate's columns)
      WindowAggregate(HOP(ts, slide=10s, size=1min), keys=[k], aggs)
        Project / Filter ...        (window columns dropped, ts passed through)
          X

so the runtime aggregates each event once per pane and assembles windows
when they close, instead of copying each event into every window it
belongs to. Window columns may be renamed on their way to the aggregate's
keys; if anything computes on them, the plan is left as it is (a regular
aggregate over the TVF's rows).

An aggregate grouped by the window bounds of an earlier window aggregate
(renamed or not; Nexmark q5 groups ``window_start AS starttime``) is a
window aggregate too, as in Flink (window properties propagate): each row
already belongs to one window, which its end identifies, so it is grouped
by a TUMBLE of the pane width over window_time with the window start kept
as a key::

    Aggregate(keys=[ws, we], aggs)                  WindowAggregate(HOP(...) attached by __ws and window_end,
      Project(window_start AS ws, window_end AS we)   TUMBLE(__wt, slide), keys=[__ws], aggs)
        WindowAggregate(HOP(slide, size), ...)  ->    Project(..., window_start AS __ws, window_time AS __wt)
                                                        WindowAggregate(HOP(slide, size), ...)

This changes meaning, not just cost: a window aggregate emits each window
once when it closes (append-only) and its window_time stays an event-time
attribute, so windows can cascade. The binder applies it to every
aggregate it builds, so the bound plan already has the right changelog
mode and time attributes.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..bind.expressions import col
from ..logical import nodes as L
from ..types import unique_name
from ..windows import TUMBLE


def as_window_aggregate(node: L.Node) -> L.Node:
    if not isinstance(node, L.Aggregate):
        return node
    chain: list[L.Node] = []  # from just below the aggregate down to the TVF
    cur = node.input
    while isinstance(cur, (L.Project, L.Filter)):
        chain.append(cur)
        cur = cur.input
    if isinstance(cur, L.WindowAggregate):
        return _regrouped_windows(node, chain, cur)
    if not isinstance(cur, L.WindowTVF):
        return node
    tvf = cur
    bottom_up = list(reversed(chain))

    # Names denoting window columns at each level, from the TVF up.
    wnames = _window_names(bottom_up)
    if wnames is None:
        return node
    if any(call.arg in wnames for call in node.aggs):
        return node
    window_keys = {k: wnames[k] for k in node.keys if k in wnames}
    if not {"window_start", "window_end"} <= set(window_keys.values()):
        return node

    rebuilt, carry = _without_window_columns(tvf, bottom_up)
    keys = tuple(k for k in node.keys if k not in window_keys)
    window = replace(tvf.window, time_col=carry[0], partition_by=tuple(carry[1:]))
    agg = L.WindowAggregate(rebuilt, window, keys, node.aggs)

    # Rename back to exactly the columns the Aggregate produced.
    out = [(f.name, col(window_keys.get(f.name, f.name))) for f in node.schema]
    types = tuple(agg.schema.find(e.name).type for _, e in out)
    project = L.Project(agg, tuple(out), types)
    return agg if project.is_identity() else project


def _without_window_columns(tvf: L.WindowTVF, bottom_up: list[L.Node]) -> tuple[L.Node, list[str]]:
    """The chain rebuilt over the TVF's input without window columns, carrying the time column (and a session's
    partition columns) up; and the names they have at its top."""
    carry = [tvf.window.time_col, *tvf.window.partition_by]
    rebuilt: L.Node = tvf.input
    wnames = {n: n for n in L.WINDOW_COLUMNS}
    for n in bottom_up:
        if isinstance(n, L.Filter):
            rebuilt = L.Filter(rebuilt, n.condition)
            continue
        kept = [(name, e, t) for (name, e), t in zip(n.exprs, n.types)
                if not (isinstance(e, exp.Column) and e.name in wnames)]
        wnames = {out: 0 for out, e in n.exprs if isinstance(e, exp.Column) and e.name in wnames}
        for i, c in enumerate(carry):
            carried = next((name for name, e, _ in kept if isinstance(e, exp.Column) and e.name == c), None)
            if carried is None:
                carried = unique_name(c, [name for name, _, _ in kept] + list(wnames))
                kept.append((carried, col(c), rebuilt.schema.find(c).type))
            carry[i] = carried
        rebuilt = L.Project(rebuilt, tuple((name, e) for name, e, _ in kept), tuple(t for _, _, t in kept))
    return rebuilt, carry


def _window_names(bottom_up: list[L.Node]) -> dict[str, str] | None:
    """The names denoting window columns above a chain of projections and filters (None: computed on)."""
    wnames = {n: n for n in L.WINDOW_COLUMNS}
    for n in bottom_up:
        if isinstance(n, L.Filter):
            if _refs(n.condition) & set(wnames):
                return None
            continue
        above = {}
        for out, e in n.exprs:
            if isinstance(e, exp.Column) and e.name in wnames:
                above[out] = wnames[e.name]
            elif _refs(e) & set(wnames):
                return None
        wnames = above
    return wnames


def _regrouped_windows(node: L.Aggregate, chain: list[L.Node], inner: L.WindowAggregate) -> L.Node:
    """An aggregate over an earlier window aggregate's rows, grouped by their window_start and window_end."""
    w = inner.window
    if w.type.merging or inner.emit.updating or inner.attached is not None:
        return node
    bottom_up = list(reversed(chain))
    wnames = _window_names(bottom_up)
    if wnames is None or any(call.arg in wnames for call in node.aggs):
        return node
    window_keys = {k: wnames[k] for k in node.keys if k in wnames}
    if not {"window_start", "window_end"} <= set(window_keys.values()):
        return node

    # Carry window_start and window_time up the chain (renamed apart from the new window columns).
    carry = {"window_start": "window_start", "window_time": "window_time"}
    rebuilt: L.Node = inner
    for n in bottom_up:
        if isinstance(n, L.Filter):
            rebuilt = L.Filter(rebuilt, n.condition)
            continue
        exprs, types = list(n.exprs), list(n.types)
        for what, name in carry.items():
            found = next((out for out, e in exprs if isinstance(e, exp.Column) and e.name == name), None)
            if found is None:
                found = unique_name(f"__{what}", [out for out, _ in exprs])
                exprs.append((found, col(name)))
                types.append(rebuilt.schema.find(name).type)
            carry[what] = found
        rebuilt = L.Project(rebuilt, tuple(exprs), tuple(types))
    names = [f.name for f in rebuilt.schema if f.name not in wnames and f.name not in carry.values()]
    start, wt = unique_name("__attached_start", names), unique_name("__attached_time", names)
    top = [(n, col(n)) for n in names] + [(start, col(carry["window_start"])), (wt, col(carry["window_time"]))]
    rebuilt = L.Project(rebuilt, tuple(top), tuple(rebuilt.schema.find(e.name).type for _, e in top))

    keys = (start,) + tuple(k for k in node.keys if k not in window_keys)
    by_end = TUMBLE.spec(wt, size=w.pane, offset=w.offset)
    agg = L.WindowAggregate(rebuilt, by_end, keys, node.aggs, attached=w, attached_start=start)
    renamed = {"window_start": start, "window_end": "window_end", "window_time": "window_time"}
    out = [(f.name, col(renamed[window_keys[f.name]] if f.name in window_keys else f.name)) for f in node.schema]
    return L.Project(agg, tuple(out), tuple(agg.schema.find(e.name).type for _, e in out))


def _refs(e: exp.Expression) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}
