"""The binder: sqlglot query trees -> logical plans.

Syntax trees stop here. The binder resolves every name against the
catalog and the scopes of FROM, checks functions, infers types, and builds
:mod:`logical` nodes. Aggregation is bound the classic way: a projection
computes group keys and aggregate arguments, an :class:`Aggregate` groups
them, and HAVING and the SELECT list are rewritten over its output. An
aggregate grouped by ``window_start, window_end`` of a window TVF becomes
a :class:`WindowAggregate` right away (see :mod:`window_aggregate`).

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

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from ..grammar import Diagnostic, Name, Query, Span, SqlError
from ..grammar.dialect import GroupWindow
from ..grammar.dialect import WindowTVF as WindowTVFExpr
from . import logical as L
from .catalog import Catalog, MaterializedViewDef, SourceDef, ViewDef
from .expressions import Scope, ScopeColumn, bind_scalar, col, infer_type, output_name, passthrough
from .timeutil import interval_micros, node_span
from .types import Field, Schema, is_numeric, sql_name, sum_type, to_sql_type, unique_name
from .window_aggregate import as_window_aggregate


@dataclass
class _Context:
    catalog: Catalog
    source: str | None
    ctes: dict[str, tuple[L.Node, Schema]] = field(default_factory=dict)
    views: tuple[str, ...] = ()  # views being expanded, to catch cycles

    def error(self, message: str, node: exp.Expression | None = None, help: str | None = None,
              span: Span | None = None) -> SqlError:
        return SqlError(Diagnostic(message, span or (node_span(node) if node is not None else None), self.source, help=help))


def bind_query(query: Query | exp.Expression, catalog: Catalog, source: str | None = None) -> L.Node:
    """Bind a query body to a logical plan whose schema is the query's result."""
    tree = query.tree if isinstance(query, Query) else query
    return _bind_set(tree, _Context(catalog, source))


# -- set operations ------------------------------------------------------------

def _bind_set(tree: exp.Expression, ctx: _Context) -> L.Node:
    if isinstance(tree, exp.Subquery):
        return _bind_set(tree.this, ctx)
    if isinstance(tree, exp.Select):
        return _bind_select(tree, ctx)
    if isinstance(tree, exp.Union):
        return _bind_union(tree, ctx)
    if isinstance(tree, exp.Values):
        return _bind_values(tree, ctx)
    if isinstance(tree, (exp.Intersect, exp.Except)):
        raise ctx.error(f"{type(tree).__name__.upper()} is not supported; use a join", tree)
    raise ctx.error(f"expected a query, found {type(tree).__name__}", tree)


def _bind_union(tree: exp.Union, ctx: _Context) -> L.Node:
    if tree.args.get("distinct"):
        raise ctx.error("UNION (distinct) is not supported on streams", tree, help="use UNION ALL")
    with_ = tree.args.get("with_")
    if with_ is not None:
        _bind_ctes(with_, ctx)
    inputs: list[L.Node] = []
    for side in (tree.this, tree.expression):
        node = _bind_set(side, ctx)
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
            t = _common_type(t, node.schema.fields[i].type)
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


def _common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
    if a == b or pa.types.is_null(b):
        return a
    if pa.types.is_null(a):
        return b
    if is_numeric(a) and is_numeric(b):
        if pa.types.is_floating(a) or pa.types.is_floating(b):
            return pa.float64()
        if pa.types.is_decimal(a) or pa.types.is_decimal(b):
            return pa.float64()
        return a if a.bit_width >= b.bit_width else b
    return None


