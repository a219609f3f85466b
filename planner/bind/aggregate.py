"""Binding aggregation: GROUP BY (with group windows), aggregates, HAVING.

A projection under the aggregate computes the group keys and aggregate
arguments; an :class:`~logical.Aggregate` groups them (a
:class:`~logical.WindowAggregate` when the keys are a window TVF's
bounds); the SELECT list and HAVING are rewritten over its output.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar.dialect import GroupWindow
from ..aggregate_kinds import (
    COUNT,
    NAMES,
    NOT_YET,
    NOT_YET_HELP,
    AggregateKind,
    AggregateTypeError,
    is_aggregate,
    kind_of,
    written_name,
)
from ..analysis.window_aggregate import as_window_aggregate
from ..logical import nodes as L
from ..types import unique_name
from ..windows import WINDOW_KINDS, window_kind
from .context import BindContext, require_boolean
from .expressions import Scope, bind_scalar, col, infer_type, passthrough
from .from_clause import window_over

_GROUP_WINDOW_HELPERS = {"START": "window_start", "END": "window_end", "ROWTIME": "window_time"}


def with_null_treatment(tree: exp.Expression | None, ctx: BindContext) -> exp.Expression | None:
    """``agg(x IGNORE NULLS)`` and ``agg(x RESPECT NULLS)`` (parsed as a wrapper around the call): the call of
    the kind that treats NULLs so (ARRAY_AGG takes both; the aggregates that skip NULLs take IGNORE NULLS)."""
    treatments = (exp.IgnoreNulls, exp.RespectNulls)

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, treatments):  # agg(x) IGNORE NULLS
            call, wrapper = node.this, node
        elif isinstance(node.this, treatments) and kind_of(node) is not None:  # agg(x IGNORE NULLS) FILTER (...)
            call, wrapper = node.copy(), node.this
            call.set("this", wrapper.this.copy())
        else:
            return node
        ignore = isinstance(wrapper, exp.IgnoreNulls)
        kind = kind_of(call) if isinstance(call, exp.Expression) else None
        if kind is None:
            raise ctx.error(f"{'IGNORE' if ignore else 'RESPECT'} NULLS applies to an aggregate function only",
                            wrapper)
        try:
            treated = kind.with_null_treatment(ignore)
        except AggregateTypeError as e:
            raise ctx.error(str(e), wrapper) from None
        if treated is kind:
            return call
        (cls,) = treated.sql_classes
        return cls(**{k: v for k, v in call.args.items()})

    return tree.transform(fix) if tree is not None else None


def has_aggregate(tree: exp.Expression) -> bool:
    return any(is_aggregate(n) for n in tree.walk())


def bind_aggregation(node: L.Node, scope: Scope, items, group: exp.Group | None, having: exp.Having | None,
                      ctx: BindContext):
    group_items = list(group.expressions) if group is not None else []
    node, scope, group_items, items, having = _group_window(node, scope, group_items, items, having, ctx)
    keys_bound = _bind_keys(group_items, items, scope, ctx)

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

    agg_nodes = _aggregate_calls(bound_items + ([bound_having] if bound_having is not None else []), ctx)
    calls = _bind_calls(agg_nodes, node, pre, taken, key_names, ctx)

    if not pre:  # COUNT(*) alone: the rows still need a column to be counted by
        pre.append((unique_name("__unit", taken), exp.Literal.number(1)))
    pre_types = tuple(infer_type(e, node.schema, ctx.source) for _, e in pre)
    pre_node = L.Project(node, tuple(pre), pre_types)
    if pre_node.is_identity():
        pre_node = node
    agg = as_window_aggregate(L.Aggregate(pre_node, tuple(key_names), tuple(calls)))
    check_python_aggregates(agg, group or having, ctx)
    _check_session_keys(agg, group or having, ctx)

    # Rewrite SELECT and HAVING over the aggregate's output.
    key_map = list(zip(keys_bound, key_names))
    agg_map = [(a, c.name) for a, c in zip(agg_nodes, calls)]
    post_items = [_over_aggregate(b, key_map, agg_map, ctx, at=i) for i, b in zip(items, bound_items)]
    post_having = _over_aggregate(bound_having, key_map, agg_map, ctx, at=having) if bound_having is not None else None
    if post_having is not None:
        require_boolean(post_having, agg.schema, having.this, ctx)
    post_scope = Scope.of(agg.schema, None)
    return agg, post_scope, post_items, post_having


def _group_window(node: L.Node, scope: Scope, group_items, items, having, ctx: BindContext):
    """GROUP BY TUMBLE(ts, size): a window TVF under the aggregate, grouped by its bounds."""
    windows = [g for g in group_items if isinstance(g, GroupWindow)]
    if len(windows) > 1:
        raise ctx.error("only one group window is allowed in GROUP BY", windows[1])
    if not windows:
        return node, scope, group_items, items, having
    gw = windows[0]
    group_items = [g for g in group_items if g is not gw]
    node, scope = _apply_group_window(node, scope, gw, group_items, ctx)
    group_items = [exp.column(c) for c in L.WINDOW_COLUMNS] + group_items
    items = [_replace_window_helpers(i, gw, ctx) for i in items]
    having = _replace_window_helpers(having, gw, ctx) if having is not None else None
    return node, scope, group_items, items, having


def _bind_keys(group_items, items, scope: Scope, ctx: BindContext) -> list[exp.Expression]:
    """The bound GROUP BY keys; they may name SELECT aliases or positions, as in DuckDB."""
    aliases = {i.alias.lower(): i.this for i in items if isinstance(i, exp.Alias)}
    keys_bound: list[exp.Expression] = []
    for g in group_items:
        if isinstance(g, exp.Literal) and not g.is_string:
            if not g.is_int:
                raise ctx.error(f"GROUP BY {g.name}: a number in GROUP BY is a position in the SELECT list "
                                "(1, 2, ...)", g)
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
    return keys_bound


def _aggregate_calls(trees: list[exp.Expression], ctx: BindContext) -> list[exp.Expression]:
    """The distinct aggregate calls in ``trees`` (with their FILTER clause, if any), in order."""
    found: list[exp.Expression] = []
    for tree in trees:
        for n in tree.walk():
            if isinstance(n, exp.Filter) and not is_aggregate(n.this):
                raise ctx.error("FILTER (WHERE ...) applies to aggregate functions only", n)
            unit = isinstance(n, exp.Filter) or (is_aggregate(n) and not isinstance(n.parent, exp.Filter))
            if not unit or n in found:  # a call with its FILTER is one unit
                continue
            call = n.this if isinstance(n, exp.Filter) else n
            if any(is_aggregate(a) for a in n.walk() if a is not call and a is not n):
                raise ctx.error("aggregate functions cannot be nested", n)
            found.append(n)
    return found


def _bind_calls(agg_nodes, node: L.Node, pre: list, taken: list[str], out_names: list[str],
                ctx: BindContext) -> list[L.AggCall]:
    """An AggCall per aggregate call; their arguments are added to the projection ``pre``."""
    out_names = list(out_names)
    calls: list[L.AggCall] = []
    for j, a in enumerate(agg_nodes):
        kind, arg, distinct = agg_parts(a, ctx)
        if isinstance(a, exp.Filter):
            require_boolean(arg.args["ifs"][0].this, node.schema, a.expression, ctx)
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
        calls.append(L.AggCall(kind, arg_name, distinct, name, agg_type(kind, arg_type, a, ctx), arg_type))
    return calls


def _alias_like(original: exp.Expression, bound: exp.Expression) -> exp.Expression:
    """Keep the output name of ``original`` on its bound form."""
    if isinstance(original, exp.Alias):
        return exp.Alias(this=bound, alias=original.args["alias"].copy())
    if isinstance(original, exp.Column):
        return exp.Alias(this=bound, alias=exp.Identifier(this=original.name, quoted=True))
    return Unnamed(this=bound)


class Unnamed(exp.Expression):
    """A bound SELECT item that had no alias (it is named EXPR$n)."""

    arg_types = {"this": True}


def _over_aggregate(tree, key_map, agg_map, ctx: BindContext, at: exp.Expression | None = None):
    """Replace group keys and aggregates with references to the aggregate's output."""
    if isinstance(tree, (exp.Alias, Unnamed)):
        out = tree.copy()
        out.set("this", _over_aggregate(tree.this, key_map, agg_map, ctx, at))
        return out

    def replace(node: exp.Expression) -> exp.Expression:
        for k, name in key_map:
            if node == k:
                return col(name)
        if is_aggregate(node) or isinstance(node, exp.Filter):
            for a, name in agg_map:
                if node == a:
                    return col(name)
        return node

    out = tree.transform(replace)  # top down: a replaced node's subtree is not visited
    valid = {n for _, n in key_map} | {n for _, n in agg_map}
    for c in out.find_all(exp.Column):
        if c.name not in valid:
            raise ctx.error(f"column '{c.name}' must appear in GROUP BY or be used in an aggregate function",
                            _find_column(at, c.name) if at is not None else tree)
    return out


