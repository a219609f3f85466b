"""The optimizer: rules applied in order, each checked to keep the schema.

A rule is a function ``Node -> Node`` that looks at one node (and what is
below it) and returns it unchanged or rewritten. :func:`optimize` applies
each rule bottom-up over the whole DAG, sharing rewritten sub-plans, and
checks that the root's columns and types did not change.
"""

from __future__ import annotations

from typing import Callable

from .logical import nodes as L
from .rules.merge_projects import merge_projects

Rule = Callable[[L.Node], L.Node]

RULES: tuple[Rule, ...] = (
    merge_projects,
)


def with_inputs(node: L.Node, inputs: tuple[L.Node, ...]) -> L.Node:
    """``node`` over new inputs (the same node if they did not change)."""
    if all(a is b for a, b in zip(inputs, node.inputs)):
        return node
    return node.with_inputs(tuple(inputs))


def apply_rule(root: L.Node, rule: Rule) -> L.Node:
    done: dict[int, L.Node] = {}

    def visit(n: L.Node) -> L.Node:
        if id(n) in done:
            return done[id(n)]
        out = rule(with_inputs(n, tuple(visit(i) for i in n.inputs)))
        done[id(n)] = out
        return out

    return visit(root)


def optimize(root: L.Node, rules: tuple[Rule, ...] = RULES) -> L.Node:
    for rule in rules:
        before = root.schema
        root = apply_rule(root, rule)
        if [(f.name, f.type) for f in root.schema] != [(f.name, f.type) for f in before]:
            raise AssertionError(f"rule {rule.__name__} changed the result schema")
    return root
