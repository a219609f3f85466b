"""Window kinds: the vocabulary the planner and the runtime share for windows (see base.py).

The kinds are found here by their grammar name. Adding a kind is one
class (a :class:`SlicedWindowKind` or :class:`MergingWindowKind`
subclass) and its registration, :func:`register_window_kind`, which also
teaches the SQL dialect its name (docs/development.md has the recipe).

Example:
    >>> window_kind("hop").params, window_kind("SESSION").merging
    (('slide', 'size'), True)
    >>> {"TUMBLE", "HOP", "SESSION", "CUMULATE"} <= set(WINDOW_KINDS)
    True
"""

from __future__ import annotations

from ...grammar.dialect import add_window_kind
from .base import (
    EACH,
    Assignment,
    MergingWindowKind,
    SlicedWindowKind,
    StreamWindow,
    WindowKind,
    WindowSpec,
    assign_windows,
    floor_to,
    micros,
    timestamp,
)
from .kinds import BUILTIN, CUMULATE, HOP, SESSION, TUMBLE

WINDOW_KINDS: dict[str, WindowKind] = {}


def register_window_kind(kind: WindowKind) -> WindowKind:
    """Make ``kind`` known to the planner and its name (with its named parameters) to the SQL dialect."""
    WINDOW_KINDS[kind.name.upper()] = kind
    add_window_kind(kind.name.upper(), kind.named_params)
    return kind


def window_kind(name: str) -> WindowKind:
    """The kind of a grammar name (the dialect parses only registered names)."""
    return WINDOW_KINDS[name.upper()]


for _kind in BUILTIN:
    register_window_kind(_kind)

__all__ = ["CUMULATE", "EACH", "HOP", "SESSION", "TUMBLE", "WINDOW_KINDS", "Assignment", "MergingWindowKind",
           "SlicedWindowKind", "StreamWindow", "WindowKind", "WindowSpec", "assign_windows", "floor_to", "micros",
           "register_window_kind", "timestamp", "window_kind"]
