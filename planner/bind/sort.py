"""Binding ORDER BY and LIMIT of a continuous query (Flink's rules for streams).

``ORDER BY`` must start with an event-time attribute of the result,
ascending; more columns may follow (``logical/sort.py``: TemporalSort).
``LIMIT n`` keeps the first ``n`` rows (Limit). Both need an append-only
result: an updating one has Top-N (``ROW_NUMBER() OVER (…)``).
"""

from __future__ import annotations

from sqlglot import exp

from ..logical import nodes as L
from ..logical.sort import Limit, TemporalSort
from .context import BindContext

_TOP_N = "for Top-N use ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) in a subquery, WHERE rn <= N"


def bind_order_limit(node: L.Node, select: exp.Select, ctx: BindContext) -> L.Node:
    """``node`` sorted by the SELECT's ORDER BY and cut by its LIMIT (each when given)."""
    order, limit, offset = select.args.get("order"), select.args.get("limit"), select.args.get("offset")
    if offset is not None:
        raise ctx.error("OFFSET is not supported on a continuous query", offset,
                        help="LIMIT n keeps the first n rows; a query over materialized views may use OFFSET")
    if (order is not None or limit is not None) and node.changelog != L.APPEND:
        raise ctx.error(f"{'ORDER BY' if order is not None else 'LIMIT'} needs an append-only result, but this "
                        "query's result is updating (rows are retracted and replaced)", order or limit, help=_TOP_N)
    if order is not None:
        node = TemporalSort(node, _sort_keys(node, order, ctx))
    if limit is not None:
        node = Limit(node, _count(limit, ctx))
    return node


def _sort_keys(node: L.Node, order: exp.Order, ctx: BindContext) -> tuple[tuple[str, bool], ...]:
    names = {n.lower(): n for n in node.schema.names}
    keys = []
    for item in order.expressions:
        column = item.this
        if not isinstance(column, exp.Column) or column.name.lower() not in names:
            raise ctx.error("ORDER BY of a continuous query takes columns of its result", column,
                            help="name a column of the SELECT list (or its alias)")
        keys.append((names[column.name.lower()], bool(item.args.get("desc"))))
    first, descending = keys[0]
    if not node.schema.find(first).rowtime or descending:
        raise ctx.error("ORDER BY of a continuous query must start with an event-time attribute, ascending "
                        f"('{first}' {'is descending' if descending else 'is not one'})", order.expressions[0],
                        help="ORDER BY the time column (WATERMARK FOR ...) ASC, then other columns; " + _TOP_N)
    return tuple(keys)


def _count(limit: exp.Limit, ctx: BindContext) -> int:
    value = limit.args.get("expression")
    if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
        raise ctx.error("LIMIT takes a whole number of rows", value or limit, help="LIMIT 10")
    if int(value.this) > 2**63 - 1:
        raise ctx.error("LIMIT is larger than a BIGINT holds (9223372036854775807)", value, help="LIMIT 10")
    return int(value.this)
