"""The logical join node: two inputs, a join kind, and the strategy the binder chose.

The strategy decides what the join means on unbounded input, and so the
changelog mode and the state it keeps (see docs/joins.md)::

    interval   two append-only streams, ON ... AND r.ts BETWEEN l.ts - a AND l.ts + b
               -> append-only; rows kept until the watermark passes the last possible partner
    window     both sides the same window (TVF or window aggregate), ON l.window_start = r.window_start
               AND l.window_end = r.window_end -> append-only, emitted when the window closes
    temporal   s JOIN t FOR SYSTEM_TIME AS OF s.ts -> append-only; each event with the version of
               t's row valid at its time, emitted when the watermark passes the event
    lookup     a stream with a table, no time condition, or FOR SYSTEM_TIME AS OF a processing time
               -> the stream side's mode; each event (or change, kind kept) with the table's current
               rows when it is processed
    regular    anything else -> updating when an input is updating or a side is outer; keeps
               every current row of both inputs

The output columns are the left input's, then the right input's renamed
where they clash (``right_names``). Conditions are sqlglot trees over the
output names.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare(";".join(f"CREATE STREAM {name} (id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS "
    ...                            "ts - INTERVAL '5' SECOND) WITH (connector = 'memory')" for name in ("imp", "clk")))
    >>> p = plan_query("SELECT imp.id, clk.ts FROM imp LEFT JOIN clk ON imp.id = clk.id "
    ...                "AND clk.ts BETWEEN imp.ts AND imp.ts + INTERVAL '1' MINUTE", catalog)
    >>> join = p.optimized.input
    >>> join.strategy, join.kind, join.bounds.describe(), p.changelog
    ('interval', 'left', 'ts <= ts0 <= ts + 1min', 'append-only')
    >>> p = plan_query("SELECT imp.id, clk.ts FROM imp LEFT JOIN clk ON imp.id = clk.id", catalog)
    >>> p.optimized.input.strategy, p.changelog, len(p.warnings)
    ('regular', 'updating', 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from sqlglot import exp

from ..timeutil import format_duration
from ..types import Field, Schema
from .nodes import APPEND, UPDATING, Node, WindowSpec, show

KINDS = ("inner", "left", "right", "full")
STRATEGIES = ("interval", "window", "temporal", "lookup", "regular")


def duration(us: int) -> str:
    return "0s" if us == 0 else format_duration(us)


@dataclass(frozen=True)
class TimeBounds:
    """``lower <= right_time - left_time <= upper`` (microseconds), over output names."""

    left_time: str
    right_time: str
    lower: int
    upper: int

    @property
    def delay(self) -> int:
        """How far behind the input watermark the output's event times can be."""
        return max(self.upper, -self.lower, 0)

    def describe(self) -> str:
        return f"{self.left_time}{_offset(self.lower)} <= {self.right_time} <= {self.left_time}{_offset(self.upper)}"


def _offset(us: int) -> str:
    return "" if us == 0 else f" {'+' if us > 0 else '-'} {duration(abs(us))}"


