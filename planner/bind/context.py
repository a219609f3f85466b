"""State shared by the parts of the binder while one query is bound."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa
from sqlglot import exp

from ...grammar import Diagnostic, Span, SqlError
from ..catalog import Catalog
from ..logical import nodes as L
from ..timeutil import node_span
from ..types import Schema, sql_name
from .expressions import infer_type


@dataclass
class BindContext:
    catalog: Catalog
    source: str | None
    ctes: dict[str, tuple[L.Node, Schema]] = field(default_factory=dict)
    views: tuple[str, ...] = ()  # views being expanded, to catch cycles
    # binds a nested query (a subquery, a view); set by the binder, so FROM and
    # aggregation binding need not import it
    bind_set: Callable[[exp.Expression, "BindContext"], L.Node] | None = None

    def error(self, message: str, node: exp.Expression | None = None, help: str | None = None,
              span: Span | None = None) -> SqlError:
        return SqlError(Diagnostic(message, span or (node_span(node) if node is not None else None), self.source, help=help))

    def nested(self, views: tuple[str, ...]) -> "BindContext":
        """A context for a view's own text: its own positions, no outer CTEs."""
        return BindContext(self.catalog, None, {}, views, self.bind_set)


def require_boolean(cond: exp.Expression, schema: Schema, tree: exp.Expression, ctx: BindContext) -> None:
    t = infer_type(cond, schema, ctx.source)
    if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
        raise ctx.error(f"the condition must be BOOLEAN, not {sql_name(t)}", tree)
