"""The shell connected to a `dsms server`: ``dsms shell --connect postgresql://host:port`` (or ``DSMS_URL``).

:class:`RemoteEngine` stands in for ``dsms.Engine`` in the shell (``app.Repl``): it speaks the
PostgreSQL protocol to the server with psycopg and offers the part of the engine's API the shell
uses, so the prompt, highlighting, completion, meta commands and live results are the shell's own:

* statements are sent as typed, one at a time; rows come back as Arrow tables, notices as warnings,
  errors with the server's position drawn as a caret under the statement;
* completion reads a catalog fetched from the server (``pg_catalog``: each relation, its kind and
  its columns; ``SET``: the settings; ``SHOW QUERIES``: the queries), fetched again after every
  statement that can change it;
* a continuous SELECT (one that reads a stream or table) becomes a live result: it runs on the
  server as ``SELECT … EMIT CHANGES`` on a connection of its own, whose changes a thread applies to
  the result shown above the prompt; Ctrl-C sends the server a cancel request. The prompt stays
  free meanwhile (INSERT on the main connection, watch the result change).

The server steps the queries; the shell only draws. Its ``SET``s are the connection's (the server
keeps them per client) and are replayed on each live result's connection.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
import time
from dataclasses import dataclass, field

import psycopg
import pyarrow as pa
from prompt_toolkit.patch_stdout import patch_stdout

import dsms
from dsms import DsmsError
from dsms.grammar import (
    CreateMaterializedView,
    CreateSink,
    CreateSource,
    CreateView,
    Describe,
    Drop,
    QueryStatement,
    ResetOption,
    SetOption,
    parse_statement,
)
from dsms.pull import relation_names
from dsms.query import Result
from dsms.render import format_table
from dsms.runtime.changelog import OP, OP_NAMES, apply_changes
from dsms.runtime.operators.base import MIN_WATERMARK

from .app import Repl, _history
from .completion import quote_name
from .live import LiveResult

# PostgreSQL type OIDs as Arrow types, for live results built from rows (numeric: as its text).
_ARROW = {16: pa.bool_(), 20: pa.int64(), 21: pa.int16(), 23: pa.int32(), 700: pa.float32(), 701: pa.float64(),
          1082: pa.date32(), 1114: pa.timestamp("us"), 1184: pa.timestamp("us", tz="UTC"), 17: pa.binary()}
_KINDS = {"stream", "table", "view", "materialized view", "sink"}
_CATALOG_SQL = ("SELECT c.relname, d.description, a.attname FROM pg_catalog.pg_class c "
                "JOIN pg_catalog.pg_description d ON d.objoid = c.oid "
                "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid ORDER BY c.relname, a.attnum")


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass
class RemoteObject:
    """A catalog object as the server describes it: what completion and live results need."""

    name: str
    object_kind: str
    schema: list = field(default_factory=list)
    definition: str | None = None  # a view's query

    @property
    def descriptor(self):
        return self  # completion asks descriptor.insertable

    @property
    def insertable(self) -> bool:
        return self.object_kind in ("stream", "table")


@dataclass
class RemoteCatalog:
    objects: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    def get(self, name: str):
        return self.objects.get(name.lower())


class _Scheduler:
    """What the shell reads of the engine's scheduler: query names (completion), failures (none here)."""

    def __init__(self):
        self.jobs: dict[str, object] = {}
        self.failures: list = []


def _arrow(columns: list[str], oids: list[int], rows: list[tuple]) -> pa.Table:
    arrays = []
    for i, oid in enumerate(oids):
        values = [row[i] for row in rows]
        kind = _ARROW.get(oid)
        if kind is None:
            values = [None if v is None else str(v) for v in values]
            kind = pa.string()
        arrays.append(pa.array(values, type=kind))
    return pa.Table.from_arrays(arrays, names=columns) if columns else pa.table({})


def _error(e: psycopg.Error, text: str) -> DsmsError:
    """An error the server sent back, with a caret under the position it gave (as psql draws it)."""
    diag = e.diag
    lines = [f"error: {diag.message_primary or str(e).strip()}"]
    if diag.statement_position:  # psql's LINE n: … and a caret under the position
        at = int(diag.statement_position) - 1
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start:end if end >= 0 else len(text)]
        number = text.count("\n", 0, at) + 1
        prefix = f"LINE {number}: "
        lines += [prefix + line, " " * (len(prefix) + at - start) + "^"]
    if diag.message_hint:
        lines.append(f"help: {diag.message_hint}")
    return DsmsError("\n".join(lines))


