"""Logical nodes for Top-N and deduplication (ROW_NUMBER() OVER ... filtered by the row number)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from ...grammar import Span
from ..types import Field, Schema
from .nodes import APPEND, UPDATING, Filter, Node, Project, Unary, WindowAggregate, WindowTVF, _derive


def describe_order(order_by: tuple[tuple[str, bool], ...]) -> str:
    return ", ".join(f"{c} DESC" if desc else c for c, desc in order_by)


def window_end_column(node: Node, partition_by: tuple[str, ...]) -> str | None:
    """The name, among ``partition_by``, of the column holding the window's end."""
    found = _window_names(node, partition_by)
    return found[1]["window_end"] if found else None


def window_source(node: Node, partition_by: tuple[str, ...]) -> Node | None:
    """The window aggregate or table function whose window_start and window_end ``partition_by`` holds, if any.

    Follows renames through projections and filters, so Flink's window Top-N
    shape (``PARTITION BY window_start, window_end`` right after a window
    aggregate or TVF) is recognised whatever else is selected.
    """
    found = _window_names(node, partition_by)
    return found[0] if found else None


def _window_names(node: Node, partition_by: tuple[str, ...]):
    names = {p: p for p in partition_by}  # name at this level -> name in the partition
    cur = node
    while True:
        if isinstance(cur, (WindowAggregate, WindowTVF)) or isinstance(cur, TopN) and cur.kind == "window":
            return (cur, names) if {"window_start", "window_end"} <= set(names) else None
        if isinstance(cur, Filter):
            cur = cur.input
            continue
        if isinstance(cur, Project):
            below = {}
            for out, e in cur.exprs:
                if out in names and isinstance(e, exp.Column):
                    below[e.name] = names[out]
            names, cur = below, cur.input
            continue
        return None


@dataclass(frozen=True, eq=False)
class Rank(Unary):
    """``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)`` before a filter on it makes it a Top-N.

    Only a step of binding: the enclosing query must bound the row number
    (``WHERE rn <= N`` or ``rn = 1``), which turns it into a :class:`TopN`.
    """

    partition_by: tuple[str, ...]
    order_by: tuple[tuple[str, bool], ...]  # (column, descending)
    rank_name: str
    span: Span | None = None
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        _derive(self, schema=Schema(tuple(self.input.schema) + (Field(self.rank_name, pa.int64(), False),)),
                changelog=UPDATING, watermark=None)

    def label(self) -> str:
        return f"Rank(partition by {', '.join(self.partition_by)}, order by {describe_order(self.order_by)})"


@dataclass(frozen=True, eq=False)
class TopN(Unary):
    """The first ``limit`` rows of each partition in an order; the row number is column ``rank_name``.

    ``kind`` (derived):

    - ``window``: partitioned by a window's bounds over an append-only
      windowed input; each window's top rows are emitted once, when the
      watermark passes its end (append-only);
    - ``first`` / ``last``: deduplication (``rn = 1`` ordered by a time
      attribute ascending / descending); the first row per key is
      append-only, the last row per key is updating;
    - ``global``: anything else; updating (rows enter and leave the top).
    """

    partition_by: tuple[str, ...]
    order_by: tuple[tuple[str, bool], ...]
    limit: int
    rank_name: str
    ttl: int = 0  # global Top-N, deduplication: partitions not touched for this long are dropped (state.ttl)
    kind: str = field(init=False)
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        schema = self.input.schema
        append = self.input.changelog == APPEND
        order_field = schema.find(self.order_by[0][0]) if len(self.order_by) == 1 else None
        window = window_source(self.input, self.partition_by)
        if append and window is not None:
            kind = "window"
        elif append and self.limit == 1 and order_field is not None and (order_field.rowtime or order_field.proctime):
            kind = "last" if self.order_by[0][1] else "first"
        else:
            kind = "global"
        keeps_time = kind in ("window", "first")
        fields = tuple(f if keeps_time else f.plain() for f in schema) + (Field(self.rank_name, pa.int64(), False),)
        watermark = (window.watermark if kind == "window" else self.input.watermark) if keeps_time else None
        _derive(self, kind=kind, schema=Schema(fields), changelog=APPEND if keeps_time else UPDATING,
                watermark=watermark)

    def label(self) -> str:
        what = {"window": "WindowTopN", "first": "Deduplicate(first)", "last": "Deduplicate(last)",
                "global": "TopN"}[self.kind]
        part = f"partition by {', '.join(self.partition_by)}, " if self.partition_by else ""
        return f"{what}({part}order by {describe_order(self.order_by)}, n={self.limit})"
