"""Physical operator specs for sessions, emission policies, OVER, Top-N, dedup and CQL.

Like :mod:`physical.specs`, each spec is a frozen description of one runtime
operator, with the DuckDB SQL it runs as text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from ..logical.nodes import EmitPolicy, WindowSpec
from ..logical.over import OverFrame
from ..lower.sqlgen_emit import EmitSql
from ..lower.sqlgen_session import SessionSql
from ..lower.sqlgen_topn import TopNSql
from .specs import OpSpec, PartialAgg, WindowAggSpec


@dataclass(frozen=True)
class SessionSpec(OpSpec):
    """Session windows per partition: merge on overlap, emit when the watermark passes a session's end.

    ``aggs`` empty: the sessions are not aggregated (a SESSION table
    function on its own) and every row is emitted with its session's bounds.
    """

    spec_kind: ClassVar[str] = "session_window"
    window: WindowSpec = None  # type: ignore[assignment]
    partition: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()  # the output's keys, in order
    group: tuple[str, ...] = ()  # state grouping columns besides the partition (keys, COUNT DISTINCT args)
    aggs: tuple[PartialAgg, ...] = ()
    sql: SessionSql = None  # type: ignore[assignment]
    merges: tuple[tuple[str, str], ...] = ()  # partial column -> how partials merge (sum | min | max)
    state_schema: pa.Schema = None  # type: ignore[assignment]
    emit: EmitPolicy = EmitPolicy()
    emit_sql: EmitSql | None = None


@dataclass(frozen=True)
class WindowEmitSpec(WindowAggSpec):
    """A pane-based window aggregate (see WindowAggSpec) that emits early results or corrections."""

    spec_kind: ClassVar[str] = "window_emit"
    emit: EmitPolicy = EmitPolicy()
    emit_sql: EmitSql = None  # type: ignore[assignment]


@dataclass(frozen=True)
class OverAggSpec(OpSpec):
    """OVER aggregates: rows wait until the watermark passes their time, then get their frames' aggregates.

    See planner/lower/sqlgen_over.py for the statements.
    """

    spec_kind: ClassVar[str] = "over_aggregate"
    columns: tuple[str, ...] = ()  # the input columns kept (the output's first columns)
    input_sql: str | None = None  # fused per-batch nodes below, run on each batch first
    order: str = ""
    frame: OverFrame = None  # type: ignore[assignment]
    compute_sql: str = ""
    retain_sql: str | None = None
    carry_sql: str | None = None
    carry_schema: pa.Schema | None = None
    partition: tuple[str, ...] = ()
    # On event time the operator judges late rows as Flink's OVER operators (docs/time.md): a row at or below
    # the watermark is late for an UNBOUNDED frame, one at or below the last time released for its
    # partition for a bounded frame; rows at the watermark are released with it.
    event_time: bool = False
    last_of_rows_sql: str | None = None  # bounded frames: see planner/lower/sqlgen_over.py OverSql
    advance_last_sql: str | None = None
    last_schema: pa.Schema | None = None
    retain_by_partition_sql: str | None = None


@dataclass(frozen=True)
class TopNSpec(OpSpec):
    """Top-N per partition and deduplication; ``kind`` as in logical.rank.TopN.

    ``rank`` names the row-number column when the query reads it (else it
    is left out, which also spares the changes that renumbering causes).
    """

    spec_kind: ClassVar[str] = "top_n"
    kind: str = "global"
    columns: tuple[str, ...] = ()  # input columns kept
    input_sql: str | None = None
    partition: tuple[str, ...] = ()
    order: tuple[tuple[str, bool], ...] = ()
    limit: int = 1
    rank: str | None = None
    window_end: str | None = None  # window Top-N: the column holding the window's end
    sql: TopNSql = None  # type: ignore[assignment]
    emit_sql: EmitSql | None = None  # rank column or last row per key: changes against the emitted rows
    ttl_us: int = 0  # SET 'state.ttl' (global Top-N, deduplication): partitions not touched this long go
    ttl_setup: tuple[str, ...] = ()  # creates the key table of partitions and their last touch
    ttl_tables: tuple[str, ...] = ()
    expire: tuple[str, ...] = ()  # drop partitions last touched at or before now - ttl_us
    oldest: str = ""
    touch: tuple[str, ...] = ()  # over __input: stamp the partitions of its rows with now


@dataclass(frozen=True)
class SnapshotDiffSpec(OpSpec):
    """A relation given per instant (rows tagged with ``instant``) -> what enters and leaves it."""

    spec_kind: ClassVar[str] = "snapshot_diff"
    instant: str = ""
    slide_us: int = 0
    kind: str = "relation"  # relation | insert | delete
    columns: tuple[str, ...] = ()
    input_sql: str | None = None
