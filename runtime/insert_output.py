"""Outputs of continuous INSERTs: into a memory stream's log, and several outputs of one job.

``LogOutput`` appends a job's results to the log of a memory stream or
table, so every query reading that stream sees them (``INSERT INTO
memory_stream SELECT …``). Exactly once across a restart, by replay: the
job is restored from its checkpoint and recomputes, deterministically, the
rows it wrote after it; each append carries ``[writer, rows so far]`` in
the log's journal, so the output knows how many of the recomputed rows the
log already holds and skips them.

    checkpoint at 100 rows written ──▶ appends up to 130 ──▶ crash
    restore: written = 100, the journal says 130 ──▶ skip the next 30 rows

``FanOutput`` is the output of a job with several roots (``EXECUTE
STATEMENT SET``): root ``i`` writes to output ``i``; a checkpoint holds
each output's part.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc

from ..planner.vocabulary import OP, ChangeOp
from .convert import to_table
from .memory import MemoryLog, data_schema, keyed_changes


class LogOutput:
    """Appends results to a memory log (``keys``: a memory table's primary key, None for a stream)."""

    def __init__(self, log: MemoryLog, name: str, writer: str, keys: tuple[str, ...] | None = None):
        self.log, self.name, self.writer, self.keys = log, name, writer, keys
        self.schema = data_schema(log)
        self.listeners: list[list[pa.Table]] = []
        self.closed = False
        self.written = 0  # result rows taken, as a checkpoint counts them
        self._skip = 0  # rows recomputed after a restore that the log already holds

    def write(self, table: pa.Table) -> None:
        taken = table
        if self._skip:
            drop = min(self._skip, table.num_rows)
            self._skip -= drop
            table = table.slice(drop)
        self.written += taken.num_rows
        if table.num_rows:
            self.log.append(self._as_log_rows(table), tag=[self.writer, self.written])
        for queue in self.listeners:
            queue.append(taken)

    def _as_log_rows(self, table: pa.Table) -> pa.Table:
        """A stream's log takes the rows; a table's takes upserts and deletes by key (a -U is implied)."""
        ops = table.column(OP) if OP in table.column_names else None
        if ops is not None and self.keys is not None:
            table = table.filter(pc.not_equal(ops, int(ChangeOp.UPDATE_BEFORE)))
            ops = table.column(OP)
        rows = to_table(table.drop_columns([OP]) if ops is not None else table, self.schema)
        if self.keys is None:
            return rows
        keyed = keyed_changes(rows, self.keys, ChangeOp.INSERT, self.name)
        if ops is None:
            return keyed
        codes = pc.if_else(pc.equal(ops, int(ChangeOp.DELETE)), pa.scalar(int(ChangeOp.DELETE), pa.int8()),
                           pa.scalar(int(ChangeOp.INSERT), pa.int8()))
        return keyed.set_column(keyed.schema.get_field_index(OP), OP, codes)

    def close(self) -> None:
        self.closed = True  # the stream goes on: other writers and Engine.insert may still feed it

    def checkpoint(self) -> tuple[dict, None]:
        return {"written": self.written}, None

    def restore(self, meta: dict) -> None:
        self.written = int(meta.get("written", 0))
        self._skip = max(0, self.log.written_by(self.writer) - self.written)


class FanOutput:
    """The outputs of a job with several roots: ``write_port(i, table)`` goes to output ``i``."""

    def __init__(self, outputs: list):
        self.outputs = outputs
        self.listeners: list[list[pa.Table]] = []

    @property
    def closed(self) -> bool:
        return all(getattr(o, "closed", True) for o in self.outputs)

    def write_port(self, port: int, table: pa.Table) -> None:
        self.outputs[port].write(table)

    def write(self, table: pa.Table) -> None:
        self.write_port(0, table)

    def close(self) -> None:
        for output in self.outputs:
            output.close()

    def checkpoint(self) -> tuple[dict, pa.Table | None]:
        """Each output's part; the rows some keep (write-ahead sinks) as Arrow IPC, one row per output."""
        metas, blobs = [], []
        for output in self.outputs:
            meta, contents = output.checkpoint()
            metas.append(meta)
            blobs.append(None if contents is None else _ipc(contents))
        contents = None if all(b is None for b in blobs) else pa.table({"contents": pa.array(blobs, pa.binary())})
        return {"outputs": metas}, contents

    def checkpoint_complete(self, meta: dict) -> None:
        for output, part in zip(self.outputs, meta.get("outputs", ())):
            complete = getattr(output, "checkpoint_complete", None)
            if complete is not None:
                complete(part)


def fan_parts(meta: dict, contents: pa.Table | None, n: int) -> list[tuple[dict, pa.Table | None]]:
    """A FanOutput checkpoint's (meta, contents) of each of its ``n`` outputs."""
    metas = list(meta.get("outputs", ())) or [{} for _ in range(n)]
    blobs = contents.column("contents").to_pylist() if contents is not None else [None] * n
    return [(m, None if b is None else pa.ipc.open_stream(b).read_all()) for m, b in zip(metas, blobs)]


def _ipc(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()
