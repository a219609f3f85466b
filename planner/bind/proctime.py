"""``PROCTIME()`` inside a query: the processing time, as a time attribute, where Flink allows it.

Flink accepts ``PROCTIME()`` in the SELECT list and as the order of an
OVER window, e.g. processing-time deduplication written inline::

    SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) AS rn FROM s)
    WHERE rn = 1

dsms fills processing time where rows arrive, at the source, so each
``PROCTIME()`` of a SELECT becomes a reference to a processing-time column
of the source it reads: the source's own ``pt AS PROCTIME()`` column when
it declares one, else a hidden one added to the scan (through the filters
and projections above it); ``SELECT *`` does not show it. A SELECT over a
join or an aggregate has no single source, so there ``PROCTIME()`` needs
a ``pt AS PROCTIME()`` column of the source instead (an error says so).

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k VARCHAR, v INT) WITH (connector = 'memory')")
    >>> p = plan_query("SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) "
    ...                "AS rn FROM s) WHERE rn = 1", catalog)
    >>> p.optimized.input.label(), p.changelog
    ('Deduplicate(first)(partition by k, order by __proctime, n=1)', 'append-only')
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..logical import nodes as L
from ..types import TIMESTAMP_LTZ, Field, Schema, unique_name
from .context import BindContext
from .cql import HIDDEN
from .expressions import Scope, ScopeColumn, col

PROCTIME_COLUMN = "__proctime"


def is_proctime_call(e: exp.Expression) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.upper() == "PROCTIME" and not e.expressions


def _calls(trees) -> list[exp.Expression]:
    return [n for t in trees if t is not None for n in t.find_all(exp.Anonymous) if is_proctime_call(n)]


def bind_proctime_calls(node: L.Node, scope: Scope, items: list[exp.Expression], select: exp.Select,
                        ctx: BindContext) -> tuple[L.Node, Scope, list[exp.Expression], exp.Select]:
    """Each ``PROCTIME()`` of the SELECT list and of its OVER windows (inline or ``WINDOW w AS``) as a reference to
    a processing-time column of ``node``'s source; the node (with the column added if it had none), its scope
    (the column hidden from ``*``), the items and the SELECT rewritten."""
    windows = select.args.get("windows") or []
    calls = _calls(items) + _calls(windows)
    if not calls:
        return node, scope, items, select
    added = _with_proctime(node, ctx)
    if added is None:
        raise ctx.error("PROCTIME() here needs the processing time of one source, but this SELECT does not read "
                        "a single stream or table (it reads a join, an aggregate or no table)", calls[0],
                        help="declare the column in the source (pt AS PROCTIME()) and use it, or call PROCTIME() in "
                             "a subquery over the source")
    node, name = added
    if not any(c.field.name == name and c.qualifier == HIDDEN for c in scope.columns):
        scope = Scope(scope.columns + (ScopeColumn(HIDDEN, name, node.schema.find(name)),))

    def to_column(n: exp.Expression) -> exp.Expression:
        return exp.column(name, table=HIDDEN, quoted=True) if is_proctime_call(n) else n

    items = [i.transform(to_column) for i in items]
    if windows:
        select = select.copy()
        select.set("windows", [w.transform(to_column) for w in windows])
    return node, scope, items, select


def _with_proctime(node: L.Node, ctx: BindContext) -> tuple[L.Node, str] | None:
    """``node`` carrying a processing-time column of the source below it, and that column's name; None when the
    node is not a source read through filters and projections."""
    if isinstance(node, L.Scan):
        return _scan_with_proctime(node)
    if isinstance(node, L.Filter):
        below = _with_proctime(node.input, ctx)
        return None if below is None else (L.Filter(below[0], node.condition), below[1])
    if isinstance(node, L.Project):
        below = _with_proctime(node.input, ctx)
        if below is None:
            return None
        inner, name = below
        kept = next((out for out, e in node.exprs if isinstance(e, exp.Column) and e.name == name), None)
        if kept is not None:
            return node.with_inputs((inner,)), kept
        out = unique_name(PROCTIME_COLUMN, list(node.schema.names))
        return L.Project(inner, node.exprs + ((out, col(name)),), node.types + (TIMESTAMP_LTZ,)), out
    return None


def _scan_with_proctime(scan: L.Scan) -> tuple[L.Node, str]:
    src = scan.source
    declared = next((n for n, e in src.computed if is_proctime_call(e)), None)
    if declared is not None:  # the source fills one processing-time column: its own
        if scan.columns is not None and declared not in scan.columns:
            scan = replace(scan, columns=scan.columns + (declared,))
        return scan, declared
    name = unique_name(PROCTIME_COLUMN, list(src.schema.names))
    field = Field(name, TIMESTAMP_LTZ, nullable=False, proctime=True)
    source = replace(src, schema=Schema(tuple(src.schema) + (field,)),
                     computed=src.computed + ((name, exp.Anonymous(this="PROCTIME", expressions=[])),))
    columns = None if scan.columns is None else scan.columns + (name,)
    return replace(scan, source=source, columns=columns), name
