"""In-memory append-only logs: memory-connector streams and late-event side outputs.

A log keeps every table appended to it; each reader has its own offset, so
a query started later can still read from the beginning (``earliest``,
the default) or only what comes next (``latest``), as with a Kafka topic.
"""

from __future__ import annotations

import threading

import pyarrow as pa


class MemoryLog:
    def __init__(self, schema: pa.Schema):
        self.schema = schema
        self._tables: list[pa.Table] = []
        self._closed = False
        self._lock = threading.Lock()
        self.rows = 0

    def append(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        with self._lock:
            self._tables.append(table)
            self.rows += table.num_rows

    def close(self) -> None:
        """End the stream: readers finish once they have read everything."""
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed

    def snapshot(self) -> pa.Table:
        with self._lock:
            tables = list(self._tables)
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def reader(self, start: str = "earliest-offset") -> "MemoryReader":
        return MemoryReader(self, 0 if start == "earliest-offset" else len(self._tables))

    def _since(self, offset: int) -> list[pa.Table]:
        with self._lock:
            return self._tables[offset:]


class MemoryReader:
    """Reads a MemoryLog from an offset (counted in appended tables)."""

    def __init__(self, log: MemoryLog, offset: int = 0):
        self.log = log
        self.offset = offset

    def read(self) -> pa.Table | None:
        closed = self.log.closed  # read the flag first: nothing appended before it is missed
        tables = self.log._since(self.offset)
        if not tables:
            return None if closed else self.log.schema.empty_table()
        self.offset += len(tables)
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    @property
    def position(self) -> dict:
        return {"offset": self.offset}

    def seek(self, position: dict) -> None:
        self.offset = int(position["offset"])

    @property
    def skipped(self) -> int:
        return 0

    def close(self) -> None:
        pass
