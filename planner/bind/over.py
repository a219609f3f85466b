"""Binding OVER: per-row aggregates over a time-ordered frame, and ROW_NUMBER for Top-N.

``SUM(x) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10'
SECOND PRECEDING AND CURRENT ROW)`` (or ``ROWS BETWEEN n PRECEDING``, or
``UNBOUNDED PRECEDING``; named with ``WINDOW w AS (...)``) becomes an
:class:`~logical.over.OverAggregate`. As in Flink: the window is ordered
by one time attribute ascending, the frame ends at the current row, and
all OVER aggregates of a SELECT share one window.

``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) AS rn`` (or ``RANK()``,
``DENSE_RANK()``) becomes a
:class:`~logical.rank.Rank`; the enclosing query's ``WHERE rn <= N`` (or
``rn = 1``) turns it into a :class:`~logical.rank.TopN`
(:func:`merge_rank_filter`); a Rank left without one is an error
(:func:`finish_ranks`), unless it is ordered by time: a running row number.
``LAG``, ``FIRST_VALUE``, ``LAST_VALUE``, ``RANK`` and ``DENSE_RANK``: :mod:`over_functions`.
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L
from ..logical.over import OverAggregate, OverCall, OverFrame
from ..logical.rank import Rank, TopN
from ..timeutil import interval_micros, node_span
from ..types import unique_name
from .aggregate import Unnamed, agg_parts, agg_type
from .context import BindContext
from .expressions import Scope, ScopeColumn, bind_scalar, col, infer_type, passthrough
from .over_functions import bind_window_function, check_row_number_alone, is_window_function, rank_as_over

# The numbering functions a Top-N filters on, by their logical name (logical/rank.py RANK_FUNCTIONS).
RANKING = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
_OVER_HELP = "use COUNT, SUM, AVG, MIN, MAX, LAG, FIRST_VALUE, LAST_VALUE, ROW_NUMBER, RANK or DENSE_RANK"


def _fname(w: exp.Window) -> str:
    return f"{RANKING[type(w.this)].upper()}()"


def has_over(items: list[exp.Expression]) -> bool:
    return any(item.find(exp.Window) is not None for item in items)


def bind_over(node: L.Node, scope: Scope, items: list[exp.Expression], select: exp.Select, ctx: BindContext):
    """Compute the OVER expressions of ``items``; returns the new node, its scope and the rewritten items."""
    named = {w.name.lower(): w for w in select.args.get("windows") or []}
    windows = [w for item in items for w in item.find_all(exp.Window)]
    resolved = [_resolve(w, named, ctx) for w in windows]
    if len(windows) == 1 and type(windows[0].this) in RANKING:
        # Top-N when the enclosing query filters it (merge_rank_filter), else a running number (finish_ranks)
        return _bind_rank(node, scope, items, windows[0], resolved[0], ctx)
    check_row_number_alone(windows, ctx)
    _check_one_window(windows, resolved, ctx)
    first = resolved[0]
    inputs = _OverInputs(node, scope, ctx)
    partition = tuple(inputs.column_for(p) for p in first.args.get("partition_by") or [])
    order = _order_column(first, scope, ctx)
    frame = _frame(first, ctx)
    calls: list[L.AggCall | OverCall] = []
    names: dict[int, str] = {}
    for j, w in enumerate(windows):
        calls.append(_bind_over_call(w.this, j, resolved[j], frame, inputs, ctx))
        names[id(w)] = calls[-1].name
    if node.changelog == L.UPDATING:
        raise ctx.error("OVER aggregates need an append-only input (a stream)", windows[0])
    over = OverAggregate(inputs.projected(), partition, order, frame, tuple(calls))
    return over, _scope_over(over, scope, names.values()), [_replace(i, names) for i in items]


def _check_one_window(windows: list[exp.Window], resolved: list[exp.Window], ctx: BindContext) -> None:
    """As in Flink, all OVER aggregates of a SELECT share one window."""
    first = resolved[0]
    for w, r in zip(windows[1:], resolved[1:]):
        if _window_key(r) != _window_key(first):
            raise ctx.error("all OVER aggregates of a SELECT must use the same window", w,
                            help="compute the others in a separate query, or use one named WINDOW w AS (...)")


class _OverInputs:
    """The columns an OVER aggregate reads: the input's, plus a computed column for each partition key or
    argument that is an expression (projected before the aggregate)."""

    def __init__(self, node: L.Node, scope: Scope, ctx: BindContext):
        self.node, self.scope, self.ctx = node, scope, ctx
        self.pre: list[tuple[str, exp.Expression]] = [(f.name, col(f.name)) for f in node.schema]
        self.taken = list(node.schema.names)

    def column_for(self, e: exp.Expression) -> str:
        """The input column holding ``e``, added when ``e`` is a new expression."""
        bound = bind_scalar(e, self.scope, self.ctx.source, clause="OVER")
        name = passthrough(bound)
        if name is None:
            pre = self.pre
            name = next((n for n, x in pre if x == bound), None) or unique_name(f"__over_key{len(pre)}", self.taken)
            if all(n != name for n, _ in pre):
                pre.append((name, bound))
                self.taken.append(name)
        return name

    def new_name(self, hint: str) -> str:
        name = unique_name(hint, self.taken)
        self.taken.append(name)
        return name

    def schema(self):
        return _schema_of(self.node, self.pre)

    def projected(self) -> L.Node:
        """The input, with the computed columns when there are any."""
        node, pre = self.node, self.pre
        if len(pre) > len(node.schema):
            return L.Project(node, tuple(pre), tuple(infer_type(e, node.schema, self.ctx.source) for _, e in pre))
        return node


def _bind_over_call(func: exp.Expression, j: int, window: exp.Window, frame: OverFrame, inputs: _OverInputs,
                    ctx: BindContext) -> L.AggCall | OverCall:
    """One function over the window: a window function (LAG, FIRST_VALUE, ...) or an aggregate."""
    if is_window_function(func):
        out = inputs.new_name(f"__over{j}")
        return bind_window_function(func, window, frame, out, inputs.column_for, inputs.schema, inputs.scope, ctx)
    if isinstance(func, exp.Filter):
        raise ctx.error("FILTER (WHERE ...) is not supported over a window", func,
                        help="filter in a subquery, or use CASE WHEN inside the aggregate")
    if not isinstance(func, exp.AggFunc):
        raise ctx.error(f"{func.sql_name() if not isinstance(func, exp.Anonymous) else func.name} is not supported "
                        "over a window", func, help=_OVER_HELP)
    kind, arg, distinct = agg_parts(func, ctx)
    if not kind.in_over:
        raise ctx.error(f"{kind.name} is not supported over a window", func, help=_OVER_HELP)
    if distinct:
        raise ctx.error("DISTINCT aggregates are not supported over a window", func)
    arg_name = inputs.column_for(arg) if arg is not None else None
    arg_type = infer_type(col(arg_name), inputs.schema(), ctx.source) if arg_name else None
    out = inputs.new_name(f"__over{j}")
    return L.AggCall(kind, arg_name, False, out, agg_type(kind, arg_type, func, ctx), arg_type)


def _schema_of(node: L.Node, pre):
    types = tuple(infer_type(e, node.schema, None) for _, e in pre)
    return L.Project(node, tuple(pre), types).schema


def _resolve(w: exp.Window, named: dict, ctx: BindContext) -> exp.Window:
    """A window with its named definition (``OVER w``) filled in."""
    if w.args.get("partition_by") or w.args.get("order") or w.args.get("spec"):
        return w
    alias = w.args.get("alias")
    if alias is None:
        return w
    definition = named.get(alias.name.lower())
    if definition is None:
        raise ctx.error(f"unknown window '{alias.name}'", w, help="define it with WINDOW name AS (...) after WHERE")
    return definition


def _window_key(w: exp.Window):
    return (tuple(p.sql() for p in w.args.get("partition_by") or []),
            w.args["order"].sql() if w.args.get("order") else None,
            w.args["spec"].sql() if w.args.get("spec") else None)


def _order_column(w: exp.Window, scope: Scope, ctx: BindContext) -> str:
    order = w.args.get("order")
    keys = order.expressions if order is not None else []
    if len(keys) != 1 or not isinstance(keys[0].this, exp.Column) or keys[0].args.get("desc"):
        raise ctx.error("an OVER window must be ordered by one time attribute, ascending", order or w,
                        help="e.g. OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 10 PRECEDING AND CURRENT ROW)")
    field = scope.resolve(keys[0].this, ctx.source).field
    if not (field.rowtime or field.proctime):
        raise ctx.error(f"'{keys[0].this.name}' is not a time attribute; OVER windows are ordered by event time or "
                        "processing time", keys[0], help="order by the source's WATERMARK column or a PROCTIME() column")
    return field.name


def _frame(w: exp.Window, ctx: BindContext) -> OverFrame:
    spec = w.args.get("spec")
    if spec is None:
        return OverFrame("RANGE", None)  # the SQL default with ORDER BY
    kind = str(spec.args.get("kind") or "").upper()
    end = spec.args.get("end")
    if end is not None and str(end).upper() != "CURRENT ROW":
        raise ctx.error("an OVER frame must end at CURRENT ROW", spec,
                        help="BETWEEN ... PRECEDING AND CURRENT ROW (future rows are not known yet)")
    start = spec.args.get("start")
    if str(start).upper() == "UNBOUNDED":
        return OverFrame(kind, None)
    if str(start).upper() == "CURRENT ROW":
        return OverFrame(kind, 0)
    if start is None or str(spec.args.get("start_side") or "").upper() != "PRECEDING":
        raise ctx.error("an OVER frame must start at a PRECEDING bound", spec)
    if kind == "ROWS":
        if not (isinstance(start, exp.Literal) and start.is_int and int(start.name) >= 0):
            raise ctx.error("ROWS BETWEEN n PRECEDING needs a whole number n", start)
        return OverFrame("ROWS", int(start.name))
    return OverFrame("RANGE", interval_micros(start, ctx.source))


def _bind_rank(node: L.Node, scope: Scope, items, w: exp.Window, spec: exp.Window, ctx: BindContext):
    item = next(i for i in items if w in list(i.find_all(exp.Window)))
    if not (isinstance(item, exp.Alias) and item.this is w):
        raise ctx.error(f"give {_fname(w)} OVER (...) a name (AS rn) and filter on it in the enclosing query", w,
                        help="SELECT * FROM (SELECT *, ROW_NUMBER() OVER (...) AS rn FROM t) WHERE rn <= 3")
    if spec.args.get("spec") is not None:
        raise ctx.error(f"{_fname(w)} takes no ROWS or RANGE frame", spec.args["spec"])
    partition, keys, taken = _rank_partition(node, scope, spec, ctx)
    order = _rank_order(scope, w, spec, ctx)
    rank_name = unique_name(item.alias, taken)
    base = node
    if keys:  # computed below the Top-N, hidden from the query's columns
        pre = [(f.name, col(f.name)) for f in node.schema] + keys
        base = L.Project(node, tuple(pre), tuple(infer_type(e, node.schema, ctx.source) for _, e in pre))
    rank = Rank(base, tuple(partition), tuple(order), rank_name, node_span(w), RANKING[type(w.this)])
    new_scope = _scope_over(rank, scope, [rank_name])
    return rank, new_scope, [_replace(i, {id(w): rank_name}) for i in items]


def _rank_partition(node: L.Node, scope: Scope, spec: exp.Window, ctx: BindContext):
    """A Top-N's partition key columns, the keys that are expressions (Flink: PARTITION BY x / 2), each with the
    hidden column it is computed into, and the column names taken."""
    partition = []
    keys: list[tuple[str, exp.Expression]] = []
    taken = list(node.schema.names)
    for p in spec.args.get("partition_by") or []:
        bound = bind_scalar(p, scope, ctx.source, clause="PARTITION BY")
        name = passthrough(bound)
        if name is None:
            name = next((n for n, e in keys if e == bound), None) or unique_name(f"__rank_key{len(keys)}", taken)
            if all(n != name for n, _ in keys):
                keys.append((name, bound))
                taken.append(name)
        partition.append(name)
    return partition, keys, taken


def _rank_order(scope: Scope, w: exp.Window, spec: exp.Window, ctx: BindContext) -> list[tuple[str, bool]]:
    """A Top-N's ordering: (column, descending) pairs."""
    order = []
    for o in (spec.args["order"].expressions if spec.args.get("order") else []):
        bound = bind_scalar(o.this, scope, ctx.source, clause="ORDER BY")
        if passthrough(bound) is None:
            raise ctx.error(f"{_fname(w)} orders by columns", o, help="compute the value in a subquery first")
        order.append((passthrough(bound), bool(o.args.get("desc"))))
    if not order:
        raise ctx.error(f"{_fname(w)} needs ORDER BY in its window", w)
    return order


