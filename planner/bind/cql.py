"""Binding the STREAM/CQL window syntax onto dsms's window, OVER, Top-N and changelog model.

``FROM s [window]`` makes a relation out of a stream; a query over it is a
relation; ``ISTREAM``, ``DSTREAM`` and ``RSTREAM`` turn a relation back
into a stream. The mapping (docs/cql.md has the full table):

- ``[RANGE size SLIDE slide]``: a HOP window; the relation at each instant
  (a multiple of the slide) holds the rows of the window ending then, and
  an aggregate groups by that window. As a relation it is an updating
  result (:class:`~logical.cql.SnapshotDiff`); RSTREAM is each instant's
  rows (the window aggregate itself); ISTREAM/DSTREAM what enters/leaves;
- ``[ROWS n]`` / ``[PARTITION BY k ROWS n]``: the last n rows (per k), a
  Top-N by time; with aggregates (grouped by exactly the partition keys),
  an OVER aggregate over ``n - 1 PRECEDING`` rows, of which the latest
  row per key is the relation (keep-last deduplication);
- ``[RANGE UNBOUNDED]``: every row so far (the stream; its aggregates are
  group aggregates);
- ``[NOW]``: the rows of the current instant, i.e. the stream itself.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ...grammar.stream_syntax import CqlWindow, RelationToStream
from ..logical import nodes as L
from ..logical.cql import SnapshotDiff, StreamOf
from ..timeutil import interval_micros
from ..windows import HOP
from .context import BindContext
from .expressions import Scope, ScopeColumn, col
from .from_clause import bind_relation, window_over

HIDDEN = "__cql"  # qualifier of the window columns a CQL query does not show
INSTANT = "__instant"


def cql_window_of(select: exp.Expression) -> CqlWindow | None:
    from_ = select.args.get("from_") if isinstance(select, exp.Select) else None
    return from_.this if from_ is not None and isinstance(from_.this, CqlWindow) else None


def bind_cql_window(w: CqlWindow, ctx: BindContext) -> tuple[L.Node, Scope, int | None]:
    """The relation of ``s [window]`` for RANGE, UNBOUNDED and NOW windows; the slide for RANGE, else None."""
    alias = w.args.get("alias")
    table = w.this.copy()
    if alias is not None:
        table.set("alias", alias.copy())
    node, scope = bind_relation(table, ctx)
    kind = w.args["kind"]
    rowtime = next((c for c in scope.columns if c.field.rowtime), None)
    if kind in ("NOW", "RANGE") and rowtime is None:
        raise ctx.error(f"a [{kind} ...] window needs a stream with event time", w,
                        help="declare WATERMARK FOR <time column> AS ... in the source")
    if kind != "RANGE":
        return node, scope, None
    if w.args.get("slide") is None:
        raise ctx.error("a time-based CQL window needs SLIDE: dsms evaluates it at instants a slide apart", w,
                        help="e.g. [RANGE 1 MINUTE SLIDE 10 SECONDS]; [RANGE 1 MINUTE SLIDE 1 MINUTE] tumbles")
    size, slide = w.args["size"], w.args["slide"]
    size_us, slide_us = interval_micros(size, ctx.source), interval_micros(slide, ctx.source)
    if slide_us > 0 and size_us % slide_us != 0:  # each instant (a multiple of the slide) ends a window
        raise ctx.error("the size of a CQL RANGE window must be a whole multiple of its slide", w,
                        help="e.g. [RANGE 1 MINUTE SLIDE 10 SECONDS]")
    desc = exp.column(rowtime.name, table=rowtime.qualifier)
    node, windowed = window_over(node, scope, HOP, desc, [slide, size], [], w, ctx)
    cols = [c if c.name not in L.WINDOW_COLUMNS or c.qualifier else ScopeColumn(HIDDEN, c.name, c.field)
            for c in windowed.columns]
    return node, Scope(tuple(cols)), interval_micros(slide, ctx.source)


def with_instant(items: list[exp.Expression], group: exp.Group | None, aggregated: bool):
    """A RANGE window's query: the instant (the window end) as a hidden column, aggregates grouped by the window."""
    hidden = [exp.column(n, table=HIDDEN) for n in ("window_start", "window_end")]
    items = items + [exp.alias_(exp.column("window_end", table=HIDDEN), INSTANT, quoted=True)]
    if aggregated:
        group = exp.Group(expressions=hidden + (list(group.expressions) if group is not None else []))
    return items, group


