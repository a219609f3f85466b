"""What a window kind is: its parameters, their checks, its panes and how rows are assigned to windows.

A window kind (TUMBLE, HOP, CUMULATE, SESSION, or one a program adds) is
a :class:`WindowKind` subclass; a window in a plan is a
:class:`WindowSpec`, a kind with its parameter values, time column and
offset. Everything that differs between kinds is asked of the kind, never
of its name:

* the binder checks the parameters (``params``, ``takes_offset``,
  ``partitioned``, :meth:`WindowKind.check`);
* the runtime aggregates per *pane* (the largest slice every window is
  made of) and assembles windows from panes when the watermark passes
  them (:meth:`WindowKind.pane`, :meth:`WindowKind.windows_of_pane`,
  :meth:`WindowKind.last_end`);
* every route assigns rows to windows with the one builder here,
  :func:`assign_windows`, over the kind's :meth:`WindowKind.assign`: the
  runtime per batch on DuckDB, the batch routes on DuckDB and Spark, the
  Spark streaming route (plus the struct Spark groups a stream by,
  :meth:`WindowKind.stream_window`);
* *merging* kinds (sessions) grow and merge windows per key as events
  arrive instead: the session operator and the lowering's gaps and
  islands run them, from the kind's ``gap``.

Times are integer microseconds since the epoch. Window arithmetic is a
floor modulo on them, exact before and after 1970::

    TUMBLE(size 10 s), t = 47 s             [40, 50)
    HOP(slide 10 s, size 30 s), t = 47 s    starts 20, 30, 40  (last = floor(t, 10), first = last - 20)
    CUMULATE(step 10 s, size 30 s), t = 47  start 30, ends 40 .. 60 by 10 from floor(t, 10) + 10: 50, 60

Example:
    >>> from dsms.planner.windows import HOP
    >>> w = HOP.spec("ts", slide=10, size=30)
    >>> w.pane, w.windows_of_pane(40), w.last_end(40), w.describe()
    (10, [(20, 50), (30, 60), (40, 70)], 70, 'HOP(ts, slide=10us, size=30us)')
    >>> select = assign_windows(w, exp.to_table("s"), None, lambda start, end: [exp.alias_(start, "ws")])
    >>> print(select.sql("duckdb"))  # doctest: +NORMALIZE_WHITESPACE
    SELECT * EXCLUDE ("__each"), "__each" AS ws FROM (SELECT *, UNNEST(GENERATE_SERIES(EPOCH_US("ts")
    - (((EPOCH_US("ts") % 10) + 10) % 10) - 20, EPOCH_US("ts") - (((EPOCH_US("ts") % 10) + 10) % 10), 10))
    AS "__each" FROM s) AS "h"
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, ClassVar

from sqlglot import exp

from ..timeutil import format_duration

EACH = "__each"  # the column one row per window is exploded into


# -- portable time arithmetic (the same tree renders for DuckDB and Spark) ----------------------------


def lit(value: int) -> exp.Literal:
    return exp.Literal.number(value)


def micros(e: exp.Expression) -> exp.Expression:
    """A timestamp as integer microseconds since the epoch (DuckDB ``epoch_us``, Spark ``unix_micros``)."""
    return exp.UnixMicros(this=e)


def timestamp(us: exp.Expression) -> exp.Expression:
    """Integer microseconds since the epoch as a timestamp (``make_timestamp`` / ``timestamp_micros``)."""
    return exp.UnixToTime(this=us, scale=exp.UnixToTime.MICROS)


def floor_to(us: exp.Expression, width: int | exp.Expression, offset: int = 0) -> exp.Expression:
    """``us`` rounded down to a multiple of ``width`` (shifted by ``offset``), exactly."""
    w = lit(width) if isinstance(width, int) else width
    if not isinstance(us, (exp.Func, exp.Column, exp.Paren, exp.Literal)):
        us = exp.Paren(this=us)  # (t - size) % width, not t - size % width
    shifted = exp.Paren(this=exp.Sub(this=us.copy(), expression=lit(offset))) if offset else us.copy()
    mod = exp.Mod(this=exp.Paren(this=exp.Add(this=exp.Paren(this=exp.Mod(this=shifted, expression=w.copy())),
                                              expression=w.copy())), expression=w.copy())
    return exp.Sub(this=us.copy(), expression=exp.Paren(this=mod))


def plus(a: exp.Expression, n: int | exp.Expression) -> exp.Expression:
    return exp.Add(this=a.copy(), expression=lit(n) if isinstance(n, int) else n)


def minus(a: exp.Expression, n: int | exp.Expression) -> exp.Expression:
    return exp.Sub(this=a.copy(), expression=lit(n) if isinstance(n, int) else n)


def each() -> exp.Column:
    return exp.column(EACH, quoted=True)


# -- what a kind gives ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Assignment:
    """A row's windows, over its time ``t`` in microseconds.

    ``each``: a list or series with one value per window of the row, which
    is exploded into the column ``__each`` (:func:`each`); None when a row
    has exactly one window. ``start`` and ``end``: the window's bounds in
    microseconds, over ``t`` and ``__each``.
    """

    start: exp.Expression
    end: exp.Expression
    each: exp.Expression | None = None


@dataclass(frozen=True)
class StreamWindow:
    """How Spark Structured Streaming groups a stream by these windows (the group key carries the watermark).

    ``struct``: Spark's ``window(...)`` or ``session_window(...)`` of the time
    column. ``each``: for kinds with several windows per struct (CUMULATE's
    steps), one end per window, over ``t`` and the struct's start in
    microseconds; each is exploded into ``__we`` and is the window's end.
    """

    struct: exp.Expression
    each: Callable[[exp.Expression, exp.Expression], exp.Expression] | None = None


class WindowKind(ABC):
    """A kind of window. Subclasses set the class attributes and implement what applies.

    Attributes:
        name: the grammar name, as written in SQL (``TUMBLE``).
        params: the interval parameters after the time column, in their positional order.
        takes_offset: whether an ``offset`` may follow them.
        partitioned: whether ``TABLE t PARTITION BY k`` is allowed (windows kept per key).
        merging: windows grow and merge per key as events arrive (sessions), so they are not
            assembled from panes (:class:`MergingWindowKind`); else :class:`SlicedWindowKind`.
        newest_pane_first: an aggregate in arrival order (ARRAY_AGG, LISTAGG) takes a window's panes newest
            first, each pane's values in arrival order, as Flink merges the slices of a HOP window (a
            CUMULATE window's oldest first).
        single_pane: each window is exactly one pane (TUMBLE), so an aggregate never combines partial
            results (a Python aggregate function needs no ``merge``).
    """

    name: ClassVar[str]
    params: ClassVar[tuple[str, ...]]
    takes_offset: ClassVar[bool] = True
    partitioned: ClassVar[bool] = False
    merging: ClassVar[bool] = False
    newest_pane_first: ClassVar[bool] = False
    single_pane: ClassVar[bool] = False

    def __repr__(self) -> str:
        return self.name

    def spec(self, time_col: str, *, offset: int = 0, partition_by: tuple[str, ...] = (), **values: int) -> WindowSpec:
        """A window of this kind on ``time_col`` with parameter ``values`` (microseconds)."""
        unknown = set(values) - set(self.params)
        if unknown:
            raise ValueError(f"{self.name} has no parameter {sorted(unknown)[0]}")
        return WindowSpec(self, time_col, tuple((p, values.get(p, 0)) for p in self.params), offset, partition_by)

    @property
    def named_params(self) -> tuple[str, ...]:
        """The names Flink's named-argument spelling uses (``SIZE => ...``)."""
        return tuple(p.upper() for p in self.params) + (("OFFSET",) if self.takes_offset else ())

    def check(self, values: dict[str, int]) -> tuple[str, str] | None:
        """What is wrong with positive parameter ``values`` taken together: (the parameter to change,
        a message in user words), or None. The binder points the error at that parameter."""
        return None

    def describe(self, w: WindowSpec) -> list[str]:
        """The parameters as EXPLAIN shows them."""
        return [f"{p}={format_duration(v)}" for p, v in w.params]

    def longest(self, w: WindowSpec) -> int:
        """The length of the longest window, how far back a window's state reaches (0: no bound known)."""
        return w.param("size")

    def stream_window(self, w: WindowSpec, t: exp.Expression) -> StreamWindow | None:
        """How Spark Structured Streaming groups by these windows, over the time column ``t``; None: it cannot."""
        return None


