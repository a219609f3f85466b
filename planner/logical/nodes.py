"""Logical plan nodes: what a query computes, bound to names and types.

Nodes are frozen dataclasses; each derives, when built, its output
``schema``, its ``changelog`` mode (``append-only`` or ``updating``) and a
description of the ``watermark`` it carries (None when it has no event
time). Expressions inside nodes are sqlglot trees whose columns are bare,
unqualified names of the input node's fields.

Nodes compare by identity, so a DAG can share a sub-plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa
from sqlglot import exp

from ..aggregate_kinds import AggregateKind
from ..catalog import SourceDef
from ..timeutil import format_duration
from ..types import TIMESTAMP, TIMESTAMP_LTZ, Field, Schema
from ..windows import WindowSpec  # noqa: F401 - (plan nodes hold windows; modules take it from here)

APPEND = "append-only"
UPDATING = "updating"

WINDOW_COLUMNS = ("window_start", "window_end", "window_time")

# window_time is the last instant inside the window (Flink: window_end - 1 ms).
WINDOW_TIME_OFFSET_US = 1_000


# Meta key of a bound Python function call (``bind/udf.py``): the function's name in SQL, which EXPLAIN shows.
PYTHON_NAME = "dsms_python_name"
PYTHON_ARGS = "dsms_python_args"  # False: it was called without arguments


def _as_written(node: exp.Expression) -> exp.Expression:
    """A bound Python function call as it was written: ``f(x)``, not its registered name under a CAST."""
    name = node.meta.get(PYTHON_NAME)
    if name is None or not isinstance(node, exp.Cast):
        return node
    args = node.this.expressions if node.meta.get(PYTHON_ARGS, True) else []
    return exp.Anonymous(this=name, expressions=[a.copy() for a in args])


def show(e: exp.Expression) -> str:
    """An expression as a user would write it (identifiers quoted only when needed)."""
    e = e.transform(_as_written)
    for ident in e.find_all(exp.Identifier):
        if ident.this and ident.this.replace("_", "a").isalnum() and not ident.this[0].isdigit():
            ident.set("quoted", False)
    return e.sql()


def _derive(obj, **values) -> None:
    for k, v in values.items():
        object.__setattr__(obj, k, v)


@dataclass(frozen=True)
class EmitPolicy:
    """When a window aggregate emits (see docs/emission.md).

    ``mode``: ``final`` (each window once, when the watermark passes its
    end) or ``changes`` (early, on every micro-batch that changes a window,
    or every ``every_us`` of processing time). ``lateness_us``: how long a
    window stays open after it fires; late events within it emit
    corrections. Anything but the default makes the result updating.
    """

    mode: str = "final"
    every_us: int = 0
    lateness_us: int = 0
    explicit: bool = False  # the query said EMIT ... (SET 'emit' does not override it)

    @property
    def updating(self) -> bool:
        return self.mode != "final" or self.lateness_us > 0

    def describe(self) -> str:
        parts = []
        if self.mode == "changes":
            parts.append("emit changes" + (f" every {format_duration(self.every_us)}" if self.every_us else ""))
        if self.lateness_us:
            parts.append(f"lateness {format_duration(self.lateness_us)}")
        return ", ".join(parts)


@dataclass(frozen=True)
class AggCall:
    """One aggregate: ``kind(arg)`` over an input field, named ``name`` (kinds: planner/aggregate_kinds.py)."""

    kind: AggregateKind
    arg: str | None  # input field; None for COUNT(*)
    distinct: bool
    name: str
    type: pa.DataType
    arg_type: pa.DataType | None = None

    @property
    def func(self) -> str:
        """The aggregate's name in lower case (``count``, ``stddev_pop``), as EXPLAIN shows it."""
        return self.kind.name.lower()

    @property
    def keeps_values(self) -> bool:
        """Whether its state is the set of distinct values (DISTINCT that changes the result)."""
        return self.distinct and self.kind.takes_distinct

    def partials(self, retracting: bool = False):
        """Its partial columns (aggregate_kinds.Partial); ``retracting``: with those kept for retractions."""
        return tuple(p for p in self.kind.partials(self.arg_type) if retracting or not p.retract_only)

    def describe(self) -> str:
        inner = "*" if self.arg is None else (("DISTINCT " if self.distinct else "") + self.arg)
        return f"{self.kind.name}({inner}) AS {self.name}"