def _find_column(tree: exp.Expression, name: str) -> exp.Expression:
    """The first reference to column ``name`` in an unbound tree, for an error's position."""
    return next((c for c in tree.find_all(exp.Column) if c.name.lower() == name.lower()), tree)


def agg_parts(a: exp.Expression, ctx: BindContext) -> tuple[AggregateKind, exp.Expression | None, bool]:
    """The kind, argument and DISTINCT of an aggregate call; ``agg(x) FILTER (WHERE c)`` is ``agg(CASE WHEN c
    THEN x END)``: every aggregate skips NULLs (``COUNT(*)`` becomes a count of ``CASE WHEN c THEN 1 END``)."""
    condition = None
    if isinstance(a, exp.Filter):
        condition = a.expression.this if isinstance(a.expression, exp.Where) else a.expression
        a = a.this
    kind, arg = _kind_and_argument(a, ctx)
    if isinstance(arg, exp.Order):
        raise ctx.error(f"{kind.name} takes no ORDER BY (nor does Flink)", a,
                        help="the values are aggregated in the order the rows arrive")
    if condition is not None and not kind.skips_nulls:
        raise ctx.error(f"{kind.name} keeps NULL values, so FILTER (WHERE ...) on it is not supported yet", a,
                        help="filter the rows in WHERE, or in a subquery")
    arg, distinct = _distinct(kind, arg, a, ctx)
    if distinct:
        kind = kind.with_distinct()
    if kind is COUNT and (arg is None or isinstance(arg, exp.Star) or (isinstance(arg, exp.Literal) and not distinct)):
        arg = None if condition is None else exp.Literal.number(1)
    elif arg is None:
        raise ctx.error(f"{kind.name} needs an argument", a)
    if condition is not None:
        arg = exp.Case(ifs=[exp.If(this=condition, true=arg)])
    return kind, arg, distinct


