"""What a connector is, as data: its name, options, formats and capabilities.

A connector is one :class:`ConnectorDescriptor` (importable by the planner,
so DDL is checked when it is declared) plus one runtime module named by
``descriptor.module``, which the runtime imports only when it opens a
source or sink there. Everything else derives from the descriptor: DDL
validation and its did-you-mean, shell completion, ``SHOW CONNECTORS``,
the option tables of docs/connectors.md, and the routes' choices.

Example:
    >>> d = ConnectorDescriptor("demo", "rows from nowhere", module="demo_runtime", source=True,
    ...                         options=(Option("rows", "int", required=True, help="how many rows"),))
    >>> d.option("rows").check("12") is None, d.option("rows").check("x")
    (True, "option 'rows' needs a whole number, not 'x'")
    >>> d.is_bounded({"rows": "3"})
    False
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Mapping

from ..timeutil import parse_duration

OPTION_TYPES = ("string", "int", "float", "bool", "duration", "enum")
# Every source accepts these; the planner and the source operator read them, not the connector.
SOURCE_TIME_OPTIONS_HELP = {
    "idle_timeout": "after this long without events the source stops holding the watermark back",
    "allowed_lateness": "events up to this much behind the watermark still update their windows",
}


class OptionError(ValueError):
    """A connector's own check refused the options (the planner turns it into a Diagnostic)."""

    def __init__(self, message: str, help: str | None = None):
        super().__init__(message)
        self.help = help


@dataclass(frozen=True)
class Option:
    """One WITH (...) option.

    ``name`` may hold ``*`` for a part the user chooses, as Flink's
    pass-through prefixes: ``properties.*``, ``fields.*.kind``.
    ``scope`` says whether a source, a sink or both take it.
    """

    name: str
    type: str = "string"
    default: str | None = None
    required: bool = False
    help: str = ""
    values: tuple[str, ...] = ()  # the choices of an enum
    scope: str = "both"  # source | sink | both

    def __post_init__(self):
        if self.type not in OPTION_TYPES:
            raise ValueError(f"option '{self.name}': unknown type '{self.type}' (one of {', '.join(OPTION_TYPES)})")
        if (self.type == "enum") != bool(self.values):
            raise ValueError(f"option '{self.name}': an enum lists its values, and only an enum does")
        if self.scope not in ("source", "sink", "both"):
            raise ValueError(f"option '{self.name}': scope is source, sink or both, not '{self.scope}'")

    @property
    def is_pattern(self) -> bool:
        return "*" in self.name

    def matches(self, key: str) -> bool:
        if not self.is_pattern:
            return key == self.name
        parts = (re.escape(p) for p in self.name.split("*"))
        return re.fullmatch("(.+)".join(parts), key) is not None

    def applies_to(self, role: str) -> bool:
        return self.scope == "both" or self.scope == role

    def check(self, value: str) -> str | None:
        """Why ``value`` is not valid for this option, or None."""
        v = value.strip()
        if self.type == "enum" and v.lower() not in self.values:
            return f"invalid value '{value}' for option '{self.name}' (expected one of: {', '.join(self.values)})"
        if self.type == "int" and not re.fullmatch(r"[+-]?\d+", v):
            return f"option '{self.name}' needs a whole number, not '{value}'"
        if self.type == "float":
            try:
                float(v)
            except ValueError:
                return f"option '{self.name}' needs a number, not '{value}'"
        if self.type == "bool" and v.lower() not in ("true", "false"):
            return f"option '{self.name}' is 'true' or 'false', not '{value}'"
        if self.type == "duration":
            try:
                parse_duration(v)
            except ValueError as e:
                return str(e)
        return None

    def describe_values(self) -> str:
        """The values, for people (docs tables)."""
        return {"enum": ", ".join(f"`{v}`" for v in self.values), "int": "integer", "bool": "`true`, `false`",
                "duration": "duration (`'5 s'`)", "float": "number"}.get(self.type, "text")


@dataclass(frozen=True)
class Format:
    """A value format a connector reads or writes (``format = '...'``).

    ``changelog``: the format carries inserts, updates and deletes. A
    source reads it only into a TABLE with a PRIMARY KEY; a sink needs it
    (or a connector that takes changes without a format) for an updating
    result.
    """

    name: str
    source: bool = True
    sink: bool = True
    changelog: bool = False


def never_bounded(options: Mapping[str, str]) -> bool:
    return False


def always_bounded(options: Mapping[str, str]) -> bool:
    return True


