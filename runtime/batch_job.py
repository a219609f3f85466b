"""A query on a batch route, scheduled like the runtime's jobs.

The engine starts it where it would start a runtime job, with the same
output (a file sink writer or a collector), so query handles, sinks and
``dsms run``'s summary work the same. It runs once, on its first step:
the lowered statement over every file, the final rows written out (an
updating result's rows as ``+I`` changes, so a changelog sink holds the
final result), the output closed.
"""

from __future__ import annotations

import hashlib
import time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from ..planner.lower.plan import Lowered
from ..planner.physical.specs import OP
from .batch_read import RunStats, ScanStats
from .checkpoint import Checkpoint
from .connectors.dir_sink import DirectorySink
from .job import JobMetrics, Lifecycle
from .operators.base import MAX_WATERMARK, MIN_WATERMARK
from .routes import JobStats, Output, StartContext

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import RouteChoice


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

    def step(self) -> bool:
        if not self.runnable:
            return False
        began = time.perf_counter()
        rows = [f for f in self.schema if f.name != OP]
        writer = getattr(self.output, "writer", None)
        try:
            if getattr(self.executor, "writes_parts", False) and isinstance(writer, DirectorySink):
                self.run_stats = self.executor.run(self.lowered, self._write, pa.schema(rows), parts=writer)
                self.metrics.rows_out = self.run_stats.rows_out  # the executors wrote the parts
            else:
                self.run_stats = self.executor.run(self.lowered, self._write, pa.schema(rows))
        finally:
            self.metrics.busy_s += time.perf_counter() - began
        self.metrics.meter.mark(self.rows_in)
        self.done = True
        self.metrics.finished = time.time()
        self.output.close()
        return True

    def _write(self, table: pa.Table) -> None:
        if self.updating:
            table = table.append_column(OP, pa.array(np.zeros(table.num_rows, dtype=np.int8)))
        self.metrics.rows_out += table.num_rows
        self.output.write(table)

    def run(self) -> None:
        self.step()
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        pass

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
        meta = {"route": self.route, "done": self.done, "rows_out": self.metrics.rows_out,
                "plan": self.fingerprint()}
        return Checkpoint(meta, {}, *self.output.checkpoint())

    def restore(self, ckpt: Checkpoint) -> None:
        meta = ckpt.check(self.fingerprint())
        self.done = bool(meta["done"])  # not done: it runs again from the start, into a truncated output
        self.metrics.rows_out = int(meta["rows_out"]) if self.done else 0

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

    def __init__(self, engine: str, executor_class):
        self.name = self.engine = engine
        self.executor_class = executor_class

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
