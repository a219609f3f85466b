"""Window aggregation that emits before windows close, or corrects them after.

The same panes as :mod:`window_agg`; what differs is when rows go out.
Every emission compares the windows' current rows with what was emitted
for them before (:mod:`emit`), so the output is a valid changelog::

    EMIT CHANGES              batch touching window w -> +I / -U +U for w's changed keys
    EMIT CHANGES EVERY T      batch -> nothing (w is marked); every T of processing time ->
                              the changes of the marked windows; watermark reaching w's last ms -> w's changes
    ALLOWED LATENESS L        watermark reaching w's last millisecond -> +I w's rows (as without lateness);
                              a late event for w (last ms <= watermark < last ms + L) -> -U old, +U new;
                              watermark reaching last ms + L -> w is forgotten

Late events are judged here, per window, as Flink's group window operator
with ``table.exec.emit.allow-lateness`` judges them (``isWindowLate``): an
event counts in every window whose cleanup time (its last millisecond plus
the allowed lateness) was above the watermark when the event arrived, and
updates the windows among them that had fired; an event whose every
window was past its cleanup time is dropped and counted (``late_dropped``)::

    TUMBLE 10 s, lateness 1 min, bound 5 s:  1 2 | 16 (watermark 11: [0, 10) fires) | 4 -> -U +U [0, 10)
                                             80 (watermark 75: [0, 10) cleaned up) | 6 -> dropped, counted
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical.stream_specs import WindowEmitSpec
from .base import MAX_WATERMARK, Env
from .emit import EmitTable
from .window_agg import WindowAggLogic


class WindowEmitLogic(WindowAggLogic):
    """Emits early or corrects late: a window is complete when the watermark reaches its last millisecond."""

    def __init__(self, spec: WindowEmitSpec, env: Env):
        super().__init__(spec, env)
        self.policy = spec.emit
        self.lateness = spec.emit.lateness_us
        self.emitted = EmitTable(spec.emit_sql, env, spec.id, spec.schema)
        self.clock = env.clock
        self.marked = env.state.value(spec.id, "marked", [])  # windows changed since the last periodic firing
        self.next_fire = env.state.value(spec.id, "next_fire", None)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        reach = self._reach(self.fired.value)
        # The windows the batch updates: those not yet past their cleanup time (Flink's assignActualWindows).
        windows = {w for pane in self._add(batch) for w in self.window.windows_of_pane(pane)
                   if w[1] + self.lateness > reach}
        closed = {w for w in windows if w[1] <= reach}
        if self.policy.mode == "changes" and not self.policy.every_us:
            return self._fire(windows)
        if self.policy.every_us:
            self.marked.value = [list(w) for w in sorted(set(map(tuple, self.marked.value)) | (windows - closed))]
        return self._fire(closed)

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        fired = self.fired.value
        if watermark <= fired:
            return []
        reach, done = self._reach(watermark), self._reach(fired)
        out: list[pa.Table] = []
        if not (self.policy.mode == "changes" and not self.policy.every_us):
            ready = {w for pane in self.panes.keys() if pane < reach
                     for w in self.window.windows_of_pane(pane) if done < w[1] <= reach}
            out = self._fire(ready)
            if self.policy.every_us:
                self.marked.value = [list(w) for w in self.marked.value if w[1] > reach]
        # A window can change until the watermark reaches its cleanup time: its last millisecond plus the lateness.
        horizon = reach - self.policy.lateness_us if watermark < MAX_WATERMARK else MAX_WATERMARK
        for pane in self.panes.keys():
            if pane >= horizon:
                break
            if self.window.pane_expiry(pane) <= horizon:
                self.panes.pop(pane)
        self.emitted.evict(horizon + 1)
        self.fired.value = watermark
        return out

    def on_tick(self, now_us: int) -> list[pa.Table]:
        """Periodic firing: the windows marked since the last one."""
        every = self.policy.every_us
        if not every:
            return []
        due = self.next_fire.value
        self.next_fire.value = (now_us // every + 1) * every
        if due is None or now_us < due:
            if due is not None:
                self.next_fire.value = due
            return []
        marked = {tuple(w) for w in self.marked.value}
        self.marked.value = []
        return self._fire(marked)

    def _fire(self, windows) -> list[pa.Table]:
        windows = sorted(set(windows), key=lambda w: (w[1], w[0]))
        if not windows:
            return []
        current = self._emit(windows)
        shift = self.spec.window.local_shift  # windows over TIMESTAMP_LTZ: bounds shown in local time
        scope = pa.table({"window_start": pa.array([w[0] + shift for w in windows], pa.int64()).cast(pa.timestamp("us")),
                          "window_end": pa.array([w[1] + shift for w in windows], pa.int64()).cast(pa.timestamp("us"))})
        changes = self.emitted.diff(current, scope)
        return [changes] if changes.num_rows else []
