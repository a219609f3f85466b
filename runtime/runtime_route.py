"""The runtime route: a query run incrementally by the in-process runtime, batch by batch.

Its job is ``job.Job``: the physical plan's operators (``planner/physical/planner.py``,
built here, when the runtime runs the query) driven by the scheduler. It
runs every query the runtime can plan, over any source: memory streams,
watched and bounded files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..planner.explain import explain_physical
from .job import Job
from .routes import Output, StartContext

if TYPE_CHECKING:
    from ..planner import PlannedQuery
    from ..planner.analysis.routing import RouteChoice


class RuntimeRoute:
    name = engine = "runtime"
    backfills = False
    lowers = False

    def serves(self, choice: "RouteChoice") -> bool:
        return choice.engine == self.engine and not choice.backfill

    def start(self, ctx: StartContext, planned: "PlannedQuery", choice: "RouteChoice", output: Output) -> Job:
        return ctx.scheduler.start(ctx.name, planned.physical, output)

    def explain(self, planned: "PlannedQuery", choice: "RouteChoice") -> str:
        return explain_physical(planned.physical)


ROUTE = RuntimeRoute()
