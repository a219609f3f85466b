"""Binding subqueries in expressions: each becomes a regular join, as Flink decorrelates them.

A subquery is planned as a join against its (distinct or aggregated)
rows, so it stays continuous: when the subquery's input changes, the
join retracts and re-emits the outer rows it decides (docs/sql.md)::

    x IN (SELECT y FROM t WHERE t.k = s.k)   semi join:  s JOIN (SELECT DISTINCT y, k FROM t) ON x = y AND s.k = k
    EXISTS (SELECT ... WHERE t.k = s.k)      semi join:  s JOIN (SELECT DISTINCT k FROM t) ON s.k = k
    NOT EXISTS (...)                         anti join:  s LEFT JOIN (SELECT DISTINCT k, TRUE AS m ...) WHERE m IS NULL
    x NOT IN (SELECT y ...)                  null-aware anti join: as NOT EXISTS, and a LEFT JOIN against
                                             (COUNT(*), COUNT(y)) per correlation key, so that a NULL x or
                                             a NULL y drops the row unless the subquery is empty (SQL's rule)
    (SELECT MAX(v) FROM t WHERE t.k = s.k)   s LEFT JOIN (SELECT k, MAX(v) FROM t GROUP BY k) ON s.k = k;
                                             a bare COUNT is 0, not NULL, where nothing matches

Correlation is decorrelated when it is a conjunct of the subquery's WHERE
that equates an expression of the subquery with one of the outer query;
anything else that refers to the outer query is refused with its position.
IN and EXISTS must be conjuncts of WHERE (AND-ed, not under OR); a scalar
subquery must be one aggregate without GROUP BY (so it has one row).

The joins are marked with the subquery they came from, which EXPLAIN shows.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar import SqlError
from ..aggregate_kinds import COUNT as AGG_COUNT
from ..logical import nodes as L
from ..logical.join import Join
from ..types import Field, unique_name
from .aggregate import has_aggregate
from .context import BindContext
from .cql import HIDDEN
from .expressions import Scope, ScopeColumn, bind_scalar, col
from .from_clause import bind_relation
from .join import bind_joins

# Column names of the subquery side; clear of the join's own bookkeeping columns (__n, __k, ...).
VALUE, MARK, COUNT, NON_NULL = "__sq_v", "__sq_m", "__sq_n", "__sq_nv"


def _key(i: int) -> str:
    return f"__sq_k{i}"


def has_subquery(tree: exp.Expression | None) -> bool:
    return tree is not None and tree.find(exp.Subquery, exp.Exists) is not None


def split_subquery_conditions(where: exp.Expression | None) -> tuple[exp.Expression | None, exp.Expression | None]:
    """WHERE as (the conjuncts without subqueries, those with them)."""
    if where is None:
        return None, None
    parts = _conjuncts(where)
    return (_and([c for c in parts if not has_subquery(c)]), _and([c for c in parts if has_subquery(c)]))


def without_subqueries(tree: exp.Expression) -> exp.Expression:
    """``tree`` with each subquery replaced by NULL (to ask what the outer query itself computes)."""
    return tree.copy().transform(lambda n: exp.Null() if isinstance(n, (exp.Subquery, exp.Exists)) else n)


def bind_where_subqueries(node: L.Node, scope: Scope, where: exp.Expression, ctx: BindContext
                          ) -> tuple[L.Node, Scope, exp.Expression | None]:
    """Join the subqueries of WHERE into ``node``; returns the node, its scope and the rest of WHERE (unbound,
    its scalar subqueries replaced by columns of the scope)."""
    rest: list[exp.Expression] = []
    for c in _conjuncts(where):
        negated, inner = _negation(c)
        if isinstance(inner, exp.In) and inner.args.get("query") is not None:
            node = _membership(node, scope, inner, negated, ctx)
        elif isinstance(inner, exp.Exists):
            node = _exists(node, scope, inner, negated, ctx)
        else:
            rest.append(c)
    for c in rest:
        for found in c.find_all(exp.Exists, exp.In):
            if isinstance(found, exp.Exists) or found.args.get("query") is not None:
                raise ctx.error("IN (SELECT ...) and EXISTS must be conditions of WHERE joined by AND", found,
                                help="move the subquery condition out of OR / CASE, or join explicitly")
    node, scope, rest = bind_scalar_subqueries(node, scope, rest, ctx)
    return node, scope, _and(rest)


def bind_scalar_subqueries(node: L.Node, scope: Scope, trees: list[exp.Expression], ctx: BindContext
                           ) -> tuple[L.Node, Scope, list[exp.Expression]]:
    """Replace each scalar subquery of ``trees`` by a column of a LEFT JOIN against its one row (per key)."""
    out = []
    for tree in trees:
        tree = tree.copy()
        for sub in list(tree.find_all(exp.Subquery)):
            if sub.find_ancestor(exp.Subquery) is not None:
                continue  # bound with its enclosing subquery
            node, scope, name = _scalar(node, scope, sub, ctx)
            replacement = exp.Column(this=exp.Identifier(this=name, quoted=True))
            if sub is tree:
                tree = replacement
            else:
                sub.replace(replacement)
        out.append(tree)
    return node, scope, out


# -- the subquery kinds ----------------------------------------------------------------

def _membership(node: L.Node, scope: Scope, pred: exp.In, negated: bool, ctx: BindContext) -> L.Node:
    query = pred.args["query"]
    select, pairs = _decorrelate(query.this, scope, ctx)
    value = bind_scalar(pred.this, scope, ctx.source, clause="WHERE")
    sub = _bind_items(select, pairs, ctx, value_required=True, at=query)
    what = f"{'NOT ' if negated else ''}IN subquery"
    keyed = [(value, VALUE)] + [(outer, _key(i)) for i, (_, outer) in enumerate(pairs)]
    distinct = _distinct(sub, [VALUE] + [_key(i) for i in range(len(pairs))])
    if not negated:
        return _semi(node, distinct, keyed, f"semi join ({what})")
    joined, names = _left(node, distinct, keyed, f"anti join ({what})")
    cond: exp.Expression = exp.Is(this=col(names[MARK]), expression=exp.Null())
    value_nullable = not isinstance(value, exp.Column) or node.schema.find(value.name).nullable
    if value_nullable or sub.schema.find(VALUE).nullable:
        # SQL: x NOT IN (set) is TRUE only when no element equals x and none is NULL (or the set is empty).
        counts = L.Aggregate(sub, tuple(_key(i) for i in range(len(pairs))), (
            L.AggCall(AGG_COUNT, None, False, COUNT, pa.int64()),
            L.AggCall(AGG_COUNT, VALUE, False, NON_NULL, pa.int64(), sub.schema.find(VALUE).type)))
        joined, more = _left(joined, counts, keyed[1:], f"null-aware anti join ({what}: NULL counts)")
        n, nv = col(more[COUNT]), col(more[NON_NULL])
        empty = exp.EQ(this=exp.Coalesce(this=n, expressions=[exp.Literal.number(0)]), expression=exp.Literal.number(0))
        no_nulls = exp.and_(exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())), exp.EQ(this=n.copy(), expression=nv))
        cond = exp.and_(cond, exp.Paren(this=exp.or_(empty, exp.Paren(this=no_nulls))))
    return _back_to(L.Filter(joined, cond), node)


def _exists(node: L.Node, scope: Scope, pred: exp.Exists, negated: bool, ctx: BindContext) -> L.Node:
    select, pairs = _decorrelate(pred.this, scope, ctx)
    sub = _bind_items(select, pairs, ctx, value_required=False, at=pred)
    keyed = [(outer, _key(i)) for i, (_, outer) in enumerate(pairs)]
    distinct = _distinct(sub, [_key(i) for i in range(len(pairs))])
    what = f"{'NOT ' if negated else ''}EXISTS subquery"
    if not negated:
        return _semi(node, distinct, keyed, f"semi join ({what})")
    joined, names = _left(node, distinct, keyed, f"anti join ({what})")
    return _back_to(L.Filter(joined, exp.Is(this=col(names[MARK]), expression=exp.Null())), node)


def _scalar(node: L.Node, scope: Scope, sub: exp.Subquery, ctx: BindContext) -> tuple[L.Node, Scope, str]:
    select = sub.this
    if (not isinstance(select, exp.Select) or len(select.expressions) != 1 or select.args.get("group") is not None
            or not has_aggregate(select.expressions[0])):
        raise ctx.error("a scalar subquery must compute one aggregate without GROUP BY, so that it has one row",
                        sub, help="e.g. (SELECT MAX(v) FROM t WHERE t.k = s.k); for several rows use IN or a join")
    item = select.expressions[0]
    inner = item.this if isinstance(item, exp.Alias) else item
    bare_count = isinstance(inner, exp.Count)
    select, pairs = _decorrelate(select, scope, ctx)
    if pairs and inner.find(exp.Count) is not None and not bare_count:
        raise ctx.error("a correlated scalar subquery may use COUNT only as its whole result", inner,
                        help="compute the expression around the subquery: (SELECT COUNT(*) ...) + 1")
    grouped = select.copy()
    if pairs:
        grouped.set("group", exp.Group(expressions=[inner_e.copy() for inner_e, _ in pairs]))
    right = _bind_items(grouped, pairs, ctx, value_required=True, at=sub)
    keyed = [(outer, _key(i)) for i, (_, outer) in enumerate(pairs)]
    joined, names = _left(node, right, keyed, "scalar subquery (LEFT JOIN on one row" + (" per key)" if pairs else ")"))
    value: exp.Expression = col(names[VALUE])
    if bare_count:  # no matching rows: COUNT is 0, not the NULL of the outer join
        value = exp.Coalesce(this=value, expressions=[exp.Literal.number(0)])
    name = unique_name("__scalar", joined.schema.names)
    exprs = tuple((n, col(n)) for n in joined.schema.names) + ((name, value),)
    types = tuple(f.type for f in joined.schema) + (joined.schema.find(names[VALUE]).type,)
    out = L.Project(joined, exprs, types)
    added = ScopeColumn(HIDDEN, name, Field(name, types[-1]))
    return out, Scope(scope.columns + (added,)), name


# -- decorrelation -----------------------------------------------------------------------

def _decorrelate(query: exp.Expression, outer: Scope, ctx: BindContext
                 ) -> tuple[exp.Expression, list[tuple[exp.Expression, exp.Expression]]]:
    """The subquery without its correlated conjuncts, and those as (inner expression, bound outer expression)."""
    if not isinstance(query, exp.Select) or query.args.get("from_") is None:
        return query, []
    from_ = query.args["from_"]
    if query.args.get("joins"):
        _, inner, _ = bind_joins(from_.this, query.args["joins"], None, ctx)
    else:
        _, inner = bind_relation(from_.this, ctx)
    where = query.args.get("where")
    local: list[exp.Expression] = []
    pairs: list[tuple[exp.Expression, exp.Expression]] = []
    for c in _conjuncts(where.this) if where is not None else []:
        if not _outer_columns(c, inner, outer, ctx):
            local.append(c)
            continue
        sides = (c.this, c.expression) if isinstance(c, exp.EQ) else ()
        pair = None
        for a, b in (sides, sides[::-1]) if sides else ():
            if _outer_columns(b, inner, outer, ctx) and not _outer_columns(a, inner, outer, ctx) \
                    and len(list(b.find_all(exp.Column))) == len(_outer_columns(b, inner, outer, ctx)) \
                    and a.find(exp.Column) is not None:
                pair = (a, bind_scalar(b, outer, ctx.source, clause="WHERE"))
        if pair is None:
            raise ctx.error("a correlated condition must equate an expression of the subquery with one of the "
                            "outer query", c, help="dsms decorrelates AND-ed equalities such as t.k = s.k into join keys")
        pairs.append(pair)
    for part in ("expressions", "group", "having"):
        for e in _as_list(query.args.get(part)):
            refs = _outer_columns(e, inner, outer, ctx)
            if refs:
                raise ctx.error("a subquery may refer to the outer query only in equalities of its WHERE", refs[0])
    if not pairs:
        return query, []
    out = query.copy()
    out.set("where", exp.Where(this=_and(local)) if local else None)
    return out, pairs


def _outer_columns(e: exp.Expression, inner: Scope, outer: Scope, ctx: BindContext) -> list[exp.Column]:
    """The columns of ``e`` that name the outer query and not the subquery (nested subqueries excluded)."""
    out = []
    for c in e.find_all(exp.Column):
        if isinstance(c.this, exp.Star) or _nested(c, e):
            continue
        if not _resolves(inner, c, ctx) and _resolves(outer, c, ctx):
            out.append(c)
    return out


def _nested(c: exp.Expression, top: exp.Expression) -> bool:
    """Whether ``c`` sits in a query nested inside ``top`` (its names are that query's business)."""
    if c is top:
        return False
    node = c.parent
    while node is not None and node is not top:
        if isinstance(node, (exp.Select, exp.Subquery, exp.Exists)):
            return True
        node = node.parent
    return False


def _resolves(scope: Scope, c: exp.Column, ctx: BindContext) -> bool:
    try:
        scope.resolve(c, ctx.source)
    except SqlError:
        return False
    return True


def _bind_items(select: exp.Expression, pairs, ctx: BindContext, value_required: bool, at: exp.Expression) -> L.Node:
    """The subquery with its columns named: the value (IN, scalar), the correlation keys and the match mark
    (TRUE, so that a LEFT JOIN tells a match from none)."""
    if isinstance(select, exp.Select):
        items = list(select.expressions)
        if value_required and (len(items) != 1 or isinstance(items[0], exp.Star)):
            raise ctx.error("the subquery must select exactly one column", at)
        select = select.copy()
        value = [exp.alias_(items[0].this if isinstance(items[0], exp.Alias) else items[0], VALUE, quoted=True)] \
            if value_required else []
        keys = [exp.alias_(inner.copy(), _key(i), quoted=True) for i, (inner, _) in enumerate(pairs)]
        select.set("expressions", value + keys + [exp.alias_(exp.true(), MARK, quoted=True)])
        return ctx.bind_set(select, ctx)
    node = ctx.bind_set(select, ctx)  # a UNION or VALUES: uncorrelated
    if value_required and len(node.schema) != 1:
        raise ctx.error("the subquery must select exactly one column", at)
    first = node.schema.fields[0]
    exprs = ((VALUE, col(first.name)),) if value_required else ()
    return L.Project(node, exprs + ((MARK, exp.true()),), ((first.type,) if value_required else ()) + (pa.bool_(),))


# -- joins -------------------------------------------------------------------------------

def _distinct(sub: L.Node, keys: list[str]) -> L.Node:
    """The distinct (keys, mark) rows: a semi join must match each outer row at most once."""
    return L.Aggregate(sub, tuple(keys) + (MARK,), ())


def _renamed(left: L.Node, right: L.Node) -> dict[str, str]:
    taken = list(left.schema.names)
    names = {}
    for n in right.schema.names:
        names[n] = unique_name(n, taken)
        taken.append(names[n])
    return names


def _join(left: L.Node, right: L.Node, kind: str, keyed, note: str) -> tuple[Join, dict[str, str]]:
    names = _renamed(left, right)
    equi = tuple((outer.copy(), col(names[inner])) for outer, inner in keyed)
    return Join(left, right, kind, "regular", tuple(names[n] for n in right.schema.names), equi=equi,
                subquery=note), names


def _semi(node: L.Node, right: L.Node, keyed, note: str) -> L.Node:
    joined, _ = _join(node, right, "inner", keyed, note)
    return _back_to(joined, node)


def _left(node: L.Node, right: L.Node, keyed, note: str) -> tuple[L.Node, dict[str, str]]:
    return _join(node, right, "left", keyed, note)


def _back_to(joined: L.Node, node: L.Node) -> L.Node:
    """Only the outer query's columns again."""
    return L.Project(joined, tuple((f.name, col(f.name)) for f in node.schema),
                     tuple(f.type for f in node.schema))


# -- helpers -----------------------------------------------------------------------------

def _negation(c: exp.Expression) -> tuple[bool, exp.Expression]:
    negated = False
    while isinstance(c, (exp.Not, exp.Paren)):
        if isinstance(c, exp.Not):
            negated = not negated
        c = c.this
    return negated, c


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
        return _conjuncts(e.this)
    return [e]


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    return exp.and_(*parts) if parts else None


def _as_list(v) -> list[exp.Expression]:
    if v is None:
        return []
    if isinstance(v, list):
        return v
    return [v]
