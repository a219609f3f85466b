"""Rule: a projection over a projection becomes one projection.

Rewrites ``Project(a + 1 AS b)`` over ``Project(x * 2 AS a)`` into
``Project(x * 2 + 1 AS b)``, and drops projections that only pass every
column through unchanged. Each surviving layer is one less subquery in the
per-batch SQL and in the lowered statement.
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L


def merge_projects(node: L.Node) -> L.Node:
    if not isinstance(node, L.Project):
        return node
    if node.is_identity():
        return node.input
    inner = node.input
    if not isinstance(inner, L.Project):
        return node
    defs = dict(inner.exprs)

    def substitute(e: exp.Expression) -> exp.Expression:
        return e.transform(lambda n: defs[n.name].copy() if isinstance(n, exp.Column) and n.name in defs else n)

    exprs = tuple((name, substitute(e)) for name, e in node.exprs)
    merged = L.Project(inner.input, exprs, node.types)
    # A merge must not change which columns are time attributes.
    if [f.rowtime for f in merged.schema] != [f.rowtime for f in node.schema]:
        return node
    return merged.input if merged.is_identity() else merged
