"""Small sqlglot builders for lowered statements, the same tree for DuckDB and Spark.

Lowered SQL is built as sqlglot trees and rendered per dialect at the
end; these helpers only use expressions whose DuckDB and Spark renderings
mean the same (``UnixMicros`` is ``epoch_us`` / ``unix_micros``,
``UnixToTime`` at microsecond scale is ``make_timestamp`` /
``timestamp_micros``, ``Explode`` of a ``GenerateSeries`` is ``unnest`` /
``explode``). Time is integer microseconds since the epoch, as in the
runtime, and windows are aligned with the same floor modulo
(``lower.sqlgen.floor_to``).

Example:
    >>> e = floor_us(micros(c("ts")), 10_000_000)
    >>> e.sql("duckdb")
    'EPOCH_US("ts") - (((EPOCH_US("ts") % 10000000) + 10000000) % 10000000)'
    >>> e.sql("spark")
    'UNIX_MICROS(`ts`) - (((UNIX_MICROS(`ts`) % 10000000) + 10000000) % 10000000)'
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ..errors import LoweringRefused  # noqa: F401 - (the lowering modules take it from here)
from ..logical.nodes import WINDOW_TIME_OFFSET_US
from ..types import to_sql_type
from ..vocabulary import OP  # noqa: F401 - (lowering modules take it from here)
from ..windows import floor_to
from .sqlgen import lit

DIALECTS = ("duckdb", "spark")
FILE, ROW, MAX_BEFORE = "__file", "__row", "__mx"  # columns every scan relation carries (and OP for changes)
ARRIVAL_WM = "__wm"  # the watermark (less the allowed lateness) as it stood when the row arrived; NULL: not judged
# Source order (the file's place in the source, the row's place in the file), and the watermark at arrival,
# against which the operators that judge lateness per window compare each row's windows.
ORDER = (FILE, ROW, ARRIVAL_WM)
RUNTIME = "the runtime can (SET 'engine' = 'runtime')"


def ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def c(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference, optionally qualified."""
    return exp.Column(this=ident(name), table=exp.Identifier(this=table, quoted=False) if table else None)


def table(name: str, alias: str | None = None) -> exp.Table:
    t = exp.Table(this=ident(name))
    if alias:
        t.set("alias", exp.TableAlias(this=exp.Identifier(this=alias, quoted=False)))
    return t


def sub(query: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.Identifier(this=alias, quoted=False)))


def alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(e, name, quoted=True)


def micros(e: exp.Expression) -> exp.Expression:
    """A timestamp as integer microseconds since the epoch."""
    return exp.UnixMicros(this=e)


def timestamp(us: exp.Expression) -> exp.Expression:
    """Integer microseconds since the epoch as a timestamp."""
    return exp.UnixToTime(this=us, scale=exp.UnixToTime.MICROS)


def floor_us(us: exp.Expression, width: int, offset: int = 0) -> exp.Expression:
    return floor_to(us, width, offset)


def add(a: exp.Expression, n: int | exp.Expression) -> exp.Expression:
    return exp.Add(this=a, expression=lit(n) if isinstance(n, int) else n)


def minus(a: exp.Expression, n: int | exp.Expression) -> exp.Expression:
    return exp.Sub(this=a, expression=lit(n) if isinstance(n, int) else n)


def null_of(dtype: pa.DataType) -> exp.Expression:
    return exp.Cast(this=exp.Null(), to=to_sql_type(dtype))


def cast(e: exp.Expression, dtype: pa.DataType) -> exp.Expression:
    return exp.Cast(this=e, to=to_sql_type(dtype))


def greatest(*args: exp.Expression) -> exp.Expression:
    """The largest non-NULL argument (NULL only if all are NULL), in both engines."""
    if len(args) == 1:
        return args[0]
    return exp.Greatest(this=args[0], expressions=list(args[1:]), ignore_nulls=True)


def and_(*parts: exp.Expression | None) -> exp.Expression | None:
    parts = [p for p in parts if p is not None]
    return exp.and_(*parts, copy=False) if parts else None


def null_safe_eq(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    return exp.NullSafeEQ(this=a, expression=b)


def window(func: exp.Expression, partition: list[exp.Expression], order: list[exp.Ordered] | None = None,
           frame: exp.WindowSpec | None = None) -> exp.Window:
    return exp.Window(this=func, partition_by=partition or None,
                      order=exp.Order(expressions=order) if order else None, spec=frame)


def asc(e: exp.Expression, nulls_first: bool = True) -> exp.Ordered:
    return exp.Ordered(this=e, desc=False, nulls_first=nulls_first)


def desc(e: exp.Expression, nulls_first: bool = False) -> exp.Ordered:
    return exp.Ordered(this=e, desc=True, nulls_first=nulls_first)


def rows_frame(preceding: int | None, end: str = "CURRENT ROW", kind: str = "ROWS") -> exp.WindowSpec:
    """``kind BETWEEN <preceding> PRECEDING AND <end>`` (None: UNBOUNDED; end may be '1 PRECEDING')."""
    start = "UNBOUNDED" if preceding is None else lit(preceding)
    if end == "1 PRECEDING":
        return exp.WindowSpec(kind=kind, start=start, start_side="PRECEDING", end=lit(1), end_side="PRECEDING")
    return exp.WindowSpec(kind=kind, start=start, start_side="PRECEDING", end="CURRENT ROW")


def row_number(partition: list[exp.Expression], order: list[exp.Ordered]) -> exp.Window:
    return window(exp.RowNumber(), partition, order)


def open_window(end: exp.Expression) -> exp.Expression:
    """Whether a row's window ``[.., end)`` (microseconds) was still open when the row arrived: its last
    millisecond (window_time) above the watermark at arrival, ``__wm`` (Flink's window operators drop a row
    only from windows that fired, ``TimeWindowUtil.isWindowFired``)."""
    last = exp.Sub(this=end, expression=lit(WINDOW_TIME_OFFSET_US))
    return exp.Paren(this=exp.Or(this=exp.Is(this=c(ARRIVAL_WM), expression=exp.Null()),
                                 expression=exp.GT(this=last, expression=c(ARRIVAL_WM))))
