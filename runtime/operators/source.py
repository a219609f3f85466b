"""Sources: read a batch, add computed columns, advance the watermark, drop late events.

A source's watermark is defined as if it advanced after every event, in
source order: the largest event time seen so far minus the declared bound.
An event is late when its time is below the watermark as it stood just
before the event arrived (minus the allowed lateness). That is computed
for a whole batch at once with a running maximum, so results do not depend
on how the input is cut into batches::

    ts           10  14  12   3  20   9        (bound 5)
    max before    -  10  14  14  14  20
    watermark     -   5   9   9   9  15
    late                      ^       ^        (3 < 9, 9 < 15)

Late events are dropped from the stream, counted, and kept in the
source's late log, which a user can read as a stream.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.physical import OP, SourceOp
from ...planner.vocabulary import RETRACTIONS
from ..connectors.base import SourceError, SourceReader
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, Env


def int64_values(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """The 64-bit values of a column without NULLs (e.g. timestamp microseconds), as numpy, without a copy.

    Reads the data buffer directly: Array.to_numpy() costs milliseconds per
    batch even when it does not copy.
    """
    if isinstance(column, pa.ChunkedArray):  # one chunk: no copy (combine_chunks copies even then)
        array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    else:
        array = column
    return np.frombuffer(array.buffers()[1], dtype=np.int64, count=len(array) + array.offset)[array.offset:]


def event_times(table: pa.Table, time_column: str, source: str) -> tuple[np.ndarray, np.ndarray | None]:
    """A batch's event times in microseconds, and which rows are a table's retractions (None: a stream).

    A table's retractions (-U, -D) carry the time of the row they remove: they
    are never late and do not advance the watermark, so their time reads as
    the smallest possible.

    Raises:
        SourceError: an event time is NULL.
    """
    column = table.column(time_column)
    if column.null_count:
        raise SourceError("the event-time column is NULL", source=source, column=time_column)
    ts = int64_values(column)
    if OP not in table.column_names:
        return ts, None
    ops = int64_values(table.column(OP).cast(pa.int64()))
    retracting = np.isin(ops, RETRACTIONS)
    return np.where(retracting, MIN_WATERMARK, ts), retracting


def running_max_before(ts: np.ndarray, start: int) -> tuple[np.ndarray, int]:
    """For each row, the largest of ``start`` and the times before it; and the largest time overall."""
    running = np.maximum.accumulate(ts)
    before = np.empty_like(running)
    before[0] = start
    np.maximum(running[:-1], start, out=before[1:])
    return before, max(start, int(running[-1]))


class SourceLogic:
    def __init__(self, spec: SourceOp, reader: SourceReader, env: Env, late_log=None):
        self.spec = spec
        self.reader = reader
        self.duck = env.duck
        self.clock = env.clock
        self.max_ts = env.state.value(spec.id, "max_event_time", MIN_WATERMARK)
        self.finished = False
        self.rows_read = 0
        self.late = 0
        self.late_log = late_log
        self.last_data_us = self.clock.now_us()
        # While idle, consumers move on without this source; on its return, events behind what they
        # have passed are late (judged here, like all lateness).
        self.floor = env.state.value(spec.id, "late_floor", MIN_WATERMARK)
        self.follows_clock = spec.clock_watermark

    @property
    def idle(self) -> bool:
        timeout = self.spec.idle_timeout_us
        return bool(timeout) and not self.finished and self.clock.now_us() - self.last_data_us >= timeout

    @property
    def name(self) -> str:
        return self.spec.source.name

    @property
    def is_table(self) -> bool:
        """A table with a primary key: read before streams when their watermarks tie."""
        return self.spec.source.kind == "table"

    @property
    def watermark(self) -> int:
        if self.finished:
            return MAX_WATERMARK
        if self.spec.clock_watermark:
            return self.clock.now_us()
        if self.spec.late_only or self.spec.time_column is None or self.max_ts.value == MIN_WATERMARK:
            return MIN_WATERMARK
        return self.max_ts.value - self.spec.delay_us

    def poll(self) -> pa.Table | None:
        """The next batch of on-time events; an empty table if none now; None at the end."""
        raw = self.reader.read()
        if raw is None:
            self.finished = True
            return None
        if raw.num_rows == 0:
            return raw
        self.rows_read += raw.num_rows
        now = self.last_data_us = self.clock.now_us()
        table = raw
        if self.spec.proctime_column is not None:
            table = table.append_column(self.spec.proctime_column,
                                        pa.array(np.full(table.num_rows, now, dtype=np.int64)).cast(pa.timestamp("us")))
        if self.spec.computed_sql:
            table = conform(self.duck.run(self.spec.computed_sql, table), self.spec.schema)
        if self.spec.time_column is not None and not self.spec.clock_watermark:
            table = self._drop_late(table)
        return table

    def _drop_late(self, table: pa.Table) -> pa.Table:
        ts, retracting = event_times(table, self.spec.time_column, self.name)
        before, self.max_ts.value = running_max_before(ts, self.max_ts.value)
        threshold = np.maximum(before - (self.spec.delay_us + self.spec.lateness_us),
                               self.floor.value - self.spec.lateness_us)
        late = ts < threshold
        if retracting is not None:
            late &= ~retracting
        if self.spec.late_only:  # LATE(s): the late events are the stream
            return table.filter(pa.array(late))
        if not self.spec.drop_late or not late.any():
            return table
        self.late += int(late.sum())
        if self.late_log is not None:
            self.late_log.append(table.filter(pa.array(late)))
        return table.filter(pa.array(~late))
