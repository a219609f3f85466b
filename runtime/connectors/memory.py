"""The runtime half of the memory connector (``planner/connectors/memory.py``).

A memory source reads the engine's shared log of the source
(``runtime/memory.py``), which ``INSERT INTO`` and ``Engine.insert``
append to. Memory sinks keep their results in the engine (the descriptor
says ``collects``), so there is no writer here.
"""

from __future__ import annotations

from ..changelog import OP
from .base import ReaderWrapper, ReadRequest, SourceContext, SourceReader


def open_source(req: ReadRequest, ctx: SourceContext) -> SourceReader:
    src = ctx.source
    mode = req.options.get("scan.startup.mode", "earliest-offset")
    reader = ctx.memory_log(src).reader(mode, req.batch_rows)
    return Select(reader, list(req.schema.names) + ([OP] if src.kind == "table" else []))


class Select(ReaderWrapper):
    """A reader that keeps only some columns of another reader's batches."""

    def __init__(self, reader, columns: list[str]):
        super().__init__(reader)
        self.columns = columns

    def read(self):
        table = self.inner.read()
        return table if table is None else table.select(self.columns)

    def checkpoint_complete(self, position: dict | None) -> None:
        self.inner.checkpoint_complete(position)  # the log may drop what the checkpoint covers

    def release(self) -> None:
        self.inner.release()
