"""Logical nodes for OVER aggregates (per-row aggregates over a time-ordered frame)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
    aggs: tuple[AggCall, ...]
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