def as_relation(node: L.Node, slide_us: int) -> L.Node:
    return SnapshotDiff(node, INSTANT, slide_us, "relation")


def bind_relation_to_stream(tree: RelationToStream, ctx: BindContext) -> L.Node:
    """ISTREAM / DSTREAM / RSTREAM of a query."""
    kind = tree.args["kind"]
    inner = tree.this
    window = cql_window_of(inner)
    if kind == "ISTREAM" and window is not None and window.args["kind"] == "ROWS":
        # Event by event rather than at micro-batch instants, so the stream does not depend on batching.
        return ctx.bind_set(rewrite_rows_window(inner, window, ctx, istream=True), ctx)
    node = ctx.bind_set(inner, ctx)
    now = window is not None and window.args["kind"] == "NOW"
    if isinstance(node, SnapshotDiff):
        if kind == "RSTREAM":  # every instant's rows: what the window produces
            keep = [(f.name, col(f.name)) for f in node.input.schema if f.name != INSTANT]
            return L.Project(node.input, tuple(keep), tuple(node.input.schema.find(n).type for n, _ in keep))
        return replace(node, kind="insert" if kind == "ISTREAM" else "delete")
    if node.changelog == L.UPDATING:
        if kind == "RSTREAM":
            raise ctx.error("RSTREAM of a relation that changes with every event would repeat all of it each time",
                            tree, help="use ISTREAM (its new rows) or DSTREAM (its removed rows)")
        return StreamOf(node, "insert" if kind == "ISTREAM" else "delete")
    # An append-only relation only grows: its rows enter once and never leave, except with [NOW].
    if kind == "ISTREAM" or now:
        return node
    if kind == "DSTREAM":
        return L.Filter(node, exp.false())
    raise ctx.error("RSTREAM of a relation that only grows would repeat all of it at every instant", tree,
                    help="use ISTREAM, or a [RANGE ... SLIDE ...] or [NOW] window")


# -- [ROWS n] ------------------------------------------------------------------------------

# The most rows a [ROWS n] window keeps per partition: its row numbers are 64-bit integers.
ROWS_LIMIT = 2**62

def rewrite_rows_window(select: exp.Select, w: CqlWindow, ctx: BindContext, istream: bool = False) -> exp.Expression:
    """``[ROWS n]`` / ``[PARTITION BY k ROWS n]`` as an equivalent query over the plain stream.

    With ``istream``, the query whose rows are what ISTREAM of the relation gives, event by event:
    each arriving row (without aggregates), or each row with its window's aggregates.
    """
    text = w.args["rows"].name
    n = int(text) if text.isdigit() else 0
    if not 1 <= n <= ROWS_LIMIT:
        raise ctx.error(f"a [ROWS n] window needs a whole number n from 1 to {ROWS_LIMIT:,}, not {text}", w)
    base, scope = bind_relation(w.this.copy(), ctx)
    rowtime = next((f.name for f in base.schema if f.rowtime), None)
    if rowtime is None:
        raise ctx.error("a [ROWS n] window needs a stream with event time (it keeps the latest rows)", w)
    keys = [k.name for k in w.args.get("partition_by") or []]
    for k in keys:
        scope.resolve(exp.column(k), ctx.source)
    name = (w.args.get("alias") or w.this.args.get("alias"))
    name = name.name if name is not None else w.this.name
    source = w.this.copy()
    part = [exp.column(k, quoted=True) for k in keys]
    group = select.args.get("group")
    aggregated = group is not None or any(i.find(exp.AggFunc) for i in select.expressions)
    if select.args.get("having") is not None:
        raise ctx.error("HAVING over a [ROWS n] window is not supported", select.args["having"],
                        help="filter the result in an enclosing query")
    if not aggregated and istream:  # every row enters the relation when it arrives
        out = select.copy()
        out.set("from_", exp.From(this=source))
        return out
    if not aggregated:
        return _last_rows(select, source, base, rowtime, n, part, name)
    _check_rows_grouping(group, keys, w, ctx)
    return _rows_aggregate(select, source, rowtime, n, part, istream)


def _ranked(inner: exp.Expression, order: exp.Expression, part: list[exp.Expression]) -> exp.Select:
    """``inner``'s rows numbered (``__cql_rn``) per partition, latest ``order`` first."""
    rn = exp.Window(this=exp.RowNumber(), partition_by=[p.copy() for p in part] or None,
                    order=exp.Order(expressions=[exp.Ordered(this=order, desc=True)]))
    return exp.select(exp.Star(), exp.alias_(rn, "__cql_rn", quoted=True)).from_(inner)


