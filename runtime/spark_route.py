"""The Spark batch route: a lowered statement run as Spark SQL through PySpark.

PySpark is imported only when a query takes this route (``import dsms``
stays light). The session is ``local[*]`` unless ``SET 'spark.master'``
says otherwise; every other ``spark.*`` setting goes to the session
builder, so the same script runs on a cluster. The session time zone is
UTC (dsms timestamps are naive UTC wall clock); in local mode shuffles use
four partitions per core unless ``spark.sql.shuffle.partitions`` says
otherwise. One session serves the whole process: the first Spark query
creates it.

Sources: each scan relation is a DataFrame with one row per file, mapped
by Spark's Python workers through dsms's own readers (``mapInArrow`` of
``batch_read.read_files``), one task per file. Parsing, bad-row errors and
dead letters are the runtime's; ``__mx`` is the running maximum within
each file and the lowered SQL adds the earlier files' maxima. That SQL
reads the relation twice (the per-file maxima, then the rows), so the
relation is cached for the run instead of read twice. On a cluster the
driver ships dsms to the executors (``spark_ship.py``); the workers need
its dependencies and the files at the same paths.

Results are collected as Arrow and handed to the output on the driver,
which writes the sink file (a sink is one file, as on every route).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from functools import partial

import pyarrow as pa

from ..planner.lower.plan import Lowered
from .batch_job import BatchRoute
from .batch_read import (
    BATCH_ROWS,
    ReadPlan,
    RouteError,
    RunStats,
    ScanStats,
    merge_dead_letters,
    read_files,
    source_error_in,
)
from .batch_source import read_source_scan
from .connectors.dir_sink import DirectorySink, write_part
from .duck import conform
from .spark_ship import ship_to_executors

_SPARK_TYPES = {pa.bool_(): "BOOLEAN", pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT",
                pa.int64(): "BIGINT", pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.string(): "STRING",
                pa.date32(): "DATE", pa.binary(): "BINARY"}

_session = None


def spark_type(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "TIMESTAMP"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    return _SPARK_TYPES[t]


def spark_schema(schema: pa.Schema) -> str:
    return ", ".join(f"`{f.name}` {spark_type(f.type)}" for f in schema)


def spark_session(settings: dict):
    """The process's SparkSession, created on first use from the ``spark.*`` settings."""
    global _session
    # The workers' Python (they run dsms's readers): SET 'spark.pyspark.python', PYSPARK_PYTHON, else the driver's.
    if settings.get("spark.pyspark.python"):
        os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if _session is None or _session._jsc is None:
        master = settings.get("spark.master", "local[*]")
        builder = SparkSession.builder.appName("dsms").master(master)
        builder = builder.config("spark.ui.showConsoleProgress", "false")
        if master.startswith("local"):  # one machine: a few shuffle partitions per core, not Spark's 200
            builder = builder.config("spark.sql.shuffle.partitions", str(4 * (os.cpu_count() or 1)))
        for key, value in settings.items():
            if key.startswith("spark.") and key != "spark.master":
                builder = builder.config(key, value)
        _session = builder.getOrCreate()
        if not master.startswith("local"):  # a cluster's workers get the driver's dsms from the session
            ship_to_executors(_session.sparkContext)
        if "spark.log.level" not in settings:
            _session.sparkContext.setLogLevel("ERROR")
    for key, value in settings.items():  # SQL settings also apply to a session that already runs
        if key.startswith("spark.sql.") and key != "spark.sql.session.timeZone":
            _session.conf.set(key, value)
    _session.conf.set("spark.sql.session.timeZone", "UTC")
    return _session


class SparkExecutor:
    """Runs lowered Spark SQL statements."""

    name = "spark"
    writes_parts = True  # a directory sink's parts are written by the executors

    def __init__(self, settings: dict | None = None, batch_rows: int = BATCH_ROWS):
        self.settings = settings or {}
        self.batch_rows = batch_rows

    def run(self, lowered: Lowered, write, out_schema: pa.Schema, parts: DirectorySink | None = None) -> RunStats:
        """Run ``lowered``: its rows to ``write`` on the driver, or written by the executors as ``parts``."""
        began = time.perf_counter()
        stats = RunStats([ScanStats(s.source.name) for s in lowered.scans])
        spark = spark_session(self.settings)
        stats.startup_seconds = time.perf_counter() - began
        scans = BoundedScans(spark, self.batch_rows)
        try:
            for spec, scan_stats in zip(lowered.scans, stats.scans):
                scans.add(spec, scan_stats).createOrReplaceTempView(spec.relation)
            try:
                frame = spark.sql(lowered.sql())
                if parts is not None:
                    stats.rows_out = write_parts(frame, parts, 0, out_schema)
                else:
                    table = conform(_naive(frame.toArrow()), out_schema)
                    if table.num_rows:
                        write(table)
                    stats.rows_out = table.num_rows
            except Exception as e:  # noqa: BLE001 - Spark's errors come through Py4J
                raise _translate(e) from None
            scans.finish()
        finally:
            scans.close()
            for spec in lowered.scans:
                spark.catalog.dropTempView(spec.relation)
        stats.seconds = time.perf_counter() - began
        return stats