@dataclass(frozen=True, eq=False)
class Node:
    """Base of all logical nodes."""

    @property
    def inputs(self) -> tuple["Node", ...]:
        return ()

    def with_inputs(self, inputs: tuple["Node", ...]) -> "Node":
        """The same node over new inputs (a node without inputs: itself)."""
        return self

    def label(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class Unary(Node):
    """A node over one ``input`` (the first field of every such node)."""

    input: Node

    @property
    def inputs(self) -> tuple[Node, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        return replace(self, input=inputs[0])


@dataclass(frozen=True, eq=False)
class Scan(Node):
    source: SourceDef
    lateness_us: int = 0  # a query's ALLOWED LATENESS: accept events this far behind (beyond the source's own)
    columns: tuple[str, ...] | None = None  # the columns read (None: all; set by rules/prune_columns.py)
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        wm = self.source.watermark
        _derive(self, schema=read_schema(self.source.schema, self.columns),
                changelog=APPEND if self.source.kind == "stream" else UPDATING,
                watermark=f"{self.source.name}.{wm.column} - {format_duration(wm.delay_us)}" if wm else None)

    def label(self) -> str:
        return f"Scan({self.source.name}{read_label(self.source.schema, self.columns)})"


def read_schema(schema: Schema, columns: tuple[str, ...] | None) -> Schema:
    """The fields of a scan that reads only ``columns`` (None: every one)."""
    return schema if columns is None else Schema(tuple(f for f in schema if f.name in columns))


def read_label(schema: Schema, columns: tuple[str, ...] | None) -> str:
    """How EXPLAIN shows the columns a scan reads: nothing when it reads them all."""
    if columns is None or len(columns) == len(schema.fields):
        return ""
    return ": " + ", ".join(f.name for f in schema if f.name in columns)


@dataclass(frozen=True, eq=False)
class Values(Node):
    rows: tuple[tuple[exp.Expression, ...], ...]
    schema: Schema
    changelog: str = field(init=False, default=APPEND)
    watermark: str | None = field(init=False, default=None)

    def label(self) -> str:
        return f"Values({len(self.rows)} rows)"


@dataclass(frozen=True, eq=False)
class Filter(Unary):
    condition: exp.Expression
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        _derive(self, schema=self.input.schema, changelog=self.input.changelog, watermark=self.input.watermark)

    def label(self) -> str:
        return f"Filter({show(self.condition)})"


@dataclass(frozen=True, eq=False)
class Project(Unary):
    """Compute named expressions. A bare column keeps its time-attribute status."""

    exprs: tuple[tuple[str, exp.Expression], ...]
    types: tuple[pa.DataType, ...]
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        fields = []
        for (name, e), t in zip(self.exprs, self.types):
            src = self.input.schema.find(e.name) if isinstance(e, exp.Column) else None
            if src is not None:
                fields.append(Field(name, src.type, src.nullable, src.rowtime, src.proctime))
            else:
                fields.append(Field(name, t))
        schema = Schema(tuple(fields))
        _derive(self, schema=schema, changelog=self.input.changelog,
                watermark=self.input.watermark if schema.rowtime else None)

    def is_identity(self) -> bool:
        return [n for n, _ in self.exprs] == self.input.schema.names and all(
            isinstance(e, exp.Column) and e.name == n for n, e in self.exprs)

    def label(self) -> str:
        parts = [show(e) if isinstance(e, exp.Column) and e.name == n else f"{show(e)} AS {n}" for n, e in self.exprs]
        return f"Project({', '.join(parts)})"


def window_fields(proctime: bool = False, ltz: bool = False) -> tuple[Field, ...]:
    """The window columns; window_time is the result's time attribute (processing time for proctime windows).

    Over a TIMESTAMP_LTZ attribute window_start/window_end are local TIMESTAMPs
    and window_time is a TIMESTAMP_LTZ (Flink's types).
    """
    return (Field("window_start", TIMESTAMP, False), Field("window_end", TIMESTAMP, False),
            Field("window_time", TIMESTAMP_LTZ if ltz else TIMESTAMP, False, rowtime=not proctime, proctime=proctime))


@dataclass(frozen=True, eq=False)
class WindowTVF(Unary):
    """Assign each row to its windows, adding window_start, window_end, window_time.

    The input's time column becomes a plain timestamp; window_time is the
    new event-time attribute (as in Flink).
    """

    window: WindowSpec
    proctime: bool = False  # windows on a processing-time attribute
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        fields = tuple(f.plain() if f.rowtime or f.proctime else f for f in self.input.schema)
        _derive(self, schema=Schema(fields + window_fields(self.proctime, self.window.ltz)), changelog=self.input.changelog,
                watermark=self.input.watermark)

    def label(self) -> str:
        return f"WindowTVF({self.window.describe()}{', processing time' if self.proctime else ''})"


@dataclass(frozen=True, eq=False)
class WindowAggregate(Unary):
    """Aggregate rows per window and key; emit each window when the watermark passes its end.

    Output: window_start, window_end, window_time, the keys, the aggregates.
    """

    window: WindowSpec
    keys: tuple[str, ...]
    aggs: tuple[AggCall, ...]
    emit: EmitPolicy = EmitPolicy()
    # Regrouping an earlier window aggregate's rows by their windows (analysis/window_aggregate.py): the windows the
    # rows were assigned to, and the key column holding their start (``window`` then finds each row's window
    # by its end: a TUMBLE of the pane width over window_time).
    attached: WindowSpec | None = None
    attached_start: str | None = None
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        _derive(self, schema=Schema(window_fields(self.proctime, self.window.ltz) + _group_fields(self.input, self.keys, self.aggs)),
                changelog=UPDATING if self.emit.updating else APPEND, watermark=self.input.watermark)

    @property
    def proctime(self) -> bool:
        """Windows on processing time: they close as the engine's clock passes their end."""
        time_col = self.input.schema.find(self.window.time_col)
        return time_col is not None and time_col.proctime

    def label(self) -> str:
        keys = f", keys=[{', '.join(self.keys)}]" if self.keys else ""
        emit = f", {self.emit.describe()}" if self.emit.describe() else ""
        window = self.window.describe()
        if self.attached is not None:
            window = f"{self.attached.describe()} attached by {self.attached_start} and window_end"
        if self.proctime:
            window += ", processing time"
        return f"WindowAggregate({window}{keys}, aggs=[{', '.join(a.describe() for a in self.aggs)}]{emit})"


def _group_fields(input: Node, keys: tuple[str, ...], aggs: tuple[AggCall, ...]) -> tuple[Field, ...]:
    """An aggregate's key columns (no longer time attributes), then its aggregates."""
    return tuple(input.schema.find(k).plain() for k in keys) + tuple(Field(a.name, a.type) for a in aggs)


@dataclass(frozen=True, eq=False)
class Aggregate(Unary):
    """A group aggregate with no window: an updating result, one row per key."""

    keys: tuple[str, ...]
    aggs: tuple[AggCall, ...]
    ttl: int = 0  # a key not written for this long is forgotten (SET 'state.ttl'); 0: never
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        # Distinct keys of an append-only input only ever appear: nothing is retracted.
        changelog = APPEND if not self.aggs and self.input.changelog == APPEND else UPDATING
        _derive(self, schema=Schema(_group_fields(self.input, self.keys, self.aggs)), changelog=changelog,
                watermark=None)

    def label(self) -> str:
        keys = f"keys=[{', '.join(self.keys)}], " if self.keys else ""
        return f"Aggregate({keys}aggs=[{', '.join(a.describe() for a in self.aggs)}])"


@dataclass(frozen=True, eq=False)
class Union(Node):
    """UNION ALL of inputs with the same column types; the watermark is their minimum."""

    all_inputs: tuple[Node, ...]
    schema: Schema = field(init=False)
    changelog: str = field(init=False)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        first = self.all_inputs[0].schema
        rowtime = [all(n.schema.fields[i].rowtime for n in self.all_inputs) for i in range(len(first))]
        fields = tuple(Field(f.name, f.type, any(n.schema.fields[i].nullable for n in self.all_inputs), rowtime[i])
                       for i, f in enumerate(first))
        marks = [n.watermark for n in self.all_inputs]
        if any(rowtime) and all(marks):
            unique = list(dict.fromkeys(marks))
            watermark = unique[0] if len(unique) == 1 else f"min({', '.join(unique)})"
        else:
            watermark = None
        changelog = UPDATING if any(n.changelog == UPDATING for n in self.all_inputs) else APPEND
        _derive(self, schema=Schema(fields), changelog=changelog, watermark=watermark)

    @property
    def inputs(self):
        return self.all_inputs

    def with_inputs(self, inputs: tuple[Node, ...]) -> Node:
        return Union(tuple(inputs))

    def label(self) -> str:
        return "Union(ALL)"


def walk(node: Node):
    """Every node of the DAG once, inputs before the nodes that use them."""
    seen: set[int] = set()
    order: list[Node] = []

    def visit(n: Node):
        if id(n) in seen:
            return
        seen.add(id(n))
        for i in n.inputs:
            visit(i)
        order.append(n)

    visit(node)
    return order
