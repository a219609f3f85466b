"""A statement set's plan: several INSERT queries as one operator DAG that reads each source once.

Each query is planned alone; then the scans of the same source (with the
same allowed lateness) become one node, so the physical planner makes one
source operator for them, reading the union of the columns the queries
use, and fans its batches out to every query:

    INSERT INTO a SELECT … FROM s WHERE x > 0;     Source(s) ─┬─ Calc[x > 0] ──▶ a
    INSERT INTO b SELECT … FROM s WHERE x < 0;                 └─ Calc[x < 0] ──▶ b

The plan's ``outputs`` are the operators whose results each INSERT writes,
in statement order.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (x INT) WITH (connector = 'memory')")
    >>> both = plan_statement_set([plan_query("SELECT x FROM s WHERE x > 0", catalog),
    ...                            plan_query("SELECT x FROM s WHERE x < 0", catalog)])
    >>> [type(op).__name__ for op in both.physical.ops], both.physical.outputs
    (['SourceSpec', 'CalcSpec', 'CalcSpec'], (1, 2))
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from sqlglot import exp

from ..logical import nodes as L
from ..types import Schema
from .planner import plan_physical_roots
from .specs import PhysicalPlan


@dataclass(frozen=True, eq=False)
class Outputs(L.Node):
    """The roots of a statement set: one per INSERT (no operator of its own)."""

    roots: tuple[L.Node, ...]
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False, default=None)

    def __post_init__(self):
        first = self.roots[0]
        object.__setattr__(self, "schema", first.schema)
        object.__setattr__(self, "changelog", first.changelog)

    @property
    def inputs(self) -> tuple[L.Node, ...]:
        return self.roots

    def with_inputs(self, inputs: tuple[L.Node, ...]) -> L.Node:
        return Outputs(tuple(inputs))

    def child_needs(self, req: set[str]) -> list[set[str]]:
        return [set(r.schema.names) for r in self.roots]

    def label(self) -> str:
        return f"Outputs({len(self.roots)})"


def share_scans(roots: list[L.Node]) -> tuple[L.Node, ...]:
    """The roots with one Scan node per (source, allowed lateness) across all of them.

    Each query's scans read only what that query uses (rules/prune_columns.py); the shared scan reads
    what any of them uses, and every node that depends on column positions (a union, the root)
    selects its own columns back from it.
    """
    wanted: dict[tuple[str, int], set[str] | None] = {}
    for root in roots:
        for node in L.walk(root):
            if isinstance(node, L.Scan):
                key = _scan_key(node)
                cols = wanted.get(key, set())
                wanted[key] = None if cols is None or node.columns is None else cols | set(node.columns)
    scans: dict[tuple[str, int], L.Scan] = {}
    done: dict[int, L.Node] = {}

    def visit(node: L.Node) -> L.Node:
        if id(node) in done:
            return done[id(node)]
        if isinstance(node, L.Scan):
            key = _scan_key(node)
            cols = wanted[key]
            columns = None if cols is None else tuple(n for n in node.source.schema.names if n in cols)
            new = scans.setdefault(key, replace(node, columns=columns))
        else:
            inputs = tuple(visit(i) for i in node.inputs)
            if isinstance(node, L.Union):  # positional: each input keeps its own columns
                inputs = tuple(_as_before(new, old) for new, old in zip(inputs, node.inputs))
            same = all(a is b for a, b in zip(inputs, node.inputs))
            new = node if same else node.with_inputs(inputs)
        done[id(node)] = new
        return new

    return tuple(_as_before(visit(r), r) for r in roots)


def _scan_key(scan: L.Scan) -> tuple[str, int]:
    return scan.source.name.lower(), scan.lateness_us


def _as_before(new: L.Node, old: L.Node) -> L.Node:
    """``new``, projected to the columns of ``old`` when a wider shared scan below it added some."""
    if new.schema.names == old.schema.names:
        return new
    fields = [new.schema.find(n) for n in old.schema.names]
    return L.Project(new, tuple((f.name, exp.Column(this=exp.Identifier(this=f.name, quoted=True))) for f in fields),
                     tuple(f.type for f in fields))


@dataclass
class PlannedSet:
    """Planned INSERT queries run as one job (what ``PlannedQuery`` is for one query)."""

    queries: tuple

    @cached_property
    def optimized(self) -> Outputs:
        return Outputs(share_scans([q.optimized for q in self.queries]))

    @property
    def bound(self) -> Outputs:
        return self.optimized

    @cached_property
    def physical(self) -> PhysicalPlan:
        return plan_physical_roots(self.optimized, self.optimized.roots)

    @property
    def output_schema(self):
        return self.queries[0].output_schema

    @property
    def schema(self) -> Schema:
        return self.optimized.schema

    @property
    def changelog(self) -> str:
        return self.optimized.changelog

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w for q in self.queries for w in q.warnings))


def plan_statement_set(queries: list) -> PlannedSet:
    """One job's plan for several planned queries (``PlannedQuery``), sharing their sources' scans."""
    return PlannedSet(tuple(queries))
