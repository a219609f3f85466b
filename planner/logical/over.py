"""Logical nodes for OVER aggregates (per-row aggregates over a time-ordered frame)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from ..timeutil import format_duration
from ..types import Field, Schema
from .nodes import APPEND, AggCall, Unary, _derive


@dataclass(frozen=True)
class OverFrame:
    """``ROWS`` or ``RANGE`` ``BETWEEN <preceding> PRECEDING AND CURRENT ROW``.

    ``preceding`` is a row count (ROWS) or microseconds (RANGE); None is UNBOUNDED.
    """

    kind: str  # 'ROWS' | 'RANGE'
    preceding: int | None

    def describe(self) -> str:
        if self.preceding is None:
            start = "UNBOUNDED"
        elif self.kind == "RANGE":
            start = format_duration(self.preceding)
        else:
            start = str(self.preceding)
        return f"{self.kind} {start} PRECEDING"


@dataclass(frozen=True, eq=False)
class OverAggregate(Unary):
    """Each input row with aggregates over the rows before it in its partition, in time order.

    Output: every input column, then the aggregates. Append-only; a row is
    emitted once the watermark passes its time, in time order.
    """

    partition_by: tuple[str, ...]
    order_by: str  # a time attribute of the input
    frame: OverFrame
    aggs: tuple[AggCall | OverCall, ...]
    schema: Schema = field(init=False)
    changelog: str = field(init=False, default=APPEND)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        fields = tuple(self.input.schema) + tuple(Field(a.name, a.type) for a in self.aggs)
        _derive(self, schema=Schema(fields), watermark=self.input.watermark)

    def label(self) -> str:
        part = f"partition by {', '.join(self.partition_by)}, " if self.partition_by else ""
        aggs = ", ".join(a.describe() for a in self.aggs)
        return f"OverAggregate({part}order by {self.order_by}, {self.frame.describe()}, aggs=[{aggs}])"


# OVER functions that are not aggregates (Flink's streaming OVER supports them; LEAD it refuses in stream mode).
NAVIGATION = ("lag", "first_value", "last_value")
RANKING = ("row_number", "rank", "dense_rank")


@dataclass(frozen=True)
class OverCall:
    """A window function over the frame: ``LAG(arg, offset, default)``, ``FIRST_VALUE(arg)``,
    ``LAST_VALUE(arg)`` (both skip NULLs, as Flink's), ``ROW_NUMBER()``, ``RANK()``, ``DENSE_RANK()`` (the
    last two as Flink's streaming OVER computes them: the rows so far, peers included).

    Used where an :class:`AggCall` is (``func``, ``arg``, ``name``, ``type``); ``default`` is a bound
    literal expression (LAG) or None.
    """

    func: str
    arg: str | None
    name: str
    type: pa.DataType
    offset: int = 1
    default: exp.Expression | None = None
    distinct: bool = False

    def describe(self) -> str:
        args = [self.arg] if self.arg else []
        if self.func == "lag" and (self.offset != 1 or self.default is not None):
            args.append(str(self.offset))
        if self.default is not None:
            args.append(self.default.sql())
        return f"{self.func.upper()}({', '.join(args)}) AS {self.name}"