def _bind_values(tree: exp.Values, ctx: _Context, names: list[str] | None = None) -> L.Node:
    rows = [tuple(t.expressions) if isinstance(t, exp.Tuple) else (t,) for t in tree.expressions]
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise ctx.error("VALUES rows have different numbers of columns", tree)
    empty = Schema(())
    bound = [tuple(bind_scalar(v, Scope(()), ctx.source, clause="VALUES") for v in r) for r in rows]
    types = []
    for i in range(width):
        t: pa.DataType = pa.null()
        for r in bound:
            t2 = _common_type(t, infer_type(r[i], empty, ctx.source))
            if t2 is None:
                raise ctx.error(f"VALUES column {i + 1} mixes incompatible types", tree)
            t = t2
        types.append(pa.string() if pa.types.is_null(t) else t)
    names = names or [f"column{i + 1}" for i in range(width)]
    return L.Values(tuple(bound), Schema(tuple(Field(n, t) for n, t in zip(names, types))))


def _bind_ctes(with_: exp.With, ctx: _Context) -> None:
    for cte in with_.expressions:
        node = _bind_set(cte.this, ctx)
        ctx.ctes[cte.alias.lower()] = (node, node.schema)


# -- SELECT -------------------------------------------------------------------------

def _bind_select(select: exp.Select, ctx: _Context) -> L.Node:
    with_ = select.args.get("with_")
    if with_ is not None:
        _bind_ctes(with_, ctx)
    if select.args.get("joins"):
        raise ctx.error("JOIN is not supported yet", select.args["joins"][0])
    for clause, what in (("order", "ORDER BY"), ("limit", "LIMIT")):
        if select.args.get(clause) is not None:
            raise ctx.error(f"{what} is not supported on a continuous query", select.args[clause],
                            help="for Top-N use ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)")

    from_ = select.args.get("from_")
    if from_ is None:
        node: L.Node = L.Values(((),), Schema(()))
        scope = Scope(())
    else:
        node, scope = _bind_relation(from_.this, ctx)

    where = select.args.get("where")
    if where is not None:
        cond = bind_scalar(where.this, scope, ctx.source, clause="WHERE")
        _require_boolean(cond, node.schema, where.this, ctx)
        node = L.Filter(node, cond)

    group = select.args.get("group")
    items = _expand_stars(select.expressions, scope, ctx)
    having = select.args.get("having")
    aggregated = group is not None or having is not None or any(_has_aggregate(i) for i in items)
    if aggregated:
        node, scope, items, having_cond = _bind_aggregation(node, scope, items, group, having, ctx)
        if having_cond is not None:
            node = L.Filter(node, having_cond)
        node = _project(node, scope, items, ctx, prebound=True)
    else:
        node = _project(node, scope, items, ctx)
    if select.args.get("distinct") is not None:
        # SELECT DISTINCT is a group aggregate on every selected column.
        node = L.Aggregate(node, tuple(node.schema.names), ())
    return node


def _require_boolean(cond: exp.Expression, schema: Schema, tree: exp.Expression, ctx: _Context) -> None:
    t = infer_type(cond, schema, ctx.source)
    if not (pa.types.is_boolean(t) or pa.types.is_null(t)):
        raise ctx.error(f"the condition must be BOOLEAN, not {sql_name(t)}", tree)


def _expand_stars(items: list[exp.Expression], scope: Scope, ctx: _Context) -> list[exp.Expression]:
    out: list[exp.Expression] = []
    for item in items:
        if isinstance(item, exp.Star):
            out.extend(_scope_columns(scope.columns))
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


def _project(node: L.Node, scope: Scope, items: list[exp.Expression], ctx: _Context, prebound: bool = False) -> L.Node:
    exprs: list[tuple[str, exp.Expression]] = []
    types: list[pa.DataType] = []
    taken: list[str] = []
    for i, item in enumerate(items):
        inner = item.this if isinstance(item, (exp.Alias, _Unnamed)) else item
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


# -- FROM -----------------------------------------------------------------------------

