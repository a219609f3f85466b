"""Binding FROM: tables, views, CTEs, subqueries, VALUES and window TVFs."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar import Name, Span
from ...grammar.dialect import GroupWindow
from ...grammar.dialect import WindowTVF as WindowTVFExpr
from ..catalog import MaterializedViewDef, SourceDef, ViewDef
from ..literal_cells import plain_cast_type
from ..logical import nodes as L
from ..logical.late import LateScan
from ..timeutil import interval_micros, node_span
from ..types import Field, Schema, is_numeric
from ..windows import WINDOW_KINDS, WindowKind, window_kind
from .context import BindContext
from .expressions import Scope, ScopeColumn, bind_scalar, infer_type
from .time_zone import in_session_zone
from .udf import bind_python_calls


def bind_relation(rel: exp.Expression, ctx: BindContext) -> tuple[L.Node, Scope]:
    alias = rel.alias if rel.args.get("alias") is not None else None
    if isinstance(rel, exp.Table):
        return _bind_table(rel, alias, ctx)
    if isinstance(rel, exp.Subquery):
        node = ctx.bind_set(rel.this, ctx)
        return node, Scope.of(node.schema, alias)
    if isinstance(rel, exp.Values):
        tas = rel.args.get("alias")
        names = [c.name for c in tas.columns] if tas is not None and tas.columns else None
        node = bind_values(rel, ctx, names)
        return node, Scope.of(node.schema, alias)
    raise ctx.error(f"{type(rel).__name__} is not supported in FROM", rel)


def _bind_table(rel: exp.Table, alias: str | None, ctx: BindContext) -> tuple[L.Node, Scope]:
    """A name in FROM (a source, view or CTE), or a table function (``TABLE(TUMBLE(...))``, ``LATE(s)``)."""
    inner = rel.this
    if isinstance(inner, exp.Anonymous) and inner.name.upper() == "TABLE" and inner.expressions:
        inner = inner.expressions[0]
    if isinstance(inner, (WindowTVFExpr, GroupWindow, exp.Func)):
        return _bind_table_function(inner, alias, ctx)
    if rel.args.get("db") is not None:
        raise ctx.error("qualified names (db.table) are not supported", rel)
    name = Name(rel.name, node_span(rel.this) or Span(0, 0))
    node = bind_named(name, ctx)
    return node, Scope.of(node.schema, alias or rel.name)


def _bind_table_function(inner: exp.Expression, alias: str | None, ctx: BindContext) -> tuple[L.Node, Scope]:
    """A window TVF (either spelling) or ``LATE(s)`` in FROM."""
    if isinstance(inner, WindowTVFExpr):
        node, scope = bind_window_tvf(inner, ctx)
        return node, scope.requalify(alias) if alias else scope
    if isinstance(inner, GroupWindow):
        node, scope = bind_window_tvf(tvf_from_function(inner, ctx), ctx)
        return node, scope.requalify(alias) if alias else scope
    if isinstance(inner, exp.Anonymous) and inner.name.upper() == "LATE":
        node = bind_late(inner, ctx)
        return node, Scope.of(node.schema, alias or "late")
    kinds = [k.name for k in WINDOW_KINDS.values()]
    raise ctx.error(f"unknown table function '{inner.sql_name() if not isinstance(inner, exp.Anonymous) else inner.name}'",
                    inner, help=f"window functions are {', '.join(kinds[:-1])} and {kinds[-1]}")


def bind_late(call: exp.Anonymous, ctx: BindContext) -> LateScan:
    """``LATE(s)``: the events source ``s`` drops as late, as a stream."""
    args = call.expressions
    if len(args) != 1 or not isinstance(args[0], exp.Column) or args[0].table:
        raise ctx.error("LATE takes the name of a stream: LATE(clicks)", call)
    name = Name(args[0].name, node_span(args[0]) or Span(0, 0))
    obj = ctx.catalog.require(name, ctx.source, kinds=("stream", "table"))
    if obj.watermark is None:
        raise ctx.error(f"'{obj.name}' has no WATERMARK, so none of its events is late", call,
                        help="declare WATERMARK FOR <time column> AS ... in the source")
    return LateScan(obj)


def bind_named(name: Name, ctx: BindContext) -> L.Node:
    cte = ctx.ctes.get(name.value.lower())
    if cte is not None:
        return cte[0]
    obj = ctx.catalog.require(name, ctx.source)
    if isinstance(obj, SourceDef):
        fmt = obj.descriptor.format(obj.options.get("format") or obj.options.get("value.format"))
        if not (obj.descriptor.source or obj.descriptor.lookup) or (fmt is not None and not fmt.source):
            what = f"connector '{obj.connector}'" if fmt is None or fmt.source else f"format '{fmt.name}'"
            raise ctx.error(f"{obj.kind} '{obj.name}' cannot be read: its {what} is only written",
                            span=name.span, help=f"INSERT INTO {obj.name} SELECT ... writes to it")
        return L.Scan(obj)
    if isinstance(obj, (ViewDef, MaterializedViewDef)):
        if obj.name.lower() in ctx.views:
            raise ctx.error(f"view '{obj.name}' refers to itself", span=name.span)
        # A view is expanded where it is used; its own text has its own positions.
        inner = ctx.nested(ctx.views + (obj.name.lower(),))
        return inner.bind_set(bind_python_calls(obj.query, ctx.catalog), inner)
    raise ctx.error(f"'{name.value}' cannot be read", span=name.span)


def tvf_from_function(fn: GroupWindow, ctx: BindContext) -> WindowTVFExpr:
    """RisingWave's spelling in FROM: TUMBLE(t, ts, INTERVAL ...) means TUMBLE(TABLE t, DESCRIPTOR(ts), ...)."""
    args = fn.expressions
    if len(args) < 3 or not isinstance(args[0], exp.Column) or not isinstance(args[1], exp.Column):
        raise ctx.error(f"{fn.args['kind']} in FROM takes TABLE name, DESCRIPTOR(time column) and intervals", fn,
                        help=f"e.g. TABLE({fn.args['kind']}(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE))")
    table = exp.Table(this=args[0].this)
    return WindowTVFExpr(kind=fn.args["kind"], this=table, descriptor=args[1], params=list(args[2:]), partition_by=[])


