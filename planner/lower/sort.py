"""Lowering ORDER BY (a temporal sort) and LIMIT to a batch statement, and the order of its result.

A temporal sort's final rows are its input's; their order is the final
SELECT's ``ORDER BY`` (:func:`result_order`). ``LIMIT n`` takes the first
``n`` rows the runtime would pass: after a temporal sort, the first by
the sort's keys; over rows that still map one to one to one source's rows,
the first in source order (``__file``, ``__row``). After anything else
(an aggregate, a join, a union) which rows come first depends on how the
input is cut into batches, so the batch routes refuse it
(:func:`limit_refusal`) and the runtime runs the query.

A windowed result comes in window order (by ``window_end`` then
``window_start``, renamed or not), as the runtime emits windows, on every
route.
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L
from ..logical.sort import Limit, TemporalSort
from .sql import ORDER, c

_ONE_TO_ONE = (L.Filter, L.Project)
WINDOW_ORDER = ("window_end", "window_start")


def lower_temporal_sort(lowering, node: TemporalSort):
    """The input's rows (the final SELECT orders them)."""
    return lowering.rel(node.input)


def lower_limit(lowering, node: Limit):
    src = lowering.rel(node.input)
    keys = _sort_keys(node.input)
    order = [exp.Ordered(this=c(k), desc=d) for k, d in keys] if keys else [exp.Ordered(this=c(n)) for n in ORDER[:2]]
    query = exp.select(*src.cols(order=True)).from_(lowering.use(src)).order_by(*order).limit(node.count)
    return lowering.add(query, node.schema.names, src.ordered)


def limit_refusal(node: Limit) -> str | None:
    """Why a batch route cannot take the same first rows as the runtime (None: it can)."""
    if _sort_keys(node.input):
        return None
    below = node.input
    while isinstance(below, _ONE_TO_ONE):
        below = below.input
    if isinstance(below, L.Scan) and below.source.kind == "stream":
        return None
    return (f"the first rows of {below.label()} are the first to arrive, which depends on how its input is cut "
            "into batches; ORDER BY a time attribute before LIMIT gives the same rows on every route")


def result_order(root: L.Node) -> list[exp.Ordered]:
    """The final SELECT's order: a temporal sort's keys, the event time, or the window bounds."""
    keys = _sort_keys(root)
    if keys:
        return [exp.Ordered(this=c(k), desc=d) for k, d in keys]
    rowtime = root.schema.rowtime
    if rowtime is not None:  # in event-time order, as the runtime emits (ties: any order)
        return [exp.Ordered(this=c(rowtime.name))]
    bounds = window_bounds(root)
    return [exp.Ordered(this=c(name)) for kind in WINDOW_ORDER for name, of in bounds.items() if of == kind]


def window_bounds(node: L.Node) -> dict[str, str]:
    """The columns of ``node`` that hold a window's end or start (through renames and casts), and which."""
    if isinstance(node, L.Project):
        below = window_bounds(node.input)
        found = {}
        for name, e in node.exprs:
            while isinstance(e, exp.Cast):
                e = e.this
            if isinstance(e, exp.Column) and e.name in below:
                found[name] = below[e.name]
        return found
    if isinstance(node, (L.Filter, TemporalSort, Limit)):
        return window_bounds(node.input)
    return {n: n for n in WINDOW_ORDER if n in node.schema.names}


def _sort_keys(node: L.Node) -> tuple[tuple[str, bool], ...]:
    """The keys of the temporal sort ``node`` is (or is a LIMIT of)."""
    while isinstance(node, Limit):
        node = node.input
    return node.keys if isinstance(node, TemporalSort) else ()
