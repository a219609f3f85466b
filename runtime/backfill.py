"""Backfill then live: a runtime job's history run as one batch statement, then the runtime from the seam.

``SET 'backfill' = 'duckdb' | 'spark'`` gives a runtime job over watched
files a :class:`Backfill`, which does the job's first turn
(``planner/analysis/backfill.py`` says what the statement computes):

1. The batch route runs the history statement over the files present now
   (each read to its end, with the late-event rule of one run), writing
   into the job's output what the runtime would have emitted by then. Its
   readers report, per file, the largest event time and the position at
   the file's end.
2. The seam: each source's watermark is its history's largest time minus
   its delay; ``W`` is their minimum. The state still open at the seam can
   only hold events at or after ``T = W - reach``. For each source, the
   replay starts with the first file whose running maximum reaches ``T``
   (every earlier event is earlier than ``T``), with the running maximum of
   the files before it, so events are judged late exactly as in one run.
3. The replay: the job reads from there to the end of the history with its
   output muted. Windows that close on the way were emitted by the
   statement; what is open at the seam (windows, join rows) is now in the
   job's state. A source that reaches its end of history waits for the
   others, so nothing after the seam is read while the output is muted.
4. The job goes on as a runtime job, reading each source from where the
   statement's reader stopped.

All of it happens in one turn, so a checkpoint is taken either before it
(the backfill runs again after a restart, into an empty output) or after
it (a plain runtime checkpoint). The history's files must be whole when
the query starts (write files under a hidden name and rename them): a file
that grew between the statement and the replay is reported, not guessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ..planner.analysis.backfill import state_reach
from ..planner.explain import explain_physical
from ..planner.lower.plan import Lowered
from .batch_read import RunStats, ScanStats
from .connectors.base import ReaderWrapper
from .errors import BackfillError
from .job import Job
from .operators.base import MIN_WATERMARK
from .operators.source import SourceLogic
from .routes import Output, StartContext, backfill_executor

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import RouteChoice


class Backfill:
    """The first turn of a runtime job: its history on a batch route, then the replay up to the seam."""

    def __init__(self, executor, lowered: Lowered, reach_us: int):
        self.executor = executor
        self.route = executor.name
        self.lowered = lowered
        self.reach_us = reach_us
        self.stats: RunStats | None = None
        self.replayed_from: dict[str, str | None] = {}  # per source, the first file read again

    def run(self, job) -> None:
        """Backfill ``job``'s output, then bring its state to the seam."""
        out_schema = pa.schema([f for f in job.plan.root.schema if f.name != "__op"])

        def write(table: pa.Table) -> None:
            job.metrics.rows_out += table.num_rows
            job.output.write(table)

        self.stats = self.executor.run(self.lowered, write, out_schema)
        history = self._history()
        sources = [s for _, s in job.sources if isinstance(s, SourceLogic)]
        marks = [_largest(history[s.name]) for s in sources]
        low = min((m - s.spec.delay_us if m is not None else MIN_WATERMARK) for s, m in zip(sources, marks))
        start = low - self.reach_us if low > MIN_WATERMARK else MIN_WATERMARK
        gate = _Gate()
        for source in sources:
            self._rewind(source, history[source.name], start, gate)
        self._replay(job, gate)
        for source in sources:  # what the history holds, not what the replay read again
            scan = history[source.name]
            source.reader = source.reader.inner
            source.rows_read, source.late = scan.rows_read, scan.late or 0  # (Spark does not count late events)

    def _history(self) -> dict[str, ScanStats]:
        found: dict[str, ScanStats] = {}
        for spec, scan in zip(self.lowered.scans, self.stats.scans):
            found.setdefault(spec.source.name, scan)
        return found

    def _rewind(self, source: SourceLogic, scan: ScanStats, start: int, gate: "_Gate") -> None:
        """Point ``source`` at the first history file that can hold an event at or after ``start``."""
        before, top, resume = MIN_WATERMARK, MIN_WATERMARK, None
        first = None
        for name in sorted(scan.files):
            largest, end = scan.files[name]
            if largest is not None and max(top, largest) >= start:
                first = name
                break
            top = max(top, largest) if largest is not None else top
            before, resume = top, end
        self.replayed_from[source.name] = first
        if resume is not None:
            source.reader.seek(resume)
        source.max_ts.value = before
        source.reader = _UpToSeam(source.reader, scan.end, gate, source.name)

    def _replay(self, job, gate: "_Gate") -> None:
        output, rows_out = job.output, job.metrics.rows_out
        job.output = _Muted()
        try:
            while not gate.all_there():
                if not job.replay_turn():
                    raise BackfillError("the replay of the history stopped before its end")
        finally:
            job.output, job.metrics.rows_out = output, rows_out
        gate.open = True


class _Muted:
    """The job's output during the replay: what it emits there was emitted by the statement."""

    def write(self, table: pa.Table) -> None:
        pass


def _largest(scan: ScanStats) -> int | None:
    times = [t for t, _ in scan.files.values() if t is not None]
    return max(times) if times else None


class _Gate:
    """Holds every source at its end of history until all are there."""

    def __init__(self):
        self.readers: list[_UpToSeam] = []
        self.open = False

    def all_there(self) -> bool:
        return all(r.there for r in self.readers)


class _UpToSeam(ReaderWrapper):
    """A source's reader during the replay: it stops at the seam (the statement's end of history)."""

    def __init__(self, inner, seam: dict | None, gate: _Gate, name: str):
        super().__init__(inner)
        self.seam, self.gate, self.name = seam, gate, name
        self.there = seam is None or _at(inner.position, seam)
        self._empty = inner.req.schema.empty_table()  # (a stream's reader: LineSource or ParquetSource)
        gate.readers.append(self)

    def read(self) -> pa.Table | None:
        if self.there and not self.gate.open:
            return self._empty  # nothing after the seam while the output is muted
        table = self.inner.read()
        position = self.inner.position
        if _past(position, self.seam):
            raise BackfillError(f"the history of '{self.name}' grew while it was backfilled (file "
                                f"{position.get('file')} is longer than the backfill read it); add files whole "
                                "(write them under a hidden name and rename them) and create the query again")
        self.there = _at(position, self.seam)
        return table


def _key(position: dict) -> tuple:
    return (position.get("file") or "", int(position.get("offset", position.get("row", 0)) or 0))


def _at(position: dict, seam: dict) -> bool:
    return _key(position) == _key(seam)


def _past(position: dict, seam: dict | None) -> bool:
    return seam is not None and _key(position) > _key(seam)


class BackfillRoute:
    """The runtime, after the history of its watched files ran as one statement on a batch route."""

    name = "backfill"
    engine = None  # taken by a runtime query under SET 'backfill', not asked for by SET 'engine'
    backfills = False
    lowers = False

    def serves(self, choice: "RouteChoice") -> bool:
        return choice.backfill is not None

    def start(self, ctx: StartContext, planned: "PlannedQuery", choice: "RouteChoice", output: Output) -> Job:
        job = ctx.scheduler.start(ctx.name, planned.physical, output)
        job.backfill = Backfill(backfill_executor(choice.backfill, ctx.settings),
                                planned.lowered(choice.backfill, history=True), state_reach(planned.optimized))
        return job

    def explain(self, planned: "PlannedQuery", choice: "RouteChoice") -> str:
        history = planned.lowered(choice.backfill, history=True).explain()
        return f"{explain_physical(planned.physical)}\n-- the history, on {choice.backfill}:\n{history}"


ROUTE = BackfillRoute()