class BoundedScans:
    """Scan relations of bounded files as Spark DataFrames: one row per file, read by dsms's readers.

    ``add`` gives a scan's DataFrame (cached when the lowered SQL reads it
    twice for the late-event rule, or when ``cache``); ``finish`` moves the
    dead letters into place and counts the rows read; ``close`` releases it all.
    """

    def __init__(self, spark, batch_rows: int = BATCH_ROWS):
        self.spark, self.batch_rows = spark, batch_rows
        self.cached, self.dead, self.counters = [], [], []

    def add(self, spec, stats: ScanStats, cache: bool = False):
        spark = self.spark
        if spec.source.descriptor.batch_reader == "source":  # a bounded Kafka read: read whole on the driver
            stats.late = None
            table = pa.Table.from_batches(list(read_source_scan(spec, self.batch_rows, stats)), spec.relation_schema)
            frame = spark.createDataFrame(_zoned(table), spark_schema(spec.relation_schema)).persist()
            self.cached.append(frame)
            return frame
        plan = ReadPlan.of(spec, self.batch_rows)
        stats.late = None  # judged inside the statement, not counted
        files = plan.files()
        folder = tempfile.mkdtemp(prefix="dsms-dead-letter-") if plan.dead_letter_path() else None
        if folder:
            self.dead.append((folder, plan.dead_letter_path(), stats))
        rows = [(i, path) for i, (_, path) in enumerate(files)]
        # One task per file, or per run of files when there are many (read in order within a task).
        slices = max(1, min(len(rows), 4 * spark.sparkContext.defaultParallelism))
        listing = spark.createDataFrame(spark.sparkContext.parallelize(rows, slices), "__fi INT, __path STRING")
        counter = spark.sparkContext.accumulator(0)
        files_read = spark.sparkContext.accumulator({}, _FileReports())
        self.counters.append((counter, files_read, stats))
        frame = listing.mapInArrow(partial(_read_partition, plan, folder, counter, files_read),
                                   spark_schema(plan.relation_schema))
        if cache or ((spec.drop_late or spec.per_window) and spec.time_column is not None):  # read twice: the prefix scan
            frame = frame.persist()
            self.cached.append(frame)
        return frame

    def finish(self) -> None:
        for folder, target, stats in self.dead:
            stats.skipped += merge_dead_letters(folder, target)
        for counter, files_read, stats in self.counters:
            stats.rows_read = counter.value
            for name in sorted(files_read.value):
                top, position = files_read.value[name]
                stats.file_read(name, top, position)
            if stats.files:
                stats.end = stats.files[max(stats.files)][1]

    def close(self) -> None:
        for frame in self.cached:
            frame.unpersist()
        for folder, _, _ in self.dead:
            shutil.rmtree(folder, ignore_errors=True)
        self.cached, self.dead = [], []


def _read_partition(plan: ReadPlan, dead_letters: str | None, counter, files_read, batches):
    """mapInArrow: the files listed in a partition, read by dsms's readers (runs in a Python worker)."""

    def report(name, top, position):
        files_read.add({name: (top, position)})

    for batch in batches:
        files = list(zip(batch.column("__fi").to_pylist(), batch.column("__path").to_pylist()))
        for out in read_files(plan, files, dead_letters, report):
            counter.add(out.num_rows)
            yield out


class _FileReports:
    """An accumulator (an AccumulatorParam) of what each task saw of its files: {name: (largest time, end position)}."""

    def zero(self, value):
        return {}

    def addInPlace(self, a, b):
        a.update(b)
        return a


def write_parts(frame, sink: DirectorySink, batch: int, out_schema: pa.Schema) -> int:
    """Write ``frame`` from the executors as ``sink``'s part files of ``batch``; the rows written."""
    written = frame.mapInArrow(partial(_write_task, sink.spec, batch, out_schema),
                               "hidden STRING, final STRING, rows BIGINT").collect()
    sink.commit(batch, [(r["hidden"], r["final"]) for r in written])
    return sum(r["rows"] for r in written)


def _write_task(spec, batch: int, out_schema: pa.Schema, batches):
    """mapInArrow: one task's rows rendered by dsms's encoders into a hidden part (runs in a Python worker)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    rows = (conform(_naive(pa.Table.from_batches([b])), out_schema).combine_chunks().to_batches()
            for b in batches)
    done = write_part(spec, batch, context.partitionId(), context.attemptNumber(),
                      (piece for pieces in rows for piece in pieces))
    if done is not None:
        yield pa.RecordBatch.from_pydict({"hidden": [done[0]], "final": [done[1]], "rows": [done[2]]})


def _zoned(table: pa.Table) -> pa.Table:
    """dsms's naive timestamps as UTC instants, which Spark's TIMESTAMP takes as they are (its zone is UTC)."""
    columns = [c.cast(pa.timestamp("us", tz="UTC")) if pa.types.is_timestamp(c.type) else c for c in table.columns]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _naive(table: pa.Table) -> pa.Table:
    """Spark's timestamps arrive with the session's zone (UTC): keep their wall clock."""
    columns = []
    for column in table.columns:
        if pa.types.is_timestamp(column.type) and column.type.tz is not None:
            column = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us"))
        columns.append(column)
    return pa.Table.from_arrays(columns, names=table.column_names)


def _translate(e: Exception) -> Exception:
    """A Spark failure as a dsms error: a bad row as the reader's SourceError, else the first line."""
    text = str(e)
    found = source_error_in(text)
    if found is not None:
        return found
    first = next((line for line in text.splitlines() if line.strip()), type(e).__name__)
    return RouteError(f"Spark could not run the lowered statement: {first}")


ROUTE = BatchRoute("spark", SparkExecutor)