@dataclass(frozen=True, eq=False)
class Join(Node):
    left: Node
    right: Node
    kind: str  # inner | left | right | full
    strategy: str  # interval | window | temporal | lookup | regular
    right_names: tuple[str, ...]  # output names of the right input's fields
    equi: tuple[tuple[exp.Expression, exp.Expression], ...] = ()  # left expr = right expr
    residual: exp.Expression | None = None  # the rest of the condition
    bounds: TimeBounds | None = None  # interval joins
    window: WindowSpec | None = None  # window joins: the window both sides share
    window_columns: tuple[str, ...] = ()  # window joins: left start, left end, right start, right end
    as_of: str | None = None  # temporal joins: the left time column (output name)
    version_time: str | None = None  # temporal joins: the table's time column (output name)
    stream_side: str = "left"  # lookup joins: which input is the stream
    lateness: int = 0  # allowed lateness of the sources below (state is kept that much longer)
    warning: str | None = None
    ttl: int = 0  # regular joins: state rows not written for this long are dropped (SET 'state.ttl'); 0: never
    subquery: str = ""  # the subquery this join was decorrelated from (bind/subquery.py), for EXPLAIN
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        assert self.kind in KINDS and self.strategy in STRATEGIES
        left_nullable = self.kind in ("right", "full")
        right_nullable = self.kind in ("left", "full")
        keep_time = {
            "interval": (not left_nullable, not right_nullable),
            "window": (not left_nullable, not right_nullable),
            "temporal": (True, False),
            "lookup": (self.stream_side == "left", self.stream_side == "right"),
            "regular": (False, False),
        }[self.strategy]
        fields = []
        for f in self.left.schema:
            fields.append(Field(f.name, f.type, f.nullable or left_nullable, f.rowtime and keep_time[0]))
        for f, name in zip(self.right.schema, self.right_names):
            fields.append(Field(name, f.type, f.nullable or right_nullable, f.rowtime and keep_time[1]))
        schema = Schema(tuple(fields))
        if self.strategy == "regular":
            updating = any(n.changelog == UPDATING for n in (self.left, self.right)) or self.kind != "inner"
            changelog = UPDATING if updating else APPEND
        elif self.strategy == "temporal":  # the left side's changes, each joined with its version (as Flink)
            changelog = self.left.changelog
        elif self.strategy == "lookup":  # the stream side's changes, each looked up when it comes (as Flink)
            changelog = (self.left if self.stream_side == "left" else self.right).changelog
        else:
            changelog = APPEND
        watermark = self._output_watermark() if schema.rowtime is not None else None
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "changelog", changelog)
        object.__setattr__(self, "watermark", watermark)

    def _output_watermark(self) -> str | None:
        """The watermark of the output, when it keeps a time attribute: the stream side's, or the inputs' minimum
        (held back by an interval join's bounds)."""
        if self.strategy == "lookup":
            return (self.left if self.stream_side == "left" else self.right).watermark
        marks = list(dict.fromkeys(m for m in (self.left.watermark, self.right.watermark) if m))
        watermark = marks[0] if len(marks) == 1 else f"min({', '.join(marks)})" if marks else None
        if watermark and self.bounds is not None and self.bounds.delay:
            watermark = f"{watermark} - {duration(self.bounds.delay)}"
        return watermark

    @property
    def inputs(self):
        return (self.left, self.right)

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        # The right input's output names follow its columns by name (column pruning may narrow it).
        renamed = dict(zip(self.right.schema.names, self.right_names))
        right_names = tuple(renamed.get(n, n) for n in inputs[1].schema.names)
        return replace(self, left=inputs[0], right=inputs[1], right_names=right_names)

    # -- names ----------------------------------------------------------------------------

    @property
    def left_names(self) -> tuple[str, ...]:
        return tuple(self.left.schema.names)

    def input_name(self, out: str) -> tuple[int, str]:
        """Which input (0 left, 1 right) an output column comes from, and its name there."""
        if out in self.left.schema.names:
            return 0, out
        return 1, self.right.schema.names[self.right_names.index(out)]

    def conditions(self) -> list[exp.Expression]:
        """Every part of the ON condition, over output names (keys, time bounds, window bounds, the rest)."""
        parts: list[exp.Expression] = [exp.EQ(this=a.copy(), expression=b.copy()) for a, b in self.equi]
        if self.residual is not None:
            parts.append(self.residual)
        return parts

    def child_needs(self, required: set[str]) -> list[set[str]]:
        """The input columns needed to produce ``required`` output columns (for projection pruning)."""
        used = set(required)
        for c in self.conditions():
            used |= {col.name for col in c.find_all(exp.Column)}
        used |= {n for n in (self.as_of, self.version_time) if n}
        used |= set(self.window_columns)
        if self.bounds is not None:
            used |= {self.bounds.left_time, self.bounds.right_time}
        if self.strategy == "temporal":
            # the versioned table's key and time always (its changes are versions by key)
            source = getattr(self.right, "source", None)
            if source is not None:
                used |= {self.right_names[self.right.schema.index(k)] for k in source.primary_key}
        needs: list[set[str]] = [set(), set()]
        for name in used:
            if name in self.left.schema.names or name in self.right_names:
                side, inner = self.input_name(name)
                needs[side].add(inner)
        return needs

    # -- EXPLAIN --------------------------------------------------------------------------

    def label(self) -> str:
        parts = [self.kind.upper()]
        if self.equi:
            parts.append("keys=[" + ", ".join(f"{show(a)} = {show(b)}" for a, b in self.equi) + "]")
        if self.bounds is not None:
            parts.append(self.bounds.describe())
        if self.window is not None:
            parts.append(f"window={self.window.describe()}")
        if self.as_of is not None:
            parts.append(f"as of {self.as_of}")
        if self.strategy == "lookup":
            parts.append(f"stream={self.stream_side}")
        if self.residual is not None:
            parts.append(f"where {show(self.residual)}")
        if self.subquery:
            parts.append(f"as {self.subquery}")
        name = {"interval": "IntervalJoin", "window": "WindowJoin", "temporal": "TemporalJoin",
                "lookup": "LookupJoin", "regular": "RegularJoin"}[self.strategy]
        return f"{name}({', '.join(parts)})"

    def retention(self) -> str:
        late = f" + lateness {duration(self.lateness)}" if self.lateness else ""
        if self.strategy == "interval":
            b = self.bounds
            return (f"left rows until watermark > {b.left_time}{_offset(b.upper)}{late}, "
                    f"right rows until watermark > {b.right_time}{_offset(-b.lower)}{late}")
        if self.strategy == "window":
            return f"rows until their window closes{late}"
        if self.strategy == "temporal":
            return (f"left rows until watermark > {self.as_of}{late}; per key the last version "
                    f"before the watermark and the newer ones")
        if self.strategy == "lookup":
            return "the table's current rows"
        if self.ttl:
            return f"the rows of both inputs, until their join key is not touched for {duration(self.ttl)} (state.ttl)"
        streams = [side for side, n in (("left", self.left), ("right", self.right)) if n.changelog == APPEND]
        if not streams:
            return "the current rows of both inputs"
        grows = "(grows without bound; SET 'state.ttl' bounds it)"
        if len(streams) == 2:
            return f"every row of both inputs {grows}"
        other = "right" if streams[0] == "left" else "left"
        return f"every row of the {streams[0]} stream {grows}, the current rows of the {other} input"