def _bind_relation(rel: exp.Expression, ctx: _Context) -> tuple[L.Node, Scope]:
    alias = rel.alias if rel.args.get("alias") is not None else None
    if isinstance(rel, exp.Table):
        inner = rel.this
        if isinstance(inner, exp.Anonymous) and inner.name.upper() == "TABLE" and inner.expressions:
            inner = inner.expressions[0]
        if isinstance(inner, WindowTVFExpr):
            node, scope = _bind_window_tvf(inner, ctx)
            return node, scope.requalify(alias) if alias else scope
        if isinstance(inner, GroupWindow):
            node, scope = _bind_window_tvf(_tvf_from_function(inner, ctx), ctx)
            return node, scope.requalify(alias) if alias else scope
        if isinstance(inner, exp.Func):
            raise ctx.error(f"unknown table function '{inner.sql_name() if not isinstance(inner, exp.Anonymous) else inner.name}'",
                            inner, help="window functions are TUMBLE, HOP, SESSION and CUMULATE")
        if rel.args.get("db") is not None:
            raise ctx.error("qualified names (db.table) are not supported", rel)
        name = Name(rel.name, node_span(rel.this) or Span(0, 0))
        node = _bind_named(name, ctx)
        return node, Scope.of(node.schema, alias or rel.name)
    if isinstance(rel, exp.Subquery):
        node = _bind_set(rel.this, ctx)
        return node, Scope.of(node.schema, alias)
    if isinstance(rel, exp.Values):
        tas = rel.args.get("alias")
        names = [c.name for c in tas.columns] if tas is not None and tas.columns else None
        node = _bind_values(rel, ctx, names)
        return node, Scope.of(node.schema, alias)
    raise ctx.error(f"{type(rel).__name__} is not supported in FROM", rel)


def _bind_named(name: Name, ctx: _Context) -> L.Node:
    cte = ctx.ctes.get(name.value.lower())
    if cte is not None:
        return cte[0]
    obj = ctx.catalog.require(name, ctx.source)
    if isinstance(obj, SourceDef):
        return L.Scan(obj)
    if isinstance(obj, (ViewDef, MaterializedViewDef)):
        if obj.name.lower() in ctx.views:
            raise ctx.error(f"view '{obj.name}' refers to itself", span=name.span)
        # A view is expanded where it is used; its own text has its own positions.
        inner = _Context(ctx.catalog, None, {}, ctx.views + (obj.name.lower(),))
        return _bind_set(obj.query, inner)
    raise ctx.error(f"'{name.value}' cannot be read", span=name.span)


def _tvf_from_function(fn: GroupWindow, ctx: _Context) -> WindowTVFExpr:
    """RisingWave's spelling in FROM: TUMBLE(t, ts, INTERVAL ...) means TUMBLE(TABLE t, DESCRIPTOR(ts), ...)."""
    args = fn.expressions
    if len(args) < 3 or not isinstance(args[0], exp.Column) or not isinstance(args[1], exp.Column):
        raise ctx.error(f"{fn.args['kind']} in FROM takes TABLE name, DESCRIPTOR(time column) and intervals", fn,
                        help=f"e.g. TABLE({fn.args['kind']}(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE))")
    table = exp.Table(this=args[0].this)
    return WindowTVFExpr(kind=fn.args["kind"], this=table, descriptor=args[1], params=list(args[2:]), partition_by=[])


_TVF_PARAMS = {
    "TUMBLE": ("size",), "HOP": ("slide", "size"), "CUMULATE": ("step", "size"), "SESSION": ("gap",),
}


def _bind_window_tvf(tvf: WindowTVFExpr, ctx: _Context) -> tuple[L.Node, Scope]:
    node, scope = _bind_relation(tvf.this, ctx)
    return _window_over(node, scope, tvf.kind, tvf.args["descriptor"], list(tvf.args["params"]),
                        list(tvf.args.get("partition_by") or []), tvf, ctx)


