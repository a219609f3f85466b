"""Logical nodes of the CQL relation-to-stream operators (see docs/cql.md)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..timeutil import format_duration
from ..types import Schema
from .nodes import APPEND, UPDATING, Unary, _derive


@dataclass(frozen=True, eq=False)
class SnapshotDiff(Unary):
    """A relation given as its rows at instants (a ``[RANGE size SLIDE slide]`` window), turned into changes.

    The input holds each instant's rows tagged with the instant (column
    ``instant``, a window end); instants are ``slide`` apart and an instant
    without rows is an empty relation. ``kind``:

    - ``relation``: the relation as an updating result (+I rows that enter, -D rows that leave);
    - ``insert`` (ISTREAM): the rows that enter, as a stream;
    - ``delete`` (DSTREAM): the rows that leave, as a stream.

    Rows compare as multisets (bag semantics, as in CQL).
    """

    instant: str
    slide_us: int
    kind: str
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False, default=None)

    def __post_init__(self):
        fields = tuple(f.plain() for f in self.input.schema if f.name != self.instant)
        _derive(self, schema=Schema(fields), changelog=UPDATING if self.kind == "relation" else APPEND)

    def label(self) -> str:
        what = {"relation": "Relation", "insert": "IStream", "delete": "DStream"}[self.kind]
        return f"{what}(instants every {format_duration(self.slide_us)})"


@dataclass(frozen=True, eq=False)
class StreamOf(Unary):
    """ISTREAM / DSTREAM of an updating relation: its inserted (+I, +U) or deleted (-U, -D) rows, as a stream."""

    kind: str  # 'insert' | 'delete'
    schema: Schema = field(init=False)
    changelog: str = field(init=False, default=APPEND)
    watermark: str | None = field(init=False, default=None)

    def __post_init__(self):
        _derive(self, schema=Schema(tuple(f.plain() for f in self.input.schema)))

    def label(self) -> str:
        return f"{'IStream' if self.kind == 'insert' else 'DStream'}(changes)"
