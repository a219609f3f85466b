"""ORDER BY and LIMIT on continuous queries, as Flink allows them on streams.

* ``ORDER BY ts [ASC], more …`` where ``ts`` is an event-time attribute:
  :class:`TemporalSort` holds rows until the watermark passes their time,
  then emits them in (ts, more …) order (Flink's temporal sort). Its input
  must be append-only; so is its output.
* ``LIMIT n``: :class:`Limit` passes the first ``n`` rows of an
  append-only input, in the order they come (after a temporal sort: the
  first ``n`` by time), then nothing.

Example (bind them from SQL):
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'memory')")
    >>> plan_query("SELECT k, ts FROM s ORDER BY ts, k LIMIT 3", catalog).optimized.label()
    'Limit(3)'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..types import Schema
from .nodes import APPEND, Unary, _derive


@dataclass(frozen=True, eq=False)
class TemporalSort(Unary):
    """Rows in event-time order: each emitted once the watermark passes its time (``keys``: (column,
    descending) pairs; the first is the input's event-time attribute, ascending)."""

    keys: tuple[tuple[str, bool], ...]
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        _derive(self, schema=self.input.schema, changelog=APPEND, watermark=self.input.watermark)

    @property
    def time_column(self) -> str:
        return self.keys[0][0]

    acts_on_event_time = True  # it holds rows until the watermark passes them: late rows would be out of order

    def state_description(self) -> str:
        return "rows until the watermark passes their time"

    def label(self) -> str:
        return "TemporalSort(" + ", ".join(f"{k}{' DESC' if d else ''}" for k, d in self.keys) + ")"


@dataclass(frozen=True, eq=False)
class Limit(Unary):
    """The first ``count`` rows of an append-only input."""

    count: int
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        _derive(self, schema=self.input.schema, changelog=APPEND, watermark=self.input.watermark)

    def state_description(self) -> str:
        return "how many rows it has passed"

    def label(self) -> str:
        return f"Limit({self.count})"
