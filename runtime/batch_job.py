"""A query on a batch route, scheduled like the runtime's jobs.

The engine starts it where it would start a runtime job, with the same
output (a file sink writer or a collector), so query handles, sinks and
``dsms run``'s summary work the same. It runs once, on its first step:
the lowered statement over every file, the final rows written out (an
updating result's rows as ``+I`` changes, so a changelog sink holds the
final result), the output closed.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pyarrow as pa

from ..planner.lower_plan import Lowered
from ..planner.physical import OP, PhysicalPlan
from .batch_read import RunStats, ScanStats
from .connectors.dir_sink import DirectorySink
from .job import JobMetrics, Lifecycle, Output
from .operators.base import MAX_WATERMARK, MIN_WATERMARK
from .state import StateStore


class _ScanView:
    """What the run summary reads of a source (as of a runtime job's SourceLogic)."""

    def __init__(self, stats: ScanStats):
        self.stats = stats
        self.finished = True
        self.watermark = MAX_WATERMARK
        self.reader = self

    @property
    def name(self) -> str:
        return self.stats.name

    @property
    def rows_read(self) -> int:
        return self.stats.rows_read

    @property
    def skipped(self) -> int:
        return self.stats.skipped


class BatchJob(Lifecycle):
    """Runs ``lowered`` on ``executor`` (a DuckDBRoute or SparkRoute) into ``output``, once.

    It answers what the engine asks of a runtime job (status, pause,
    failure, counters), so SHOW QUERIES, PAUSE QUERY and checkpoints treat
    both alike. It has no state between turns: a checkpoint records only
    whether it finished, and a batch query cut short is simply run again.
    """

    def __init__(self, executor, lowered: Lowered, output: Output, plan: PhysicalPlan, reason: str = ""):
        self.executor = executor
        self.route = executor.name
        self.reason = reason
        self.lowered = lowered
        self.output = output
        self.plan = plan  # the runtime's plan of the same query: its fingerprint names the query in checkpoints
        self.schema = plan.root.schema  # the output's columns, with __op when the result is updating
        self.updating = OP in self.schema.names
        self.metrics = JobMetrics()
        self.stats = RunStats([ScanStats(s.source.name) for s in lowered.scans])
        self.env = SimpleNamespace(state=StateStore())  # always empty
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
            if self.route == "spark" and isinstance(writer, DirectorySink):  # the executors write the parts
                self.stats = self.executor.run(self.lowered, self._write, pa.schema(rows), parts=writer)
                self.metrics.rows_out = self.stats.rows_out
            else:
                self.stats = self.executor.run(self.lowered, self._write, pa.schema(rows))
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

    # -- what the engine and `dsms run` read of a job ----------------------------------------

    @property
    def sources(self) -> list[tuple[int, _ScanView]]:
        return [(i, _ScanView(s)) for i, s in enumerate(self.stats.scans)]

    @property
    def rows_in(self) -> int:
        return sum(s.rows_read for s in self.stats.scans)

    @property
    def late(self) -> dict[str, int]:
        return {s.name: s.late for s in self.stats.scans if s.late is not None}

    @property
    def late_counted(self) -> bool:
        """Whether ``late`` counts every late event (the Spark route judges them inside its statement)."""
        return all(s.late is not None for s in self.stats.scans)

    @property
    def state_rows(self) -> int:
        return 0

    @property
    def watermark(self) -> int:
        return MAX_WATERMARK if self.done else MIN_WATERMARK

    output_watermark = watermark
