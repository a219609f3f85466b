"""In-memory append-only logs: memory-connector streams and late-event side outputs.

A log keeps the tables appended to it; each reader has its own offset, so
a query started later can read from the oldest table kept (``earliest``,
the default) or only what comes next (``latest``), as with a Kafka topic.

With a journal (an engine with a state directory) every append is written
to disk first, and a new log starts with what its journal holds, so
readers' offsets stay valid across a restart.

Trimming keeps a log flat however long it is fed. Offsets are absolute
(``base`` is the offset of the oldest table kept), and a table is dropped
— from memory and, in large enough runs, from the journal — once every
reader of the log needs it no more: it has read past it, and, for a
reader of a checkpointed query, its last checkpoint lies past it too (a
restore reads again from there)::

    offsets     0   1   2   3   4   5
    reader A            ^               (a continuous SELECT: at 2)
    reader B                ^   h       (a sink: read to 3, checkpointed at 4)
    trimmable   [0   1]                  base may become 2 = min(2, min(3, 4))

Up to ``retention`` bytes of tables that every reader is done with are
kept anyway (``SET 'memory.retention'``), newest first, so a query
started later still sees the recent past (and a short session, all of
it). A memory table's log is never trimmed: a later query needs every
key's change to know the table.

``pending_bytes()`` is how far the slowest reader is behind, which
``Engine.insert`` holds within ``'insert.max_pending'`` (backpressure).
"""

from __future__ import annotations

import threading
import weakref

import pyarrow as pa
import pyarrow.compute as pc

from ..grammar import DsmsError
from ..planner.physical.specs import OP
from ..planner.vocabulary import ChangeOp

# Bytes of consumed rows a log keeps for queries started later ('memory.retention').
DEFAULT_RETENTION = 16 * 1024**2


class MemoryLog:
    def __init__(self, schema: pa.Schema, journal=None, trims: bool = True, retention: int = DEFAULT_RETENTION):
        self.schema = schema
        self._tables: list[pa.Table] = []
        self._closed = False
        self._lock = threading.Lock()
        self.rows = 0  # rows appended in all (trimmed or not)
        self.journal = journal
        self.trims = trims  # False: keep everything (a table's changes)
        self.retention = retention
        self._sizes: list[int] = []  # the bytes of each table kept
        self.kept_bytes = 0
        self.appended_bytes = 0  # in all, since the log began (trimmed or not)
        self.base = 0  # the offset of the oldest table kept
        self.tags: list = []  # the tag of each table kept
        self.trimmed_tag = None  # the largest tag of the tables trimmed
        self._readers: weakref.WeakSet[MemoryReader] = weakref.WeakSet()
        if journal is not None:
            self._tables, self._closed, self.tags = journal.load()
            self._tables = [t.cast(schema) if t.schema != schema else t for t in self._tables]
            self.base, self.trimmed_tag = journal.base, journal.trimmed_tag
            self.rows = sum(t.num_rows for t in self._tables)
            self._sizes = [t.nbytes for t in self._tables]
            self.kept_bytes = self.appended_bytes = sum(self._sizes)

    def append(self, table: pa.Table, tag=None) -> None:
        if table.num_rows == 0:
            return
        with self._lock:
            if self.journal is not None:
                self.journal.append(table, tag)  # on disk before any reader sees it
            self.tags.append(tag)
            self._tables.append(table)
            self._sizes.append(table.nbytes)
            self.kept_bytes += table.nbytes
            self.appended_bytes += table.nbytes
            self.rows += table.num_rows
        if self.kept_bytes > self.retention:
            self.trim()

    def written_by(self, writer: str) -> int:
        """How many rows a continuous INSERT's output (``runtime/insert_output.py``) says it has appended:
        the count in the last ``[writer, rows]`` tag it left in the journal."""
        counts = [t[1] for t in self.tags if isinstance(t, list) and len(t) == 2 and t[0] == writer]
        return max(counts, default=0)

    def close(self) -> None:
        """End the stream: readers finish once they have read everything."""
        if not self._closed and self.journal is not None:
            self.journal.append_end()
        self._closed = True

    def sync(self) -> None:
        """Make every append durable (before a checkpoint that records readers' offsets)."""
        if self.journal is not None:
            self.journal.sync()

    def detach(self) -> None:
        """The stream is dropped: delete its journal."""
        if self.journal is not None:
            self.journal.delete()
            self.journal = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def kept(self) -> int:
        """How many appended tables are kept (in memory)."""
        return len(self._tables)

    @property
    def last_tag(self):
        """The largest integer tag of any table appended, trimmed or kept (None if there is none)."""
        tags = [t for t in (self.trimmed_tag, *self.tags) if isinstance(t, int)]
        return max(tags) if tags else None

    def snapshot(self) -> pa.Table:
        with self._lock:
            tables = list(self._tables)
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def reader(self, start: str = "earliest-offset", batch_rows: int = 65536) -> "MemoryReader":
        with self._lock:
            offset = self.base if start == "earliest-offset" else self.base + len(self._tables)
            reader = MemoryReader(self, offset, batch_rows)
            self._readers.add(reader)
        return reader

    def forget(self, reader: "MemoryReader") -> None:
        """``reader`` reads no more (its query stopped)."""
        self._readers.discard(reader)
        self.trim()

    def pending_bytes(self) -> int:
        """The bytes appended that the slowest reader has not read yet (0 if nothing reads the log)."""
        with self._lock:
            offsets = [r.offset for r in list(self._readers) if r.active]
            if not offsets:
                return 0
            return sum(self._sizes[min(offsets) - self.base:])

    def trim(self) -> None:
        """Drop the oldest tables every reader is done with, beyond ``retention`` bytes (see the module)."""
        if not self.trims or self.kept_bytes <= self.retention:
            return
        with self._lock:
            limit = min([r.needed for r in list(self._readers)] + [self.base + len(self._tables)]) - self.base
            drop, kept = 0, self.kept_bytes
            while drop < limit and kept > self.retention:
                kept -= self._sizes[drop]
                drop += 1
            if drop <= 0:
                return
            tags = [t for t in (self.trimmed_tag, *self.tags[:drop]) if isinstance(t, int)]
            self.trimmed_tag = max(tags) if tags else None
            del self._tables[:drop], self.tags[:drop], self._sizes[:drop]
            self.kept_bytes = kept
            self.base += drop
            if self.journal is not None:
                self.journal.trim(self.base, self.trimmed_tag)

    def _since(self, offset: int) -> list[pa.Table]:
        with self._lock:
            if offset < self.base:
                raise DsmsError(f"the memory stream no longer holds offset {offset} (it keeps {self.base} on); "
                                "its journal was trimmed past this query's checkpoint")
            return self._tables[offset - self.base:]


