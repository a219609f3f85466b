"""Physical operator specs: the DAG the in-process runtime executes.

Each spec is a frozen description, made by the planner, of one runtime
operator: its id, its inputs, its output schema (Arrow), its changelog mode
and the watermark it carries. The SQL inside specs is DuckDB SQL text,
rendered from sqlglot trees, that the runtime runs over one micro-batch
registered as ``__input``; the runtime never parses it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import pyarrow as pa

from ..aggregate_kinds import AggregateKind
from ..catalog import SourceDef
from ..logical.nodes import WindowSpec
from ..vocabulary import OP  # noqa: F401 - the changelog column of updating streams (codes: vocabulary.ChangeOp)

BATCH = "__input"  # the relation name per-batch SQL reads
PANE = "__pane"  # the pane start (epoch microseconds) column of partial aggregates


@dataclass(frozen=True)
class OpSpec:
    # What the operator is, for checkpoints: runtime/checkpoint.py fingerprints a plan by it, not by the class
    # name, so renaming a spec class keeps users' checkpoints. Each concrete spec sets its own, unique, and
    # never changes it (tests/test_checkpoint_fingerprint.py checks).
    spec_kind: ClassVar[str | None] = None

    id: int
    inputs: tuple[int, ...]
    schema: pa.Schema
    changelog: str
    watermark: str | None
    label: str
    state: str | None = None  # what bounds the operator's state, for EXPLAIN (None: it keeps none)


@dataclass(frozen=True)
class SourceSpec(OpSpec):
    """Read a source; compute its computed columns; derive watermarks; drop late events."""

    spec_kind: ClassVar[str] = "source"
    source: SourceDef = None  # type: ignore[assignment]
    columns: tuple[str, ...] = ()  # physical columns to read
    computed_sql: str | None = None  # adds computed columns over the physical ones
    time_column: str | None = None
    delay_us: int = 0
    lateness_us: int = 0
    drop_late: bool = True  # False when no operator above acts on event time: every event is kept
    proctime_column: str | None = None  # filled with the processing time at arrival
    clock_watermark: bool = False  # the plan runs on processing time: the watermark is the clock
    idle_timeout_us: int = 0  # after this long without data the source is idle (ignored by the minimum)
    late_only: bool = False  # LATE(s): emit the late events instead of the on-time ones
    # The operators above judge late events per window: keep every event, and cut batches before events
    # behind the watermark so that they see it as it stood when each arrived.
    per_window: bool = False
    # (width, offset) of the window grids of those operators: an event exactly at the watermark is late for
    # a window ending 1 ms after it (the window fired at its last millisecond), so the source cuts there too.
    window_grids: tuple[tuple[int, int], ...] = ()
    # A session above judges each event behind the watermark alone, before the events after it (which
    # could otherwise bridge it to an open session): each such event is a batch of its own.
    isolate_late: bool = False
    # Its only consumer is an interval or temporal join that judges its rows: instead of being cut, each
    # batch carries ``__w``, every event's watermark as it stood when the event arrived, which the join keeps.
    arrival_column: bool = False


@dataclass(frozen=True)
class ValuesSpec(OpSpec):
    """A bounded relation of literal rows (SELECT without FROM, VALUES)."""

    spec_kind: ClassVar[str] = "values"
    sql: str = ""


@dataclass(frozen=True)
class CalcSpec(OpSpec):
    """Filter, project and assign windows: one SQL statement per batch."""

    spec_kind: ClassVar[str] = "calc"
    sql: str = ""
    # When the statement only picks and renames columns: (output column, input column) pairs, which
    # the runtime applies to the Arrow batch without running the statement.
    picks: tuple[tuple[str, str], ...] | None = None


@dataclass(frozen=True)
class PartialAgg:
    """How one aggregate is split: partial columns per batch, merged when a window closes.

    ``partials`` are (partial column, merge, suffix) triples computed by the
    partial SQL and merged by ``merge`` (``sum``, ``min``, ``max``,
    ``bit_and`` ...); the kind derives the output from the merged partials
    by suffix (``AggregateKind.final_arrow``). A DISTINCT aggregate has no
    partial columns: its argument ``distinct`` is a grouping column of the
    partials, and the kind's partials are folded over its distinct values.
    """

    kind: AggregateKind
    name: str  # output column
    type: pa.DataType
    partials: tuple[tuple[str, str, str], ...]  # (partial column, merge, suffix)
    distinct: str | None = None
    arg_type: pa.DataType | None = None


ROWS_COLUMN = "__rows"  # a window aggregate's partial rows: how many events each holds


@dataclass(frozen=True)
class WindowAggSpec(OpSpec):
    """Aggregate per pane and key; assemble and emit windows as the watermark passes them.

    ``partial_sql`` also counts the events of each partial row (``__rows``), so that the
    operator can count the events it drops as late.
    """

    spec_kind: ClassVar[str] = "window_aggregate"
    window: WindowSpec = None  # type: ignore[assignment]
    keys: tuple[str, ...] = ()
    aggs: tuple[PartialAgg, ...] = ()
    partial_sql: str = ""  # per batch: __pane, keys, distinct columns, partial columns
    distinct_columns: tuple[str, ...] = ()
    processing_time: bool = False  # windows on processing time fire at their end (event time: at window_time)
    numbered: bool = False  # rows get an arrival number (aggregate_kinds.SEQ) before the partial SQL


@dataclass(frozen=True)
class DuckStateSpec(OpSpec):
    """An operator whose state is tables in the job's DuckDB connection (runtime: ``DuckStateLogic``).

    ``setup`` creates the tables; ``state_tables`` names them, for checkpoints.
    """

    setup: tuple[str, ...] = ()
    state_tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupAggSpec(DuckStateSpec):
    """A group aggregate without a window: an updating result, state in DuckDB tables.

    See planner/lower/sqlgen_group.py for the statements.
    """

    spec_kind: ClassVar[str] = "group_aggregate"
    keys: tuple[str, ...] = ()
    per_batch: tuple[str, ...] = ()
    compact: tuple[str, ...] = ()
    ttl_us: int = 0  # SET 'state.ttl': keys not written for this long are dropped (lower/sqlgen_ttl.py)
    expire: tuple[str, ...] = ()  # drop the keys last written at or before now - ttl_us
    oldest: str = ""  # the oldest last-written time held
    numbered: bool = False  # rows get an arrival number (aggregate_kinds.SEQ) before the statements run


@dataclass(frozen=True)
class UnionSpec(OpSpec):
    """Concatenate inputs; the watermark is the minimum over them.

    ``input_columns``: per input, the names of its columns that make the
    union's columns (inputs may carry more, or name them differently).
    """

    spec_kind: ClassVar[str] = "union"
    input_columns: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class PhysicalPlan:
    ops: tuple[OpSpec, ...]
    output: int
    notes: tuple[str, ...] = field(default=())
    outputs: tuple[int, ...] = ()  # a job with several outputs (a statement set): each INSERT's root, in order

    def op(self, op_id: int) -> OpSpec:
        return self.ops[op_id]

    @property
    def sources(self) -> list[SourceSpec]:
        return [o for o in self.ops if isinstance(o, SourceSpec)]

    @property
    def root(self) -> OpSpec:
        return self.ops[self.output]