def _window_over(node: L.Node, scope: Scope, kind: str, desc: exp.Column, params: list[exp.Expression],
                 partition_by: list[exp.Expression], at: exp.Expression, ctx: _Context) -> tuple[L.Node, Scope]:
    """Put a window TVF of ``kind`` over ``node``; the scope gains the window columns."""
    time_col = scope.resolve(desc, ctx.source).field
    if not time_col.rowtime:
        raise ctx.error(f"the time column '{desc.name}' of {kind} is not an event-time attribute", desc,
                        help="declare it with WATERMARK FOR in the source, or use a window's window_time")
    names = _TVF_PARAMS[kind]
    allowed = len(names) + (0 if kind == "SESSION" else 1)
    if not len(names) <= len(params) <= allowed:
        raise ctx.error(f"{kind} takes {', '.join(names)}{'' if kind == 'SESSION' else ' [, offset]'} after the time column", at)
    values = {n: interval_micros(p, ctx.source) for n, p in zip(names + ("offset",), params)}
    for n, v in values.items():
        if n != "offset" and v <= 0:
            raise ctx.error(f"the {n} of {kind} must be positive", at)
    if kind == "HOP" and values["size"] % values["slide"] != 0:
        raise ctx.error("the size of a HOP window must be a whole multiple of its slide", at)
    if kind == "CUMULATE" and values["size"] % values["step"] != 0:
        raise ctx.error("the size of a CUMULATE window must be a whole multiple of its step", at)
    clash = [n for n in L.WINDOW_COLUMNS if node.schema.find(n) is not None]
    if clash:
        raise ctx.error(f"the input of {kind} already has a column named {clash[0]}", at,
                        help="rename it in the inner query, e.g. window_time AS rowtime")
    partition = tuple(scope.resolve(c, ctx.source).field.name for c in partition_by)
    if partition and kind != "SESSION":
        raise ctx.error("PARTITION BY is only allowed for SESSION windows", at)
    if kind == "SESSION":
        raise ctx.error("SESSION windows are not supported yet", at)
    spec = L.WindowSpec(kind=kind, time_col=time_col.name, size=values.get("size", 0), slide=values.get("slide", 0),
                        step=values.get("step", 0), gap=values.get("gap", 0), offset=values.get("offset", 0),
                        partition_by=partition)
    out = L.WindowTVF(node, spec)
    # The input's columns keep their qualifiers; the window columns are unqualified.
    cols = [ScopeColumn(c.qualifier, c.name, out.schema.find(c.field.name)) for c in scope.columns]
    cols += [ScopeColumn(None, n, out.schema.find(n)) for n in L.WINDOW_COLUMNS]
    return out, Scope(tuple(cols))


# -- aggregation --------------------------------------------------------------------

_GROUP_WINDOW_HELPERS = {"START": "window_start", "END": "window_end", "ROWTIME": "window_time"}


def _has_aggregate(tree: exp.Expression) -> bool:
    return any(isinstance(n, exp.AggFunc) for n in tree.walk())


