"""Temporal join: each event with the version of a table's row valid at the event's time.

``s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k`` (t has a primary key and
a watermark). Input delta -> output delta::

    table changes   -> stored as versions by (key, time): an upsert starts a
                       version at its time, a delete ends the key's row at its
                       time; a later change at the same (key, time) replaces it
    events          -> buffered
    watermark W     -> the buffered events with ts < W, each joined (DuckDB's
                       ASOF join) with the latest version of its key at or
                       before ts; no version, or a delete: no match (LEFT
                       JOIN: padded with NULLs); emitted, dropped from state.
                       Versions older than the latest one before W are pruned.

    versions of k:   v1@10:00   v2@10:05   delete@10:09
    events:          e@10:03 -> v1   e@10:07 -> v2   e@10:10 -> none

An updating left side (a table's changes, as in Flink) is joined change by
change: each row keeps its kind (+I, -U, +U, -D) and rows are emitted in
the order they arrived, so a retraction, joined with the version at its
own time, takes back what its row was joined with.

An event waits until both the stream's and the table's watermark pass it
(the operator's watermark is their minimum), so every version that can
apply to it has arrived, as in Flink's event-time temporal join.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.lower.sqlgen_join import SEQ
from ...planner.physical.join_specs import TemporalJoinSpec
from .base import MAX_WATERMARK, Env
from .join_base import JoinLogic, lowered, min_time

PRUNE_EVERY = 4  # watermarks between prunings of old versions


class TemporalJoinLogic(JoinLogic):
    def __init__(self, spec: TemporalJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_fire = env.state.value(spec.id, "next_fire", MAX_WATERMARK)
        self.arrived = env.state.value(spec.id, "arrived", 0)  # left rows so far: an updating side's order
        self.marks = 0

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if port == 0:
            if self.spec.sequenced:
                first = self.arrived.value
                self.arrived.value = first + batch.num_rows
                batch = batch.append_column(SEQ, pa.array(np.arange(first, first + batch.num_rows, dtype=np.int64)))
            self.apply(self.spec.on_batch[0], batch)
            self.next_fire.value = min(self.next_fire.value, min_time(batch, self.spec.time_column))
        else:
            batch = batch.append_column(SEQ, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
            self.apply(self.spec.on_batch[1], batch)
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        out: list[pa.Table] = []
        if self.next_fire.value < w:
            out = self.fire(self.spec.fire, w)
            self.next_fire.value = self.earliest(self.spec.min_time)
        self.marks += 1
        if self.marks % PRUNE_EVERY == 0 or watermark >= MAX_WATERMARK:
            for stmt in self.spec.prune:
                self.execute(stmt, [w])
        return out
