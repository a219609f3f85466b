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

Where the operators above judge late events per window (``spec.per_window``:
window aggregates, window Top-N), the source drops nothing. It cuts its
batch before each event behind the watermark and hands the job the
watermark to advance to at each cut (``cuts``), so that every operator
sees each event with the watermark as it stood when the event arrived,
whatever the batch sizes::

    ts           10  70  20  25  80  30        (bound 5)
    watermark     -   5  65  65  65  75
    pieces       [10  70][20  25  80][30]       advance to 65 before 20, to 75 before 30

Under an interval or temporal join that judges its rows and reads the
source directly (``spec.arrival_column``), the batch is not cut: it
carries each event's watermark as it stood when the event arrived, in a
column ``__w`` (one cut per late event would cost a batch each).

Otherwise late events are dropped from the stream, counted, and kept in
the source's late log, which a user can read as a stream.

A partitioned source (Kafka: its reader says which partition each row
came from, ``batch_partitions``) keeps one watermark per partition, and
its watermark is the minimum over the partitions, leaving out those idle
for ``idle_timeout`` and those a bounded read has finished::

    partition    0: ts 10 14 |  1: ts 3 | 2: (nothing for idle_timeout)
    watermark    0: 14-5 = 9 |  1: 3-5 = -2 | 2: idle       -> source: -2

The source's watermark before each row is computed for the whole batch at
once (``partitioned_max_before``: per partition, a running maximum of its
own rows carried forward over the others'; then the minimum over the
partitions, row by row), so it too does not depend on how the rows are
cut into batches, and the same per-window machinery (``cuts``) applies::

    row          p0:10  p1:4  p0:14  p1:12  p0:11     (bound 5)
    p0 max before   -    10    10     14     14
    p1 max before   -     -     4      4     12
    watermark       -     -    -1     -1      7
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...planner.logical.nodes import WINDOW_TIME_OFFSET_US
from ...planner.physical.specs import OP, SourceSpec
from ...planner.vocabulary import RETRACTIONS
from ..connectors.base import SourceError, SourceReader
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, Env

