"""The binder: sqlglot query trees -> logical plans.

Syntax trees stop here. The binder resolves every name against the
catalog and the scopes of FROM, checks functions, infers types, and builds
:mod:`logical.nodes`. Aggregation is bound the classic way: a projection
computes group keys and aggregate arguments, an :class:`Aggregate` groups
them, and HAVING and the SELECT list are rewritten over its output. An
aggregate grouped by ``window_start, window_end`` of a window TVF becomes
a :class:`WindowAggregate` right away (see :mod:`analysis.window_aggregate`).

Example:
    >>> from dsms.planner import Catalog, bind_query
    >>> from dsms.planner.ddl import bind_create_source
    >>> from dsms.grammar import parse_statement
    >>> catalog = Catalog()
    >>> ddl = parse_statement("CREATE STREAM s (k INT, ts TIMESTAMP(3), "
    ...     "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')")
    >>> catalog.add(bind_create_source(ddl))
    >>> bind_query(parse_statement("SELECT k + 1 AS k1 FROM s WHERE k > 0").query, catalog).label()
    'Project(k + 1 AS k1)'
"""
from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar import Query
from ...grammar.stream_syntax import RelationToStream
from ..catalog import Catalog
from ..logical import nodes as L
from ..types import Schema, sql_name, to_sql_type, unique_name
from .aggregate import Unnamed, bind_aggregation, has_aggregate, with_null_treatment
from .context import BindContext, require_boolean
from .cql import (
    HIDDEN,
    as_relation,
    bind_cql_window,
    bind_relation_to_stream,
    cql_window_of,
    rewrite_rows_window,
    with_instant,
)
from .emit import bind_emit_clause, resolve_emit
from .expressions import Scope, bind_scalar, col, infer_type, output_name
from .from_clause import bind_relation, bind_values, common_type
from .grouping_sets import bind_grouping_sets, has_grouping_sets
from .join import bind_joins
from .match_recognize import bind_match_recognize
from .over import bind_over, finish_ranks, has_over, merge_rank_filter
from .proctime import bind_proctime_calls
from .sort import bind_order_limit
from .subquery import (
    bind_scalar_subqueries,
    bind_where_subqueries,
    has_subquery,
    split_subquery_conditions,
    without_subqueries,
)
from .time_zone import binding_zone, session_zone
from .udf import bind_python_calls
from .unnest import bind_unnest, is_unnest_join


def bind_query(query: Query | exp.Expression, catalog: Catalog, source: str | None = None) -> L.Node:
    """Bind a query body to a logical plan whose schema is the query's result."""
    tree = bind_python_calls(query.tree if isinstance(query, Query) else query, catalog, source)
    ctx = BindContext(catalog, source, bind_set=bind_set)
    with binding_zone(session_zone(catalog.settings)):
        node = bind_set(tree, ctx)
    node = finish_ranks(node, ctx)
    return resolve_emit(node, catalog.settings)


# -- set operations ------------------------------------------------------------

def bind_set(tree: exp.Expression, ctx: BindContext) -> L.Node:
    if isinstance(tree, exp.Subquery):
        return bind_set(tree.this, ctx)
    if isinstance(tree, exp.Select):
        return _bind_select(tree, ctx)
    if isinstance(tree, exp.Union):
        return _bind_union(tree, ctx)
    if isinstance(tree, exp.Values):
        return bind_values(tree, ctx)
    if isinstance(tree, RelationToStream):
        return bind_relation_to_stream(tree, ctx)
    if isinstance(tree, (exp.Intersect, exp.Except)):
        raise ctx.error(f"{type(tree).__name__.upper()} is not supported; use a join", tree)
    raise ctx.error(f"expected a query, found {type(tree).__name__}", tree)


def _bind_union(tree: exp.Union, ctx: BindContext) -> L.Node:
    if tree.args.get("distinct"):
        raise ctx.error("UNION (distinct) is not supported on streams", tree, help="use UNION ALL")
    with_ = tree.args.get("with_")
    if with_ is not None:
        _bind_ctes(with_, ctx)
    inputs: list[L.Node] = []
    for side in (tree.this, tree.expression):
        node = bind_set(side, ctx)
        inputs.extend(node.all_inputs if isinstance(node, L.Union) else [node])
    first = inputs[0].schema
    for node in inputs[1:]:
        if len(node.schema) != len(first):
            raise ctx.error(f"UNION ALL inputs have different numbers of columns ({len(first)} and {len(node.schema)})", tree)
    # Unify the column types; cast the inputs that differ.
    types = []
    for i, f in enumerate(first):
        t = f.type
        for node in inputs[1:]:
            t = common_type(t, node.schema.fields[i].type)
            if t is None:
                raise ctx.error(f"UNION ALL column {i + 1} ('{f.name}') has incompatible types "
                                f"{sql_name(f.type)} and {sql_name(node.schema.fields[i].type)}", tree)
        types.append(t)
    aligned = []
    for node in inputs:
        exprs, need = [], False
        for f, t, name in zip(node.schema, types, first.names):
            e: exp.Expression = col(f.name)
            if f.type != t and not pa.types.is_null(t):
                e, need = exp.Cast(this=e, to=to_sql_type(t)), True
            need = need or f.name != name
            exprs.append((name, e))
        aligned.append(L.Project(node, tuple(exprs), tuple(types)) if need else node)
    return L.Union(tuple(aligned))




