"""A query on a batch route, scheduled like the runtime's jobs.

The engine starts it where it would start a runtime job, with the same
output (a file sink writer or a collector), so query handles, sinks and
``dsms run``'s summary work the same. It runs once: the lowered statement over
every file, the final rows written out (an updating result's rows as
``+I`` changes, so a changelog sink holds the final result), the output
closed.

The statement runs on a thread of its own, started by the job's first
step; each step waits for it a moment and hands the rows it has produced
to the output, so the thread that drives the engine (the shell's prompt)
is never blocked for long, and ``cancel`` (Ctrl-C, DROP QUERY) interrupts
the statement through its executor (``interrupt()``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..planner.lower.plan import Lowered
from ..planner.physical.specs import OP
from .batch_read import RunStats, ScanStats, check_scans_read_to_end
from .checkpoint import Checkpoint
from .connectors.dir_sink import DirectorySink
from .lifecycle import JobMetrics, Lifecycle
from .operators.base import MAX_WATERMARK, MIN_WATERMARK
from .routes import JobStats, Output, StartContext

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import EngineTraits, RouteChoice


class BatchJob(Lifecycle):
    """Runs ``lowered`` on ``executor`` (a batch route's executor) into ``output``, once.

    It is a job like the runtime's (status, pause, failure, stats,
    checkpoints), so SHOW QUERIES, PAUSE QUERY and checkpoints treat both
    alike. It has no state between turns: a checkpoint records only
    whether it finished, and a batch query cut short is simply run again.
    """

    kind = "batch statement"  # what SHOW PROGRESS calls it

    def __init__(self, executor, lowered: Lowered, output: Output, schema: pa.Schema, reason: str = ""):
        self.executor = executor
        self.route = executor.name
        self.reason = reason
        self.lowered = lowered
        self.output = output
        self.schema = schema  # the output's columns, with __op when the result is updating
        self.updating = OP in self.schema.names
        self.metrics = JobMetrics()
        self.run_stats = RunStats([ScanStats(s.source.name) for s in lowered.scans])
        self.done = False
        self.paused = False
        self.cancelled = False
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._results: list[pa.Table] = []  # rows the statement produced, not yet handed to the output
        self._outcome: list = []  # the statement's RunStats, or the exception it raised
        self._began = 0.0
        self._start_output: tuple | None = None  # the output before the run: what a checkpoint keeps meanwhile
        self._restored_read: dict[str, dict] = {}  # a finished job's read files, from its checkpoint

    WAIT_S = 0.05  # how long a step waits for the statement

    def step(self) -> bool:
        if not self.runnable:
            return False
        if self._thread is None:
            self._start_output = self.output.checkpoint()
            self._began = time.perf_counter()
            self._thread = threading.Thread(target=self._execute, name="dsms-batch", daemon=True)
            self._thread.start()
        self._thread.join(self.WAIT_S)
        self._hand_over()
        if self._thread.is_alive():
            return True
        self.metrics.busy_s += time.perf_counter() - self._began
        outcome = self._outcome[0]
        if isinstance(outcome, BaseException):
            raise outcome
        self.run_stats = outcome
        if self._writes_parts():
            self.metrics.rows_out = self.run_stats.rows_out  # the executors wrote the parts
        self.metrics.meter.mark(self.rows_in)
        self.done = True
        self.metrics.finished = time.time()
        self.output.close()
        return True

    def _execute(self) -> None:
        """The statement, on its own thread: its rows are collected for ``step`` to hand over."""
        rows = pa.schema([f for f in self.schema if f.name != OP])
        try:
            if self._writes_parts():
                self._outcome.append(self.executor.run(self.lowered, self._results.append, rows,
                                                       parts=self.output.writer))
            else:
                self._outcome.append(self.executor.run(self.lowered, self._results.append, rows))
        except BaseException as e:  # handed to the driving thread, which fails the job
            self._outcome.append(e)

    def _writes_parts(self) -> bool:
        return getattr(self.executor, "writes_parts", False) and isinstance(getattr(self.output, "writer", None),
                                                                            DirectorySink)

    def _hand_over(self) -> None:
        while self._results:
            self._write(self._results.pop(0))

    def _write(self, table: pa.Table) -> None:
        """One result table to the output (an updating result's rows are all inserts)."""
        if self.updating:
            table = table.append_column(OP, pa.array(np.zeros(table.num_rows, dtype=np.int8)))
        self.metrics.rows_out += table.num_rows
        self.output.write(table)

    def run(self) -> None:
        while self.runnable and self.step():
            pass
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        """Stop for good; a statement that is running is interrupted."""
        super().cancel()
        self._interrupt()

    def close(self) -> None:
        self._interrupt()

    def _interrupt(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            interrupt = getattr(self.executor, "interrupt", None)
            if interrupt is not None:
                interrupt()
            self._thread.join(5.0)

    # -- what the engine reads of a job ------------------------------------------------------

    def stats(self) -> JobStats:
        rows: dict[str, int] = {}
        skipped: dict[str, int] = {}
        for s in self.run_stats.scans:
            rows[s.name] = max(rows.get(s.name, 0), s.rows_read)
            if s.skipped:
                skipped[s.name] = max(skipped.get(s.name, 0), s.skipped)
        return JobStats(
            route=self.route, status=self.status, watermark=self.watermark, rows_in=self.rows_in,
            rows_out=self.metrics.rows_out, events_per_s=self.metrics.meter.rate() if self.runnable else 0.0,
            late=self.late, late_counted=self.late_counted, sources=rows, skipped=skipped, error=self.error)

    def progress(self) -> list[dict]:
        """One row: a statement has no operators to wait for."""
        return [{"op_id": None, "operator": f"{self.kind} on {self.route} ({self.reason})", "inputs": [],
                 "has_watermark": True, "watermark": self.watermark, "held_back_by": None, "idle": False,
                 "next_fire": None, "late": sum(self.late.values()), "state_rows": 0, "state_bytes": 0}]

    def fingerprint(self) -> str:
        """What the statement computes: a checkpoint of another statement does not fit."""
        return hashlib.sha256(self.lowered.sql().encode()).hexdigest()[:16]

    def snapshot(self) -> Checkpoint:
        """No state: whether it finished, and its output."""
        if not self.done and self._start_output is not None:  # running: a restart runs it again from the start
            meta = {"route": self.route, "done": False, "rows_out": 0, "plan": self.fingerprint()}
            return Checkpoint(meta, {}, *self._start_output)
        meta = {"route": self.route, "done": self.done, "rows_out": self.metrics.rows_out,
                "plan": self.fingerprint()}
        if self.done:
            meta["read_to_end"] = self._read_to_end()
        return Checkpoint(meta, {}, *self.output.checkpoint())

    def restore(self, ckpt: Checkpoint) -> None:
        meta = ckpt.check(self.fingerprint())
        self.done = bool(meta["done"])  # not done: it runs again from the start, into a truncated output
        self.metrics.rows_out = int(meta["rows_out"]) if self.done else 0
        if self.done and meta.get("read_to_end"):
            self._restored_read = meta["read_to_end"]
            check_scans_read_to_end(self.lowered.scans, self._restored_read)

    def _read_to_end(self) -> dict[str, dict]:
        """Per source, the files the statement read to their end (a restored job: what its checkpoint said)."""
        read = dict(self._restored_read)
        for scan in self.run_stats.scans:
            if scan.read_to_end is not None:
                read[scan.name] = {**read.get(scan.name, {}), **scan.read_to_end}
        return read

    @property
    def rows_in(self) -> int:
        return sum(s.rows_read for s in self.run_stats.scans)

    @property
    def late(self) -> dict[str, int]:
        return {s.name: s.late for s in self.run_stats.scans if s.late is not None}

    @property
    def late_counted(self) -> bool:
        """Whether ``late`` counts every late event (the Spark route judges them inside its statement)."""
        return all(s.late is not None for s in self.run_stats.scans)

    @property
    def state_rows(self) -> int:
        return 0

    @property
    def watermark(self) -> int:
        return MAX_WATERMARK if self.done else MIN_WATERMARK

    output_watermark = watermark


class BatchRoute:
    """A route that runs a query as one statement of ``engine``'s dialect, over bounded files.

    Each batch route module defines one, with its executor class (``run(lowered, write, schema)``).
    """

    backfills = True
    lowers = True

    def __init__(self, engine: str, executor_class, traits: "EngineTraits"):
        self.name = self.engine = engine
        self.executor_class = executor_class
        self.traits = traits

    def serves(self, choice: "RouteChoice") -> bool:
        return choice.engine == self.engine and not choice.continuous and not choice.backfill

    def executor(self, settings: dict):
        return self.executor_class(settings)

    def start(self, ctx: StartContext, planned: "PlannedQuery", choice: "RouteChoice", output: Output) -> BatchJob:
        job = BatchJob(self.executor(ctx.settings), planned.lowered(self.engine, streaming=False), output,
                       planned.output_schema, choice.reason)
        ctx.scheduler.add(ctx.name, job)
        return job

    def explain(self, planned: "PlannedQuery", choice: "RouteChoice") -> str:
        return planned.lowered(self.engine, streaming=False).explain()