class RemoteEngine:
    """The shell's engine when it is connected to a server (see the module docstring)."""

    def __init__(self, url: str, connect_timeout: int = 10):
        self.url = url
        try:
            self.conn = psycopg.connect(url, autocommit=True, connect_timeout=connect_timeout)
        except psycopg.Error as e:
            raise DsmsError(f"cannot connect to the dsms server at {url}: {str(e).strip()}") from None
        self.notices: list[str] = []
        self.conn.add_notice_handler(lambda d: self.notices.append(d.message_primary))
        self.scheduler = _Scheduler()
        self.catalog = RemoteCatalog()
        self.session_sets: list[str] = []
        self.live: dict[str, RemoteQuery] = {}
        self._ids = 0
        self.refresh()

    # -- the engine API the shell uses --------------------------------------------------

    def step(self) -> bool:
        return False  # the server steps the queries

    def execute(self, sql: str) -> Result:
        return self.execute_statement(parse_statement(sql))

    def execute_statement(self, stmt) -> Result:
        text = stmt.text.strip().rstrip(";")
        if isinstance(stmt, Describe):  # \d name builds one whose text is the meta command's
            text = f"DESCRIBE {quote_name(stmt.name.value)}"
        if isinstance(stmt, Drop) and stmt.kind.lower() == "query" and stmt.name.value in self.live:
            self.live.pop(stmt.name.value).cancel()  # a live result of this shell: stop its connection
            self.scheduler.jobs.pop(stmt.name.value, None)
            return Result("message", message=f"Dropped query {stmt.name.value}")
        if isinstance(stmt, QueryStatement) and self._continuous(stmt):
            return self.start_live(text, emit=stmt.query.tree.args.get("emit") is None)
        result = self._run(text)
        if isinstance(stmt, (SetOption, ResetOption)) and result.table is None:
            self.session_sets.append(text)
        if isinstance(stmt, (CreateSource, CreateView, CreateMaterializedView, CreateSink, Drop, SetOption,
                             ResetOption)) or type(stmt).__name__ in ("PauseQuery", "ResumeQuery"):
            self.refresh()
        return result

    def close(self) -> None:
        for query in list(self.live.values()):
            query.cancel()
        self.conn.close()

    # -- talking to the server ----------------------------------------------------------

    def _run(self, text: str) -> Result:
        self.notices.clear()
        try:
            with self.conn.cursor() as cur:
                cur.execute(text)
                warnings = tuple(self.notices)
                if cur.description is None:
                    return Result("message", message=_message(cur.statusmessage or "OK", warnings))
                columns = [d.name for d in cur.description]
                table = _arrow(columns, [d.type_code for d in cur.description], cur.fetchall())
        except psycopg.OperationalError as e:
            raise DsmsError(f"the connection to the dsms server was lost: {str(e).strip()}") from None
        except psycopg.Error as e:
            raise _error(e, text) from None
        return Result("rows", table=table, warnings=warnings)

    def refresh(self) -> None:
        """Fetch the catalog (relations, kinds, columns, view definitions), the settings and the queries."""
        objects: dict[str, RemoteObject] = {}
        with self.conn.cursor() as cur:
            for name, description, column in cur.execute(_CATALOG_SQL).fetchall():
                kind = (description or "").removeprefix("dsms ")
                if kind in _KINDS:
                    objects.setdefault(name.lower(), RemoteObject(name, kind)).schema.append(_Field(column))
            for name, definition in cur.execute("SELECT viewname, definition FROM pg_catalog.pg_views").fetchall():
                if name.lower() in objects:
                    objects[name.lower()].definition = definition
            settings = {key: value for key, value in cur.execute("SET").fetchall()}
            queries = [row[0] for row in cur.execute("SHOW QUERIES").fetchall()]
        self.catalog = RemoteCatalog(objects, settings)
        self.scheduler.jobs = {**{q: None for q in queries}, **{q: None for q in self.live}}

    def _continuous(self, stmt: QueryStatement) -> bool:
        """Whether a SELECT keeps running (it reads a stream or table, through views too) or answers once."""
        tree = stmt.query.tree
        if tree.args.get("emit") is not None:
            return str(tree.args["emit"].args.get("mode", "")).upper() == "CHANGES"
        return self._reads_input(tree, 0)

    def _reads_input(self, tree, depth: int) -> bool:
        for name in relation_names(tree):
            obj = self.catalog.get(name)
            if obj is None or obj.object_kind in ("stream", "table"):
                return True  # unknown names: let the server say what they are
            if obj.object_kind == "view" and obj.definition and depth < 16:
                try:
                    inner = parse_statement(obj.definition)
                except DsmsError:
                    return True
                if isinstance(inner, QueryStatement) and self._reads_input(inner.query.tree, depth + 1):
                    return True
        return False

    def _query_line(self, query_id: str) -> dict | None:
        """A query's line of SHOW QUERIES (for a live result's status), or None if it is gone."""
        try:
            rows = self._run("SHOW QUERIES").table.to_pylist()
        except DsmsError:
            return None
        return next((row for row in rows if row.get("id") == query_id), None)

    def run_text(self, text: str) -> Result:
        """A statement only the server knows (SUBSCRIBE aside), sent as typed."""
        result = self._run(text)
        self.refresh()
        return result

    def start_live(self, text: str, emit: bool) -> Result:
        """Run ``text`` (with ``EMIT CHANGES`` added if ``emit``) as a live result on a connection of its own."""
        self._ids += 1
        name = f"live_{self._ids}"
        query = RemoteQuery(name, self.url, f"{text} EMIT CHANGES" if emit else text,
                            self.session_sets, on_failure=lambda q: self.scheduler.failures.append((q.name, q.job)))
        query.lookup = self._query_line
        query.start()
        self.live[name] = query
        self.scheduler.jobs[name] = None
        return Result("query", query=query)