class MemoryReader:
    """Reads a MemoryLog from a position: (appended table, row within it).

    ``held``: the offset of this reader's last checkpoint (a restore goes
    back there, so the log keeps it), or None if its query is not
    checkpointed.
    """

    def __init__(self, log: MemoryLog, offset: int = 0, batch_rows: int = 65536):
        self.log = log
        self.offset = offset
        self.row = 0
        self.batch_rows = batch_rows
        self.held: int | None = None
        self.active = True  # False once its query failed: it reads no more

    @property
    def needed(self) -> int:
        """The oldest offset this reader may still read."""
        return self.offset if self.held is None else min(self.offset, self.held)

    def read(self) -> pa.Table | None:
        """Up to ``batch_rows`` rows; a larger insert is read in slices."""
        closed = self.log.closed  # read the flag first: nothing appended before it is missed
        tables = self.log._since(self.offset)
        if not tables:
            return None if closed else self.log.schema.empty_table()
        taken, rows, start = [], 0, self.offset
        for t in tables:
            piece = t.slice(self.row) if self.row else t
            room = self.batch_rows - rows
            if piece.num_rows > room and rows:
                break
            if piece.num_rows > self.batch_rows:
                piece = piece.slice(0, self.batch_rows)
                self.row += piece.num_rows
                taken.append(piece)
                break
            taken.append(piece)
            rows += piece.num_rows
            self.offset += 1
            self.row = 0
        if self.offset > start and self.held is None:
            self.log.trim()
        return taken[0] if len(taken) == 1 else pa.concat_tables(taken)

    @property
    def position(self) -> dict:
        return {"offset": self.offset, "row": self.row}

    def seek(self, position: dict) -> None:
        """Continue from a checkpoint's position (which the log then keeps until the next checkpoint)."""
        self.offset = int(position["offset"])
        self.row = int(position.get("row", 0))
        self.held = self.offset
        self.log._since(self.offset)  # still there?

    def checkpoint_complete(self, position: dict | None) -> None:
        """A checkpoint holding ``position`` is on disk: what lies before it may go."""
        if position is not None:
            self.held = int(position["offset"])
            self.log.trim()

    @property
    def skipped(self) -> int:
        return 0

    def release(self) -> None:
        """Its query failed for good: the log need not keep anything for it, nor wait for it."""
        self.active = False
        self.log.forget(self)

    def close(self) -> None:
        self.log.forget(self)


def data_schema(log: MemoryLog) -> pa.Schema:
    """The columns a program gives for a log (a table's log also holds the change kind)."""
    return log.schema.remove(log.schema.get_field_index(OP)) if OP in log.schema.names else log.schema


def keyed_changes(table: pa.Table, keys: tuple[str, ...], op: ChangeOp, name: str) -> pa.Table:
    """Rows given for a table with a primary key, as changes by key (op 0 upsert, 3 delete)."""
    for k in keys:
        if table.column(k).null_count:
            raise DsmsError(f"the primary key column '{k}' of table '{name}' cannot be NULL")
    return table.append_column(OP, pc.cast(pa.repeat(pa.scalar(op, pa.int8()), table.num_rows), pa.int8())
                               if table.num_rows else pa.array([], pa.int8()))