def _bind_ctes(with_: exp.With, ctx: BindContext) -> None:
    for cte in with_.expressions:
        node = bind_set(cte.this, ctx)
        ctx.ctes[cte.alias.lower()] = (node, node.schema)


# -- SELECT -------------------------------------------------------------------------

def _bind_select(select: exp.Select, ctx: BindContext) -> L.Node:
    with_ = select.args.get("with_")
    if with_ is not None:
        _bind_ctes(with_, ctx)

    cql = cql_window_of(select)
    if cql is not None and cql.args["kind"] == "ROWS":
        return ctx.bind_set(rewrite_rows_window(select, cql, ctx), ctx)
    node, scope, slide = _bind_from_where(select, cql, ctx)

    group = select.args.get("group")
    items = _expand_stars(select.expressions, scope, ctx)
    node, scope, items, select = bind_proctime_calls(node, scope, items, select, ctx)
    having = select.args.get("having")
    node, scope, items = _bind_subqueries_and_over(node, scope, items, select, ctx)
    aggregated = group is not None or having is not None or any(has_aggregate(i) for i in items)
    if cql is not None and cql.args["kind"] == "NOW" and aggregated:
        raise ctx.error("aggregates over a [NOW] window are not supported", cql,
                        help="use [RANGE size SLIDE size] for per-instant aggregates")
    if slide is not None:
        items, group = with_instant(items, group, aggregated)
    node = _bind_aggregated(node, scope, items, group, having, ctx) if aggregated else \
        _project(node, scope, items, ctx)
    if select.args.get("distinct") is not None:
        # SELECT DISTINCT is a group aggregate on every selected column.
        node = L.Aggregate(node, tuple(node.schema.names), ())
    node = bind_emit_clause(node, select.args.get("emit"), ctx)
    node = as_relation(node, slide) if slide is not None else node
    return bind_order_limit(node, select, ctx)


def _bind_aggregated(node: L.Node, scope: Scope, items: list, group, having, ctx: BindContext) -> L.Node:
    """The SELECT list of an aggregating query: GROUP BY (or GROUPING SETS, ROLLUP, CUBE), HAVING."""
    items = [with_null_treatment(i, ctx) for i in items]
    having = with_null_treatment(having, ctx)
    if group is not None and (has_grouping_sets(group) or
                              any(i.find(exp.Grouping) for i in items + [having] if i is not None)):
        return bind_grouping_sets(node, scope, items, group, having, ctx,
                                  lambda agg, post_scope, post_items: _project(agg, post_scope, post_items, ctx,
                                                                               prebound=True))
    node, scope, items, having_cond = bind_aggregation(node, scope, items, group, having, ctx)
    if having_cond is not None:
        node = L.Filter(node, having_cond)
    return _project(node, scope, items, ctx, prebound=True)


def _bind_subqueries_and_over(node: L.Node, scope: Scope, items: list, select: exp.Select, ctx: BindContext):
    """The scalar subqueries of the SELECT list (as joins), then its OVER expressions."""
    group, having = select.args.get("group"), select.args.get("having")
    if any(has_subquery(i) for i in items):
        outer = [without_subqueries(i) for i in items]
        if group is not None or having is not None or has_over(outer) or any(has_aggregate(i) for i in outer):
            raise ctx.error("a subquery in the SELECT list of an aggregating or OVER query is not supported",
                            next(i for i in items if has_subquery(i)),
                            help="compute the subquery in an outer query over this one's result")
        node, scope, items = bind_scalar_subqueries(node, scope, items, ctx)
    if has_over(items):
        if group is not None or having is not None:
            raise ctx.error("OVER together with GROUP BY is not supported", group or having,
                            help="aggregate in a subquery, then compute the OVER expressions over its result")
        node, scope, items = bind_over(node, scope, items, select, ctx)
    return node, scope, items


