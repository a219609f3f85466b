"""Rule: every node produces only the columns the plan above it reads.

Rewrites, for ``SELECT auction, price * 0.9 AS net FROM bids WHERE price > 10``::

    Project(auction, price * 0.9 AS net)        Project(auction, price * 0.9 AS net)
      Filter(price > 10)                 ->       Filter(price > 10)
        Scan(bids)                                  Scan(bids: auction, price, ts)

* a scan reads only the columns used above it (its primary key and its
  event-time column always: changelogs are keyed and watermarks need the time);
* a projection drops the expressions nothing reads;
* a join's per-batch inputs (a filter, a window assignment) get a projection
  to the columns the join needs, so that its state holds no more;
* a union's inputs are aligned on the columns read above it.

Event-time columns are kept, so every node keeps the watermark it carries.
What a node must produce depends on every node above it, so this rule looks at
the whole plan: it is marked ``whole_plan`` and the optimizer calls it once,
on the root (``analysis/needed_columns.py`` computes what each node must produce).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..analysis.needed_columns import required_columns, source_columns
from ..logical import nodes as L
from ..logical.join import Join
from ..logical.late import LateScan
from ..types import Field


def prune_columns(root: L.Node) -> L.Node:
    # A projection narrowed in one pass reads less from below it: repeat until nothing changes.
    for _ in range(len(L.walk(root))):
        pruned = _prune_once(root)
        if pruned is root:
            break
        root = pruned
    return root


def _prune_once(root: L.Node) -> L.Node:
    need = required_columns(root)
    done: dict[int, L.Node] = {}
    narrowed: dict[tuple[int, frozenset], L.Node] = {}

    def narrow_input(node: L.Node, needs: set[str]) -> L.Node:
        key = (id(node), frozenset(needs))  # one projection per input and need, however many joins share it
        if key not in narrowed:
            narrowed[key] = _join_input(node, needs)
        return narrowed[key]

    def visit(n: L.Node) -> L.Node:
        if id(n) in done:
            return done[id(n)]
        req = need.get(id(n), set(n.schema.names))
        inputs = tuple(visit(i) for i in n.inputs)
        if isinstance(n, Join) and n.strategy != "temporal":  # a temporal join reads its versioned table raw
            inputs = tuple(narrow_input(i, needs) for i, needs in zip(inputs, n.child_needs(req)))
        elif isinstance(n, L.Union):
            inputs = _aligned(n, inputs, req)
        out = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.with_inputs(inputs)
        done[id(n)] = out = _narrowed(out, req)
        return out

    return visit(root)


prune_columns.whole_plan = True  # type: ignore[attr-defined]


def _narrowed(node: L.Node, req: set[str]) -> L.Node:
    """``node`` producing only ``req`` (and its event time), where it can say so itself."""
    if isinstance(node, (L.Scan, LateScan)):
        columns, computed, proctime = source_columns(node.source, req)
        read = set(columns) | {n for n, _ in computed} | ({proctime} if proctime is not None else set())
        names = tuple(n for n in node.schema.names if n in read)
        return node if len(names) == len(node.schema.fields) else replace(node, columns=names)
    if isinstance(node, L.Project):
        keep = [i for i, f in enumerate(node.schema) if f.name in req or f.rowtime] or [0]  # batches need a column
        if len(keep) == len(node.exprs):
            return node
        return L.Project(node.input, tuple(node.exprs[i] for i in keep), tuple(node.types[i] for i in keep))
    return node


def _join_input(node: L.Node, needs: set[str]) -> L.Node:
    """A join's input with only the columns the join needs, when it is a per-batch node that passes every
    column of its own input through (other nodes produce only what they are asked for already)."""
    if not isinstance(node, (L.Filter, L.WindowTVF)) or set(node.schema.names) <= needs:
        return node
    return _select(node, [f for f in node.schema if f.name in needs or f.rowtime])


def _aligned(union: L.Union, inputs: tuple[L.Node, ...], req: set[str]) -> tuple[L.Node, ...]:
    """The inputs of ``union``, each producing the columns at the positions read above (and event times)."""
    keep = [j for j, f in enumerate(union.schema) if f.name in req or f.rowtime] or [0]
    out = []
    for old, new in zip(union.inputs, inputs):
        names = [old.schema.fields[j].name for j in keep]
        out.append(new if new.schema.names == names else _select(new, [new.schema.find(n) for n in names]))
    return tuple(out)


def _select(node: L.Node, fields: list[Field]) -> L.Project:
    return L.Project(node, tuple((f.name, exp.Column(this=exp.Identifier(this=f.name, quoted=True))) for f in fields), tuple(f.type for f in fields))
