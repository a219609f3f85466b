"""The window kinds of Flink SQL: TUMBLE, HOP, CUMULATE and SESSION (see base.py for what a kind gives).

Panes and windows, in units of the pane::

    TUMBLE(size 3)               pane = 3    |  w0  |  w1  |  w2  |
    HOP(slide 1, size 3)         pane = 1    |p0|p1|p2|p3|p4|        window [0,3) = p0+p1+p2, [1,4) = p1+p2+p3
    CUMULATE(step 1, size 3)     pane = 1    |p0|p1|p2|              windows [0,1) [0,2) [0,3), then [3,4) ...
"""

from __future__ import annotations

from math import gcd

from sqlglot import exp

from ..timeutil import format_duration
from .base import (
    Assignment,
    MergingWindowKind,
    SlicedWindowKind,
    StreamWindow,
    WindowSpec,
    each,
    floor_to,
    lit,
    micros,
    minus,
    plus,
)


def _duration(us: int) -> exp.Literal:
    """A duration as Spark's window functions take it."""
    return exp.Literal.string(f"{us} microseconds")


def _spark_window(t: exp.Expression, size: int, slide: int, offset: int) -> exp.Expression:
    return exp.Anonymous(this="window", expressions=[t, _duration(size), _duration(slide), _duration(offset % slide)])


class Tumble(SlicedWindowKind):
    """Windows of ``size`` one after the other: every row is in one."""

    name = "TUMBLE"
    params = ("size",)
    single_pane = True

    def describe(self, w: WindowSpec) -> list[str]:
        return [format_duration(w.size)]

    def pane(self, w: WindowSpec) -> int:
        return w.size

    def windows_of_pane(self, w: WindowSpec, pane_start: int) -> list[tuple[int, int]]:
        return [(pane_start, pane_start + w.size)]

    def last_end(self, w: WindowSpec, pane_start):
        return pane_start - (pane_start - w.offset) % w.size + w.size

    def assign(self, w: WindowSpec, t: exp.Expression) -> Assignment:
        start = floor_to(t, w.size, w.offset)
        return Assignment(start, plus(start, w.size))

    def stream_window(self, w: WindowSpec, t: exp.Expression) -> StreamWindow:
        return StreamWindow(_spark_window(t, w.size, w.size, w.offset))


class Hop(SlicedWindowKind):
    """Windows of ``size`` starting every ``slide``: a row is in those that started within ``size`` before it
    (size / slide of them when the size is a multiple of the slide; as Flink, it need not be)."""

    name = "HOP"
    newest_pane_first = True  # Flink's HOP merges its slices from the last one back
    params = ("slide", "size")

    def pane(self, w: WindowSpec) -> int:
        return gcd(w.slide, w.size)

    def windows_of_pane(self, w: WindowSpec, pane_start: int) -> list[tuple[int, int]]:
        last = pane_start - (pane_start - w.offset) % w.slide
        out = []
        start = last
        while start > pane_start - w.size:
            out.append((start, start + w.size))
            start -= w.slide
        return out[::-1]

    def last_end(self, w: WindowSpec, pane_start):
        return pane_start - (pane_start - w.offset) % w.slide + w.size  # the last window starts at its slide floor

    def assign(self, w: WindowSpec, t: exp.Expression) -> Assignment:
        last = floor_to(t, w.slide, w.offset)
        if w.size % w.slide == 0:
            first = minus(last, w.size - w.slide)
        else:  # the first window that still holds t starts after t - size
            first = plus(floor_to(minus(t, w.size), w.slide, w.offset), w.slide)
        starts = exp.GenerateSeries(start=first, end=last, step=lit(w.slide))
        return Assignment(each(), plus(each(), w.size), starts)

    def stream_window(self, w: WindowSpec, t: exp.Expression) -> StreamWindow:
        return StreamWindow(_spark_window(t, w.size, w.slide, w.offset))


class Cumulate(SlicedWindowKind):
    """Windows that start every ``size`` and grow by ``step`` up to ``size``: a row is in those that reach it."""

    name = "CUMULATE"
    params = ("step", "size")

    def check(self, values: dict[str, int]) -> tuple[str, str] | None:
        if values["size"] % values["step"]:
            return "size", "the size of a CUMULATE window must be a whole multiple of its step"
        return None

    def pane(self, w: WindowSpec) -> int:
        return w.step

    def windows_of_pane(self, w: WindowSpec, pane_start: int) -> list[tuple[int, int]]:
        start = pane_start - (pane_start - w.offset) % w.size
        return [(start, end) for end in range(pane_start + w.step, start + w.size + 1, w.step)]

    def last_end(self, w: WindowSpec, pane_start):
        return pane_start - (pane_start - w.offset) % w.size + w.size

    def assign(self, w: WindowSpec, t: exp.Expression) -> Assignment:
        start = floor_to(t, w.size, w.offset)
        ends = exp.GenerateSeries(start=plus(floor_to(t, w.step, w.offset), w.step), end=plus(start, w.size),
                                  step=lit(w.step))
        return Assignment(start, each(), ends)

    def stream_window(self, w: WindowSpec, t: exp.Expression) -> StreamWindow:
        # Spark groups by the largest window; each step's end is exploded beside it.
        def ends(time: exp.Expression, struct_start: exp.Expression) -> exp.Expression:
            return exp.GenerateSeries(start=plus(floor_to(micros(time), w.step, w.offset), w.step),
                                      end=plus(struct_start, w.size), step=lit(w.step))

        return StreamWindow(_spark_window(t, w.size, w.size, w.offset), ends)


class Session(MergingWindowKind):
    """Per key, events less than ``gap`` apart share a window, from the first event to the last plus the gap."""

    name = "SESSION"

    def stream_window(self, w: WindowSpec, t: exp.Expression) -> StreamWindow:
        return StreamWindow(exp.Anonymous(this="session_window", expressions=[t, _duration(w.gap)]))


TUMBLE, HOP, CUMULATE, SESSION = Tumble(), Hop(), Cumulate(), Session()
BUILTIN = (TUMBLE, HOP, SESSION, CUMULATE)  # registered by planner/windows/__init__.py
