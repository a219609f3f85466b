"""Physical specs of ORDER BY (a temporal sort) and LIMIT on continuous queries (``logical/sort.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .specs import OpSpec


@dataclass(frozen=True)
class TemporalSortSpec(OpSpec):
    """Hold rows until the watermark reaches their ``time_column``; emit them sorted by ``keys``."""

    spec_kind: ClassVar[str] = "temporal_sort"
    time_column: str = ""
    keys: tuple[tuple[str, bool], ...] = ()  # (column, descending)


@dataclass(frozen=True)
class LimitSpec(OpSpec):
    """Pass the first ``count`` rows."""

    spec_kind: ClassVar[str] = "limit"
    count: int = 0
