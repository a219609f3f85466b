"""Interval join: two append-only streams, rows matched within a time bound of each other.

``ON l.k = r.k AND r.ts BETWEEN l.ts + lower AND l.ts + upper``. Input delta -> output delta::

    left batch    -> its matches with the stored right rows; the rows are stored
    right batch   -> its matches with the stored left rows; the rows are stored
    watermark W   -> left rows with ts + upper < W and right rows with ts - lower < W
                     can meet no future partner: dropped from state; an outer
                     side's unmatched ones are emitted first, padded with NULLs

    lower = -1min, upper = 0 (r.ts BETWEEN l.ts - 1 min AND l.ts):
    l@10:05  kept until W > 10:05        r@10:04:30  kept until W > 10:05:30

Both sides' state is bounded by what arrives within the bound plus the
watermark delay, however long the stream. The output's event times may lag
the input watermark by max(upper, -lower), so the forwarded watermark is
held back by that much (as Flink does). A pair is emitted once, when the
later of its two rows arrives, so the result does not depend on batching.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.lower.sqlgen_join import ID
from ...planner.physical.join_specs import IntervalJoinSpec
from .base import MAX_WATERMARK, Env
from .join_base import JoinLogic, lowered, min_time


class IntervalJoinLogic(JoinLogic):
    def __init__(self, spec: IntervalJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_expiry = [env.state.value(spec.id, f"next_expiry_{s}", MAX_WATERMARK) for s in (0, 1)]
        self.next_id = env.state.value(spec.id, "next_id", 0)
        self.reach = (spec.upper, -spec.lower)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.ids[port]:
            start = self.next_id.value
            batch = batch.append_column(ID, pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64)))
            self.next_id.value = start + batch.num_rows
        out = self.run(self.spec.on_batch[port], batch)
        earliest = min_time(batch, self.spec.time_columns[port])
        if earliest < MAX_WATERMARK:
            state = self.next_expiry[port]
            state.value = min(state.value, earliest + self.reach[port])
        return out

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        out: list[pa.Table] = []
        for side in (0, 1):
            state = self.next_expiry[side]
            if state.value >= w:
                continue  # nothing in this side's state has expired
            padded, delete = self.spec.expire[side]
            if padded:
                out += self.run((padded,), params=[w])
            self.execute(delete, [w])
            state.value = self.earliest(self.spec.min_time[side])
        return out

    def output_watermark(self, watermark: int) -> int:
        return watermark if watermark >= MAX_WATERMARK else watermark - self.spec.delay