@dataclass(frozen=True)
class ConnectorDescriptor:
    """A connector: what it accepts and what it can do.

    Attributes:
        name: ``connector = 'name'`` (lower case).
        help: one line for SHOW CONNECTORS and the docs.
        module: the runtime module (dotted path) with ``open_source(req, ctx)``
            and/or ``open_sink(req)`` (see ``runtime/connectors/base.py``).
        aliases: other names for it (``filesystem`` is Flink's for ``file``).
        options: every option but ``connector`` (and the source time options every source takes).
        formats: the ``format`` values; empty when the connector has no ``format`` option.
        format_required: ``format`` must be given (when there are formats).
        source, sink, lookup: what it can be (``lookup``: it can answer FOR SYSTEM_TIME AS OF lookups
            by key; SHOW CONNECTORS shows it, and the lookup join's use of it comes with the first
            such connector).
        tables: a source may be a TABLE with a PRIMARY KEY (read as changes by key).
        streams: a source may be an append-only STREAM (False: it is read by key only, as a TABLE).
        bounded: whether a source with these options ends (lower-case keys).
        bounded_note: the same for people: ``yes``, ``no``, ``unless watch = 'true'``.
        batch_readable: the batch routes (DuckDB, Spark and any registered one) can read it as a
            source; otherwise only the runtime reads it. A function of the options says when (Kafka:
            with ``scan.bounded.mode``), and ``batch_note`` says it for people. (A sink is written on
            every route: a route hands its result batches to the writer ``open_sink`` made.)
        batch_reader: how a batch route reads it: ``files``, with the file readers of
            ``runtime/batch_read.py`` (a task per file on Spark), or ``source``, with the connector's
            own ``open_source`` reader read to its end in one pass (``runtime/batch_source.py``).
        batch_note: when a conditionally batch-readable source is read by the batch routes.
        partitioned: the source's reader keeps a watermark per partition (``batch_partitions``); the
            source's watermark is the minimum over them.
        replayable: an unbounded source whose history a batch route can read before the
            runtime continues from where it stopped (backfill, the continuous Spark route).
        insertable: ``INSERT INTO`` and ``Engine.insert`` feed it.
        collects: as a sink, the engine keeps the results in memory (``Engine.sink(name)``).
        accepts_changes: as a sink without a format, it can take an updating result.
        check: more checks of the options against the columns: ``check(options, schema, role)``
            (``schema``: a source's physical columns, or a sink's result columns), raising
            :class:`OptionError`.
        metadata: the keys a source's ``col TYPE METADATA FROM 'key'`` columns can read, with their
            SQL types (Kafka: ``partition``, ``offset``, ...); the runtime module fills them.
    """

    name: str
    help: str
    module: str
    aliases: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    formats: tuple[Format, ...] = ()
    format_required: bool = True
    source: bool = False
    sink: bool = False
    lookup: bool = False
    tables: bool = False
    streams: bool = True
    bounded: Callable[[Mapping[str, str]], bool] = never_bounded
    bounded_note: str = "no"
    batch_readable: bool | Callable[[Mapping[str, str]], bool] = False
    batch_reader: str = "files"
    batch_note: str = ""
    partitioned: bool = False
    replayable: bool = False
    insertable: bool = False
    collects: bool = False
    accepts_changes: bool = True
    check: Callable | None = field(default=None, compare=False)
    metadata: tuple[tuple[str, str], ...] = ()  # what METADATA FROM 'key' columns can read: (key, SQL type)

    def __post_init__(self):
        if not (self.source or self.sink or self.lookup):
            raise ValueError(f"connector '{self.name}' is neither a source, a sink nor a lookup source")
        if self.batch_reader not in ("files", "source"):
            raise ValueError(f"connector '{self.name}': batch_reader is 'files' or 'source', not '{self.batch_reader}'")
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"connector '{self.name}' declares an option twice")

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(k for k, on in (("source", self.source), ("sink", self.sink), ("lookup", self.lookup)) if on)

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name,) + self.aliases

    def is_bounded(self, options: Mapping[str, str]) -> bool:
        return bool(self.bounded({k.lower(): v for k, v in options.items()}))

    def batch_reads(self, options: Mapping[str, str]) -> bool:
        """Whether the batch routes can read a source with these options."""
        if callable(self.batch_readable):
            return bool(self.batch_readable({k.lower(): v for k, v in options.items()}))
        return bool(self.batch_readable)

    def option(self, key: str) -> Option | None:
        """The option ``key`` is (an exact name first, then a pattern)."""
        key = key.lower()
        exact = next((o for o in self.options if not o.is_pattern and o.name == key), None)
        return exact or next((o for o in self.options if o.is_pattern and o.matches(key)), None)

    def options_for(self, role: str) -> tuple[Option, ...]:
        """The options a source (``role='source'``) or a sink takes, with the format option."""
        own = tuple(o for o in self.options if o.applies_to(role))
        formats = self.format_names(role)
        fmt = (Option("format", "enum", required=self.format_required, values=formats, help="the value format", scope=role),) \
            if formats else ()
        common = tuple(Option(k, "duration", help=h, scope="source") for k, h in SOURCE_TIME_OPTIONS_HELP.items()) \
            if role == "source" else ()
        return fmt + own + common

    def format_names(self, role: str) -> tuple[str, ...]:
        return tuple(f.name for f in self.formats if (f.source if role == "source" else f.sink))

    def format(self, name: str | None) -> Format | None:
        return next((f for f in self.formats if name is not None and f.name == name.lower()), None)
