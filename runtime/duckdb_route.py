"""The DuckDB batch route: a lowered statement run once by DuckDB over the sources' files.

Each scan relation is a stream of Arrow batches from dsms's file readers
(``batch_read.read_scan``), read in one pass so that ``__mx`` is the running
maximum over the whole source; DuckDB consumes it as it reads. The result
is fetched in batches and handed to an output (a file sink writer or a
collector) with the plan's types.

Measured on the 5 M-event tumble benchmark (docs/performance.md): feeding
DuckDB from the runtime's Parquet reader, which computes ``__mx`` in numpy
as it goes, is faster than letting DuckDB read the file itself and judge
late events with a window function over ``file_row_number`` (which sorts),
and only the readers give the runtime's parsing, errors and dead letters,
so they are the only way in.
"""

from __future__ import annotations

import time

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..planner.lower.plan import Lowered
from ..planner.lower.sql import MAX_BEFORE, OP
from ..planner.vocabulary import RETRACTIONS
from .batch_job import BatchRoute
from .batch_read import BATCH_ROWS, ReadPlan, RouteError, RunStats, ScanStats, read_scan
from .batch_source import read_source_scan
from .duck import conform

RESULT_ROWS = 256 * 1024


class DuckDBExecutor:
    """Runs lowered DuckDB statements (one connection per run)."""

    name = "duckdb"
    writes_parts = False

    def __init__(self, settings: dict | None = None, batch_rows: int = BATCH_ROWS):
        self.settings = settings or {}
        self.batch_rows = batch_rows

    def run(self, lowered: Lowered, write, out_schema: pa.Schema) -> "RunStats":
        """Run ``lowered``; ``write(table)`` receives the result in batches conformed to ``out_schema``."""
        began = time.perf_counter()
        stats = RunStats([ScanStats(s.source.name) for s in lowered.scans])
        failure: list[BaseException] = []
        con = duckdb.connect()
        scans = []
        try:
            for spec, scan_stats in zip(lowered.scans, stats.scans):
                if spec.source.descriptor.batch_reader == "source":  # a bounded Kafka read: its own reader
                    read = read_source_scan(spec, self.batch_rows, scan_stats)
                else:
                    read = read_scan(ReadPlan.of(spec, self.batch_rows), scan_stats)
                batches = _counting_late(_remembering(read, failure), spec, scan_stats)
                scans.append(batches)
                con.register(spec.relation, pa.RecordBatchReader.from_batches(spec.relation_schema, batches))
            try:
                result = con.sql(lowered.sql()).to_arrow_reader(RESULT_ROWS)
                for batch in result:
                    write(conform(pa.Table.from_batches([batch]), out_schema))
                    stats.rows_out += batch.num_rows
            except (duckdb.Error, pa.ArrowException, OSError) as e:
                if failure:  # a source's error, reported by DuckDB (or by the Arrow stream) as a failed scan
                    raise failure[0] from None
                if not isinstance(e, duckdb.Error):
                    raise
                raise RouteError(f"DuckDB could not run the lowered statement: {str(e).splitlines()[0]}") from None
            if failure:
                raise failure[0]
        finally:
            con.close()
        for batches in scans:
            # What DuckDB did not need to read (a side of an empty join) is still read to its end, as on
            # the runtime: a bad row there stops the run, and every row and late event is counted.
            for _ in batches:
                pass
        stats.seconds = time.perf_counter() - began
        return stats


def _remembering(batches, failure: list):
    """The batches; an error while reading is kept, since DuckDB reports it only as a failed scan."""
    try:
        yield from batches
    except BaseException as e:
        failure.append(e)
        raise


def _counting_late(batches, spec, stats: ScanStats):
    """The batches, counting the late events among them (what the runtime's summary reports).

    Where window operators judge lateness per window (``spec.per_window``) the statement drops each
    event from the windows that had fired when it arrived; those drops are not counted (``late`` None).
    """
    if spec.per_window:
        stats.late = None
    if spec.time_column is None or not spec.drop_late or spec.late_only:
        yield from batches
        return
    for b in batches:
        ts = pc.cast(b.column(spec.time_column), pa.int64())
        late = pc.less(ts, pc.subtract(b.column(MAX_BEFORE), spec.bound_us))
        if OP in b.schema.names:
            late = pc.and_(late, pc.invert(pc.is_in(b.column(OP), pa.array(RETRACTIONS, pa.int8()))))
        stats.late += int(pc.sum(pc.fill_null(late, False)).as_py() or 0)
        yield b


ROUTE = BatchRoute("duckdb", DuckDBExecutor)
