"""Physical specs of the operators that keep rows of their inputs: joins and ChangelogNormalize.

Each holds DuckDB statements made by the planner (``lower/sqlgen_join.py``,
``lower/sqlgen_normalize.py``) that the runtime runs over a batch registered as
``__input`` and the operator's state tables; ``$1`` in a statement is the
watermark the runtime passes. State tables are named after the operator id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .specs import DuckStateSpec


@dataclass(frozen=True)
class ChangelogNormalizeSpec(DuckStateSpec):
    """Turn a table's changes by key (upserts, deletes) into a valid changelog; keeps each key's row."""

    spec_kind: ClassVar[str] = "changelog_normalize"
    keys: tuple[str, ...] = ()
    per_batch: tuple[str, ...] = ()


@dataclass(frozen=True)
class JoinSpec(DuckStateSpec):
    """What every join operator has: its kind, and its state tables (``DuckStateSpec``)."""

    kind: str = "inner"  # inner | left | right | full


@dataclass(frozen=True)
class IntervalJoinSpec(JoinSpec):
    """Two append-only streams, rows matched when ``lower <= r.ts - l.ts <= upper`` (microseconds).

    Rows are kept until the watermark passes the last time a partner could
    have; an outer side's unmatched rows are emitted then, padded with NULLs.
    """

    spec_kind: ClassVar[str] = "interval_join"
    lower: int = 0
    upper: int = 0
    delay: int = 0  # the output watermark lags the input's by this much
    lateness: int = 0  # allowed lateness of the sources below: state is kept that much longer
    on_batch: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # per port; the last returns output
    expire: tuple[tuple[str, str], tuple[str, str]] = (("", ""), ("", ""))  # per side, $1 = watermark:
    # (the padded rows of an outer side that no partner can reach any more, or ""; the delete)
    min_time: tuple[str, str] = ("", "")  # per side, the smallest time at which a stored row expires
    time_columns: tuple[str, str] = ("", "")
    ids: tuple[bool, bool] = (False, False)  # whether each port's batches get a row id column (outer sides)
    # Per port: its late rows are judged here, against the port's watermark as it stood when they arrived
    # (kept with each row as ``__w``; see runtime/operators/interval_join.py).
    judged: tuple[bool, bool] = (False, False)
    # Per side, $1 = watermark: how many of the rows that expire arrived too late to wait for a partner and
    # found none (an inner side's late rows the join drops), or "" (an outer side: they are padded).
    unmatched: tuple[str, str] = ("", "")


@dataclass(frozen=True)
class WindowJoinSpec(JoinSpec):
    """Two windowed inputs joined per window when the watermark passes its end."""

    spec_kind: ClassVar[str] = "window_join"
    lateness: int = 0
    on_batch: tuple[str, str] = ("", "")  # per port: store the rows
    fire: tuple[str, ...] = ()  # with $1 = watermark; the first returns the output
    min_end: str = ""  # the smallest window end held
    end_columns: tuple[str, str] = ("", "")
    # Per port: its rows are judged here, each against the port's watermark as it stood before the row
    # (the window join judges late rows itself and every source below the port leaves them to it).
    judged: tuple[bool, bool] = (False, False)


@dataclass(frozen=True)
class TemporalJoinSpec(JoinSpec):
    """Each left row with the version of the right row valid at its time, emitted when the watermark passes it."""

    spec_kind: ClassVar[str] = "temporal_join"
    lateness: int = 0
    on_batch: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    fire: tuple[str, ...] = ()  # with $1 = watermark; the first returns the output
    prune: tuple[str, ...] = ()  # with $1 = watermark
    min_time: str = ""  # the earliest buffered left row
    time_column: str = ""  # the left rows' time column
    sequenced: bool = False  # an updating left side: its rows are numbered, and emitted in arrival order
    # Per port: the left rows are judged here (each keeps its port's watermark at arrival as ``__w``); the
    # versioned table's are judged at its source.
    judged: tuple[bool, bool] = (False, False)


@dataclass(frozen=True)
class ExternalLookup:
    """A lookup table in another system (``connector = 'jdbc'``): its rows are fetched by key, per batch of
    events, into the join's table (the cache) instead of arriving as a changelog input."""

    options: tuple[tuple[str, str], ...]  # the table's WITH (...) options
    columns: tuple[tuple[str, object], ...]  # (name, Arrow type) of the table columns the join reads
    keys: tuple[str, ...]  # the table's columns that the join's equalities name
    key_sql: str  # the batch's distinct key values, named as ``keys`` (DuckDB, over ``__input``)
    misses: str  # the table of keys looked up and not found (cached too, as Flink does)
    max_rows: int | None  # lookup.cache.max-rows (None: no cache, every batch asks the database)
    ttl_us: int | None  # lookup.cache.ttl


@dataclass(frozen=True)
class LookupJoinSpec(JoinSpec):
    """Each event of the stream side with the current rows of the table side (processing time)."""

    spec_kind: ClassVar[str] = "lookup_join"
    stream_port: int = 0
    lookup: tuple[str, ...] = ()  # the stream batch; the last returns output
    update: tuple[str, ...] = ()  # the table's changes
    external: ExternalLookup | None = None  # set: one input (the stream); rows fetched by key
    sequenced: bool = False  # an updating stream side: its rows are numbered, and emitted in arrival order


@dataclass(frozen=True)
class RegularJoinSpec(JoinSpec):
    """A join of two relations that keeps all their current rows: an updating result."""

    spec_kind: ClassVar[str] = "regular_join"
    on_batch: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())  # per port; the last returns output
    ttl_us: int = 0  # SET 'state.ttl': join keys not touched for this long are dropped (lower/sqlgen_ttl.py)
    expire: tuple[str, ...] = ()  # drop the keys last touched at or before now - ttl_us
    oldest: str = ""  # the oldest last-touched time held