def _bind_aggregation(node: L.Node, scope: Scope, items, group: exp.Group | None, having: exp.Having | None,
                      ctx: _Context):
    group_items = list(group.expressions) if group is not None else []

    # GROUP BY TUMBLE(ts, size): a window TVF under the aggregate, grouped by its bounds.
    windows = [g for g in group_items if isinstance(g, GroupWindow)]
    if len(windows) > 1:
        raise ctx.error("only one group window is allowed in GROUP BY", windows[1])
    if windows:
        gw = windows[0]
        group_items = [g for g in group_items if g is not gw]
        node, scope = _apply_group_window(node, scope, gw, ctx)
        group_items = [exp.column("window_start"), exp.column("window_end")] + group_items
        items = [_replace_window_helpers(i, gw, ctx) for i in items]
        having = _replace_window_helpers(having, gw, ctx) if having is not None else None

    # Group keys may name SELECT aliases or positions, as in DuckDB.
    aliases = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    keys_bound: list[exp.Expression] = []
    for g in group_items:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.name)
            if not 1 <= pos <= len(items):
                raise ctx.error(f"GROUP BY position {pos} is out of range", g)
            target = items[pos - 1]
            g = target.this if isinstance(target, exp.Alias) else target
        elif isinstance(g, exp.Column) and not g.table and g.name.lower() in aliases and \
                not any(c.name.lower() == g.name.lower() for c in scope.columns):
            g = aliases[g.name.lower()]
        b = bind_scalar(g, scope, ctx.source, clause="GROUP BY")
        if b not in keys_bound:
            keys_bound.append(b)

    # Bind the SELECT items and HAVING over the input scope, aggregates allowed.
    bound_items = [_alias_like(i, bind_scalar(i.this if isinstance(i, exp.Alias) else i, scope, ctx.source,
                                              allow_aggregates=True, clause="SELECT")) for i in items]
    bound_having = bind_scalar(having.this, scope, ctx.source, allow_aggregates=True, clause="HAVING") if having else None

    # The projection under the aggregate: keys, then aggregate arguments.
    pre: list[tuple[str, exp.Expression]] = []
    taken = [c.field.name for c in scope.columns]
    key_names: list[str] = []
    for i, k in enumerate(keys_bound):
        name = passthrough(k) or unique_name(f"key{i}", taken + [n for n, _ in pre])
        pre.append((name, k))
        key_names.append(name)

    agg_nodes: list[exp.AggFunc] = []
    for tree in bound_items + ([bound_having] if bound_having is not None else []):
        for n in tree.walk():
            if isinstance(n, exp.AggFunc) and n not in agg_nodes:
                if any(isinstance(a, exp.AggFunc) for a in n.walk() if a is not n):
                    raise ctx.error("aggregate functions cannot be nested", n)
                agg_nodes.append(n)

    calls: list[L.AggCall] = []
    out_names = list(key_names)
    for j, a in enumerate(agg_nodes):
        func, arg, distinct = _agg_parts(a, ctx)
        arg_name = None
        if arg is not None:
            existing = next((n for n, e in pre if e == arg), None)
            arg_name = existing or passthrough(arg) or unique_name(f"arg{j}", taken + [n for n, _ in pre])
            if existing is None:
                if any(n == arg_name for n, _ in pre):
                    arg_name = unique_name(arg_name, [n for n, _ in pre] + taken)
                pre.append((arg_name, arg))
        name = unique_name(f"agg{j}", out_names + taken)
        out_names.append(name)
        arg_type = infer_type(arg, node.schema, ctx.source) if arg is not None else None
        calls.append(L.AggCall(func, arg_name, distinct, name, _agg_type(func, arg_type, a, ctx)))

    pre_types = tuple(infer_type(e, node.schema, ctx.source) for _, e in pre)
    pre_node = L.Project(node, tuple(pre), pre_types)
    if pre_node.is_identity():
        pre_node = node
    agg = as_window_aggregate(L.Aggregate(pre_node, tuple(key_names), tuple(calls)))

    # Rewrite SELECT and HAVING over the aggregate's output.
    key_map = list(zip(keys_bound, key_names))
    agg_map = [(a, c.name) for a, c in zip(agg_nodes, calls)]
    post_items = [_over_aggregate(b, key_map, agg_map, ctx, at=i) for i, b in zip(items, bound_items)]
    post_having = _over_aggregate(bound_having, key_map, agg_map, ctx, at=having) if bound_having is not None else None
    if post_having is not None:
        _require_boolean(post_having, agg.schema, having.this, ctx)
    post_scope = Scope.of(agg.schema, None)
    return agg, post_scope, post_items, post_having


def _alias_like(original: exp.Expression, bound: exp.Expression) -> exp.Expression:
    """Keep the output name of ``original`` on its bound form."""
    if isinstance(original, exp.Alias):
        return exp.Alias(this=bound, alias=original.args["alias"].copy())
    if isinstance(original, exp.Column):
        return exp.Alias(this=bound, alias=exp.Identifier(this=original.name, quoted=True))
    return _Unnamed(this=bound)


class _Unnamed(exp.Expression):
    """A bound SELECT item that had no alias (it is named EXPR$n)."""

    arg_types = {"this": True}


