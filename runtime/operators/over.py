"""OVER aggregates: each row with aggregates over the rows before it, in time order.

Input delta -> output delta::

    batch       : rows -> buffered (nothing out)
    watermark W : the buffered rows with time < W, in time order (arrival order
                  among equal times), each with its frame's aggregates

A row is released once the watermark reaches its time, so its frame is
complete and rows come out in time order (append-only). Kept between
releases: for ``ROWS n PRECEDING`` the last n rows of each partition, for
``RANGE t PRECEDING`` the rows within t of the partition's last released
time, for ``UNBOUNDED PRECEDING`` running totals per partition (and, for
LAG, the last ``offset`` rows of each partition).

Late rows, on event time, as Flink judges them (the source cuts its
batches before rows behind the watermark, so the operator's watermark is
the one the row arrived under). A row that cannot be placed after the rows
already emitted is dropped and counted in ``late_dropped``:

* UNBOUNDED frames (``AbstractRowTimeUnboundedPrecedingOver``): a row at
  or below the watermark;
* bounded frames (``RowTimeRangeBoundedPrecedingFunction``,
  ``RowTimeRowsBoundedPrecedingFunction``): a row at or below the last time
  released for its partition; a row behind the watermark but after that
  time still counts, released at the next watermark. A RANGE partition
  idle for 1.5 frames after its last row forgets that time (Flink's
  cleanup timer), so a later row behind the watermark counts again::

    RANGE 10 s, bound 5 s, partition a:  :10 :30 (watermark :25 releases :10)
    :20 arrives at watermark :25: after :10, counts (frame :10..:20)
    :08 arrives: at or below :10 (released): dropped
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.lower.sqlgen_over import SEQ
from ...planner.physical.stream_specs import OverAggSpec
from ..duck import conform, registered
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env, Logic
from .source import int64_values

_PENDING, _HISTORY, _CARRY = 0, 1, 2


class OverAggLogic(CountsLate, Logic):
    def __init__(self, spec: OverAggSpec, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        self.state = env.state.panes(spec.id, "rows")
        self.last = env.state.panes(spec.id, "last_released")  # bounded frames: one table, per partition
        self.seq = env.state.value(spec.id, "seq", 0)
        self.fired = env.state.value(spec.id, "released_until", MIN_WATERMARK)
        self.count_late(env, spec.id)
        schema = pa.schema([pa.field(c, spec.schema.field(c).type) for c in spec.columns])
        self.row_schema = schema.append(pa.field(SEQ, pa.int64()))

    @property
    def state_rows(self) -> int:
        return self.state.rows

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.input_sql is not None:
            batch = self.duck.run(self.spec.input_sql, batch)
        rows = batch.select(list(self.spec.columns))
        n = rows.num_rows
        rows = rows.append_column(SEQ, pa.array(np.arange(self.seq.value, self.seq.value + n, dtype=np.int64)))
        self.seq.value += n
        late = self._late_rows(rows)
        if late.any():
            self.late_dropped += int(late.sum())
            rows = rows.filter(pa.array(~late))
        self.state.add(_PENDING, conform(rows, self.row_schema))
        return []

    def _late_rows(self, rows: pa.Table) -> np.ndarray:
        """Which rows are late (see the module docstring)."""
        times = int64_values(rows.column(self.spec.order))
        fired = self.fired.value
        if not self.spec.event_time:
            return times < fired  # processing time: never, the clock only moves forward
        if fired == MIN_WATERMARK:
            return np.zeros(len(times), dtype=bool)
        if self.spec.last_of_rows_sql is None:  # UNBOUNDED
            return times <= fired
        last = self._take(0, self.spec.last_schema, self.last)
        if last.num_rows == 0:
            return np.zeros(len(times), dtype=bool)
        with registered(self.con, __rows=rows, __last=last):
            before = self.con.sql(self.spec.last_of_rows_sql).to_arrow_table().column(0)
        return times <= int64_values(before)

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        if watermark <= self.fired.value:
            return []
        self.fired.value = watermark
        pending = self._take(_PENDING, self.row_schema)
        if pending.num_rows == 0:
            return []
        times = int64_values(pending.column(self.spec.order))
        # Flink releases rows at the watermark (its timers fire when the watermark reaches them).
        ready_mask = times <= watermark if self.spec.event_time else times < watermark
        if not ready_mask.any():
            self.state.replace(_PENDING, pending)
            return []
        ready = pending.filter(pa.array(ready_mask))
        self.state.replace(_PENDING, pending.filter(pa.array(~ready_mask)))
        out = self._release(ready, watermark)
        return [conform(out, self.spec.schema)] if out.num_rows else []

    def _take(self, key: int, schema: pa.Schema, state=None) -> pa.Table:
        tables = (self.state if state is None else state).get(key)
        if not tables:
            return schema.empty_table()
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _release(self, ready: pa.Table, watermark: int) -> pa.Table:
        spec = self.spec
        if spec.carry_sql is not None:
            history = self._take(_HISTORY, self.row_schema)  # rows LAG reads back to (none without LAG)
            with registered(self.con, __ready=ready, __carry=self._take(_CARRY, spec.carry_schema), __hist=history):
                out = self.con.sql(spec.compute_sql).to_arrow_table()
                self.state.replace(_CARRY, conform(self.con.sql(spec.carry_sql).to_arrow_table(), spec.carry_schema))
                if spec.retain_sql is not None:
                    self.state.replace(_HISTORY, conform(self.con.sql(spec.retain_sql).to_arrow_table(),
                                                         self.row_schema))
            return out
        history = self._take(_HISTORY, self.row_schema)
        with registered(self.con, __ready=ready, __hist=history):
            out = self.con.sql(spec.compute_sql).to_arrow_table()
            kept = self.con.sql(spec.retain_sql).to_arrow_table() if spec.retain_sql is not None else None
            if spec.event_time and spec.advance_last_sql is not None:
                kept = self._advance_last(ready, history, watermark, kept)
        if kept is None:  # RANGE t PRECEDING: later rows (time >= watermark) reach back to watermark - t
            both = pa.concat_tables([history, ready])
            horizon = watermark - spec.frame.preceding if watermark < MAX_WATERMARK else MAX_WATERMARK
            kept = both.filter(pa.array(int64_values(both.column(spec.order)) >= horizon))
        self.state.replace(_HISTORY, conform(kept, self.row_schema))
        return out

    def _advance_last(self, ready: pa.Table, history: pa.Table, watermark: int, kept: pa.Table | None
                      ) -> pa.Table | None:
        """Record each partition's last released time (``__ready``, ``__hist`` registered); for RANGE, the
        rows its later rows can reach: within the frame of that time (a late row comes after it)."""
        spec = self.spec
        params = [watermark] if "?" in spec.advance_last_sql else None
        with registered(self.con, __last=self._take(0, spec.last_schema, self.last),
                        __pending=self._take(_PENDING, self.row_schema)):
            last = self.con.sql(spec.advance_last_sql, params=params).to_arrow_table()
        last = conform(last, spec.last_schema)
        self.last.replace(0, last)
        if spec.retain_by_partition_sql is None:
            return kept
        with registered(self.con, __last=last):
            return self.con.sql(spec.retain_by_partition_sql).to_arrow_table()
