"""Column pruning: which columns each plan node must produce, and what each scan reads.

Every route reads only what the plan above a scan uses: the physical planner
gives each runtime source its columns, and the lowering reads the same ones
in the statement of a batch route. A node that knows its own needs (a join)
says them through ``child_needs``.
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L
from ..logical.cql import SnapshotDiff
from ..logical.late import LateScan
from ..logical.over import OverAggregate
from ..logical.rank import TopN
from ..physical.plan_window import is_proctime_call


def required_columns(root: L.Node) -> dict[int, set[str]]:
    """For each node, the columns of its output that the plan above it reads."""
    need: dict[int, set[str]] = {id(root): set(root.schema.names)}
    out: dict[int, set[str]] = {}
    for node in reversed(L.walk(root)):
        req = need.get(id(node), set())
        out[id(node)] = out.get(id(node), set()) | req
        for i, child_req in zip(node.inputs, _child_needs(node, req)):
            need[id(i)] = need.get(id(i), set()) | child_req
    return {**need, **out}


def _refs(e: exp.Expression) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}


def _child_needs(node: L.Node, req: set[str]) -> list[set[str]]:
    """The columns each input of ``node`` must produce so that ``node`` can produce ``req``."""
    if hasattr(node, "child_needs"):  # nodes that know their own needs (joins)
        return node.child_needs(req)
    if isinstance(node, LateScan):
        return []
    if isinstance(node, L.Union):
        idx = [i for i, n in enumerate(node.schema.names) if n in req]
        return [{i.schema.fields[j].name for j in idx} for i in node.inputs]
    needs = _input_needs(node, req)
    return [needs] if needs is not None else [set(i.schema.names) for i in node.inputs]


def _input_needs(node: L.Node, req: set[str]) -> set[str] | None:
    """What the one input of ``node`` must produce (None: every column, for a node not known here)."""
    if isinstance(node, L.Filter):
        return req | _refs(node.condition)
    if isinstance(node, L.Project):
        used = set()
        for _, e in node.exprs:
            used |= _refs(e)
        return used
    if isinstance(node, L.WindowTVF):
        return (req - set(L.WINDOW_COLUMNS)) | {node.window.time_col} | set(node.window.partition_by)
    if isinstance(node, SnapshotDiff):
        return set(node.input.schema.names)
    if isinstance(node, TopN):
        keep = set(node.partition_by) | {c for c, _ in node.order_by}
        return set(node.input.schema.names) if node.kind == "global" else (req & set(node.input.schema.names)) | keep
    if isinstance(node, OverAggregate):
        return ((req & set(node.input.schema.names)) | set(node.partition_by) | {node.order_by} |
                {a.arg for a in node.aggs if a.arg})
    if isinstance(node, (L.WindowAggregate, L.Aggregate)):
        cols = set(node.keys) | {a.arg for a in node.aggs if a.arg}
        if isinstance(node, L.WindowAggregate):
            cols |= {node.window.time_col} | set(node.window.partition_by)
        return cols
    return None


def source_columns(src, needed: set[str]) -> tuple[tuple[str, ...], list, str | None]:
    """What a scan of ``src`` reads so that the columns ``needed`` above it can be computed.

    Returns the physical columns to read (the primary key and the watermark
    column always), the computed columns to add, and the processing-time
    column if one is needed.
    """
    needed = set(needed) | set(src.primary_key)
    proctime = next((n for n, e in src.computed if n in needed and is_proctime_call(e)), None)
    computed = [(n, e) for n, e in src.computed if n in needed and not is_proctime_call(e)]
    wm = src.watermark
    if wm is not None:
        needed = needed | {wm.column}
        if any(n == wm.column for n, _ in src.computed):
            computed = [(n, e) for n, e in src.computed if n in needed]
    for _, e in computed:
        needed = needed | {c.name for c in e.find_all(exp.Column)}
    columns = tuple(n for n in src.physical if n in needed) or src.physical[:1]  # batches need a column
    return columns, computed, proctime
