"""Parsed statements: what the grammar hands to the planner.

Every statement remembers its span in the script and the script text, so
the planner can point its own errors at the user's line and column.
Query bodies and scalar expressions are sqlglot trees (dsms dialect).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from .diagnostics import Span


@dataclass(frozen=True)
class Name:
    """An identifier as written, with its place in the script."""

    value: str
    span: Span

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Query:
    """A query body: its text, its sqlglot tree and where it sits."""

    text: str
    tree: exp.Expression
    span: Span
    target: str | None = None  # a trailing FOR <engine> (only after EXPLAIN LOWERED)


@dataclass(frozen=True)
class Statement:
    span: Span
    source: str = field(repr=False, compare=False)

    @property
    def text(self) -> str:
        return self.source[self.span.start : self.span.end]


@dataclass(frozen=True)
class ColumnDef:
    name: Name
    type_text: str
    not_null: bool
    span: Span
    type_span: Span | None = None
    metadata: str | None = None  # METADATA [FROM 'key']: the connector's metadata key it is filled from
    virtual: bool = False  # VIRTUAL: read only, never written by a sink
    key_span: Span | None = None  # set: the column is declared PRIMARY KEY (the column form of the constraint)


@dataclass(frozen=True)
class ComputedColumn:
    name: Name
    expr: exp.Expression
    span: Span


@dataclass(frozen=True)
class WatermarkDef:
    column: Name
    expr: exp.Expression
    span: Span


@dataclass(frozen=True)
class CreateSource(Statement):
    kind: str = "stream"  # 'stream' (append-only) or 'table' (updating)
    name: Name | None = None
    columns: tuple[ColumnDef, ...] = ()
    computed: tuple[ComputedColumn, ...] = ()
    watermark: WatermarkDef | None = None
    primary_key: tuple[Name, ...] = ()
    options: dict = field(default_factory=dict)
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateView(Statement):
    name: Name | None = None
    query: Query | None = None
    or_replace: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateFunction(Statement):
    """``CREATE [TEMPORARY] FUNCTION name AS 'package.module.func' [LANGUAGE PYTHON]``."""

    name: Name | None = None
    target: str = ""  # the dotted path of the Python callable
    language: str = "python"
    temporary: bool = False
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateMaterializedView(Statement):
    name: Name | None = None
    options: dict = field(default_factory=dict)
    query: Query | None = None
    if_not_exists: bool = False


@dataclass(frozen=True)
class CreateSink(Statement):
    name: Name | None = None
    options: dict = field(default_factory=dict)
    query: Query | None = None
    if_not_exists: bool = False


@dataclass(frozen=True)
class Insert(Statement):
    target: Name | None = None
    columns: tuple[Name, ...] = ()
    query: Query | None = None


@dataclass(frozen=True)
class StatementSet(Statement):
    """``EXECUTE STATEMENT SET BEGIN INSERT …; INSERT …; END``: the inserts run as one job."""

    inserts: tuple[Insert, ...] = ()


@dataclass(frozen=True)
class CreateTableAs(Statement):
    """``CREATE TABLE name WITH (…) AS SELECT …``: a table with the query's columns, filled continuously."""

    kind: str = "table"  # table | stream
    name: Name | None = None
    options: dict = field(default_factory=dict)
    query: Query | None = None
    if_not_exists: bool = False
    primary_key: tuple[Name, ...] = ()  # CREATE TABLE t (PRIMARY KEY (k) NOT ENFORCED) AS SELECT


@dataclass(frozen=True)
class Show(Statement):
    what: str = ""  # streams, tables, views, sinks, queries, functions, progress, connectors, materialized views
    name: Name | None = None


@dataclass(frozen=True)
class Describe(Statement):
    name: Name | None = None


@dataclass(frozen=True)
class Explain(Statement):
    options: frozenset = frozenset()  # analyze, lowered, physical, logical
    statement: Statement | None = None
    target: str | None = None  # EXPLAIN LOWERED ... FOR <engine>


@dataclass(frozen=True)
class Drop(Statement):
    kind: str = ""  # stream, table, view, sink, query, materialized view
    name: Name | None = None
    if_exists: bool = False


@dataclass(frozen=True)
class SetOption(Statement):
    key: str | None = None  # None: list the options
    value: str | None = None


@dataclass(frozen=True)
class ResetOption(Statement):
    key: str | None = None


@dataclass(frozen=True)
class PauseQuery(Statement):
    name: Name | None = None


@dataclass(frozen=True)
class ResumeQuery(Statement):
    name: Name | None = None


@dataclass(frozen=True)
class Flush(Statement):
    """``FLUSH``: wait until every standing query has processed all input given so far."""


@dataclass(frozen=True)
class QueryStatement(Statement):
    query: Query | None = None
