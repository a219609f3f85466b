"""Binding the window functions of OVER that are not aggregates, as Flink's streaming OVER has them.

``LAG(x [, n [, default]])``, ``FIRST_VALUE(x)``, ``LAST_VALUE(x)`` (NULLs
skipped, as Flink's), ``ROW_NUMBER()``, ``RANK()`` and ``DENSE_RANK()``
over a window ordered by a time attribute become :class:`~logical.over.OverCall`
entries of an :class:`~logical.over.OverAggregate`. ``LEAD`` is refused as
Flink refuses it in stream mode (it would wait for rows that have not
arrived), and so are the frames the ranking functions do not take.

A ``ROW_NUMBER()`` that no Top-N filter bounds is an OverAggregate too
(:func:`rank_as_over`): the row's position in its partition, in time and
arrival order, as Flink computes it (``ROW_NUMBER() OVER (PARTITION BY a
ORDER BY ts)`` on a stream is append-only).
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ..logical.over import OverAggregate, OverCall, OverFrame
from ..logical.rank import Rank
from .context import BindContext
from .expressions import bind_scalar, infer_type

_RANKING = {exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank"}
_VALUES = {exp.FirstValue: "first_value", exp.LastValue: "last_value"}


def is_window_function(func: exp.Expression) -> bool:
    return isinstance(func, (exp.Lag, exp.Lead, *_RANKING, *_VALUES))


def bind_window_function(func: exp.Expression, window: exp.Window, frame: OverFrame, out: str, column_for,
                         schema_of, scope, ctx: BindContext) -> OverCall:
    """The OverCall for ``func`` (named ``out``); ``column_for`` names an argument's input column and
    ``schema_of()`` is the schema those columns are in."""
    if isinstance(func, exp.Lead):
        raise ctx.error("LEAD is not supported on a stream (as in Flink: it would wait for rows that have not "
                        "arrived)", func, help="use LAG over the same window, or pair each row with the next by a "
                                               "self-join")
    for kind, name in _RANKING.items():
        if isinstance(func, kind):
            if window.args.get("spec") is not None:
                raise ctx.error(f"{name.upper()}() takes no ROWS or RANGE frame", window.args["spec"])
            if func.args.get("expressions"):
                raise ctx.error(f"{name.upper()}() takes no arguments", func)
            return OverCall(name, None, out, pa.int64())
    arg = column_for(func.this)
    arg_type = schema_of().find(arg).type
    if isinstance(func, exp.Lag):
        if window.args.get("spec") is not None:  # Calcite: LAG does not allow framing
            raise ctx.error("LAG takes no ROWS or RANGE frame", window.args["spec"],
                            help="LAG(x) OVER (PARTITION BY ... ORDER BY ts)")
        offset = func.args.get("offset")
        if offset is not None and not (isinstance(offset, exp.Literal) and offset.is_int and int(offset.name) >= 0):
            raise ctx.error("the offset of LAG must be a whole number, 0 or more", offset)
        default = func.args.get("default")
        if default is not None:
            default = bind_scalar(default, scope, ctx.source, clause="LAG")
            if default.find(exp.Column) is not None:
                raise ctx.error("the default of LAG must be a constant", func.args["default"])
            infer_type(default, schema_of(), ctx.source)
        return OverCall("lag", arg, out, arg_type, int(offset.name) if offset is not None else 1, default)
    return OverCall(next(n for k, n in _VALUES.items() if isinstance(func, k)), arg, out, arg_type)


def check_row_number_alone(windows: list[exp.Window], ctx: BindContext) -> None:
    """ROW_NUMBER counts over ROWS, everything else here over the default RANGE frame: Flink cannot mix them."""
    kinds = {isinstance(w.this, exp.RowNumber) for w in windows}
    if len(kinds) > 1:
        first = next(w for w in windows if isinstance(w.this, exp.RowNumber))
        raise ctx.error("ROW_NUMBER() counts over a ROWS window and cannot share its SELECT with other OVER "
                        "functions (as in Flink: all must be computed on the same window)", first,
                        help="compute ROW_NUMBER() in a subquery and the rest over its result")


def rank_as_over(rank: Rank, ctx: BindContext) -> OverAggregate:
    """A ROW_NUMBER, RANK or DENSE_RANK without a Top-N filter: the running number, if it is ordered by a time
    attribute (ROW_NUMBER counts rows, the others the rows so far with their peers, as Flink's OVER)."""
    name = rank.function.upper()
    order = rank.order_by
    field = rank.input.schema.find(order[0][0]) if len(order) == 1 else None
    if field is None or order[0][1] or not (field.rowtime or field.proctime):
        raise ctx.error(f"{name}() OVER (...) needs a filter on it in the enclosing query: WHERE rn <= N "
                        "(Top-N) or rn = 1 (deduplication), unless it is ordered by a time attribute ascending",
                        span=rank.span,
                        help="SELECT * FROM (SELECT *, ROW_NUMBER() OVER (...) AS rn FROM t) WHERE rn <= 3")
    if rank.input.changelog != "append-only":
        raise ctx.error(f"a running {name}() needs an append-only input (a stream)", span=rank.span)
    frame = OverFrame("ROWS", None) if rank.function == "row_number" else OverFrame("RANGE", None)
    return OverAggregate(rank.input, rank.partition_by, field.name, frame,
                         (OverCall(rank.function, None, rank.rank_name, pa.int64()),))