def _last_rows(select: exp.Select, source: exp.Expression, base, rowtime: str, n: int,
               part: list[exp.Expression], name: str) -> exp.Select:
    """The last n rows per partition: a Top-N by time, then the user's query over it."""
    columns = [exp.column(f.name, quoted=True) for f in base.schema]
    top = exp.select(*columns).from_(exp.Subquery(this=_ranked(source, exp.column(rowtime, quoted=True), part),
                                                 alias=exp.TableAlias(this=exp.to_identifier("__cql_r"))))
    top = top.where(exp.column("__cql_rn", quoted=True) <= exp.Literal.number(n))
    out = select.copy()
    out.set("from_", exp.From(this=exp.Subquery(this=top, alias=exp.TableAlias(this=exp.to_identifier(name)))))
    return out


def _check_rows_grouping(group: exp.Group | None, keys: list[str], w: CqlWindow, ctx: BindContext) -> None:
    """An aggregate over a [ROWS n] window is grouped by exactly the window's PARTITION BY keys."""
    group_keys = sorted(g.name for g in (group.expressions if group is not None else []) if isinstance(g, exp.Column))
    if group is not None and (len(group_keys) != len(group.expressions) or group_keys != sorted(keys)):
        raise ctx.error("an aggregate over a [ROWS n] window is grouped by exactly its PARTITION BY keys", group,
                        help="[PARTITION BY k ROWS 3] ... GROUP BY k")
    if keys and group is None:
        raise ctx.error("group by the PARTITION BY keys of the [ROWS n] window", w)


def _rows_aggregate(select: exp.Select, source: exp.Expression, rowtime: str, n: int,
                    part: list[exp.Expression], istream: bool) -> exp.Select:
    """Each row with the aggregates of its window (the n rows up to it); without ``istream``, the latest per key."""
    where = select.args.get("where")
    frame = exp.WindowSpec(kind="ROWS", start=exp.Literal.number(n - 1), start_side="PRECEDING", end="CURRENT ROW")
    over = exp.Window(partition_by=[p.copy() for p in part] or None,
                      order=exp.Order(expressions=[exp.Ordered(this=exp.column(rowtime, quoted=True))]), spec=frame)
    items, names = [], []
    for i, item in enumerate(select.expressions):
        out_name = item.alias if isinstance(item, exp.Alias) else item.name if isinstance(item, exp.Column) \
            else f"EXPR${i}"
        names.append(out_name)
        inner = item.this if isinstance(item, exp.Alias) else item
        items.append(exp.alias_(inner.transform(lambda e: _over_rows(e, over, where)), out_name, quoted=True))
    items += [exp.alias_(p.copy(), f"__cql_k{j}", quoted=True) for j, p in enumerate(part)]
    items.append(exp.alias_(exp.column(rowtime, quoted=True), "__cql_t", quoted=True))
    per_row = exp.select(*items).from_(source)
    if istream:
        return exp.select(*[exp.column(c, quoted=True) for c in names]).from_(
            exp.Subquery(this=per_row, alias=exp.TableAlias(this=exp.to_identifier("__cql_o"))))
    keyed = [exp.column(f"__cql_k{j}", quoted=True) for j in range(len(part))]
    latest = _ranked(exp.Subquery(this=per_row, alias=exp.TableAlias(this=exp.to_identifier("__cql_o"))),
                     exp.column("__cql_t", quoted=True), keyed)
    return exp.select(*[exp.column(c, quoted=True) for c in names]).from_(
        exp.Subquery(this=latest, alias=exp.TableAlias(this=exp.to_identifier("__cql_l")))
    ).where(exp.column("__cql_rn", quoted=True).eq(1))


def _over_rows(e: exp.Expression, over: exp.Window, where: exp.Where | None) -> exp.Expression:
    """An aggregate call as the same aggregate OVER the window's rows (the WHERE picks what it aggregates)."""
    if not isinstance(e, exp.AggFunc):
        return e
    agg = e.copy()
    if where is not None:  # the window holds every row; the filter picks what is aggregated
        arg = agg.this
        if arg is None or isinstance(arg, exp.Star):
            agg.set("this", exp.Case(ifs=[exp.If(this=where.this.copy(), true=exp.Literal.number(1))]))
        else:
            agg.set("this", exp.Case(ifs=[exp.If(this=where.this.copy(), true=arg.copy())]))
    w2 = over.copy()
    w2.set("this", agg)
    return w2
