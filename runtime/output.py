"""Where a job's results go: a sink writer, or a collector a program reads.

Both keep ``listeners``: lists that every written batch is appended to
(subscriptions; the engine hands them on after the job's turn). Both can
say what a checkpoint must hold: how far a sink has written (its file is
cut back there on a restart) or what a collector holds.
"""

from __future__ import annotations

import threading

import pyarrow as pa

from .changelog import INSERT, OP, apply_changes, with_op
from .connectors.base import SinkWriter

_COMPACT_AT = 64  # pieces of changes applied to a collected result at once


class SinkOutput:
    """Writes every result batch to a sink and flushes it when the job ends."""

    def __init__(self, writer: SinkWriter):
        self.writer = writer
        self.listeners: list[list[pa.Table]] = []
        self.closed = False

    def write(self, table: pa.Table) -> None:
        self.writer.write(table)
        for queue in self.listeners:
            queue.append(table)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.writer.flush()
        self.writer.close()

    def checkpoint(self) -> tuple[dict, pa.Table | None]:
        """Make what was written durable; its position is what a restart keeps.

        A write-ahead sink (``connectors/base.py`` ``WriteAheadSink``: the jdbc and Kafka sinks) instead
        seals what came since the last checkpoint: those rows go into the checkpoint and are committed
        by ``checkpoint_complete`` once it is on disk.
        """
        if not self.closed:
            self.writer.flush()
        prepare = getattr(self.writer, "prepare_checkpoint", None)
        if prepare is not None:
            position, pending = prepare()
            return {"position": position}, pending
        return {"position": self.writer.position}, None

    def checkpoint_complete(self, meta: dict) -> None:
        """The checkpoint that holds ``meta`` is on disk."""
        complete = getattr(self.writer, "checkpoint_complete", None)
        if complete is not None:
            complete(meta.get("position"))


def _result_schema(schema: pa.Schema) -> pa.Schema:
    """The columns of a result: a change's kind (``__op``) is not one of them."""
    return schema.remove(schema.get_field_index(OP)) if OP in schema.names else schema


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
        self._applied: pa.Table = _result_schema(schema).empty_table()
        self._unapplied: list[pa.Table] = []
        self.keep_result = True  # False: only changes are kept (a reader that polls them needs no result)
        self._lock = threading.Lock()
        self.closed = False
        self.rows = 0
        self.listeners: list[list[pa.Table]] = []

    def write(self, table: pa.Table) -> None:
        with self._lock:
            if self.keep_changes:
                self._pending.append(table if OP in table.column_names else with_op(table, INSERT))
            if self.keep_result:
                self._unapplied.append(table)
                if len(self._unapplied) >= _COMPACT_AT:  # a result nobody reads stays its own size
                    self._apply()
            self.rows += table.num_rows
            for queue in self.listeners:
                queue.append(table)

    def checkpoint(self) -> tuple[dict, pa.Table]:
        """What a checkpoint keeps: the current result (changes not yet drained are not kept)."""
        return {"rows": self.rows}, self.snapshot()

    def restore(self, meta: dict, contents: pa.Table | None) -> None:
        with self._lock:
            if contents is not None:
                self._applied = contents
            self._unapplied, self._pending = [], []
            self.rows = int(meta.get("rows", self._applied.num_rows))

    def close(self) -> None:
        self.closed = True

    def drain(self) -> list[pa.Table]:
        with self._lock:
            out, self._pending = self._pending, []
        return out

    def snapshot(self) -> pa.Table:
        with self._lock:
            if not self.keep_result:
                raise RuntimeError("this query keeps only its changes, not its result")
            self._apply()
            return self._applied

    def discard_result(self) -> None:
        """From now on keep only the changes (``drain``); ``snapshot`` is refused."""
        with self._lock:
            self.keep_result = False
            self._unapplied, self._applied = [], _result_schema(self.schema).empty_table()

    def _apply(self) -> None:
        deltas, self._unapplied = self._unapplied, []
        if deltas:
            if self.updating:
                self._applied = apply_changes(self._applied, deltas)
            else:
                self._applied = pa.concat_tables([self._applied, *deltas])


class ClosedOutput:
    """The output of a job restored after it had finished: nothing more is written."""

    def __init__(self):
        self.listeners: list[list[pa.Table]] = []
        self.closed = True

    def write(self, table: pa.Table) -> None:
        raise RuntimeError("the query has finished")

    def close(self) -> None:
        pass

    def checkpoint(self) -> tuple[dict, None]:
        return {}, None