def _over_aggregate(tree, key_map, agg_map, ctx: _Context, at: exp.Expression | None = None):
    """Replace group keys and aggregates with references to the aggregate's output."""
    if isinstance(tree, (exp.Alias, _Unnamed)):
        out = tree.copy()
        out.set("this", _over_aggregate(tree.this, key_map, agg_map, ctx, at))
        return out

    def replace(node: exp.Expression) -> exp.Expression:
        for k, name in key_map:
            if node == k:
                return col(name)
        if isinstance(node, exp.AggFunc):
            for a, name in agg_map:
                if node == a:
                    return col(name)
        copy = node.copy()
        for key, value in list(copy.args.items()):
            if isinstance(value, exp.Expression):
                copy.set(key, replace(value))
            elif isinstance(value, list):
                copy.set(key, [replace(v) if isinstance(v, exp.Expression) else v for v in value])
        return copy

    out = replace(tree)
    valid = {n for _, n in key_map} | {n for _, n in agg_map}
    for c in out.find_all(exp.Column):
        if c.name not in valid:
            raise ctx.error(f"column '{c.name}' must appear in GROUP BY or be used in an aggregate function",
                            _find_column(at, c.name) if at is not None else tree)
    return out


def _find_column(tree: exp.Expression, name: str) -> exp.Expression:
    """The first reference to column ``name`` in an unbound tree, for an error's position."""
    return next((c for c in tree.find_all(exp.Column) if c.name.lower() == name.lower()), tree)


def _agg_parts(a: exp.AggFunc, ctx: _Context) -> tuple[str, exp.Expression | None, bool]:
    funcs = {exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
    func = next((f for cls, f in funcs.items() if type(a) is cls), None)
    if func is None:
        raise ctx.error(f"aggregate {a.sql_name()} is not supported", a, help="use COUNT, SUM, AVG, MIN or MAX")
    arg = a.this
    distinct = False
    if isinstance(arg, exp.Distinct):
        if len(arg.expressions) != 1:
            raise ctx.error("DISTINCT aggregates take one argument", a)
        distinct, arg = True, arg.expressions[0]
    if func == "count" and (arg is None or isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not distinct)):
        return "count", None, False
    if arg is None:
        raise ctx.error(f"{func.upper()} needs an argument", a)
    if distinct and func in ("min", "max"):
        distinct = False  # MIN/MAX of distinct values is the same.
    if distinct and func != "count":
        raise ctx.error(f"{func.upper()}(DISTINCT ...) is not supported", a, help="COUNT(DISTINCT x) is")
    return func, arg, distinct


def _agg_type(func: str, arg_type: pa.DataType | None, node: exp.Expression, ctx: _Context) -> pa.DataType:
    if func == "count":
        return pa.int64()
    assert arg_type is not None
    if func in ("sum", "avg") and not is_numeric(arg_type):
        raise ctx.error(f"{func.upper()} needs a numeric argument, not {arg_type}", node)
    if func == "sum":
        return sum_type(arg_type)
    if func == "avg":
        # As in Flink, the average of an integer column is an integer (truncated).
        if pa.types.is_integer(arg_type):
            return arg_type
        if pa.types.is_decimal(arg_type):
            return pa.decimal128(38, max(arg_type.scale, 6))
        return pa.float64()
    return arg_type


def _apply_group_window(node: L.Node, scope: Scope, gw: GroupWindow, ctx: _Context) -> tuple[L.Node, Scope]:
    kind = gw.args["kind"]
    args = gw.expressions
    if not args or not isinstance(args[0], exp.Column):
        raise ctx.error(f"{kind}(time column, ...) needs a time column first", gw)
    return _window_over(node, scope, kind, args[0], list(args[1:]), [], gw, ctx)


def _replace_window_helpers(tree: exp.Expression, gw: GroupWindow, ctx: _Context) -> exp.Expression:
    kind = gw.args["kind"]

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous):
            name = node.name.upper()
            for suffix, column in _GROUP_WINDOW_HELPERS.items():
                if name.startswith(kind + "_") and name == f"{kind}_{suffix}":
                    return exp.column(column)
                if any(name == f"{k}_{suffix}" for k in ("TUMBLE", "HOP", "SESSION", "CUMULATE")):
                    raise ctx.error(f"{name} does not match the group window {kind}(...)", node)
        return node

    return tree.transform(fix)
