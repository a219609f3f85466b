"""The catalog: the streams, tables, views, sinks and materialized views a
session has declared, and its settings.

Names are case-insensitive and keep the case they were declared with (as
in DuckDB). Every object keeps the DDL text that created it, so a catalog
can be saved and rebuilt by replaying it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import pyarrow as pa
from sqlglot import exp

from ..grammar import Diagnostic, Name, SqlError
from ..grammar.diagnostics import did_you_mean
from .aggregate_kinds import AggregateKind
from .connectors import ConnectorDescriptor, find
from .types import Schema

# Settings a session starts with, and what they mean (SET 'key' = 'value').
DEFAULT_SETTINGS = {
    "engine": "auto",  # auto | runtime | duckdb | spark
    "emit": "final",  # final (on window close) | changes
    "strict": "false",  # refuse plans whose state grows without bound
    "join.stream_table": "regular",  # a stream joined to a table: regular (updating, Flink) | lookup (ksqlDB)
    "state.ttl": "0 ms",  # drop state rows not written for this long (Flink's table.exec.state.ttl); 0: never
    "batch.max_bytes": str(2 * 1024**3),
    "batch.size": "65536",  # rows per micro-batch read from files
    "checkpoint.interval": "5 s",  # how often standing queries are checkpointed (with a state directory)
    "table.local-time-zone": "UTC",  # the session time zone of TIMESTAMP_LTZ values and their windows
    "memory.retention": "16MB",  # consumed rows a memory stream keeps for queries started later
    "insert.max_pending": "64MB",  # engine.insert holds back while queries have this much unread
    "insert.backpressure": "block",  # block (up to insert.timeout, giving queries turns) | error
    "insert.timeout": "30 s",
    "python.files": "",  # where CREATE FUNCTION imports from, besides the script's folder (Flink's python.files)
}

# Other names of settings (Flink's), stored under dsms's name.
SETTING_ALIASES = {"table.exec.state.ttl": "state.ttl"}


def resolve_path(path: str | None, base_dir: str | None) -> str | None:
    """A connector path; relative paths resolve against the script's folder (a trailing ``/``, which
    makes a sink a directory of part files, is kept)."""
    if path is None:
        return None
    directory = path.endswith(("/", os.sep))
    if not os.path.isabs(path) and base_dir:
        path = os.path.join(base_dir, path)
    return os.path.normpath(path) + (os.sep if directory else "")


@dataclass(frozen=True)
class WatermarkSpec:
    """``WATERMARK FOR column AS column - INTERVAL delay``."""

    column: str
    delay_us: int


@dataclass(frozen=True, eq=False)
class SourceDef:
    """A declared stream (append-only) or table (updating, keyed)."""

    name: str
    kind: str  # 'stream' | 'table'
    schema: Schema  # physical then computed columns; the watermark column is the rowtime
    physical: tuple[str, ...]
    computed: tuple[tuple[str, exp.Expression], ...]
    watermark: WatermarkSpec | None
    primary_key: tuple[str, ...]
    options: dict
    base_dir: str | None
    ddl: str
    # Metadata columns (Flink's ``col TYPE METADATA FROM 'key' VIRTUAL``): (column, key) pairs, filled by
    # the connector; they are among ``physical``.
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def descriptor(self) -> ConnectorDescriptor:
        """The connector (checked when the source was declared)."""
        return _descriptor(self.options)

    @property
    def connector(self) -> str:
        """The connector's name (an alias such as ``filesystem`` gives its connector's name)."""
        return self.descriptor.name

    @property
    def format(self) -> str:
        return self.options.get("format", "json").lower()

    @property
    def path(self) -> str | None:
        """The source path, resolved against the script's folder."""
        return resolve_path(self.options.get("path"), self.base_dir)

    @property
    def bounded(self) -> bool:
        """Whether the source ends (files do unless watched; a datagen with number-of-rows does)."""
        return self.descriptor.is_bounded(self.options)

    @property
    def object_kind(self) -> str:
        return self.kind