def bind_window_tvf(tvf: WindowTVFExpr, ctx: BindContext) -> tuple[L.Node, Scope]:
    node, scope = bind_relation(tvf.this, ctx)
    return window_over(node, scope, window_kind(tvf.kind), tvf.args["descriptor"], list(tvf.args["params"]),
                        list(tvf.args.get("partition_by") or []), tvf, ctx)


def window_over(node: L.Node, scope: Scope, kind: WindowKind, desc: exp.Column, params: list[exp.Expression],
                 partition_by: list[exp.Expression], at: exp.Expression, ctx: BindContext) -> tuple[L.Node, Scope]:
    """Put a window TVF of ``kind`` over ``node``; the scope gains the window columns."""
    time_col = scope.resolve(desc, ctx.source).field
    if not (time_col.rowtime or time_col.proctime):
        raise ctx.error(f"the time column '{desc.name}' of {kind} is not an event-time attribute (nor a processing-time one)", desc,
                        help="declare it with WATERMARK FOR in the source (event time) or as PROCTIME() "
                             "(processing time), or use a window's window_time")
    values = _window_parameters(kind, params, at, ctx)
    clash = [n for n in L.WINDOW_COLUMNS if node.schema.find(n) is not None]
    if clash:
        raise ctx.error(f"the input of {kind.name} already has a column named {clash[0]}", at,
                        help="rename it in the inner query, e.g. window_time AS rowtime")
    partition = _window_partition(kind, partition_by, scope, ctx)
    offset_us = values.pop("offset", 0)
    spec = kind.spec(time_col.name, offset=offset_us, partition_by=partition, **values)
    if pa.types.is_timestamp(time_col.type) and time_col.type.tz:
        spec = in_session_zone(spec, ctx.catalog.settings, lambda m, h: ctx.error(m, desc, help=h))
    out = L.WindowTVF(node, spec, proctime=time_col.proctime)
    # The input's columns keep their qualifiers; the window columns are unqualified.
    cols = [ScopeColumn(c.qualifier, c.name, out.schema.find(c.field.name)) for c in scope.columns]
    cols += [ScopeColumn(None, n, out.schema.find(n)) for n in L.WINDOW_COLUMNS]
    return out, Scope(tuple(cols))


def _window_parameters(kind: WindowKind, params: list[exp.Expression], at: exp.Expression,
                       ctx: BindContext) -> dict[str, int]:
    """The window's intervals (microseconds) by parameter name, checked by the kind; ``offset`` when given."""
    names, offset = kind.params, " [, offset]" if kind.takes_offset else ""
    if not len(names) <= len(params) <= len(names) + kind.takes_offset:
        raise ctx.error(f"{kind.name} takes {', '.join(names)}{offset} after the time column", at)
    values = {n: interval_micros(p, ctx.source) for n, p in zip(names + ("offset",), params)}
    for n, v in values.items():
        if n != "offset" and v <= 0:
            raise ctx.error(f"the {n} of {kind.name} must be positive", at)
    wrong = kind.check({n: v for n, v in values.items() if n != "offset"})
    if wrong:
        param, message = wrong
        raise ctx.error(message, params[names.index(param)] if param in names else at)
    return values


def _window_partition(kind: WindowKind, partition_by: list[exp.Expression], scope: Scope,
                      ctx: BindContext) -> tuple[str, ...]:
    """The PARTITION BY columns of a window TVF (only the kinds that take them, e.g. SESSION)."""
    partition = tuple(scope.resolve(c, ctx.source).field.name for c in partition_by)
    if partition and not kind.partitioned:
        kinds = " and ".join(k.name for k in WINDOW_KINDS.values() if k.partitioned)
        raise ctx.error(f"PARTITION BY is only allowed for {kinds} windows", partition_by[0])
    return partition


def common_type(a: pa.DataType, b: pa.DataType) -> pa.DataType | None:
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


def bind_values(tree: exp.Values, ctx: BindContext, names: list[str] | None = None) -> L.Node:
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
            t2 = common_type(t, plain_cast_type(r[i]) or infer_type(r[i], empty, ctx.source))
            if t2 is None:
                raise ctx.error(f"VALUES column {i + 1} mixes incompatible types", tree)
            t = t2
        types.append(pa.string() if pa.types.is_null(t) else t)
    names = names or [f"column{i + 1}" for i in range(width)]
    return L.Values(tuple(bound), Schema(tuple(Field(n, t) for n, t in zip(names, types))))