ARRIVAL = "__w"  # the column of each event's watermark at arrival, for a row join that judges it


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
    def __init__(self, spec: SourceSpec, reader: SourceReader, env: Env, late_log=None):
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
        # Per partition: the largest event time (by partition index) and when data last came.
        self.partitioned = spec.time_column is not None and hasattr(reader, "batch_partitions")
        if self.partitioned:
            self.partition_max = env.state.value(spec.id, "partition_max", {})
            self.partition_seen: dict[int, int] = {}
            self.held = env.state.value(spec.id, "held_watermark", MIN_WATERMARK)  # the watermark given out
            self.started_us = self.clock.now_us()
        # (row, watermark): before row ``row`` of the last batch the job advances the watermark (per_window)
        self.cuts: list[tuple[int, int]] = []

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
        if self.partitioned:  # never back (a partition back from idle may lower the minimum), as Flink's
            self.held.value = max(self.held.value, self._partition_watermark())
            return self.held.value
        return self.max_ts.value - self.spec.delay_us

    def _active_partitions(self) -> list[int]:
        """The partitions that hold the watermark back: not finished, not idle (all, if every one is idle)."""
        done = getattr(self.reader, "done_slots", set())
        slots = [i for i in range(len(self.reader.partitions)) if i not in done]
        timeout = self.spec.idle_timeout_us
        if timeout:
            now = self.clock.now_us()
            busy = [i for i in slots if now - self.partition_seen.get(i, self.started_us) < timeout]
            # All idle: the source is idle as a whole; its watermark is what the partitions with data reached.
            slots = busy or [i for i in slots if str(i) in self.partition_max.value] or slots
        return slots

    def _partition_watermark(self) -> int:
        maxima = self.partition_max.value
        slots = self._active_partitions()
        if not slots:
            return self.max_ts.value - self.spec.delay_us
        low = min(maxima.get(str(i), MIN_WATERMARK) for i in slots)
        return MIN_WATERMARK if low == MIN_WATERMARK else low - self.spec.delay_us

    def poll(self) -> pa.Table | None:
        """The next batch of on-time events; an empty table if none now; None at the end."""
        raw = self.reader.read()
        if raw is None:
            self.finished = True
            return None
        self.cuts = []
        if raw.num_rows == 0:
            return raw
        self.rows_read += raw.num_rows
        now = self.last_data_us = self.clock.now_us()
        table = raw
        if self.spec.proctime_column is not None:
            table = table.append_column(self.spec.proctime_column,
                                        pa.array(np.full(table.num_rows, now, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")))
        if self.spec.computed_sql:
            table = conform(self.duck.run(self.spec.computed_sql, table), self.spec.schema)
        if self.spec.time_column is not None and not self.spec.clock_watermark:
            table = self._drop_late(table)
        return table

    def _drop_late(self, table: pa.Table) -> pa.Table:
        ts, retracting = event_times(table, self.spec.time_column, self.name)
        first = self.held.value if self.partitioned else self.watermark  # as the job last advanced it
        watermark = self._watermark_before(ts)
        if self.spec.per_window:
            late = ts < self.floor.value - self.spec.lateness_us  # behind what consumers passed while idle
            if retracting is not None:
                late &= ~retracting
            kept = table.filter(pa.array(~late)) if late.any() else table
            if self.spec.arrival_column:  # a row join takes each event's watermark as a column: no cuts
                return self._count_late(table, late, kept.append_column(ARRIVAL, pa.array(watermark[~late], pa.int64())))
            self.cuts = _cuts(ts[~late], watermark[~late], first, self.spec.window_grids, self.spec.isolate_late)
            return self._count_late(table, late, kept)
        threshold = np.maximum(np.where(watermark == MIN_WATERMARK, MIN_WATERMARK, watermark - self.spec.lateness_us),
                               self.floor.value - self.spec.lateness_us)
        late = ts < threshold
        if retracting is not None:
            late &= ~retracting
        if self.spec.late_only:  # LATE(s): the late events are the stream
            return table.filter(pa.array(late))
        if not self.spec.drop_late or not late.any():
            return table
        return self._count_late(table, late, table.filter(pa.array(~late)))

    def _count_late(self, table: pa.Table, late: np.ndarray, kept: pa.Table) -> pa.Table:
        if late.any():
            self.late += int(late.sum())
            if self.late_log is not None:
                self.late_log.append(table.filter(pa.array(late)))
        return kept

    def _watermark_before(self, ts: np.ndarray) -> np.ndarray:
        """Per row, the source's watermark as it stood just before the row (MIN_WATERMARK: none yet); the
        state moves past the batch."""
        if not self.partitioned:
            before, self.max_ts.value = running_max_before(ts, self.max_ts.value)
            return np.where(before == MIN_WATERMARK, MIN_WATERMARK, before - self.spec.delay_us)
        parts = self.reader.batch_partitions
        maxima = {int(k): v for k, v in self.partition_max.value.items()}
        before, maxima = partitioned_max_before(ts, parts, maxima, self._active_partitions(),
                                                set(getattr(self.reader, "done_slots", ())))
        watermark = np.where(before == MIN_WATERMARK, MIN_WATERMARK, before - self.spec.delay_us)
        # A partition back from idle may lower the minimum; the watermark never goes back (as the job's).
        np.maximum.accumulate(np.maximum(watermark, self.held.value), out=watermark)
        now = self.clock.now_us()
        for slot in np.unique(parts):  # a loop over the batch's partitions, not its rows
            self.partition_seen[int(slot)] = now
        self.partition_max.value = {str(k): v for k, v in maxima.items()}
        self.max_ts.value = max(self.max_ts.value, *maxima.values())
        return watermark


def partitioned_max_before(ts: np.ndarray, parts: np.ndarray, maxima: dict[int, int], holding: list[int],
                           finished: set[int] = frozenset()) -> tuple[np.ndarray, dict[int, int]]:
    """Per row, the smallest over the partitions that hold the watermark back of their largest time before
    the row (MIN_WATERMARK while one of them has none); and each partition's largest time after the batch.

    ``maxima``: each partition's largest time before the batch; ``holding``: the partitions that hold the
    watermark back (not idle, not finished); ``finished``: those a bounded read has finished by the end of
    the batch. A partition of the batch that was idle holds the watermark back again after its first row;
    one that finished in the batch holds it back up to its last row. Vectorized per partition (they are
    few): a partition's running maximum over the batch, where the other partitions' rows count as nothing.
    """
    n = len(ts)
    low = np.full(n, MAX_WATERMARK, dtype=np.int64)
    after = dict(maxima)
    in_batch = {int(p) for p in np.unique(parts)}
    for slot in sorted((set(holding) - set(finished)) | in_batch):
        mine = parts == slot
        before, after[slot] = running_max_before(np.where(mine, ts, MIN_WATERMARK), maxima.get(slot, MIN_WATERMARK))
        if slot in finished:
            before[n - int(np.argmax(mine[::-1])):] = MAX_WATERMARK  # not after its last row
        elif slot not in holding:
            before[:int(np.argmax(mine)) + 1] = MAX_WATERMARK  # not before its first row (nor for it)
        np.minimum(low, before, out=low)
    if (low == MAX_WATERMARK).any():  # nothing holds it back (every partition finished): the source's maximum
        overall, _ = running_max_before(ts, max(maxima.values(), default=MIN_WATERMARK))
        low = np.where(low == MAX_WATERMARK, overall, low)
    return low, after


def _cuts(ts: np.ndarray, watermark: np.ndarray, first: int,
          grids: tuple[tuple[int, int], ...] = (), isolate: bool = False) -> list[tuple[int, int]]:
    """Where to advance the watermark within a batch: before each event behind it, to its value then.

    ``watermark``: the source's watermark just before each event
    (MIN_WATERMARK: none yet); ``first``: its value before the batch, which
    the job already holds. Only events behind the watermark can be late
    for a window (and one exactly at it, when a window of ``grids`` ends
    1 ms later: windows fire at their last millisecond), and only the
    watermark's value at each of them matters, so consecutive late events
    under one watermark share a cut. ``isolate``: every event behind the
    watermark is cut off from the events after it too (a session judges
    each alone, as it arrived).
    """
    if len(ts) == 0 or watermark[-1] == MIN_WATERMARK:
        return []
    behind = ts < watermark
    if grids:
        at = ts == watermark
        if at.any():
            last_ms = np.zeros(len(ts), dtype=bool)
            for width, offset in grids:
                last_ms |= (ts + WINDOW_TIME_OFFSET_US - offset) % width == 0
            behind |= at & last_ms
    if isolate:  # a cut before and after each (the second leaves the watermark as it is)
        rows = np.nonzero(behind)[0]
        pairs = [((int(row), int(mark)), (int(row) + 1, int(mark))) for row, mark in zip(rows, watermark[rows])]
        return [cut for pair in pairs for cut in pair if cut[0] < len(ts)]
    behind = np.nonzero(behind & (watermark > first))[0]
    if len(behind) == 0:
        return []
    marks = watermark[behind]
    new = np.empty(len(behind), dtype=bool)
    new[0] = True
    np.not_equal(marks[1:], marks[:-1], out=new[1:])
    return [(int(row), int(mark)) for row, mark in zip(behind[new], marks[new])]
