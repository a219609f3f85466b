"""OVER aggregates: each row with aggregates over the rows before it, in time order.

Input delta -> output delta::

    batch       : rows -> buffered (nothing out)
    watermark W : the buffered rows with time < W, in time order (arrival order
                  among equal times), each with its frame's aggregates

A row is released once no row at or before its time can still arrive, so
its frame is complete and rows come out in time order (append-only).
Kept between releases: for ``ROWS n PRECEDING`` the last n rows of each
partition, for ``RANGE t PRECEDING`` the rows within t of the watermark,
for ``UNBOUNDED PRECEDING`` running totals per partition. A row whose time
is already below the watermark (only possible with a source's allowed
lateness) cannot be placed before rows already emitted: it is dropped and
counted in ``late_dropped``, as Flink's OVER operators drop late rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.lower.sqlgen_over import SEQ
from ...planner.physical.stream_specs import OverAggOp
from ..duck import conform, registered
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env, Logic
from .source import int64_values

_PENDING, _HISTORY, _CARRY = 0, 1, 2


class OverAggLogic(CountsLate, Logic):
    def __init__(self, spec: OverAggOp, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        self.state = env.state.panes(spec.id, "rows")
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
        late = pc.less(rows.column(self.spec.order).cast(pa.int64()), self.fired.value)
        if pc.any(late).as_py():
            self.late_dropped += int(pc.sum(late).as_py())
            rows = rows.filter(pc.invert(late))
        self.state.add(_PENDING, conform(rows, self.row_schema))
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        if watermark <= self.fired.value:
            return []
        self.fired.value = watermark
        pending = self._take(_PENDING, self.row_schema)
        if pending.num_rows == 0:
            return []
        times = int64_values(pending.column(self.spec.order))
        ready_mask = times < watermark
        if not ready_mask.any():
            self.state.replace(_PENDING, pending)
            return []
        ready = pending.filter(pa.array(ready_mask))
        self.state.replace(_PENDING, pending.filter(pa.array(~ready_mask)))
        out = self._release(ready, watermark)
        return [conform(out, self.spec.schema)] if out.num_rows else []

    def _take(self, key: int, schema: pa.Schema) -> pa.Table:
        tables = self.state.get(key)
        if not tables:
            return schema.empty_table()
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _release(self, ready: pa.Table, watermark: int) -> pa.Table:
        spec = self.spec
        if spec.carry_sql is not None:
            with registered(self.con, __ready=ready, __carry=self._take(_CARRY, spec.carry_schema)):
                out = self.con.sql(spec.compute_sql).to_arrow_table()
                self.state.replace(_CARRY, conform(self.con.sql(spec.carry_sql).to_arrow_table(), spec.carry_schema))
            return out
        history = self._take(_HISTORY, self.row_schema)
        with registered(self.con, __ready=ready, __hist=history):
            out = self.con.sql(spec.compute_sql).to_arrow_table()
            kept = self.con.sql(spec.retain_sql).to_arrow_table() if spec.retain_sql is not None else None
        if kept is None:  # RANGE t PRECEDING: later rows (time >= watermark) reach back to watermark - t
            both = pa.concat_tables([history, ready])
            horizon = watermark - spec.frame.preceding if watermark < MAX_WATERMARK else MAX_WATERMARK
            kept = both.filter(pa.array(int64_values(both.column(spec.order)) >= horizon))
        self.state.replace(_HISTORY, conform(kept, self.row_schema))
        return out
