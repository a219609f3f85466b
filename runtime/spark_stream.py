"""The continuous Spark route: a query over watched files run as a Spark Structured Streaming query.

The statement is the lowering of ``planner/lower/stream.py``: its watched
sources are streams read by ``spark_source.py`` (with ``withWatermark`` on
their time columns), its bounded sources are read once by dsms's readers
and cached (the static side of a stream-static join). The query runs in
append mode into ``foreachBatch``, which hands each micro-batch's rows to
the job's output on the driver: the same file sinks and query handles as
the other routes (rows in event-time order within a micro-batch).

The engine drives it like any job: a turn in which a watched directory has
new files (and the first turn) runs the stream until it has caught up
(``Trigger.AvailableNow``: the files present when the run starts, then a
micro-batch without data in which the new watermark closes windows), and
returns when the run ends; a turn without new files does nothing. So Spark
works only when there is something to do, and the output is only written
from the engine's turn.

State: Spark's own checkpoint (offsets, commits, operator state) is kept
in ``<query's folder in the state directory>/spark``, or in a temporary
folder removed when the query stops. Exactly-once output: after writing a
micro-batch, and before Spark logs it as committed, the job takes a dsms
checkpoint of the query (``on_commit``) that records the micro-batch's id
with the sink's position. After a crash the sink is cut back to that
checkpoint; Spark runs again every micro-batch it had not logged, and the
job skips those it had already written.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
from typing import TYPE_CHECKING

import pyarrow as pa

from ..planner.lower.plan import Lowered
from .batch_job import BatchJob
from .batch_read import BATCH_ROWS, ReadPlan, RouteError, ScanStats, merge_dead_letters
from .checkpoint import Checkpoint
from .connectors.dir_sink import DirectorySink
from .duck import conform
from .operators.base import MIN_WATERMARK
from .routes import Output, StartContext
from .spark_route import BoundedScans, SparkExecutor, _naive, _translate, spark_session, write_parts

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import RouteChoice

LATE = "dropped by Spark's watermark"


class SparkStreamJob(BatchJob):
    """A Structured Streaming query over ``lowered`` (a streaming statement) into ``output``.

    It answers what the engine asks of a job (status, pause, failure,
    counters) like a batch job, but never finishes on its own: its
    sources keep growing.
    """

    streaming = True
    kind = "Structured Streaming query"

    def __init__(self, settings: dict, lowered: Lowered, output: Output, schema: pa.Schema, reason: str = "",
                 batch_rows: int = BATCH_ROWS):
        super().__init__(SparkExecutor(settings, batch_rows), lowered, output, schema, reason)
        self.settings, self.batch_rows = settings, batch_rows
        self.out_schema = pa.schema([f for f in self.schema if f.name != "__op"])
        self.rowtime = lowered.schema.rowtime
        self.committed = -1  # the last micro-batch written to the output
        self.on_commit = None  # called after each micro-batch is written (a checkpoint of the query)
        self.state_path: str | None = None  # Spark's checkpoint goes here (else a temporary folder)
        self._location: str | None = None
        self._temporary: list[str] = []
        self._frame = None
        self._bounded: BoundedScans | None = None
        self._streams: list[tuple[ReadPlan, str | None, ScanStats]] = []  # plan, dead-letter folder, stats
        self._seen: dict[int, list[str]] = {}
        self._progress: dict[int, dict] = {}  # Spark's progress per micro-batch id
        self.runs = 0
        self.run_seconds = 0.0
        self.startup_seconds = 0.0

    def keep_checkpoints(self, folder: str, take) -> None:
        """Keep Spark's checkpoint under ``folder`` and checkpoint the query (``take``) after each micro-batch,
        so its output never runs ahead of its checkpoint."""
        if self.state_path is None:
            self.state_path, self.on_commit = folder, take

    def snapshot(self) -> Checkpoint:
        """Spark keeps the state: the last micro-batch in the output."""
        meta = {"route": self.route, "streaming": True, "batch": self.committed, "done": False,
                "rows_out": self.metrics.rows_out, "plan": self.fingerprint()}
        return Checkpoint(meta, {}, *self.output.checkpoint())

    def restore(self, ckpt: Checkpoint) -> None:
        """Micro-batches up to the checkpoint's are in the output (cut back to it)."""
        meta = ckpt.check(self.fingerprint())
        self.committed = int(meta["batch"])
        self.metrics.rows_out = int(meta["rows_out"])

    # -- driving --------------------------------------------------------------------------

    def step(self) -> bool:
        if not self.runnable:
            return False
        began = time.perf_counter()
        try:
            if self._frame is None:
                self._start()
            elif not self._new_files():
                return False
            self._run()
        finally:
            self.metrics.busy_s += time.perf_counter() - began
        return True

    def run(self) -> None:
        """One run over what is there now (the engine's turn); raises if it failed."""
        self.step()
        if self.error is not None:
            raise self.error

    def _start(self) -> None:
        began = time.perf_counter()
        spark = spark_session(self.settings)
        self.startup_seconds = time.perf_counter() - began
        from .spark_source import NAME, register, source_options

        register(spark)
        self._location = self._checkpoint_location()
        self._bounded = BoundedScans(spark, self.batch_rows)
        for spec, stats in zip(self.lowered.scans, self.run_stats.scans):
            if spec.streaming:
                plan = ReadPlan.of(spec, self.batch_rows)
                dead = self._temp("dsms-dead-letter-") if plan.dead_letter_path() else None
                frame = spark.readStream.format(NAME).options(**source_options(plan, dead)).load()
                wm = spec.source.watermark
                if wm is not None:
                    frame = frame.withWatermark(wm.column, f"{wm.delay_us} microseconds")
                stats.late = None
                self._streams.append((plan, dead, stats))
            else:  # a stream-static join's bounded side: read once, kept for every micro-batch
                frame = self._bounded.add(spec, stats, cache=True)
            frame.createOrReplaceTempView(spec.relation)
        try:
            self._frame = spark.sql(self.lowered.sql())
        except Exception as e:  # noqa: BLE001 - Spark's errors come through Py4J
            raise _translate(e) from None
        finally:
            for spec in self.lowered.scans:
                spark.catalog.dropTempView(spec.relation)
        self._new_files()

    def _checkpoint_location(self) -> str:
        if self.state_path is None:
            return self._temp("dsms-spark-stream-")
        location = os.path.join(self.state_path, "spark")
        if self.committed >= 0 and not os.path.isdir(os.path.join(location, "commits")):
            raise RouteError(f"Spark's checkpoint of this query is missing from {location}, so the stream cannot "
                             "continue where its output stops; drop the query and create it again")
        return location

    def _temp(self, prefix: str) -> str:
        path = tempfile.mkdtemp(prefix=prefix)
        self._temporary.append(path)
        return path

    def _new_files(self) -> bool:
        """Whether a watched source lists files it did not list before (and remember them)."""
        from .spark_source import listing

        new = False
        for i, (plan, _, _) in enumerate(self._streams):
            names = listing(plan)
            if names != self._seen.get(i):
                self._seen[i] = names
                new = True
        return new

    def _run(self) -> None:
        began = time.perf_counter()
        writer = (self._frame.writeStream.outputMode("append").option("checkpointLocation", self._location)
                  .foreachBatch(self._micro_batch).trigger(availableNow=True))
        query = writer.start()
        try:
            query.awaitTermination()
        except Exception as e:  # noqa: BLE001 - a failed micro-batch comes back through Py4J
            raise _translate(e) from None
        except BaseException:
            query.stop()
            raise
        finally:
            self._note(query)
            self.runs += 1
            self.run_seconds += time.perf_counter() - began
        if self._bounded is not None:
            self._bounded.finish()

    def _micro_batch(self, frame, batch_id: int) -> None:
        """foreachBatch: one micro-batch's rows to the output (runs while the engine's turn waits for the run)."""
        if batch_id <= self.committed:  # written before a restart; Spark runs it again, not having logged it
            frame.write.format("noop").mode("overwrite").save()  # its state is updated all the same
            return
        writer = getattr(self.output, "writer", None)
        if isinstance(writer, DirectorySink):  # the executors write the micro-batch's parts
            if self.rowtime is not None:
                frame = frame.sortWithinPartitions(self.rowtime.name)
            self.metrics.rows_out += write_parts(frame, writer, batch_id, self.out_schema)
            table = None
        else:
            table = conform(_naive(frame.toArrow()), self.out_schema)
            if self.rowtime is not None and table.num_rows:
                table = table.sort_by(self.rowtime.name)
        for plan, dead, stats in self._streams:
            if dead is not None:
                stats.skipped += merge_dead_letters(dead, plan.dead_letter_path())
        if table is not None and table.num_rows:
            self._write(table)
        self.committed = batch_id
        if self.on_commit is not None:
            self.on_commit()

    def _note(self, query) -> None:
        """Keep Spark's progress reports of the run's micro-batches (rows read, late rows, watermark)."""
        for p in query.recentProgress or []:
            self._progress[int(p["batchId"])] = p
        before = self.rows_in
        for _, _, stats in self._streams:
            stats.rows_read = 0
        for p in self._progress.values():  # (Spark lists a query's sources in its own order)
            for source, (_, _, stats) in zip(p["sources"] or [], self._streams):
                stats.rows_read += int(source["numInputRows"] or 0)
        self.metrics.meter.mark(self.rows_in - before)

    def close(self) -> None:
        if self._bounded is not None:
            self._bounded.close()
        for path in self._temporary:
            shutil.rmtree(path, ignore_errors=True)
        self._temporary = []

    # -- what the engine reads of a job ------------------------------------------------

    @property
    def late(self) -> dict[str, int]:
        dropped = sum(int(op.get("numRowsDroppedByWatermark", 0)) for p in self._progress.values()
                      for op in p.get("stateOperators", []))
        return {LATE: dropped}

    @property
    def late_counted(self) -> bool:
        return True

    @property
    def watermark(self) -> int:
        if not self._progress:
            return MIN_WATERMARK
        text = self._progress[max(self._progress)].get("eventTime", {}).get("watermark")
        if not text:
            return MIN_WATERMARK
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)
        return (moment - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)

    output_watermark = watermark


class SparkStreamRoute:
    """The continuous Spark route: a query over watched files as a Spark Structured Streaming query."""

    name = "spark-streaming"
    engine = "spark"
    backfills = False  # the batch Spark route backfills
    lowers = True

    def serves(self, choice: "RouteChoice") -> bool:
        return choice.engine == self.engine and choice.continuous

    def start(self, ctx: StartContext, planned: "PlannedQuery", choice: "RouteChoice", output: Output) -> SparkStreamJob:
        job = SparkStreamJob(dict(ctx.settings), self._lowered(planned), output, planned.output_schema, choice.reason)
        ctx.scheduler.add(ctx.name, job)
        return job

    def explain(self, planned: "PlannedQuery", choice: "RouteChoice") -> str:
        return self._lowered(planned).explain()

    def _lowered(self, planned: "PlannedQuery") -> Lowered:
        return planned.lowered(self.engine, streaming=True)


ROUTE = SparkStreamRoute()