def _message(status: str, notices: tuple[str, ...]) -> str:
    return "\n".join(notices + (status,)) if notices else status


class _RemoteJob:
    """The job statistics a live result shows: rows received here; the watermark and late events of the
    query on the server (its line of SHOW QUERIES, read at most once a second)."""

    def __init__(self, query: "RemoteQuery"):
        self.query = query
        self._line: dict = {}
        self._read_at = 0.0

    @property
    def error(self) -> BaseException | None:
        return self.query.error

    @property
    def rows_in(self) -> int:
        return self.query.received

    @property
    def late(self) -> dict[str, int]:
        return {"all": int(self._server_line().get("late") or 0)}

    def stats(self):
        watermark = self._server_line().get("watermark") or ""
        try:
            at = dt.datetime.fromisoformat(watermark) - dt.datetime(1970, 1, 1)
            marks = (at // dt.timedelta(microseconds=1),)
        except ValueError:  # '-' before the first watermark, or not known
            marks = (MIN_WATERMARK,)
        return _Stats(open_watermarks=marks, late=self.late)

    def _server_line(self) -> dict:
        now = time.monotonic()
        if self.query.server_id and self.query.lookup is not None and now - self._read_at >= 1.0:
            self._read_at = now
            self._line = self.query.lookup(self.query.server_id) or self._line
        return self._line


@dataclass
class _Stats:
    open_watermarks: tuple
    late: dict


class RemoteQuery:
    """A continuous SELECT running on the server, its changes read on a connection and thread of its own.

    Offers what the shell's live result reads of a ``QueryHandle``: ``snapshot``, ``poll``,
    ``keep_changes_only``, ``done``, ``changelog``, ``job``.
    """

    def __init__(self, name: str, url: str, sql: str, session_sets: list[str], on_failure=None):
        self.name, self.url, self.sql, self.session_sets = name, url, sql, list(session_sets)
        self.on_failure = on_failure  # called (on the reading thread) when the server ends it with an error
        self.lookup = None  # the query's line of SHOW QUERIES by its id on the server (set by the engine)
        self.server_id: str | None = None  # from the server's notice when the query starts
        self.job = _RemoteJob(self)
        self.changelog = "append"
        self.received = 0
        self.error: BaseException | None = None
        self.done = False
        self._lock = threading.Lock()
        self._rows: list[tuple] = []  # received, not yet polled
        self._columns: tuple[list[str], list[int]] = ([], [])
        self._applied: pa.Table | None = None
        self._keep_result = True
        self._conn: psycopg.Connection | None = None
        self._cancelled = False
        self._heard = threading.Event()  # the first row, an error, or the end
        self._started = False
        self._thread = threading.Thread(target=self._read, name=f"dsms-{name}", daemon=True)

    def start(self, wait: float = 1.0) -> None:
        """Open the query's connection and start reading; a statement the server refuses is raised here
        (it answers at once), so the shell shows the error rather than a live result."""
        try:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
            self._conn.add_notice_handler(self._notice)
            for statement in self.session_sets:
                self._conn.execute(statement)
        except psycopg.Error as e:
            raise DsmsError(f"cannot open a connection for the live result: {str(e).strip()}") from None
        self._columns = columns, oids = self._describe()
        self._applied = _arrow(columns[1:], oids[1:], [])  # the result's columns before its first row
        self._thread.start()
        self._heard.wait(wait)
        with self._lock:
            self._started = True  # from now on a failure is reported through on_failure
        if self.error is not None:
            self._thread.join(10)
            self._conn.close()
            raise self.error

    def _notice(self, diag) -> None:
        found = re.match(r"(\S+) runs this query", diag.message_primary or "")
        if found:
            self.server_id = found.group(1)

    def _describe(self) -> tuple[list[str], list[int]]:
        """The columns the query will send (Parse and Describe, nothing run); the server's refusal, raised."""
        pgconn = self._conn.pgconn
        for result in (pgconn.prepare(b"", self.sql.encode()), pgconn.describe_prepared(b"")):
            if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
                error = psycopg.errors.lookup(result.error_field(psycopg.pq.DiagnosticField.SQLSTATE).decode())
                self._conn.close()
                raise _error(error(result.error_message.decode(), info=result), self.sql)
        return ([result.fname(i).decode() for i in range(result.nfields)],
                [result.ftype(i) for i in range(result.nfields)])

    def _read(self) -> None:
        """The reading thread: rows are kept as they come; the shell's poll turns them into Arrow."""
        try:
            for row in self._conn.cursor().stream(self.sql):
                with self._lock:
                    self._rows.append(row)
                self._heard.set()
        except psycopg.errors.QueryCanceled:
            pass
        except psycopg.Error as e:
            if not self._cancelled:
                with self._lock:
                    self.error = _error(e, self.sql)
                    report = self._started
                if report and self.on_failure is not None:
                    self.on_failure(self)
        finally:
            self.done = True
            self._heard.set()

    # -- what the live result reads ------------------------------------------------------

    def poll(self) -> pa.Table:
        """The changes since the last poll, with a leading op column (+I, -U, +U, -D); the result follows them."""
        with self._lock:
            rows, self._rows = self._rows, []
        columns, oids = self._columns
        table = _arrow(["op"] + columns[1:], oids, rows)
        if rows:
            self.received += len(rows)
            codes = pa.array([OP_NAMES.index(op) for op in table.column(0).to_pylist()], pa.int8())
            if any(code in (1, 3) for code in codes.to_pylist()):
                self.changelog = "updating"
            if self._keep_result:
                self._applied = apply_changes(self._applied, [table.drop_columns(["op"]).append_column(OP, codes)])
        return table

    def snapshot(self) -> pa.Table:
        return self._applied if self._applied is not None else pa.table({})

    def keep_changes_only(self) -> None:
        self._keep_result, self._applied = False, None

    def cancel(self) -> None:
        """Stop the query on the server (a cancel request), then close its connection."""
        self._cancelled = True
        if self._conn is not None and not self.done:
            try:
                self._conn.cancel_safe(timeout=10)
            except (psycopg.Error, AttributeError):
                pass
        self._thread.join(10)
        if self._conn is not None:
            self._conn.close()


# Statements only a server knows (the shell's own parser does not): sent as typed.
_SERVER_ONLY = re.compile(r"^\s*(SUBSCRIBE|COPY|FLUSH|(CREATE|ALTER|DROP)\s+(USER|ROLE))\b", re.I)


class RemoteRepl(Repl):
    """The shell over a RemoteEngine: statements only a server knows go to it as typed; ``SUBSCRIBE``
    is a live result like a continuous SELECT."""

    def handle(self, text: str) -> bool:
        match = _SERVER_ONLY.match(text)
        if match is None:
            return super().handle(text)
        self._executing = True
        try:
            statement = text.strip().rstrip(";")
            if match.group(1).upper() == "SUBSCRIBE":
                if self.live is not None:
                    self._end_live()
                self.live = LiveResult(self.engine.start_live(statement, emit=False).query,
                                       self.options["result_mode"])
                self._dirty = True
            else:
                result = self.engine.run_text(statement)
                self.print(result.message if result.table is None else format_table(result.table))
        except DsmsError as e:
            self.error(str(e))
        finally:
            self._executing = False
        return True


def main(url: str) -> int:
    """``dsms shell --connect URL``: the shell on the terminal, over the wire to a dsms server."""
    engine = RemoteEngine(url)
    history, where = _history(None)
    repl = RemoteRepl(engine, history=history)
    repl.print(f"dsms {dsms.__version__} connected to {_redacted(url)}: statements end with ';'. "
               "\\help for help, \\q to quit.")
    if where is None:
        repl.print("warning: history is not kept (the history file cannot be written)", "class:warning")
    try:
        with patch_stdout():
            asyncio.run(repl.run())
    finally:
        engine.close()
    return 0


def _redacted(url: str) -> str:
    """The URL without its password, for the banner."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)
