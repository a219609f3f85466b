"""The operator contract: an input delta in, an output delta out.

A job calls an operator's logic on one thread with three kinds of message:
a batch on an input port, a new (combined) input watermark, and the
processing time (a tick on every turn of the job, for timers). ``on_batch`` and ``on_watermark`` return the output batches they
produce; the job delivers those downstream before it forwards the
watermark, so results a watermark releases always precede it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ...planner.physical.specs import DuckStateSpec
from ..clock import SystemClock
from ..duck import Duck
from ..state import StateStore

MIN_WATERMARK = -(2**62)
MAX_WATERMARK = 2**62


@dataclass
class Env:
    """What operators may use: a DuckDB executor, the state store and the clock."""

    duck: Duck
    state: StateStore = field(default_factory=StateStore)
    clock: object = field(default_factory=SystemClock)


class Logic:
    """Base operator logic: passes batches and watermarks through unchanged."""

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        return [batch]

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        return []

    def on_tick(self, now_us: int) -> list[pa.Table]:
        """Processing time has moved to ``now_us`` (called on every turn of the job): timers fire here."""
        return []

    def input_watermark(self, ports: list[int]) -> int:
        """The watermark of this operator's input, from its ports' (by default their minimum)."""
        return min(ports)

    def output_watermark(self, watermark: int) -> int:
        """The watermark this operator forwards once its input watermark is ``watermark``."""
        return watermark

    # Events this operator dropped as late (an operator that judges lateness replaces it: ``count_late``).
    late_dropped = 0

    def next_fire_time(self) -> int | None:
        """The watermark at which this operator will next emit (a window's end), if it knows; for SHOW PROGRESS."""
        return None

    @property
    def state_rows(self) -> int:
        return 0


class DuckStateLogic(Logic):
    """An operator whose state is tables in the job's DuckDB connection.

    ``spec.setup`` creates the tables and ``spec.state_tables`` names them, so
    that checkpoints hold them (see ``StateStore.duck_tables``).
    """

    def __init__(self, spec: DuckStateSpec, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        for stmt in spec.setup:
            self.con.execute(stmt)
        self.state = env.state.duck_tables(spec.id, spec.state_tables, env.duck)

    @property
    def state_rows(self) -> int:
        return self.state.rows


class CountsLate:
    """An operator that drops late events: ``late_dropped`` lives in its checkpointed state.

    Each operator counts what it drops itself (Flink's ``numLateRecordsDropped``
    is per operator too); the job reports the counts per operator.
    """

    def count_late(self, env: Env, op_id: int) -> None:
        self._late = env.state.value(op_id, "late_dropped", 0)

    @property
    def late_dropped(self) -> int:
        return self._late.value

    @late_dropped.setter
    def late_dropped(self, n: int) -> None:
        self._late.value = n