def _kind_and_argument(a: exp.Expression, ctx: BindContext) -> tuple[AggregateKind, exp.Expression | None]:
    kind = kind_of(a)
    if isinstance(a, exp.Grouping):
        raise ctx.error("GROUPING(...) needs a GROUP BY that names its arguments", a)
    if kind is None and written_name(a) in NOT_YET:
        raise ctx.error(f"aggregate {written_name(a)} is not supported yet", a, help=NOT_YET_HELP)
    if kind is None:
        raise ctx.error(f"aggregate {written_name(a)} is not supported", a, help="use one of " + ", ".join(NAMES))
    args = list(a.expressions) if isinstance(a, exp.Anonymous) else [e for e in [a.this] if e is not None]
    try:
        return kind.with_arguments(args[1:]), (args[0] if args else None)
    except AggregateTypeError as e:
        raise ctx.error(str(e), a) from None


def _distinct(kind: AggregateKind, arg, a: exp.Expression, ctx: BindContext) -> tuple[exp.Expression | None, bool]:
    """The argument without DISTINCT, and whether DISTINCT changes the aggregate (not for MIN/MAX)."""
    if not isinstance(arg, exp.Distinct):
        return arg, False
    if len(arg.expressions) != 1:
        raise ctx.error("DISTINCT aggregates take one argument", a)
    if not kind.takes_distinct and not kind.distinct_is_same:
        raise ctx.error(f"{kind.name}(DISTINCT ...) is not supported", a, help=kind.distinct_help)
    return arg.expressions[0], kind.takes_distinct


def agg_type(kind: AggregateKind, arg_type: pa.DataType | None, node: exp.Expression,
             ctx: BindContext) -> pa.DataType:
    """The aggregate's result type (Flink's), or a Diagnostic on ``node`` if the argument does not fit."""
    try:
        return kind.result_type(arg_type)
    except AggregateTypeError as e:
        raise ctx.error(str(e), node) from None