def _bind_from_where(select: exp.Select, cql, ctx: BindContext) -> tuple[L.Node, Scope, int | None]:
    """The relation of FROM (a join, a CQL window, or none: one empty row) filtered by WHERE; and the slide of a
    CQL window, if any."""
    from_ = select.args.get("from_")
    where = select.args.get("where")
    slide = None
    if from_ is None:
        node: L.Node = L.Values(((),), Schema(()))
        scope = Scope(())
    elif any(is_unnest_join(j) for j in select.args.get("joins") or ()):
        node, scope = _bind_unnest_joins(from_.this, select.args["joins"], ctx)
    elif select.args.get("joins"):
        # conditions with subqueries join the joined relation; the others may become join conditions
        plain, with_subqueries = split_subquery_conditions(where.this if where is not None else None)
        node, scope, rest = bind_joins(from_.this, select.args["joins"],
                                       exp.Where(this=plain) if plain is not None else None, ctx)
        node = L.Filter(node, rest) if rest is not None else node
        where = exp.Where(this=with_subqueries) if with_subqueries is not None else None
    elif cql is not None:
        node, scope, slide = bind_cql_window(cql, ctx)
    else:
        node, scope = bind_relation(from_.this, ctx)
    match = select.args.get("match")
    if match is not None:
        if select.args.get("joins") or cql is not None:
            raise ctx.error("MATCH_RECOGNIZE applies to one relation; join in a subquery first", match)
        node, scope = bind_match_recognize(node, scope, match, ctx)
    if where is not None and has_subquery(where.this):
        node, scope, rest_where = bind_where_subqueries(node, scope, where.this, ctx)
        where = exp.Where(this=rest_where) if rest_where is not None else None
    if where is not None:
        cond = bind_scalar(where.this, scope, ctx.source, clause="WHERE")
        require_boolean(cond, node.schema, where.this, ctx)
        node = merge_rank_filter(L.Filter(node, cond), ctx, where.this)
    return node, scope, slide


def _bind_unnest_joins(first: exp.Expression, joins: list[exp.Join], ctx: BindContext) -> tuple[L.Node, Scope]:
    """FROM a [JOIN b ...] CROSS JOIN UNNEST(...) ...: the joins, then each UNNEST over their result."""
    at = next(i for i, j in enumerate(joins) if is_unnest_join(j))
    later = next((j for j in joins[at:] if not is_unnest_join(j)), None)
    if later is not None:
        raise ctx.error("a join after CROSS JOIN UNNEST is not supported", later,
                        help="join first and UNNEST last, or UNNEST in a subquery")
    if at:
        node, scope, _ = bind_joins(first, joins[:at], None, ctx)
    else:
        node, scope = bind_relation(first, ctx)
    for j in joins[at:]:
        node, scope = bind_unnest(node, scope, j, ctx)
    return node, scope


def _expand_stars(items: list[exp.Expression], scope: Scope, ctx: BindContext) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for item in items:
        if isinstance(item, exp.Star):
            out.extend(_scope_columns([c for c in scope.columns if c.qualifier != HIDDEN]))
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            qual = item.table.lower()
            cols = [c for c in scope.columns if c.qualifier == qual]
            if not cols:
                raise ctx.error(f"unknown table or alias '{item.table}'", item)
            out.extend(_scope_columns(cols))
        else:
            out.append(item)
    return out


def _scope_columns(cols) -> list[exp.Expression]:
    out = []
    for c in cols:
        ref = exp.Column(this=exp.Identifier(this=c.name, quoted=True),
                         table=exp.Identifier(this=c.qualifier, quoted=True) if c.qualifier else None)
        out.append(ref)
    return out


def _project(node: L.Node, scope: Scope, items: list[exp.Expression], ctx: BindContext, prebound: bool = False) -> L.Node:
    exprs: list[tuple[str, exp.Expression]] = []
    types: list[pa.DataType] = []
    taken: list[str] = []
    for i, item in enumerate(items):
        inner = item.this if isinstance(item, (exp.Alias, Unnamed)) else item
        bound = inner if prebound else bind_scalar(inner, scope, ctx.source, clause="SELECT")
        name = unique_name(_visible_name(item, i, scope), taken)
        taken.append(name)
        exprs.append((name, bound))
        types.append(infer_type(bound, node.schema, ctx.source))
    project = L.Project(node, tuple(exprs), tuple(types))
    return node if project.is_identity() else project


def _visible_name(item: exp.Expression, index: int, scope: Scope) -> str:
    if isinstance(item, exp.Column) and not item.table and item.args.get("this") is not None:
        return item.name
    return output_name(item, index)


