"""The planner: statements -> bound logical plans -> optimized DAGs -> runtime specs.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'memory')")
    >>> p = plan_query("SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, "
    ...     "DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, k", catalog)
    >>> p.changelog, [f.name for f in p.schema]
    ('append-only', ['window_start', 'k', 'n'])
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from ..grammar import Query, QueryStatement, SqlError, parse_statement
from ..grammar.dialect import too_deep
from .analysis.state_bounds import apply_state_ttl
from .bind.binder import bind_query
from .catalog import Catalog
from .ddl import declare
from .errors import UnsupportedPlan
from .explain import explain_logical, explain_physical
from .logical import nodes as logical
from .lower.plan import Lowered, LoweringRefused, lower_plan
from .lower.stream import unbounded_sources
from .optimizer import optimize
from .physical.planner import plan_physical
from .physical.specs import OP, PhysicalPlan
from .timeutil import state_ttl
from .types import Schema


@dataclass(frozen=True)
class PlannedQuery:
    """A planned query: the bound plan and the optimized plan, from which each route builds its own.

    The runtime's operator DAG (``physical``) is built when first asked
    for: by the runtime when it runs the query, or by EXPLAIN of it.
    """

    bound: logical.Node
    optimized: logical.Node

    @cached_property
    def physical(self) -> PhysicalPlan:
        """The runtime's operator DAG.

        Raises:
            UnsupportedPlan: the runtime cannot run this query.
        """
        return plan_physical(self.optimized)

    @property
    def output_schema(self) -> pa.Schema:
        """The result's columns as every route writes them: an updating result carries its row kind in ``__op``."""
        schema = self.optimized.schema.to_arrow()
        if self.changelog == logical.UPDATING and OP not in schema.names:
            schema = schema.append(pa.field(OP, pa.int8()))
        return schema

    @property
    def schema(self) -> Schema:
        return self.optimized.schema

    @property
    def changelog(self) -> str:
        return self.optimized.changelog

    @property
    def warnings(self) -> tuple[str, ...]:
        """What the user should know about the plan (e.g. a join whose state grows without bound)."""
        found = [n.warning for n in logical.walk(self.optimized) if getattr(n, "warning", None)]
        return tuple(dict.fromkeys(found))

    def explain(self) -> str:
        text = explain_physical(self.physical)
        return "\n".join([f"warning: {w}" for w in self.warnings] + [text])

    def lowered(self, dialect: str, streaming: bool | None = None, history: bool = False) -> Lowered:
        """The query as one ``duckdb`` or ``spark`` statement.

        On Spark, a query over watched files is lowered for Structured
        Streaming (``streaming`` None: whenever it reads one, unless
        ``history``: the backfill of their history, ``analysis/backfill.py``).

        Raises:
            LoweringRefused: the route cannot run this query (the message says why).
        """
        if streaming is None:
            streaming = dialect == "spark" and not history and bool(unbounded_sources(self.optimized))
        return lower_plan(self.optimized, dialect, streaming, history)

    def lowered_sql(self, dialect: str, pretty: bool = True) -> str:
        return self.lowered(dialect).sql(pretty=pretty)


def plan_query(query: Query | str, catalog: Catalog, source: str | None = None) -> PlannedQuery:
    """Bind, optimize and physically plan one query body."""
    if isinstance(query, str):
        stmt = parse_statement(query)
        if not isinstance(stmt, QueryStatement):
            raise TypeError("plan_query takes a query; use dsms.plan for other statements")
        query, source = stmt.query, stmt.source
    try:
        bound = bind_query(query, catalog, source)
        optimized = apply_state_ttl(optimize(bound), state_ttl(catalog.setting("state.ttl")))
        return PlannedQuery(bound, optimized)
    except RecursionError:  # e.g. thousands of terms in one expression: a deep tree
        raise too_deep(query.span, source or query.text) from None
    except SqlError as e:
        if e.diagnostic.span is not None:
            raise
        # A node made while binding (an expanded *, a rewritten call) has no place: point at the query.
        raise type(e)(dataclasses.replace(e.diagnostic, span=query.span, source=source or query.text), e.extra) from None


__all__ = ["Catalog", "declare", "Lowered", "LoweringRefused", "PlannedQuery", "UnsupportedPlan", "bind_query", "explain_logical", "explain_physical",
           "lower_plan", "optimize", "plan_physical", "plan_query"]
