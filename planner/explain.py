"""EXPLAIN: the operator DAG as an indented tree.

Each line names an operator, its changelog mode, the watermark it
carries and, for an operator that keeps state, what bounds it
(``analysis/state_bounds.py``); inputs are indented below it. A sub-plan used twice is printed
once and referred to by its id afterwards.
"""

from __future__ import annotations

from .analysis.state_bounds import state_bound
from .logical import nodes as L
from .physical.specs import PhysicalPlan


def explain_physical(plan: PhysicalPlan, header: str | None = None) -> str:
    lines = [header] if header else []
    printed: set[int] = set()

    def visit(op_id: int, prefix: str, last: bool, top: bool) -> None:
        op = plan.op(op_id)
        branch = "" if top else ("└─ " if last else "├─ ")
        wm = op.watermark or "none"
        if op_id in printed:
            lines.append(f"{prefix}{branch}#{op_id} (shown above)")
            return
        printed.add(op_id)
        state = f", state: {op.state}" if op.state else ""
        lines.append(f"{prefix}{branch}#{op_id} {op.label}  [{op.changelog}, watermark: {wm}{state}]")
        child_prefix = prefix + ("" if top else ("   " if last else "│  "))
        for i, child in enumerate(op.inputs):
            visit(child, child_prefix, i == len(op.inputs) - 1, False)

    visit(plan.output, "", True, True)
    return "\n".join(lines)


def explain_logical(root: L.Node) -> str:
    lines: list[str] = []
    seen: dict[int, int] = {}

    def visit(n: L.Node, depth: int) -> None:
        pad = "  " * depth
        if id(n) in seen:
            lines.append(f"{pad}(shared sub-plan {seen[id(n)]})")
            return
        seen[id(n)] = len(seen)
        bound = state_bound(n)
        state = f", state: {bound}" if bound else ""
        lines.append(f"{pad}{n.label()}  [{n.changelog}, watermark: {n.watermark or 'none'}{state}]")
        for i in n.inputs:
            visit(i, depth + 1)

    visit(root, 0)
    return "\n".join(lines)