def _apply_group_window(node: L.Node, scope: Scope, gw: GroupWindow, others: list[exp.Expression],
                        ctx: BindContext) -> tuple[L.Node, Scope]:
    kind = window_kind(gw.args["kind"])
    args = gw.expressions
    if not args or not isinstance(args[0], exp.Column):
        raise ctx.error(f"{kind.name}(time column, ...) needs a time column first", gw)
    partition: list[exp.Expression] = []
    if kind.partitioned:
        # GROUP BY SESSION(ts, gap), k: sessions are kept per k (the other group keys).
        for g in others:
            if not isinstance(g, exp.Column):
                raise ctx.error(f"with a {kind.name} group window, the other GROUP BY items must be columns "
                                "(its windows are kept per value of them)", g,
                                help="compute the key in a subquery and group by its name")
            partition.append(g)
    return window_over(node, scope, kind, args[0], list(args[1:]), partition, gw, ctx)


def check_python_aggregates(agg: L.Node, at: exp.Expression | None, ctx: BindContext) -> None:
    """As Flink: a Python aggregate function over an updating input needs ``retract``, and in a window made of
    several slices (HOP, CUMULATE) or sessions that merge, ``merge``."""
    w = agg
    while isinstance(w, L.Project):
        w = w.input
    python = [a.kind for a in getattr(w, "aggs", ()) if a.kind.python]
    if isinstance(w, L.Aggregate) and w.input.changelog == L.UPDATING:
        lacking = next((k for k in python if not k.can_retract), None)
        if lacking is not None:
            raise ctx.error(f"the Python aggregate function {lacking.name} has no retract, which its updating input "
                            "needs (a row updated or deleted is taken back from its group's accumulator)", at,
                            help="define retract(self, acc, *args) on the function, as Flink requires")
    if isinstance(w, L.WindowAggregate) and not w.window.type.single_pane:
        lacking = next((k for k in python if not k.can_merge), None)
        if lacking is not None:
            raise ctx.error(f"the Python aggregate function {lacking.name} has no merge, which a {w.window.kind} "
                            "window needs (its windows combine the accumulators of shared slices or of merging "
                            "sessions)", at, help="define merge(self, acc, accs) on the function, as Flink requires, "
                                                  "or use a TUMBLE window")


def _check_session_keys(agg: L.Node, at: exp.Expression | None, ctx: BindContext) -> None:
    """As in Flink, a session window's PARTITION BY keys must be grouped by; its aggregates cannot be ordered."""
    w = agg
    while isinstance(w, L.Project):
        w = w.input
    if not isinstance(w, L.WindowAggregate):
        return
    if w.window.type.merging:
        _refuse_ordered_aggregates(w, at, ctx)
    if w.window.partition_by:
        missing = [k for k in w.window.partition_by if k not in w.keys]
        if missing:
            raise ctx.error(f"the {w.window.kind} window is partitioned by {', '.join(missing)}, which must also be in "
                            "GROUP BY", at, help=f"add {', '.join(missing)} to GROUP BY")


def _refuse_ordered_aggregates(w: L.WindowAggregate, at: exp.Expression | None, ctx: BindContext) -> None:
    """Merging windows (sessions) merge in time order, so an aggregate in arrival order has no meaning there."""
    listed = [a for a in w.aggs if not a.kind.ordered and any(p.merge == "list" for p in a.partials())]
    if listed:  # session merges (runtime/operators/session_merge.py) fold numbers, not lists of values
        raise ctx.error(f"{listed[0].kind.name} is not supported in a {w.window.kind} window yet", at,
                        help="use a TUMBLE, HOP or CUMULATE window, or a GROUP BY")
    ordered = [a for a in w.aggs if a.kind.ordered]
    if ordered:
        sliced = "/".join(k.name for k in WINDOW_KINDS.values() if not k.merging)
        raise ctx.error(f"{ordered[0].kind.name} is not supported in a {w.window.kind} window", at,
                        help=f"its windows merge in time order, not arrival order: use MIN/MAX of (time, value) "
                             f"in a subquery, or a {sliced} window")


def _replace_window_helpers(tree: exp.Expression, gw: GroupWindow, ctx: BindContext) -> exp.Expression:
    kind = gw.args["kind"]

    def fix(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous):
            name = node.name.upper()
            for suffix, column in _GROUP_WINDOW_HELPERS.items():
                if name.startswith(kind + "_") and name == f"{kind}_{suffix}":
                    return exp.column(column)
                if any(name == f"{k}_{suffix}" for k in WINDOW_KINDS):
                    raise ctx.error(f"{name} does not match the group window {kind}(...)", node)
        return node

    return tree.transform(fix)

