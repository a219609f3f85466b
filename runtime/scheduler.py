"""The scheduler: the running jobs of one engine and the in-memory streams they share.

Jobs take turns, one source batch at a time, so many standing queries can
share one thread. Each job has its own DuckDB connection and state store.
Memory streams and late-event logs are kept here, by source name, because
several jobs read them.

A job that raises (bad input, a sink that cannot be written) is marked
failed with its error and left out of later turns; the others go on. The
failures are kept in ``failures`` for the engine to report.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from ..grammar import DsmsError
from ..planner.catalog import SourceDef
from ..planner.physical.specs import OP, PhysicalPlan, SourceSpec
from .clock import SystemClock
from .connectors.base import SourceContext, SourceReader
from .connectors.factory import open_source, read_request
from .duck import Duck
from .job import Job, Output
from .memory import DEFAULT_RETENTION, MemoryLog
from .operators.base import Env
from .state import StateStore


class Scheduler:
    def __init__(self, clock=None, batch_rows: int = 65536, journal_for=None):
        self.clock = clock or SystemClock()
        self.batch_rows = batch_rows
        self.jobs: dict[str, Job] = {}
        self.memory: dict[str, MemoryLog] = {}
        self.late: dict[str, MemoryLog] = {}
        self.lock = threading.RLock()
        self.failures: list[tuple[str, Job]] = []  # (job name, job) in the order they failed
        # source -> a Journal that keeps its memory log on disk (a state directory), or None
        self.journal_for = journal_for
        self.memory_retention = DEFAULT_RETENTION  # bytes of consumed rows a memory log keeps

    # -- shared logs --------------------------------------------------------------

    def memory_log(self, source: SourceDef) -> MemoryLog:
        key = source.name.lower()
        if key not in self.memory:
            fields = [source.schema.find(c) for c in source.physical]
            schema = pa.schema([pa.field(f.name, f.type) for f in fields])
            if source.kind == "table":
                schema = schema.append(pa.field(OP, pa.int8()))  # a table's log holds changes by key
            journal = self.journal_for(source, schema) if self.journal_for else None
            self.memory[key] = MemoryLog(schema, journal, trims=source.kind != "table",
                                         retention=self.memory_retention)
        return self.memory[key]

    def late_log(self, op: SourceSpec) -> MemoryLog:
        key = op.source.name.lower()
        if key not in self.late:
            self.late[key] = MemoryLog(pa.schema([pa.field(f.name, f.type) for f in op.source.schema]),
                                       retention=self.memory_retention)
        return self.late[key]

    def retain(self, retention: int) -> None:
        """Keep ``retention`` bytes of consumed rows in every memory log (``SET 'memory.retention'``)."""
        self.memory_retention = retention
        for log in [*self.memory.values(), *self.late.values()]:
            log.retention = retention
            log.trim()

    def drop_source(self, name: str) -> None:
        log = self.memory.pop(name.lower(), None)
        if log is not None:
            log.detach()
        self.late.pop(name.lower(), None)

    def open_reader(self, op: SourceSpec) -> SourceReader:
        src = op.source
        req = read_request(src, op.columns, op.time_column, self.batch_rows)
        return open_source(src, req, SourceContext(src, self.clock, self.memory_log))

    # -- jobs -----------------------------------------------------------------------

    def start(self, name: str, plan: PhysicalPlan, output: Output) -> Job:
        with self.lock:
            env = Env(duck=Duck(), state=StateStore(), clock=self.clock)
            job = Job(plan, output, env, self.open_reader, self.late_log)
            self.jobs[name] = job
            return job

    def add(self, name: str, job) -> None:
        """Schedule a job made elsewhere (a query on a batch route: ``runtime/batch_job.py``)."""
        with self.lock:
            self.jobs[name] = job

    def stop(self, name: str) -> Job | None:
        with self.lock:
            job = self.jobs.pop(name, None)
        if job is not None:
            job.close()
        return job

    def step(self) -> bool:
        """Give every running job one turn; True if any made progress (or failed)."""
        with self.lock:
            jobs = [(name, j) for name, j in self.jobs.items() if j.runnable]
        progressed = False
        for name, job in jobs:
            try:
                progressed = job.step() or progressed
            except Exception as e:  # one job's failure must not stop the others
                job.fail(e)
                self.failures.append((name, job))
                progressed = True
            except BaseException:  # Ctrl-C in the middle of a turn: the job's state may be torn
                job.fail(DsmsError("interrupted in the middle of a batch, so its state may be incomplete; with a "
                                   "state directory it continues from its last checkpoint when the engine restarts"))
                raise
        return progressed

    def run_until_idle(self, max_steps: int | None = None) -> int:
        steps = 0
        while self.step():
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
        return steps
