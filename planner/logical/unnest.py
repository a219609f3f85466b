"""``CROSS JOIN UNNEST(x) AS t(...)``: each input row once per element of an array or entry of a map.

A correlated, stateless expansion (Flink's Correlate): each input row,
whatever its row kind, becomes one row per element with the same row
kind, so an update of the outer row (``-U`` old, ``+U`` new) retracts
the unnested rows of the old value and adds those of the new one.

Shapes, as in Flink:

* ``array``: ``ARRAY<T>`` gives one column ``x`` per element;
* ``rows``: ``ARRAY<ROW<a, b>>`` gives one column per field of the ROW;
* ``map``: ``MAP<K, V>`` (and ``MULTISET<T>``) gives ``(key, value)``.

``WITH ORDINALITY`` adds the element's 1-based position as a last INT
column; ``LEFT JOIN UNNEST(x) ON TRUE`` (``outer``) keeps a row whose
array is empty or NULL, with NULL elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from ..types import Field, Schema
from .nodes import Unary, _derive, show


@dataclass(frozen=True, eq=False)
class Unnest(Unary):
    """``input`` with the elements of ``expr`` (bound over the input) as new columns.

    ``names`` are the output columns of the element parts (then the
    ordinality's, if any), distinct from the input's; ``parts`` the row
    fields they take (``rows``), else empty.
    """

    expr: exp.Expression
    shape: str  # 'array', 'rows' or 'map'
    names: tuple[str, ...]
    types: tuple[pa.DataType, ...]
    parts: tuple[str, ...] = ()
    ordinality: bool = False
    outer: bool = False
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        added = tuple(Field(n, t) for n, t in zip(self.names, self.types))
        _derive(self, schema=Schema(self.input.schema.fields + added), changelog=self.input.changelog,
                watermark=self.input.watermark)

    def child_needs(self, required: set[str]) -> list[set[str]]:
        used = {c.name for c in self.expr.find_all(exp.Column)}
        return [(required - set(self.names)) | used]

    def label(self) -> str:
        kind = "LEFT JOIN UNNEST" if self.outer else "UNNEST"
        return f"{kind}({show(self.expr)}){' WITH ORDINALITY' if self.ordinality else ''} AS ({', '.join(self.names)})"
