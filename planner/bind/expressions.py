"""Binding scalar expressions: names to fields, functions to known ones, types.

A bound expression is a sqlglot tree whose columns are bare names of the
input node's fields. Its type is inferred by sqlglot's type annotation
with the dsms dialect (Flink semantics: ``INT / INT`` is an INT).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from ...grammar import Diagnostic, SqlError
from ...grammar.diagnostics import did_you_mean
from ...grammar.dialect import Descriptor, Dsms, GroupWindow, WindowTVF
from ..aggregate_kinds import is_aggregate
from ..functions import AGGREGATES, check_function
from ..timeutil import node_span
from ..types import Field, InvalidType, Schema, from_sql_type

_IN = "__in"


@dataclass(frozen=True)
class ScopeColumn:
    """A column visible to expressions: ``qualifier.name`` is input field ``field``."""

    qualifier: str | None
    name: str
    field: Field


@dataclass(frozen=True)
class Scope:
    columns: tuple[ScopeColumn, ...]

    @staticmethod
    def of(schema: Schema, qualifier: str | None) -> "Scope":
        q = qualifier.lower() if qualifier else None
        return Scope(tuple(ScopeColumn(q, f.name, f) for f in schema))

    def requalify(self, qualifier: str | None) -> "Scope":
        q = qualifier.lower() if qualifier else None
        return Scope(tuple(ScopeColumn(q, c.name, c.field) for c in self.columns))

    def resolve(self, column: exp.Column, source: str | None) -> ScopeColumn:
        name = column.name.lower()
        table = column.table.lower() if column.table else None
        matches = [c for c in self.columns if c.name.lower() == name and (table is None or c.qualifier == table)]
        if len(matches) == 1:
            return matches[0]
        span = node_span(column)
        if not matches:
            if table is not None and not any(c.qualifier == table for c in self.columns):
                quals = {c.qualifier for c in self.columns if c.qualifier}
                raise SqlError(Diagnostic(f"unknown table or alias '{column.table}'", span, source,
                                          help=did_you_mean(column.table, quals)))
            candidates = [c.name for c in self.columns if table is None or c.qualifier == table]
            what = f"'{column.table}.{column.name}'" if table else f"'{column.name}'"
            raise SqlError(Diagnostic(f"unknown column {what}", span, source, help=did_you_mean(column.name, candidates)))
        quals = [c.qualifier or "?" for c in matches]
        raise SqlError(Diagnostic(f"column '{column.name}' is ambiguous", span, source,
                                  help="qualify it: " + " or ".join(f"{q}.{column.name}" for q in quals)))


def col(name: str) -> exp.Column:
    """A bound reference to an input field."""
    return exp.Column(this=exp.Identifier(this=name, quoted=True))


def bind_scalar(tree: exp.Expression, scope: Scope, source: str | None, *, allow_aggregates: bool = False,
                clause: str = "this clause") -> exp.Expression:
    """Resolve names and check functions; returns a new tree over the scope's fields."""
    tree = tree.copy()
    _check_tree(tree, source, allow_aggregates, clause)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return col(scope.resolve(node, source).field.name)
        return node

    return tree.transform(rewrite, copy=False)


def _check_tree(tree: exp.Expression, source: str | None, allow_aggregates: bool, clause: str) -> None:
    for node in tree.walk():
        if isinstance(node, exp.Column) and isinstance(node.this, exp.Star):
            raise SqlError(Diagnostic(f"'{node.sql()}' stands for all columns and is not a value in {clause}",
                                      node_span(node), source, help="name one column"))
        if isinstance(node, (exp.Subquery, exp.Select)):
            raise SqlError(Diagnostic("subqueries in expressions are not supported", node_span(node), source,
                                      help="join with the subquery in FROM instead"))
        if isinstance(node, (WindowTVF, Descriptor)):
            raise SqlError(Diagnostic("window table functions belong in FROM", node_span(node), source))
        if isinstance(node, GroupWindow):
            raise SqlError(Diagnostic(f"{node.args['kind']}(...) as a group window belongs in GROUP BY",
                                      node_span(node), source))
        if isinstance(node, exp.Window):
            raise SqlError(Diagnostic("OVER windows are not supported here", node_span(node), source))
        if isinstance(node, exp.Filter) and not is_aggregate(node.this):
            raise SqlError(Diagnostic("FILTER (WHERE ...) applies to aggregate functions only", node_span(node),
                                      source))
        if is_aggregate(node) or (isinstance(node, exp.Anonymous) and node.name.upper() in AGGREGATES):
            if not allow_aggregates:
                raise SqlError(Diagnostic(f"aggregate functions are not allowed in {clause}", node_span(node), source))
        elif isinstance(node, exp.Func):
            check_function(node, source)


def infer_type(expr: exp.Expression, schema: Schema, source: str | None = None) -> pa.DataType:
    """The Arrow type of a bound expression over ``schema``."""
    if isinstance(expr, exp.Column):
        f = schema.find(expr.name)
        if f is not None:
            return f.type
    probe = expr.copy()
    for c in probe.find_all(exp.Column):
        c.set("table", exp.Identifier(this=_IN, quoted=True))
    query = exp.select(exp.alias_(probe, "x", quoted=True)).from_(exp.Table(this=exp.Identifier(this=_IN, quoted=True)))
    annotated = annotate_types(query, schema={_IN: schema.to_type_dict()} if len(schema) else None, dialect=Dsms)
    dtype = annotated.expressions[0].type
    try:
        result = from_sql_type(dtype) if dtype is not None else None
    except InvalidType as e:
        raise SqlError(Diagnostic(str(e), node_span(expr), source)) from None
    if result is None:
        if isinstance(expr, exp.Null) or (dtype is not None and dtype.this == exp.DataType.Type.NULL):
            return pa.null()
        raise SqlError(Diagnostic(f"cannot infer the type of '{expr.sql(dialect=Dsms)}'", node_span(expr), source,
                                  help="add a CAST(... AS type)"))
    return result


def passthrough(expr: exp.Expression) -> str | None:
    """The field name if ``expr`` is a bare column reference."""
    return expr.name if isinstance(expr, exp.Column) else None


def output_name(item: exp.Expression, index: int) -> str:
    """The name a SELECT item gets: its alias, its column name, or EXPR$n (as in Flink)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        return item.name
    return f"EXPR${index}"
