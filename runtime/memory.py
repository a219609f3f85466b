"""In-memory append-only logs: memory-connector streams and late-event side outputs.

A log keeps every table appended to it; each reader has its own offset, so
a query started later can still read from the beginning (``earliest``,
the default) or only what comes next (``latest``), as with a Kafka topic.

With a journal (an engine with a state directory) every append is written
to disk first, and a new log starts with what its journal holds, so
readers' offsets stay valid across a restart.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc

from ..grammar import DsmsError
from ..planner.physical.specs import OP
from ..planner.vocabulary import ChangeOp


class MemoryLog:
    def __init__(self, schema: pa.Schema, journal=None):
        self.schema = schema
        self._tables: list[pa.Table] = []
        self._closed = False
        self._lock = threading.Lock()
        self.rows = 0
        self.journal = journal
        self.tags: list = []  # the tag of each journalled table
        if journal is not None:
            self._tables, self._closed, self.tags = journal.load()
            self._tables = [t.cast(schema) if t.schema != schema else t for t in self._tables]
            self.rows = sum(t.num_rows for t in self._tables)

    def append(self, table: pa.Table, tag=None) -> None:
        if table.num_rows == 0:
            return
        with self._lock:
            if self.journal is not None:
                self.journal.append(table, tag)  # on disk before any reader sees it
                self.tags.append(tag)
            self._tables.append(table)
            self.rows += table.num_rows

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

    def snapshot(self) -> pa.Table:
        with self._lock:
            tables = list(self._tables)
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def reader(self, start: str = "earliest-offset", batch_rows: int = 65536) -> "MemoryReader":
        offset = 0 if start == "earliest-offset" else len(self._tables)
        return MemoryReader(self, offset, batch_rows)

    def _since(self, offset: int) -> list[pa.Table]:
        with self._lock:
            return self._tables[offset:]


class MemoryReader:
    """Reads a MemoryLog from a position: (appended table, row within it)."""

    def __init__(self, log: MemoryLog, offset: int = 0, batch_rows: int = 65536):
        self.log = log
        self.offset = offset
        self.row = 0
        self.batch_rows = batch_rows

    def read(self) -> pa.Table | None:
        """Up to ``batch_rows`` rows; a larger insert is read in slices."""
        closed = self.log.closed  # read the flag first: nothing appended before it is missed
        tables = self.log._since(self.offset)
        if not tables:
            return None if closed else self.log.schema.empty_table()
        taken, rows = [], 0
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
        return taken[0] if len(taken) == 1 else pa.concat_tables(taken)

    @property
    def position(self) -> dict:
        return {"offset": self.offset, "row": self.row}

    def seek(self, position: dict) -> None:
        self.offset = int(position["offset"])
        self.row = int(position.get("row", 0))

    @property
    def skipped(self) -> int:
        return 0

    def close(self) -> None:
        pass


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
