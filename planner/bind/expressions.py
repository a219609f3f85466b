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
from ..functions import AGGREGATES, check_function, lower_functions
from ..timeutil import node_span
from ..types import Field, InvalidType, Schema, from_sql_type
from .time_zone import attach_zone

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
            return _resolve_path(node, node.parts, scope, source)
        if isinstance(node, exp.Dot) and isinstance(_leftmost(node), exp.Column):
            path = _dot_path(node)
            return _resolve_path(path[0], path[0].parts + path[1:], scope, source)
        return node

    return attach_zone(tree.transform(rewrite, copy=False))


def _leftmost(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Dot):
        node = node.this
    return node


def _dot_path(node: exp.Expression) -> list:
    """``a.b.c.d.e`` (a Column of four parts under Dots): the Column, then the field identifiers."""
    fields = []
    while isinstance(node, exp.Dot):
        fields.append(node.expression)
        node = node.this
    return [node] + fields[::-1]


def _resolve_path(column: exp.Column, parts: list, scope: Scope, source: str | None) -> exp.Expression:
    """``[qualifier.]column[.field...]``: the input field, then ROW field access (``r.a.b``, as Flink)."""
    names = [p.name for p in parts]
    quals = {c.qualifier for c in scope.columns if c.qualifier}
    start = 1 if len(names) > 1 and names[0].lower() in quals and any(
        c.qualifier == names[0].lower() and c.name.lower() == names[1].lower() for c in scope.columns) else 0
    if start == 0 and len(names) > 1 and not any(c.name.lower() == names[0].lower() for c in scope.columns):
        start = 1  # an unknown qualifier: the error names it
    head = exp.Column(this=parts[start].copy(), table=parts[0].copy() if start else None)
    head.meta.update(column.meta)
    found = scope.resolve(head, source)
    tree: exp.Expression = col(found.field.name)
    dtype = found.field.type
    for ident in parts[start + 1:]:
        if not pa.types.is_struct(dtype):
            raise SqlError(Diagnostic(f"'{ident.name}' is not a field: the value before it is not a ROW",
                                      node_span(column), source,
                                      help="use x[i] for an ARRAY element and m[key] for a MAP value"))
        match = [f for f in dtype if f.name.lower() == ident.name.lower()]
        if not match:
            raise SqlError(Diagnostic(f"unknown field '{ident.name}'", node_span(column), source,
                                      help=did_you_mean(ident.name, [f.name for f in dtype])))
        tree = exp.Dot(this=tree, expression=exp.to_identifier(match[0].name, quoted=True))
        dtype = match[0].type
    return tree


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
    # Some calls' types depend on their arguments' (FLOOR(date TO unit) is a DATE).
    dtype = lower_functions(annotated.expressions[0].this).type
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
