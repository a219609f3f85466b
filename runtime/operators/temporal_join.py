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

Late events, as Flink's ``TemporalRowTimeJoinOperator`` judges them: an
event behind the watermark is not dropped for it. Flink keeps, per key,
the newest version at or below the watermark and the newer ones (older
ones are cleaned up), so a late event joins its version if that is still
kept; if a newer version at or below the watermark exists, its own is
gone and it finds none (LEFT JOIN: padded; inner: dropped, and counted in
``late_dropped``). The watermark is the event's own input's as it stood
when it arrived (``__w``: a column of its source's, or the port's watermark,
which its source advances before each event behind it; source.py), so the
rows do not depend on batch sizes; a late event
waits until the operator's watermark passes that too::

    versions of k:  v1@:10   v2@:20          bound 5 s
    e@:15 at watermark :12   -> v1 (on time)
    e@:14 at watermark :25   -> v2@:20 is at or below :25: v1 is gone, none
    e@:22 at watermark :25   -> v2 (late, but its version is kept)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.lower.sqlgen_join import SEQ
from ...planner.physical.join_specs import TemporalJoinSpec
from ..duck import conform
from .base import MAX_WATERMARK, CountsLate, Env
from .join_base import JoinLogic, PortWatermarks, arrival_marks, lowered, with_watermark

DROP = "__drop"  # an inner join's fired late row without a version (lower/sqlgen_join.py)
PRUNE_EVERY = 4  # watermarks between prunings of old versions


class TemporalJoinLogic(PortWatermarks, CountsLate, JoinLogic):
    def __init__(self, spec: TemporalJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_fire = env.state.value(spec.id, "next_fire", MAX_WATERMARK)
        self.arrived = env.state.value(spec.id, "arrived", 0)  # left rows so far: an updating side's order
        self.marks = 0
        self.track_ports(env, spec.id)
        self.count_late(env, spec.id)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if port == 0:
            batch = with_watermark(batch, self.arrival_watermark(0, self.spec.judged[0]))
            if self.spec.sequenced:
                first = self.arrived.value
                self.arrived.value = first + batch.num_rows
                batch = batch.append_column(SEQ, pa.array(np.arange(first, first + batch.num_rows, dtype=np.int64)))
            self.apply(self.spec.on_batch[0], batch)
            if batch.num_rows:  # a row is due once the watermark passes its time and the watermark it came at
                times = batch.column(self.spec.time_column).cast(pa.int64())
                due = pc.min(pc.max_element_wise(times, arrival_marks(batch))).as_py()
                self.next_fire.value = min(self.next_fire.value, due)
        else:
            batch = batch.append_column(SEQ, pa.array(np.arange(batch.num_rows, dtype=np.int64)))
            self.apply(self.spec.on_batch[1], batch)
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        out: list[pa.Table] = []
        if self.next_fire.value < w:
            out = self._fire(w)
            self.next_fire.value = self.earliest(self.spec.min_time)
        self.marks += 1
        if self.marks % PRUNE_EVERY == 0 or watermark >= MAX_WATERMARK:
            for stmt in self.spec.prune:
                self.execute(stmt, [w])
        return out

    def _fire(self, w: int) -> list[pa.Table]:
        """The buffered rows the watermark ``w`` releases, joined; an inner join's late rows that found no
        version are counted and dropped here."""
        first, *rest = self.spec.fire
        out = self.duck.run_all((first,), None, [w])
        for stmt in rest:
            self.execute(stmt, [w])
        if out is None or out.num_rows == 0:
            return []
        if DROP in out.column_names:
            drop = out.column(DROP)
            dropped = int(pc.sum(drop).as_py() or 0)
            if dropped:
                self.late_dropped += dropped
                out = out.filter(pc.invert(drop))
            if out.num_rows == 0:
                return []
        return [conform(out, self.spec.schema)]