def _scope_over(node: L.Node, scope: Scope, added) -> Scope:
    cols = [ScopeColumn(c.qualifier, c.name, node.schema.find(c.field.name)) for c in scope.columns]
    cols += [ScopeColumn(None, n, node.schema.find(n)) for n in added]
    return Scope(tuple(cols))


def _replace(item: exp.Expression, names: dict[int, str]) -> exp.Expression:
    """``item`` with each OVER expression replaced by its computed column (named as Flink names it)."""
    if isinstance(item, exp.Window) and id(item) in names:
        return Unnamed(this=exp.column(names[id(item)], quoted=True))  # unaliased: EXPR$n

    def fix(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Window) and id(n) in names:
            return exp.column(names[id(n)], quoted=True)
        return n

    return _transform(item, fix)


def _transform(tree: exp.Expression, fix) -> exp.Expression:
    """Like ``tree.transform`` but matching nodes by identity (ids of the original tree)."""
    replaced = fix(tree)
    if replaced is not tree:
        return replaced
    copy = tree.copy()
    for key, orig in tree.args.items():
        if isinstance(orig, exp.Expression):
            copy.set(key, _transform(orig, fix))
        elif isinstance(orig, list):
            copy.set(key, [_transform(v, fix) if isinstance(v, exp.Expression) else v for v in orig])
    return copy


