"""Window join: rows of two windowed inputs joined per window when the watermark passes its end.

``ON l.window_start = r.window_start AND l.window_end = r.window_end [AND keys]``.
Input delta -> output delta::

    batch (either side)   -> nothing; the rows wait for their window to close
    watermark W           -> every window with end <= W: its rows of both sides
                             joined (inner or outer), emitted, dropped from state

State holds only rows of windows that have not closed yet.

Late rows, as Flink's ``WindowJoinOperator`` judges them: a row is dropped
(and counted in ``late_dropped``) only when its window had fired when it
arrived, i.e. the window's last millisecond (end - 1 ms) is at or below
the watermark then. The watermark is that of the row's own input (port),
which its source advances before each event behind it (source.py), not
the join's minimum over both inputs, which depends on how they interleave;
so the rows do not depend on batch sizes::

    TUMBLE 1 min, bound 5 s, left events at :10 :30 :20, :70, :40
    :20 arrives at watermark :25: [0, 60) has not fired, it joins
    :40 arrives at watermark :65: [0, 60) fired, dropped and counted
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...planner.logical.nodes import WINDOW_TIME_OFFSET_US
from ...planner.physical.join_specs import WindowJoinSpec
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env
from .join_base import JoinLogic, PortWatermarks, lowered, min_time


class WindowJoinLogic(PortWatermarks, CountsLate, JoinLogic):
    def __init__(self, spec: WindowJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_end = env.state.value(spec.id, "next_end", MAX_WATERMARK)
        # Each input's watermark (what late rows on it are judged against); checkpointed with the state.
        self.track_ports(env, spec.id)
        self.count_late(env, spec.id)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.judged[port]:
            batch = self._drop_late(port, batch)
            if batch.num_rows == 0:
                return []
        self.apply((self.spec.on_batch[port],), batch)
        self.next_end.value = min(self.next_end.value, min_time(batch, self.spec.end_columns[port]))
        return []

    def _drop_late(self, port: int, batch: pa.Table) -> pa.Table:
        """The rows whose window had not fired for their input when they arrived (end - 1 ms > its watermark)."""
        watermark = self.port_wm.value[port]
        if watermark <= MIN_WATERMARK or watermark >= MAX_WATERMARK:
            return batch
        ends = batch.column(self.spec.end_columns[port]).cast(pa.int64())
        open_ = pc.greater(pc.subtract(ends, WINDOW_TIME_OFFSET_US), watermark)
        kept = int(pc.sum(open_).as_py() or 0)
        if kept == batch.num_rows:
            return batch
        self.late_dropped += batch.num_rows - kept
        return batch.filter(open_)

    def next_fire_time(self) -> int | None:
        return None if self.next_end.value >= MAX_WATERMARK else self.next_end.value + self.spec.lateness

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        if self.next_end.value > w:
            return []
        out = self.fire(self.spec.fire, w)
        self.next_end.value = self.earliest(self.spec.min_end)
        return out
