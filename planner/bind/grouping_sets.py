"""Binding GROUPING SETS, ROLLUP and CUBE: one aggregate per grouping set, their rows unioned.

``GROUP BY GROUPING SETS ((a, b), (a), ())`` is the UNION ALL of the
aggregate grouped by ``a, b``, the one grouped by ``a`` and the global one;
in each, a grouping column outside its set is NULL and ``GROUPING(x, ...)``
is the constant whose bit i is 1 when the i-th argument is not grouped
(Flink's and the SQL standard's meaning)::

    GROUP BY ROLLUP (a, b)          -> sets (a, b), (a), ()
    GROUP BY CUBE (a, b)            -> sets (a, b), (a), (b), ()
    GROUP BY k, ROLLUP (a, b)       -> sets (k, a, b), (k, a), (k)

Every branch reads the same input node, so the plan shares it. In a window
aggregate, as in Flink, ``window_start`` and ``window_end`` must be in every
set (each branch is then a window aggregate itself, and the union stays
append-only).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations, product

from sqlglot import exp

from ..aggregate_kinds import is_aggregate
from ..logical import nodes as L
from ..types import to_sql_type
from .aggregate import bind_aggregation
from .context import BindContext
from .expressions import Scope, bind_scalar, infer_type

_SET_CLAUSES = (exp.GroupingSets, exp.Rollup, exp.Cube)
MAX_SETS = 64  # a CUBE of 6 columns; more would run as many aggregates


def has_grouping_sets(group: exp.Group | None) -> bool:
    return group is not None and any(isinstance(g, _SET_CLAUSES) for g in _group_items(group))


def _group_items(group: exp.Group) -> list[exp.Expression]:
    items = list(group.expressions)
    for key in ("grouping_sets", "rollup", "cube"):  # some sqlglot versions keep them apart
        value = group.args.get(key)
        items += value if isinstance(value, list) else [value] if isinstance(value, exp.Expression) else []
    return items


def grouping_sets(group: exp.Group, ctx: BindContext) -> list[list[exp.Expression]]:
    """The grouping sets of a GROUP BY clause: the cross product of its items' sets."""
    choices: list[list[list[exp.Expression]]] = []
    for g in _group_items(group):
        if isinstance(g, exp.GroupingSets):
            choices.append([_members(s) for s in g.expressions])
        elif isinstance(g, exp.Rollup):
            cols = list(g.expressions)
            choices.append([cols[:n] for n in range(len(cols), -1, -1)])
        elif isinstance(g, exp.Cube):
            cols = list(g.expressions)
            choices.append([list(c) for n in range(len(cols), -1, -1) for c in combinations(cols, n)])
        else:
            choices.append([[g]])
    sets = [[e for part in combo for e in part] for combo in product(*choices)]
    if len(sets) > MAX_SETS:
        raise ctx.error(f"GROUP BY makes {len(sets)} grouping sets; at most {MAX_SETS} are supported", group,
                        help="split the query, or group by fewer CUBE columns")
    return sets


def _members(s: exp.Expression) -> list[exp.Expression]:
    if isinstance(s, exp.Tuple):
        return list(s.expressions)
    if isinstance(s, exp.Paren):
        return [s.this]
    return [s]


def bind_grouping_sets(node: L.Node, scope: Scope, items, group: exp.Group, having: exp.Having | None,
                       ctx: BindContext, project: Callable[[L.Node, Scope, list], L.Node]) -> L.Node:
    """The UNION ALL of one aggregate per grouping set, each projected by ``project`` (see the docstring)."""
    sets = grouping_sets(group, ctx)
    keys: list[exp.Expression] = []
    for s in sets:
        keys += [k for k in s if k not in keys]
    named = [_named(i) for i in items]
    branches: list[L.Node] = []
    windowed: list[bool] = []
    for s in sets:
        absent = {i: k for i, k in enumerate(keys) if k not in s}
        nulls = {i: _typed_null(k, node, scope, ctx) for i, k in absent.items()}
        branch_items = [_for_set(i, keys, absent, nulls, ctx) for i in named]
        branch_having = exp.Having(this=_for_set(having.this, keys, absent, nulls, ctx)) if having is not None else None
        agg, post_scope, post_items, cond = bind_aggregation(node, scope, branch_items, exp.Group(expressions=[
            k.copy() for k in s]), branch_having, ctx)
        windowed.append(_is_window_aggregate(agg))
        if cond is not None:
            agg = L.Filter(agg, cond)
        branches.append(project(agg, post_scope, post_items))
    if any(windowed) and not all(windowed):
        raise ctx.error("window_start and window_end must be in every grouping set of a window aggregate", group,
                        help="add window_start, window_end to GROUP BY outside GROUPING SETS")
    first = branches[0].schema.names
    aligned = [b if b.schema.names == first else
               L.Project(b, tuple((n, exp.column(f.name, quoted=True)) for n, f in zip(first, b.schema)),
                         tuple(f.type for f in b.schema)) for b in branches]
    return L.Union(tuple(aligned))


def _named(item: exp.Expression) -> exp.Expression:
    """A column item keeps its name when a grouping set replaces it with NULL."""
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return exp.Alias(this=item, alias=exp.Identifier(this=item.name, quoted=True))
    return item


def _typed_null(key: exp.Expression, node: L.Node, scope: Scope, ctx: BindContext) -> exp.Expression:
    bound = bind_scalar(key, scope, ctx.source, clause="GROUP BY")
    return exp.Cast(this=exp.Null(), to=to_sql_type(infer_type(bound, node.schema, ctx.source)))


def _for_set(tree: exp.Expression, keys, absent: dict, nulls: dict, ctx: BindContext) -> exp.Expression:
    """``tree`` for one grouping set: GROUPING(...) as its constant, keys outside the set as NULL (not inside
    aggregates, which still aggregate the column)."""

    def replace(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Grouping):
            bits = 0
            for arg in n.expressions:
                if arg not in keys:
                    raise ctx.error(f"GROUPING({arg.sql()}) names a column that is not grouped by", arg)
                bits = bits * 2 + (1 if keys.index(arg) in absent else 0)
            return exp.Cast(this=exp.Literal.number(bits), to=exp.DataType.build("BIGINT"))  # BIGINT, as Flink
        if is_aggregate(n) or isinstance(n, exp.Filter):
            return n.copy()  # a new node: transform does not look inside it
        for i, k in absent.items():
            if n == k:
                return nulls[i].copy()
        return n

    return tree.transform(replace)  # top down: a replaced node's subtree is not visited


def _is_window_aggregate(agg: L.Node) -> bool:
    while isinstance(agg, (L.Project, L.Filter)):
        agg = agg.input
    return isinstance(agg, L.WindowAggregate)
