"""The contract between the runtime and its connectors.

A source reader yields Arrow tables with exactly the columns and types it
was asked for; a sink writer takes the operator output (with the ``__op``
column when the stream is updating). Both report a position so that a
checkpoint can record how far they got and a restore can continue there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

import pyarrow as pa

from ..errors import SinkError, SourceError  # noqa: F401 - (connectors take them from here)


@dataclass(frozen=True)
class ReadRequest:
    """What the runtime wants from a source: these columns, with these types."""

    name: str  # the source's name, for messages
    options: dict  # the WITH (...) options, lower-case keys
    path: str | None  # resolved against the script's folder
    schema: pa.Schema  # the physical columns to read, in order, with their declared types
    not_null: tuple[str, ...] = ()  # columns declared NOT NULL
    batch_rows: int = 65536
    # 'append': plain rows. 'upsert' and 'debezium' (a table with a primary key): each batch also has
    # an ``__op`` column (int8, as runtime/changelog.py) saying what each row does to its key:
    # 'upsert' gives 0 (+I: the row is now the key's row) and 3 (-D: the key is deleted);
    # 'debezium' gives +I (c, r), -U and +U (u: before and after), -D (d: before).
    changelog: str = "append"


@dataclass(frozen=True)
class SourceContext:
    """What a connector's ``open_source(req, ctx)`` may use besides the request.

    ``source`` is the declared stream or table (a ``planner.catalog.SourceDef``:
    options, key, watermark); ``clock`` has ``now_us()`` (virtual in tests);
    ``memory_log(source)`` is the engine's shared in-memory log of a source.
    """

    source: Any
    clock: Any
    memory_log: Callable[[Any], Any] | None = None


@dataclass(frozen=True)
class WriteRequest:
    """What the runtime wants a sink's ``open_sink(req)`` to write."""

    name: str  # the sink's name, for messages
    options: dict  # the WITH (...) options, lower-case keys
    path: str | None  # resolved against the script's folder
    schema: pa.Schema  # the result's columns (an ``__op`` field, if present, is to be ignored)
    updating: bool  # the result has retractions: batches carry ``__op``
    position: dict | None = None  # continue from this position (a checkpoint) instead of afresh
    # What the sink put into that checkpoint besides its position (``prepare_checkpoint``): the rows a
    # write-ahead sink had sealed but perhaps not committed when it stopped.
    contents: pa.Table | None = None
    durable: bool = False  # the engine has a state directory: checkpoints are taken and restored


class SourceReader(Protocol):
    def read(self) -> pa.Table | None:
        """The next batch of rows.

        Returns a table with ``schema``'s columns, or an empty table when an
        unbounded source has nothing new right now, or None when a bounded
        source is exhausted.
        """

    @property
    def position(self) -> dict:
        """A JSON-serialisable offset just past the rows returned so far."""

    def seek(self, position: dict) -> None:
        """Continue after ``position`` (from an earlier reader of the same source)."""

    @property
    def skipped(self) -> int:
        """Rows rejected as malformed under on_error = 'skip'."""

    def close(self) -> None: ...


class SinkWriter(Protocol):
    def write(self, table: pa.Table) -> None:
        """Append rows (with ``__op`` if the result is updating)."""

    def flush(self) -> None:
        """Make everything written so far durable and readable."""

    @property
    def position(self) -> dict:
        """How much has been written (for checkpoints)."""

    def truncate(self, position: dict) -> None:
        """Drop what was written after ``position`` (restore after a crash)."""

    def close(self) -> None: ...


class WriteAheadSink(Protocol):
    """A SinkWriter that exposes results only once a checkpoint covers them (the jdbc and Kafka sinks).

    Besides the SinkWriter methods it has ``prepare_checkpoint() -> (position,
    rows)``, called when a checkpoint is taken (after ``flush``): it seals the
    rows written since the last checkpoint, which the checkpoint keeps with the
    position; and ``checkpoint_complete(position)``, called once that
    checkpoint is on disk, when it may publish or commit them. A restored
    writer gets the sealed rows back in ``WriteRequest.contents``.
    """

    def prepare_checkpoint(self) -> tuple[dict, pa.Table | None]: ...

    def checkpoint_complete(self, position: dict | None) -> None: ...


class ReaderWrapper:
    """A reader that changes the batches of another and delegates the rest to it."""

    def __init__(self, inner: SourceReader):
        self.inner = inner

    def read(self) -> pa.Table | None:
        return self.inner.read()

    @property
    def position(self) -> dict:
        return self.inner.position

    def seek(self, position: dict) -> None:
        self.inner.seek(position)

    @property
    def skipped(self) -> int:
        return self.inner.skipped

    def close(self) -> None:
        self.inner.close()
