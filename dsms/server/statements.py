"""What one statement does over the wire: its command tag, its rows, or a feed of changes.

The server answers a few statements itself (transaction control, client
parameters, SUBSCRIBE, cursors, COPY, FLUSH, catalog queries); every other
statement is parsed by dsms and run by the engine with the client's own
settings. Functions named ``run_*`` run on the engine thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pyarrow as pa

from ..errors import Diagnostic, Span, SqlError
from ..grammar import (
    CreateFunction,
    CreateMaterializedView,
    CreateSink,
    CreateSource,
    CreateView,
    Describe,
    Drop,
    Explain,
    Insert,
    PauseQuery,
    QueryStatement,
    ResetOption,
    ResumeQuery,
    SetOption,
    Show,
    parse_statement,
)
from ..planner import plan_query
from ..planner.catalog import DEFAULT_SETTINGS, SourceDef
from ..planner.vocabulary import OP
from ..pull import pull_schema
from .copy_in import target_columns
from .feeds import Feed
from .paths import check_paths

_WORD = r"[A-Za-z_][A-Za-z0-9_$]*"
TRANSACTION = re.compile(r"^\s*(BEGIN|START\s+TRANSACTION|COMMIT|END|ROLLBACK|ABORT)\b", re.I)
CLIENT_SET = re.compile(rf"^\s*SET\s+(?:SESSION\s+|LOCAL\s+)?({_WORD})\s*(?:=|\bTO\b)\s*(.*?)\s*$", re.I | re.S)
CLIENT_SET_TZ = re.compile(r"^\s*SET\s+(?:SESSION\s+)?TIME\s+ZONE\s+(.*?)\s*$", re.I | re.S)
CLIENT_SHOW = re.compile(rf"^\s*SHOW\s+({_WORD})\s*$", re.I)
CLIENT_RESET = re.compile(rf"^\s*RESET\s+({_WORD}|ALL)\s*$", re.I)
DISCARD = re.compile(r"^\s*DISCARD\s+ALL\s*$", re.I)
SUBSCRIBE = re.compile(rf"^\s*SUBSCRIBE\s+(?:TO\s+)?(\"[^\"]+\"|{_WORD})\s*"
                       r"(?:WITH\s*\(\s*SNAPSHOT\s*=?\s*(TRUE|FALSE)\s*\))?\s*$", re.I)
COPY_SUBSCRIBE = re.compile(r"^\s*COPY\s*\((.*)\)\s*TO\s+STDOUT\b.*$", re.I | re.S)
COPY_IN = re.compile(rf"^\s*COPY\s+(\"[^\"]+\"|{_WORD})\s*(\(([^)]*)\))?\s*FROM\s+STDIN\b(.*)$", re.I | re.S)
DECLARE = re.compile(rf"^\s*DECLARE\s+(\"[^\"]+\"|{_WORD})\b.*?\bCURSOR\b.*?\bFOR\s+(.*)$", re.I | re.S)
FETCH = re.compile(rf"^\s*FETCH\s+(?:(?:FORWARD\s+)?(ALL|\d+)\s+)?(?:(?:FROM|IN)\s+)?(\"[^\"]+\"|{_WORD})\s*"
                   r"(?:WITH\s*\(\s*TIMEOUT\s*=?\s*'?([^')]*)'?\s*\))?\s*$", re.I)
CLOSE = re.compile(rf"^\s*CLOSE\s+(\"[^\"]+\"|{_WORD}|ALL)\s*$", re.I)
# SHOW words that are dsms statements, not client parameters.
DSMS_SHOW_WORDS = {"streams", "tables", "views", "sinks", "queries", "functions", "progress", "materialized"}
FLUSH = re.compile(r"^\s*FLUSH\s*$", re.I)
CATALOG = re.compile(r"\b(pg_catalog|information_schema|pg_[a-z_]+|version\s*\(|current_(schema|database|user|setting)"
                     r"|session_user|has_\w+_privilege)\b", re.I)
NO_FROM = re.compile(r"^\s*SELECT\b(?!.*\bFROM\b)", re.I | re.S)

_TAGS = {CreateView: "CREATE VIEW", CreateFunction: "CREATE FUNCTION", CreateMaterializedView: "CREATE MATERIALIZED VIEW",
         CreateSink: "CREATE SINK", Show: "SHOW", Describe: "DESCRIBE", Explain: "EXPLAIN", SetOption: "SET",
         ResetOption: "RESET", PauseQuery: "PAUSE QUERY", ResumeQuery: "RESUME QUERY"}


@dataclass
class Outcome:
    """What a statement gives back: a tag, and rows, or a feed of changes to stream."""

    tag: str
    table: pa.Table | None = None
    feed: Feed | None = None
    notices: list[str] = field(default_factory=list)


def unquote(name: str) -> str:
    return name[1:-1].replace('""', '"') if name.startswith('"') else name


def is_catalog_query(text: str) -> bool:
    """A query about the server or its catalog (what psql's \\d and drivers send), or a SELECT of constants."""
    return bool(CATALOG.search(text)) or bool(NO_FROM.match(text))


def is_constants_select(text: str) -> bool:
    """A SELECT without FROM that names no catalog table: the engine answers it when DuckDB cannot."""
    return not CATALOG.search(text) and bool(NO_FROM.match(text))


def is_push_query(stmt) -> bool:
    emit = stmt.query.tree.args.get("emit") if isinstance(stmt, QueryStatement) else None
    return emit is not None and str(emit.args.get("mode", "")).upper() == "CHANGES"


def run_statement(engine, text: str, offset: int, source: str, settings: dict, data_root: str,
                  roots: list[str], feed_factory, private: list[str] = (), python_functions: bool = False) -> Outcome:
    """Parse and run one dsms statement for a client (engine thread).

    ``private``: the server's own files, which no connector path may reach; ``python_functions``: whether
    clients may CREATE FUNCTION (it imports and runs Python code in the server's process).
    """
    stmt = parse_statement(text)
    if isinstance(stmt, CreateFunction) and not python_functions:
        raise SqlError(Diagnostic("CREATE FUNCTION imports and runs Python code in the server's process, which "
                                  "clients may do only when the server allows it", stmt.span, stmt.source,
                                  help="start the server with --allow-python-functions (only for trusted clients)"))
    if isinstance(stmt, QueryStatement):  # read your writes: what was inserted before is processed first
        while engine.step():
            pass
    if isinstance(stmt, (CreateSource, CreateSink)):
        check_paths(stmt, data_root, roots, private)
    if is_push_query(stmt):
        result = engine.execute_in_session(stmt, settings, data_root)
        handle = result.query
        handle.keep_changes_only()
        schema = pa.schema([f for f in handle.schema if f.name != OP])  # the feed's own op column replaces it
        return Outcome("SELECT", feed=feed_factory(engine, handle.name, schema, handle.cancel, snapshot=False),
                       notices=list(result.warnings) + [f"{handle.name} runs this query until the client cancels "
                                                        f"or leaves (SHOW PROGRESS {handle.name})"])
    return _outcome(engine, stmt, engine.execute_in_session(stmt, settings, data_root))


def _outcome(engine, stmt, result) -> Outcome:
    """What a client gets for a statement the engine ran: rows, an INSERT count, or a command tag."""
    if result.kind == "query":  # a SELECT over streams: its answer over what they hold now
        table = _answer_now(engine, result.query)
        return Outcome(f"SELECT {table.num_rows}", table, notices=list(result.warnings))
    if result.kind == "rows":
        return Outcome(f"SELECT {result.table.num_rows}" if isinstance(stmt, QueryStatement) else _tag(stmt),
                       result.table, notices=list(result.warnings))
    if isinstance(stmt, Insert):
        count = re.search(r"Inserted (\d+)", result.message or "")
        # INSERT … SELECT over streams starts a standing query: its id comes as a notice
        return Outcome(f"INSERT 0 {count.group(1) if count else 0}", notices=[] if count else [result.message])
    notices = list(result.warnings)
    if isinstance(stmt, (PauseQuery, ResumeQuery, Drop)) or (result.message or "").endswith(("exists", "nothing to pause",
                                                                                                 "is not paused")):
        notices.append(result.message)
    return Outcome(_tag(stmt), notices=notices)


def _answer_now(engine, handle) -> pa.Table:
    """A query's rows over what its sources hold now; the query is stopped after."""
    try:
        while engine.step():
            pass
        if handle.error is not None:
            raise handle.error
        return handle.snapshot()
    finally:
        handle.cancel()


def _tag(stmt) -> str:
    if isinstance(stmt, Drop):
        return f"DROP {stmt.kind.upper()}"
    if isinstance(stmt, CreateSource):
        return f"CREATE {stmt.kind.upper()}"
    return _TAGS.get(type(stmt), "OK")


def run_subscribe(engine, name: str, snapshot: bool, feed_factory, source: str, offset: int) -> Outcome:
    """SUBSCRIBE TO a materialized view, sink or query: its rows now (as +I), then each change."""
    try:
        query = engine.queries.get(name)
    except SqlError as e:
        at = source.lower().find(name.lower(), offset)
        raise SqlError(Diagnostic(e.diagnostic.message, Span(at, at + len(name)) if at >= 0 else None, source,
                                  help=e.diagnostic.help)) from None
    schema = query.planned.schema.to_arrow()
    return Outcome("SUBSCRIBE", feed=feed_factory(engine, query.id, schema, None, snapshot=snapshot))


def run_flush(engine) -> Outcome:
    """FLUSH: process everything that has arrived, so a read that follows sees it."""
    while engine.step():
        pass
    return Outcome("FLUSH")


class SchemaOnly:
    """What a dry run of a SUBSCRIBE gives: the columns of its feed."""

    def __init__(self, schema: pa.Schema):
        self.schema = pa.schema([pa.field("op", pa.string())] + list(schema))


def result_columns(outcome: Outcome) -> pa.Schema | None:
    if outcome.feed is not None:
        return None if "copy" in outcome.notices else outcome.feed.schema
    return outcome.table.schema if outcome.table is not None else None


def dry_run(engine, text: str, settings: dict) -> Outcome:
    """The columns of a SELECT/SHOW/DESCRIBE/EXPLAIN, found by planning (queries) or running (the rest)."""
    stmt = parse_statement(text)
    if isinstance(stmt, QueryStatement):
        schema = pull_schema(stmt, engine.catalog)
        if schema is not None:
            return Outcome("SELECT", schema.empty_table())
        schema = plan_query(stmt.query, engine.catalog, stmt.source).schema.to_arrow()
        if is_push_query(stmt):
            return Outcome("SELECT", feed=SchemaOnly(schema))
        return Outcome("SELECT", schema.empty_table())
    return Outcome("SELECT", engine.execute_in_session(stmt, dict(settings)).table)


def copy_target(engine, name: str, columns: list[str] | None):
    source = engine.catalog.get(name)
    if not isinstance(source, SourceDef) or not source.descriptor.insertable:
        engine._memory_source(name)  # raises the engine's own error: unknown, or one that takes no inserts
    return source.name, target_columns(source, columns)


def is_dsms_setting(key: str) -> bool:
    return key.lower() in DEFAULT_SETTINGS or "." in key
