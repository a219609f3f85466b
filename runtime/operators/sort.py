"""ORDER BY a time attribute and LIMIT on continuous queries (``planner/logical/sort.py``).

TemporalSortLogic: input delta -> output delta. Rows wait in the state
until the watermark reaches their time; then they leave, sorted by the
keys (time first). Rows behind the watermark never arrive: the source
drops them as late, so the output is in time order.

    keys (ts, k)     batch: (09:00:05, b) (09:00:01, a) (09:00:09, c)
    watermark 09:00:06  ->  +I (09:00:01, a), +I (09:00:05, b)
    watermark end       ->  +I (09:00:09, c)

LimitLogic: the first ``count`` rows it is given pass, then nothing
(a counter in the state).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...planner.physical.sort_specs import LimitSpec, TemporalSortSpec
from .base import Env, Logic

_ALL = 0  # the one group of buffered rows


class TemporalSortLogic(Logic):
    def __init__(self, spec: TemporalSortSpec, env: Env):
        self.spec = spec
        self.rows = env.state.panes(spec.id, "rows")
        self.order = [(k, "descending" if d else "ascending") for k, d in spec.keys]

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        self.rows.add(_ALL, batch)
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        held = self.rows.pop(_ALL)
        if not held:
            return []
        table = pa.concat_tables(held) if len(held) > 1 else held[0]
        times = pc.cast(pc.cast(table.column(self.spec.time_column), pa.timestamp("us")), pa.int64())
        due = pc.less_equal(times, watermark)
        keep = table.filter(pc.invert(due))
        if keep.num_rows:
            self.rows.add(_ALL, keep)
        out = table.filter(due)
        return [out.sort_by(self.order)] if out.num_rows else []

    @property
    def state_rows(self) -> int:
        return sum(t.num_rows for t in self.rows.get(_ALL))


class LimitLogic(Logic):
    def __init__(self, spec: LimitSpec, env: Env):
        self.spec = spec
        self.passed = env.state.value(spec.id, "passed", 0)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        room = self.spec.count - self.passed.value
        if room <= 0:
            return []
        out = batch.slice(0, room)
        self.passed.value += out.num_rows
        return [out]