@dataclass(frozen=True, eq=False)
class ViewDef:
    name: str
    query: exp.Expression
    schema: Schema
    ddl: str
    object_kind: str = "view"


@dataclass(frozen=True, eq=False)
class SinkDef:
    name: str
    options: dict
    query: exp.Expression
    schema: Schema
    base_dir: str | None
    ddl: str
    object_kind: str = "sink"

    @property
    def path(self) -> str | None:
        return resolve_path(self.options.get("path"), self.base_dir)

    @property
    def descriptor(self) -> ConnectorDescriptor:
        return _descriptor(self.options)

    @property
    def connector(self) -> str:
        return self.descriptor.name


def _descriptor(options: dict) -> ConnectorDescriptor:
    name = options.get("connector", "memory")
    descriptor = find(name)
    if descriptor is None:
        raise SqlError(Diagnostic(f"unknown connector '{name}'", None, None))
    return descriptor


@dataclass(frozen=True, eq=False)
class MaterializedViewDef:
    name: str
    options: dict
    query: exp.Expression
    schema: Schema
    ddl: str
    object_kind: str = "materialized view"


@dataclass(frozen=True, eq=False)
class FunctionDef:
    """A Python function: ``name`` in SQL, ``internal`` the name it is registered under in DuckDB.

    An aggregate function has its kind (``aggregate``); ``internal`` then names its steps (runtime/udaf.py). A table
    function (``table``) gives rows of ``returns`` (a ROW type); DuckDB calls it as a scalar function
    that returns the ARRAY of a row's rows, which ``LATERAL TABLE`` unnests.
    """

    name: str
    internal: str
    returns: pa.DataType
    target: str  # 'package.module.func', or the Python name of a function given to Engine.create_function
    temporary: bool = True
    object_kind: str = "function"
    table: bool = False
    aggregate: AggregateKind | None = None  # an aggregate function's kind (python_aggregate.py)


CatalogObject = SourceDef | ViewDef | SinkDef | MaterializedViewDef

# Which kinds a relation reference in FROM may name.
RELATION_KINDS = ("stream", "table", "view", "materialized view")


@dataclass
class Catalog:
    """Declared objects by lower-cased name, in declaration order."""

    objects: dict[str, CatalogObject] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_SETTINGS))
    functions: dict[str, FunctionDef] = field(default_factory=dict)  # Python functions by lower-cased name

    def get(self, name: str) -> CatalogObject | None:
        return self.objects.get(name.lower())

    def add(self, obj: CatalogObject, *, replace: bool = False, name: Name | None = None, source: str | None = None) -> None:
        existing = self.get(obj.name)
        if existing is not None and not replace:
            raise SqlError(Diagnostic(f"{existing.object_kind} '{existing.name}' already exists",
                                      name.span if name else None, source,
                                      help="drop it first, or use CREATE OR REPLACE / IF NOT EXISTS"))
        self.objects[obj.name.lower()] = obj

    def drop(self, name: str) -> CatalogObject | None:
        return self.objects.pop(name.lower(), None)

    def of_kind(self, *kinds: str) -> list[CatalogObject]:
        return [o for o in self.objects.values() if o.object_kind in kinds]

    def require(self, name: Name, source: str | None, kinds=RELATION_KINDS) -> CatalogObject:
        """Look up a relation or raise an error that suggests close names."""
        obj = self.get(name.value)
        if obj is not None and obj.object_kind in kinds:
            return obj
        candidates = [o.name for o in self.objects.values() if o.object_kind in kinds]
        if obj is not None:
            message = f"'{obj.name}' is a {obj.object_kind}, not a {' or '.join(kinds)}"
        else:
            message = f"unknown {'relation' if kinds == RELATION_KINDS else ' or '.join(kinds)} '{name.value}'"
        raise SqlError(Diagnostic(message, name.span, source, help=did_you_mean(name.value, candidates)))

    def setting(self, key: str) -> str:
        return self.settings.get(key.lower(), DEFAULT_SETTINGS.get(key.lower(), ""))