class SlicedWindowKind(WindowKind):
    """Windows fixed by the time alone, each the union of equal panes: aggregated per pane, assembled per window."""

    @abstractmethod
    def pane(self, w: WindowSpec) -> int:
        """The width of the slices every window is assembled from."""

    @abstractmethod
    def windows_of_pane(self, w: WindowSpec, pane_start: int) -> list[tuple[int, int]]:
        """The windows ``[start, end)`` that contain the pane starting at ``pane_start``, by end."""

    @abstractmethod
    def last_end(self, w: WindowSpec, pane_start):
        """The end of the last window that needs the pane (ints or numpy arrays of pane starts alike)."""

    @abstractmethod
    def assign(self, w: WindowSpec, t: exp.Expression) -> Assignment:
        """The windows of a row whose time in microseconds is ``t`` (see :class:`Assignment`)."""



class MergingWindowKind(WindowKind):
    """Windows that grow and merge per key as events arrive, ``gap`` apart (sessions)."""

    params = ("gap",)
    takes_offset = False
    partitioned = True
    merging = True


@dataclass(frozen=True)
class WindowSpec:
    """A window in a plan: a kind, its parameter values (microseconds), its time column and alignment.

    Windows are aligned to ``offset`` from the epoch; ``partition_by``
    keeps merging windows (sessions) per key. Over a TIMESTAMP_LTZ time
    column windows are aligned in the session zone ``zone``: its fixed
    offset ``local_shift`` is folded into ``offset``, and window_start and
    window_end are shown as local TIMESTAMPs (bound + ``local_shift``).
    """

    type: WindowKind
    time_col: str
    params: tuple[tuple[str, int], ...] = ()
    offset: int = 0
    partition_by: tuple[str, ...] = ()
    zone: str | None = None
    local_shift: int = 0

    @property
    def ltz(self) -> bool:
        """Windows over a TIMESTAMP_LTZ attribute: window_time is a TIMESTAMP_LTZ too (as in Flink)."""
        return self.zone is not None

    @property
    def kind(self) -> str:
        """The kind's grammar name (``TUMBLE``), for messages and EXPLAIN."""
        return self.type.name

    def param(self, name: str) -> int:
        return dict(self.params).get(name, 0)

    @property
    def size(self) -> int:
        return self.param("size")

    @property
    def slide(self) -> int:
        return self.param("slide")

    @property
    def step(self) -> int:
        return self.param("step")

    @property
    def gap(self) -> int:
        return self.param("gap")

    @property
    def pane(self) -> int:
        return self.type.pane(self)

    def pane_start(self, t: int) -> int:
        p = self.pane
        return t - (t - self.offset) % p

    def windows_of_pane(self, pane_start: int) -> list[tuple[int, int]]:
        return self.type.windows_of_pane(self, pane_start)

    def last_end(self, pane_start):
        return self.type.last_end(self, pane_start)

    def pane_expiry(self, pane_start: int) -> int:
        """The watermark after which no window needs this pane any more."""
        return int(self.last_end(pane_start))

    def same_windows(self, other: WindowSpec) -> bool:
        """Whether both assign the same windows (whatever their time columns)."""
        return (self.type, self.params, self.offset) == (other.type, other.params, other.offset)

    def describe(self) -> str:
        args = self.type.describe(self)
        if self.partition_by:
            args.append(f"partition by {', '.join(self.partition_by)}")
        # as written: the session zone's shift, folded into the offset of aligned windows, is not the user's
        shown_offset = self.offset + (0 if self.type.merging else self.local_shift)
        if shown_offset:
            args.append(f"offset={format_duration(shown_offset)}")
        if self.zone is not None:
            args.append(f"zone={self.zone}")
        return f"{self.kind}({self.time_col}, {', '.join(args)})"


def assign_windows(w: WindowSpec, source: exp.Expression, keep: list[exp.Expression] | None,
                   bounds: Callable[[exp.Expression, exp.Expression], list[exp.Expression]]) -> exp.Select:
    """The rows of ``source`` with their windows, one row per window: what every route runs.

    ``keep``: the columns to keep, or None for all of them (``*``; DuckDB
    only, since dropping the exploded column then needs ``* EXCLUDE``).
    ``bounds(start, end)``: the items that give a row its window, from the
    window's bounds in microseconds (the runtime makes window_start,
    window_end and window_time of them; the lowering keeps them as numbers).
    """
    a = w.type.assign(w, micros(exp.column(w.time_col, quoted=True)))
    if a.each is None:
        return exp.select(*(keep or [exp.Star()]), *bounds(a.start, a.end)).from_(source)
    exploded = exp.alias_(exp.Explode(this=a.each), EACH, quoted=True)
    inner = exp.select(*(keep or [exp.Star()]), exploded).from_(source)
    outer = [k.copy() for k in keep] if keep else [exp.Star(except_=[each()])]
    return exp.select(*outer, *bounds(a.start, a.end)).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.to_identifier("h", quoted=True))))
