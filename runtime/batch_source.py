"""Scan relations of sources that are not files, read by their connector's own reader (a bounded Kafka read).

A descriptor with ``batch_reader = 'source'`` is read by a batch route
through the connector's ``open_source`` (``runtime/connectors/factory.py``),
the reader the runtime uses, from its start to its end (the reader returns
None: ``scan.bounded.mode`` fixed where each partition stops when it
opened). The rows get the columns the lowered SQL judges late events with
(``planner/lower/scan.py``): ``__file`` is 0 (one stream), ``__row`` the
row's place in the order read, and ``__mx`` the largest event time that
the runtime would hold against the row.

For a partitioned reader (Kafka: ``batch_partitions`` says which partition
each row came from) that is exactly the runtime's source rule
(``runtime/operators/source.py``): the source's watermark is the minimum
over its unfinished partitions of their largest time so far, so a row's
``__mx`` is the smallest over the unfinished partitions of their largest
time before the row (NULL while one of them has none). The order
partitions interleave in depends on the broker, on every route; within a
partition it is the log's order::

    rows      p0: 10   p1: 4   p0: 14   p1: 12   p0: 11   (p2 finished)
    p0 max      -       10      10       14       14
    p1 max      -        -       4        4       12
    __mx       NULL     NULL     4        4       12     the window judges against __mx - bound

The whole read happens where the route reads it (the driver on Spark):
a bounded read of a topic is one stream, in the order its reader gives.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa

from ..planner.lower.scan import ScanSpec
from .batch_read import ScanStats
from .clock import SystemClock
from .connectors.base import SourceContext
from .connectors.factory import open_source, read_request
from .duck import Duck, conform
from .operators.base import MIN_WATERMARK
from .operators.source import event_times, partitioned_max_before, running_max_before


def read_source_scan(spec: ScanSpec, batch_rows: int, stats: ScanStats | None = None) -> Iterator[pa.RecordBatch]:
    """The scan relation of ``spec`` (see the module docstring), read by its connector's reader."""
    src = spec.source
    reader = open_source(src, read_request(src, spec.columns, spec.time_column, batch_rows),
                         SourceContext(source=src, clock=SystemClock()))
    duck = Duck(threads=1) if spec.computed_sql else None
    order = _Order(spec.time_column, src.name, getattr(reader, "partitions", None))
    schema = spec.relation_schema
    values = pa.schema([f for f in schema if f.name in spec.value_schema.names or f.name == "__op"])
    try:
        while True:
            raw = reader.read()
            if raw is None:
                break
            if raw.num_rows == 0:
                continue
            table = conform(duck.run(spec.computed_sql, raw), values) if duck else conform(raw, values)
            parts = getattr(reader, "batch_partitions", None)
            max_before, top = order.next(table, parts, getattr(reader, "done_slots", set()))
            n = table.num_rows
            columns = [table.column(f.name) for f in values] + [
                pa.array(np.zeros(n, dtype=np.int32)), pa.array(np.arange(order.rows, order.rows + n, dtype=np.int64)),
                max_before]
            order.rows += n
            if stats is not None:
                stats.rows_read += n
                stats.file_read("", top, reader.position)
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()
        if stats is not None:
            stats.end = reader.position
    finally:
        if stats is not None:
            stats.skipped = reader.skipped
        reader.close()
        if duck is not None:
            duck.close()


class _Order:
    """The running maxima the runtime's source keeps: over the whole source, or per partition."""

    def __init__(self, time_column: str | None, name: str, partitions):
        self.time_column, self.name = time_column, name
        self.partitions = len(partitions) if partitions is not None else 0
        self.top = MIN_WATERMARK
        self.maxima: dict[int, int] = {}
        self.rows = 0

    def next(self, table: pa.Table, parts: np.ndarray | None, done: set) -> tuple[pa.Array, int]:
        """``__mx`` of each row of ``table`` and the batch's largest time (MIN_WATERMARK: none)."""
        n = table.num_rows
        if self.time_column is None:
            return pa.nulls(n, pa.int64()), MIN_WATERMARK
        ts, retracting = event_times(table, self.time_column, self.name)
        if retracting is not None:  # a table's retractions do not move the watermark
            ts = np.where(retracting, MIN_WATERMARK, ts)
        top = int(ts.max()) if n else MIN_WATERMARK
        if parts is None or not self.partitions:
            before, self.top = running_max_before(ts, self.top)
        else:  # the other partitions count as they stand before each row, as at run time
            holding = [i for i in range(self.partitions) if i not in done]
            before, self.maxima = partitioned_max_before(ts, parts, self.maxima, holding, set(done))
        return pa.array(before, pa.int64(), mask=before == MIN_WATERMARK), top
