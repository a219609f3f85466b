"""Where a job's results go: a sink writer, or a collector a program reads."""

from __future__ import annotations

import threading

import pyarrow as pa

from .changelog import INSERT, OP, apply_changes, with_op
from .connectors.base import SinkWriter


class SinkOutput:
    """Writes every result batch to a sink and flushes it when the job ends."""

    def __init__(self, writer: SinkWriter):
        self.writer = writer

    def write(self, table: pa.Table) -> None:
        self.writer.write(table)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


class CollectOutput:
    """Keeps a query's changes for a program to read.

    ``drain()`` returns the changes since the last drain, each batch with an
    ``__op`` column; ``snapshot()`` is the current result (all rows of an
    append-only query, or the changelog applied for an updating one).
    """

    def __init__(self, schema: pa.Schema, updating: bool, keep_changes: bool = True):
        self.schema = schema
        self.updating = updating
        self.keep_changes = keep_changes
        self._pending: list[pa.Table] = []
        self._applied: pa.Table = schema.empty_table()
        self._unapplied: list[pa.Table] = []
        self._lock = threading.Lock()
        self.closed = False
        self.rows = 0

    def write(self, table: pa.Table) -> None:
        with self._lock:
            if self.keep_changes:
                self._pending.append(table if OP in table.column_names else with_op(table, INSERT))
            self._unapplied.append(table)
            self.rows += table.num_rows

    def close(self) -> None:
        self.closed = True

    def drain(self) -> list[pa.Table]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def snapshot(self) -> pa.Table:
        with self._lock:
            deltas, self._unapplied = self._unapplied, []
            if deltas:
                if self.updating:
                    self._applied = apply_changes(self._applied, deltas)
                else:
                    self._applied = pa.concat_tables([self._applied, *deltas])
            return self._applied