# -- Top-N ---------------------------------------------------------------------------------------

def merge_rank_filter(node: L.Node, ctx: BindContext, where: exp.Expression) -> L.Node:
    """``Filter(rn <= N AND rest)`` over a Rank (under projections) -> ``Filter(rest)`` over a TopN."""
    if not isinstance(node, L.Filter):
        return node
    chain, cur = [], node.input
    while isinstance(cur, L.Project):
        chain.append(cur)
        cur = cur.input
    if not isinstance(cur, Rank):
        return node
    rank = cur
    # Which names denote the row number at the filter's level.
    names = {rank.rank_name}
    for p in reversed(chain):
        names = {out for out, e in p.exprs if isinstance(e, exp.Column) and e.name in names}
    conjuncts = _conjuncts(node.condition)
    limit, rest = None, []
    for c in conjuncts:
        n = _rank_bound(c, names)
        if n is not None and limit is None:
            limit = n
        else:
            rest.append(c)
    if limit is None:
        if any(col_.name in names for c in conjuncts for col_ in c.find_all(exp.Column)):
            raise ctx.error("filter the row number with rn <= N, rn < N or rn = 1", where,
                            help="Top-N keeps the first N rows of each partition")
        return node
    if limit < 1:
        raise ctx.error("the row number bound must keep at least one row", where)
    out: L.Node = TopN(rank.input, rank.partition_by, rank.order_by, limit, rank.rank_name, function=rank.function)
    for p in reversed(chain):
        out = p.with_inputs((out,))
    for c in rest:
        out = L.Filter(out, c)
    return out


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _rank_bound(c: exp.Expression, names: set[str]) -> int | None:
    """N for ``rn <= N``, ``rn < N+1``, ``rn = 1`` (either side), else None."""
    if not isinstance(c, (exp.LTE, exp.LT, exp.EQ, exp.GTE, exp.GT)):
        return None
    left, right = c.this, c.expression
    flipped = False
    if isinstance(right, exp.Column) and right.name in names:
        left, right, flipped = right, left, True
    if not (isinstance(left, exp.Column) and left.name in names and isinstance(right, exp.Literal) and right.is_int):
        return None
    n = int(right.name)
    kind = type(c)
    if flipped:
        kind = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.LTE: exp.GTE, exp.LT: exp.GT, exp.EQ: exp.EQ}[kind]
    if kind is exp.LTE:
        return n
    if kind is exp.LT:
        return n - 1
    if kind is exp.EQ and n == 1:
        return 1
    return None


def finish_ranks(root: L.Node, ctx: BindContext) -> L.Node:
    """Each ROW_NUMBER that no filter bounded becomes a running row number ordered by time, or is refused (it
    would rank an unbounded stream)."""
    done: dict[int, L.Node] = {}

    def visit(n: L.Node) -> L.Node:
        if id(n) not in done:
            inputs = tuple(visit(i) for i in n.inputs)
            out = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.with_inputs(inputs)
            done[id(n)] = rank_as_over(out, ctx) if isinstance(out, Rank) else out
        return done[id(n)]

    return visit(root)

