"""Window join: rows of two windowed inputs joined per window when the watermark passes its end.

``ON l.window_start = r.window_start AND l.window_end = r.window_end [AND keys]``.
Input delta -> output delta::

    batch (either side)   -> nothing; the rows wait for their window to close
    watermark W           -> every window with end <= W: its rows of both sides
                             joined (inner or outer), emitted, dropped from state

State holds only rows of windows that have not closed yet.
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical.join_specs import WindowJoinSpec
from .base import MAX_WATERMARK, Env
from .join_base import JoinLogic, lowered, min_time


class WindowJoinLogic(JoinLogic):
    def __init__(self, spec: WindowJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_end = env.state.value(spec.id, "next_end", MAX_WATERMARK)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        self.apply((self.spec.on_batch[port],), batch)
        self.next_end.value = min(self.next_end.value, min_time(batch, self.spec.end_columns[port]))
        return []

    def next_fire_time(self) -> int | None:
        return None if self.next_end.value >= MAX_WATERMARK else self.next_end.value + self.spec.lateness

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        if self.next_end.value > w:
            return []
        out = self.fire(self.spec.fire, w)
        self.next_end.value = self.earliest(self.spec.min_end)
        return out
