"""``LATE(s)``: the events a source drops as late, read as a stream."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..catalog import SourceDef
from ..types import Schema
from .nodes import APPEND, Node, _derive


@dataclass(frozen=True, eq=False)
class LateScan(Node):
    """The late events of ``source``: those behind its watermark by more than its allowed lateness.

    An append-only stream without event time (late events are, by
    definition, behind the watermark), with the source's columns.
    """

    source: SourceDef
    schema: Schema = field(init=False)
    changelog: str = field(init=False, default=APPEND)
    watermark: str | None = field(init=False, default=None)

    def __post_init__(self):
        _derive(self, schema=Schema(tuple(f.plain() for f in self.source.schema)))

    def label(self) -> str:
        return f"Late({self.source.name})"
