"""The runtime side of an engine: route queries, start their jobs, open their outputs, checkpoint them.

The facade (``dsms/engine.py``) plans statements and keeps the catalog;
everything about running a planned query is here: which route runs it
(the planner's routing choice, served by a route of the registry in
``routes.py``), the job that route starts, where its results go, and its
checkpoints on disk. Nothing here knows one route from another.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (x INT) WITH (connector = 'memory')")
    >>> session = Session()
    >>> planned = plan_query("SELECT x + 1 AS y FROM s", catalog)
    >>> print(session.choose(planned, catalog.settings).describe())
    route: runtime (the batch routes cannot read 's' ...)
    >>> output = session.open_output("query", planned)
    >>> job = session.start("q", planned, catalog.settings, output)
    >>> job.stats().status, job.stats().route
    ('running', 'runtime')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from ..planner.analysis.routing import RouteChoice, choose_route
from ..planner.catalog import SinkDef
from ..planner.explain import explain_logical
from . import checkpoint as ckpt
from .connectors.factory import open_sink
from .connectors.memory import Select
from .duck import Duck
from .estimate import estimated_bytes
from .job import Job
from .memory import MemoryLog
from .operators.base import Env
from .output import ClosedOutput, CollectOutput, SinkOutput
from .routes import Output, StartContext, route_for, routes
from .scheduler import Scheduler

if TYPE_CHECKING:
    from ..planner import PlannedQuery


class Session:
    """The jobs of one engine (its scheduler) and how they are started and checkpointed."""

    def __init__(self, clock=None, journal_for=None):
        self.scheduler = Scheduler(clock=clock, journal_for=journal_for)

    # -- routes ---------------------------------------------------------------------------

    def choose(self, planned: "PlannedQuery", settings: dict, engine: str | None = None) -> RouteChoice:
        """The route of ``planned`` under ``settings`` (``engine``: as if SET 'engine' said so), and why."""
        if engine is not None:
            settings = {**settings, "engine": engine}
        return choose_route(planned.optimized, settings, estimated_bytes)

    def explain(self, planned: "PlannedQuery", settings: dict, logical: bool = False) -> str:
        """EXPLAIN's text: the planner's warnings, the route and why, then what that route runs
        (``logical``: the optimized logical plan instead)."""
        choice = self.choose(planned, settings)
        body = explain_logical(planned.optimized) if logical else route_for(choice).explain(planned, choice)
        return "\n".join([f"warning: {w}" for w in planned.warnings] + [choice.describe(), body])

    def explain_lowered(self, planned: "PlannedQuery", settings: dict, engine: str | None = None) -> str:
        """EXPLAIN LOWERED: the statement ``engine`` runs (None: the route's, or the first batch route's
        when the query takes the runtime)."""
        choice = self.choose(planned, settings, engine)
        if engine is None and not route_for(choice).lowers:
            choice = self.choose(planned, settings, next(r.engine for r in routes() if r.lowers))
        return route_for(choice).explain(planned, choice)

    # -- jobs -----------------------------------------------------------------------------

    def start(self, name: str, planned: "PlannedQuery", settings: dict, output: Output,
              saved: ckpt.Checkpoint | None = None):
        """Start ``planned`` on its route; from ``saved`` (on the route it was taken on) when given."""
        choice = self.choose(planned, settings, engine=saved.route if saved is not None else None)
        job = route_for(choice).start(StartContext(name, self.scheduler, dict(settings)), planned, choice, output)
        if saved is not None:
            try:
                job.restore(saved)
            except Exception:
                self.scheduler.stop(name)
                raise
        return job

    def open_output(self, kind: str, planned: "PlannedQuery", sink: SinkDef | None = None,
                    saved: ckpt.Checkpoint | None = None, durable: bool = False) -> Output:
        """Where a query's results go (a sink's writer, or a collector); restored from a checkpoint when there is one.

        ``durable``: the engine has a state directory, so the query is checkpointed (a write-ahead
        sink, as Kafka's exactly-once one, then publishes rows only once a checkpoint holds them).
        """
        schema = planned.output_schema
        updating = planned.changelog == "updating"
        if sink is not None and not sink.descriptor.collects:
            done = saved is not None and saved.job.get("done")
            if done and saved.contents is None:
                return ClosedOutput()  # it had finished: its output is complete
            position = saved.output.get("position") if saved is not None else None
            output = SinkOutput(open_sink(sink, schema, updating, position, durable=durable,
                                          contents=saved.contents if saved is not None else None))
            if done:  # a write-ahead sink has published its last checkpoint's rows on opening: nothing more
                output.close()
            return output
        output = CollectOutput(schema, updating, keep_changes=kind == "query" or kind == "sink")
        if saved is not None:
            output.restore(saved.output, saved.contents)
            output.closed = bool(saved.job.get("done"))
        return output

    def stop(self, name: str, job, output: Output) -> None:
        """Stop a job for good; a sink's file is flushed and closed as it is."""
        self.scheduler.stop(name)
        job.cancel()
        if not getattr(output, "closed", True) and isinstance(output, SinkOutput):
            output.close()

    # -- checkpoints ----------------------------------------------------------------------

    def latest_checkpoint(self, folder: str) -> tuple[int, ckpt.Checkpoint] | None:
        """The newest checkpoint in ``folder`` and its number, or None."""
        return ckpt.latest(folder)

    def checkpoint(self, job, folder: str, seq: int, take) -> None:
        """Write checkpoint ``seq`` of ``job`` into ``folder`` (``take``: how the query checkpoints itself,
        for a job that checkpoints after each of its own commits)."""
        job.keep_checkpoints(folder, take)
        taken = job.snapshot()
        ckpt.save(folder, seq, taken)
        ckpt.complete(job, taken)

    def sync_inputs(self) -> None:
        """Put what the memory streams hold on disk (before checkpoints that point into them)."""
        for log in self.scheduler.memory.values():
            log.sync()


def log_reader(log: MemoryLog, columns) -> Select:
    """A reader of ``log`` from its start, keeping ``columns`` (a source operator's)."""
    return Select(log.reader(), list(columns))


def run_bounded(planned: "PlannedQuery", open_reader, changes_applied: bool = True) -> pa.Table:
    """Run ``planned`` over bounded input to its end on the runtime, outside any scheduler; its result.

    For statements that answer at once (INSERT … SELECT / VALUES, pull queries over materialized views).
    ``changes_applied``: an updating result's changelog is applied (else its rows are kept as they come).
    """
    updating = changes_applied and planned.changelog == "updating"
    output = CollectOutput(planned.output_schema, updating, keep_changes=False)
    env = Env(duck=Duck())
    try:
        Job(planned.physical, output, env, open_reader).run()
    finally:
        env.duck.close()
    return output.snapshot()
