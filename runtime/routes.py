"""Routes and jobs: what runs a query, behind two protocols, found in one registry.

A *route* is a way to run a planned query: the incremental runtime, one
DuckDB statement, Spark SQL, a Spark Structured Streaming query, or the
runtime after a batch backfill of its history. The planner's routing
(``planner/analysis/routing.py``) says which engine a query should take and why
(a :class:`~dsms.planner.analysis.routing.RouteChoice`); the registry finds the
route that serves that choice, and the route starts a :class:`Job`.

Every running query is a job, whatever its route: the scheduler gives it
turns (``step``), the engine pauses, resumes and cancels it, reads its
``stats()`` for SHOW QUERIES and ``dsms run``'s summary, and checkpoints it
with ``snapshot()`` / ``restore()``. Nothing outside a route's own module
knows which route a job belongs to.

Adding a route is one module that defines ``ROUTE`` (an object with the
:class:`Route` protocol) and its name in :data:`ROUTE_MODULES`.

Example:
    >>> [r.name for r in routes()]
    ['runtime', 'backfill', 'duckdb', 'spark', 'spark-streaming']
    >>> engine_names()
    ('auto', 'runtime', 'duckdb', 'spark')
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Callable, Protocol

import pyarrow as pa

from .errors import RouteNotFound
from .operators.base import MIN_WATERMARK

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import RouteChoice
    from .checkpoint import Checkpoint
    from .job import JobMetrics
    from .scheduler import Scheduler

# The modules that define a route, in the order the registry asks them whether they serve a choice.
ROUTE_MODULES = ("runtime_route", "backfill", "duckdb_route", "spark_route", "spark_stream")


@dataclass
class JobStats:
    """What a job reports about itself: SHOW QUERIES, ``QueryHandle.stats()``, ``dsms run``'s summary."""

    route: str  # the route's name
    status: str  # running, paused, finished, failed or cancelled
    watermark: int  # of its output, epoch microseconds
    rows_in: int
    rows_out: int
    events_per_s: float
    late: dict[str, int] = field(default_factory=dict)  # late events dropped, per source
    late_counted: bool = True  # False: the route judges late events without counting them
    state_rows: int = 0
    state_bytes: int = 0
    sources: dict[str, int] = field(default_factory=dict)  # rows read, per source
    skipped: dict[str, int] = field(default_factory=dict)  # malformed rows sent to dead letters, per source
    open_watermarks: tuple[int, ...] = ()  # the watermarks of the sources still being read
    error: BaseException | None = None


class Output(Protocol):
    def write(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


class Job(Protocol):
    """A running query, as the scheduler and the engine drive it."""

    route: str  # the engine it runs on (a checkpoint records it; a restored query stays there)
    output: Output
    done: bool
    paused: bool
    cancelled: bool
    error: BaseException | None
    # Cheap to read after every turn (the engine compares them to know whether a checkpoint is due):
    rows_in: int
    output_watermark: int
    metrics: "JobMetrics"  # rows_out, busy time, the events-per-second meter

    @property
    def status(self) -> str: ...

    @property
    def runnable(self) -> bool: ...

    def step(self) -> bool:
        """One turn: read, compute and write what there is; whether anything happened."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def cancel(self) -> None: ...

    def fail(self, error: BaseException) -> None: ...

    def stats(self) -> JobStats: ...

    def progress(self) -> list[dict]:
        """SHOW PROGRESS: one row per operator (or one for the whole statement)."""

    def snapshot(self) -> "Checkpoint":
        """A consistent cut of the job, taken between two turns."""

    def restore(self, checkpoint: "Checkpoint") -> None:
        """Put a snapshot back, before the job's first turn."""

    def keep_checkpoints(self, folder: str, take: Callable[[], None]) -> None:
        """Where the job may keep checkpoint data of its own, and how to take a checkpoint of its query."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class StartContext:
    """What a route needs to start a job: the session's scheduler, its settings, the query's name."""

    name: str
    scheduler: "Scheduler"
    settings: dict


class Route(Protocol):
    """A way to run planned queries."""

    name: str
    engine: str | None  # the value of SET 'engine' that selects it (None: chosen otherwise)
    backfills: bool  # whether it can run the history of a runtime query (SET 'backfill')
    lowers: bool  # whether it runs the query as one lowered statement (EXPLAIN LOWERED shows it)

    def serves(self, choice: "RouteChoice") -> bool:
        """Whether this route runs the queries the planner routed as ``choice``."""

    def start(self, ctx: StartContext, planned: "PlannedQuery", choice: "RouteChoice", output: Output) -> Job:
        """Start ``planned`` (the scheduler gives the job its turns)."""

    def explain(self, planned: "PlannedQuery", choice: "RouteChoice") -> str:
        """What this route runs for ``planned``: the operator DAG, or the lowered statement."""

    # A route with ``backfills`` also has ``executor(settings)``: a batch executor
    # (``run(lowered, write, schema)``) that runs a runtime query's history.


class FailedJob:
    """A query that could not start (a saved query whose input is gone): listed as failed, with why."""

    route = "-"
    done = paused = cancelled = runnable = False
    status = "failed"
    rows_in = 0
    output_watermark = MIN_WATERMARK

    def __init__(self, error: BaseException):
        self.error = error

    def step(self) -> bool:
        return False

    def pause(self) -> None:
        pass

    resume = cancel = close = pause

    def fail(self, error: BaseException) -> None:
        self.error = error

    def stats(self) -> JobStats:
        return JobStats(self.route, self.status, MIN_WATERMARK, 0, 0, 0.0, error=self.error)

    def progress(self) -> list[dict]:
        return []

    def keep_checkpoints(self, folder: str, take: Callable[[], None]) -> None:
        pass


@lru_cache(maxsize=1)
def routes() -> tuple[Route, ...]:
    """The registered routes (each module's ``ROUTE``); importing them loads neither PySpark nor Spark."""
    return tuple(importlib.import_module(f"{__package__}.{m}").ROUTE for m in ROUTE_MODULES)


def route_for(choice: "RouteChoice") -> Route:
    """The route that serves ``choice``."""
    for route in routes():
        if route.serves(choice):
            return route
    raise RouteNotFound(f"no route runs {choice.describe()}")


def route_named(name: str) -> Route:
    for route in routes():
        if route.name == name:
            return route
    raise RouteNotFound(f"no route named '{name}'")


def engine_names() -> tuple[str, ...]:
    """The values of ``SET 'engine'``: auto, then each route that can be asked for by name."""
    return ("auto", *dict.fromkeys(r.engine for r in routes() if r.engine))


def backfill_names() -> tuple[str, ...]:
    """The values of ``SET 'backfill'``: off, then each route that can run a runtime query's history."""
    return ("off", *dict.fromkeys(r.engine for r in routes() if r.backfills and r.engine))


def backfill_executor(engine: str, settings: dict):
    """The batch executor of the route that backfills as ``engine``."""
    for route in routes():
        if route.backfills and route.engine == engine:
            return route.executor(settings)
    raise RouteNotFound(f"no route backfills as '{engine}'")
