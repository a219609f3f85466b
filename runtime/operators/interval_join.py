"""Interval join: two append-only streams, rows matched within a time bound of each other.

``ON l.k = r.k AND r.ts BETWEEN l.ts + lower AND l.ts + upper``. Input delta -> output delta::

    left batch    -> its matches with the stored right rows; the rows are stored
    right batch   -> its matches with the stored left rows; the rows are stored
    watermark W   -> left rows with ts + upper < W and right rows with ts - lower < W
                     can meet no future partner: dropped from state; an outer
                     side's unmatched ones are emitted first, padded with NULLs

    lower = -1min, upper = 0 (r.ts BETWEEN l.ts - 1 min AND l.ts):
    l@10:05  kept until W > 10:05        r@10:04:30  kept until W > 10:05:30

Late rows, as Flink's ``TimeIntervalJoin`` judges them: a row behind the
watermark is not dropped for it. It joins the other input's rows that are
still held, and is held itself while the other input's time has not passed
its reach (the last time a partner could have). Each row is judged against
its own input's watermark as it stood when it arrived (``__w``, kept with
the row: a column its source gives when the join reads it directly, else
the port's watermark, which its source advances before each event behind
it; source.py),
not the join's minimum over both inputs, which depends on how they
interleave; so the pair rule (``interval_pair_kept`` in
lower/sqlgen_join.py) does not depend on batch sizes::

    a.ts BETWEEN b.ts - 10 s AND b.ts + 10 s, bounds 5 s; a row reaches 10 s past its time
    b@:30 (on time)         held until the watermark passes :40
    a@:25 at watermark :35  behind, but :35 <= :40: joins b@:30
    a@:12 at watermark :35  :35 is past the reach of every b it could meet
                            (at most :22): joins nothing, dropped and counted

A row is kept until the watermark has passed both its reach and its own
``__w`` (a row of an input that is behind can still pair with it). An outer
side's row that found no partner is padded then; an inner side's row that
came too late to wait (its ``__w`` at or past its reach) and found none is
counted in ``late_dropped`` as it expires.

Both sides' state is bounded by what arrives within the bound plus the
watermark delay, however long the stream. The output's event times may lag
the input watermark by max(upper, -lower), so the forwarded watermark is
held back by that much (as Flink does). A pair is emitted once, when the
later of its two rows arrives, so the result does not depend on batching.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.lower.sqlgen_join import ID
from ...planner.physical.join_specs import IntervalJoinSpec
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env
from .join_base import JoinLogic, PortWatermarks, arrival_marks, lowered, with_watermark


class IntervalJoinLogic(PortWatermarks, CountsLate, JoinLogic):
    def __init__(self, spec: IntervalJoinSpec, env: Env):
        super().__init__(spec, env)
        self.next_expiry = [env.state.value(spec.id, f"next_expiry_{s}", MAX_WATERMARK) for s in (0, 1)]
        self.next_id = env.state.value(spec.id, "next_id", 0)
        # Per side: the largest arrival watermark of a row held that came too late to wait for a partner
        # (MIN_WATERMARK: none), so that expiring rows are counted only while there can be such rows.
        self.late_until = [env.state.value(spec.id, f"late_until_{s}", MIN_WATERMARK) for s in (0, 1)]
        self.reach = (spec.upper, -spec.lower)
        self.track_ports(env, spec.id)
        self.count_late(env, spec.id)

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        batch = with_watermark(batch, self.arrival_watermark(port, self.spec.judged[port]))
        if self.spec.ids[port]:
            start = self.next_id.value
            batch = batch.append_column(ID, pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64)))
            self.next_id.value = start + batch.num_rows
        out = self.run(self.spec.on_batch[port], batch)
        if batch.num_rows:
            self._note_expiry(port, batch)
        return out

    def _note_expiry(self, port: int, batch: pa.Table) -> None:
        """When the batch's rows can first expire (their reach and their __w passed), and whether any came too
        late to wait for a partner (their __w at or past their reach: counted if they expire unmatched)."""
        reach = pc.add(batch.column(self.spec.time_columns[port]).cast(pa.int64()), self.reach[port])
        marks = arrival_marks(batch)
        expiry = pc.min(pc.max_element_wise(reach, pc.subtract(marks, 1))).as_py()
        self.next_expiry[port].value = min(self.next_expiry[port].value, expiry)
        if self.spec.unmatched[port]:
            too_late = pc.max(pc.if_else(pc.less_equal(reach, marks), marks, MIN_WATERMARK)).as_py()
            self.late_until[port].value = max(self.late_until[port].value, too_late)

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        w = lowered(watermark, self.spec.lateness)
        expiring = [self.next_expiry[side].value < w for side in (0, 1)]
        for side in (0, 1):  # counted before either side's rows go: a row's partners expire no earlier
            if expiring[side] and self.late_until[side].value > MIN_WATERMARK:
                self.late_dropped += int(self.con.execute(self.spec.unmatched[side], [w]).fetchall()[0][0])
                if w > self.late_until[side].value:
                    self.late_until[side].value = MIN_WATERMARK
        out: list[pa.Table] = []
        for side in (0, 1):
            if not expiring[side]:
                continue  # nothing in this side's state has expired
            padded, delete = self.spec.expire[side]
            if padded:
                out += self.run((padded,), params=[w])
            self.execute(delete, [w])
            self.next_expiry[side].value = self.earliest(self.spec.min_time[side])
        return out

    def output_watermark(self, watermark: int) -> int:
        return watermark if watermark >= MAX_WATERMARK else watermark - self.spec.delay
