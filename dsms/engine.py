"""The Engine: a catalog, a planner and a runtime behind one object.

Example:
    >>> import dsms
    >>> engine = dsms.Engine()
    >>> _ = engine.execute('''
    ...   CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3),
    ...     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');
    ... ''')
    >>> q = engine.query('''SELECT window_start, ad, COUNT(*) AS n
    ...   FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    ...   GROUP BY window_start, window_end, ad''')
    >>> _ = engine.insert("clicks", [(1, "2024-01-01 12:00:05"), (1, "2024-01-01 12:00:30"),
    ...                              (1, "2024-01-01 12:01:10")])
    >>> engine.run_until_idle()
    >>> q.snapshot().to_pylist()
    [{'window_start': datetime.datetime(2024, 1, 1, 12, 0), 'ad': 1, 'n': 2}]
"""

from __future__ import annotations

import itertools
import os
import threading

import pyarrow as pa

from .describe import check_unread, describe, show_catalog
from .engine_state import EngineState
from .grammar import (
    CreateMaterializedView,
    CreateSink,
    CreateSource,
    CreateView,
    Describe,
    Diagnostic,
    Drop,
    DsmsError,
    Explain,
    Insert,
    PauseQuery,
    QueryStatement,
    ResumeQuery,
    Show,
    SqlError,
    Statement,
    parse_script,
    parse_statement,
)
from .grammar.diagnostics import did_you_mean
from .inserts import as_deleted, as_inserted, insert_rows, memory_source
from .planner import Catalog, PlannedQuery, plan_query
from .planner.analysis.routing import RouteChoice
from .planner.analysis.sink_target import check_sink_target
from .planner.catalog import SourceDef
from .planner.ddl import bind_create_mv, bind_create_sink, bind_create_source, bind_create_view
from .pull import pulled_views, run_pull
from .queries import Queries, RunningQuery, Subscription
from .query import QueryHandle, QueryStatus, Result
from .runtime.convert import to_table
from .runtime.memory import data_schema
from .runtime.routes import engine_names
from .runtime.session import Session
from .script import ScriptProgress
from .state_dir import StateDir


class Engine(EngineState):
    """Declare streams, run continuous queries over them, read their results.

    Args:
        state_dir: where the catalog, memory streams and checkpoints of standing
            queries are kept (None: nothing is saved). An engine created on a
            directory an earlier one used gets its catalog back and its sinks and
            materialized views running from their last checkpoints (docs/state.md).
        clock: the processing-time clock (``dsms.VirtualClock`` in tests).
        base_dir: the folder relative file paths resolve against (default: the current one).
    """

    def __init__(self, state_dir: str | None = None, clock=None, base_dir: str | None = None,
                 batch_rows: int | None = None):
        self.catalog = Catalog()
        self.state_dir = state_dir
        self.base_dir = base_dir
        self.durable = StateDir(state_dir) if state_dir else None
        journal_for = (lambda source, schema: self.durable.journal(source.name)) if self.durable else None
        self.batch_rows = batch_rows  # rows per batch read from files (dsms run --batch-size), restored queries too
        self.session = Session(clock=clock, journal_for=journal_for)
        self.scheduler = self.session.scheduler  # the jobs and the memory streams they share
        if batch_rows:
            self.scheduler.batch_rows = batch_rows
        self._ids = itertools.count(1)
        self.queries = Queries(self)
        self._lock = threading.RLock()  # statements and turns of the jobs do not interleave
        self._replaying: dict | None = None  # the saved object being recreated
        self._in_session = False  # execute_in_session: SET is the client's, not saved
        self.script_tag = None  # tags memory-stream inserts (dsms run --state-dir: the script statement)
        if self.durable is not None:
            try:
                self._restore()
            except BaseException:
                self.durable.close()
                raise

    # -- statements ---------------------------------------------------------------

    def execute(self, sql: str, base_dir: str | None = None) -> Result:
        """Run every statement of ``sql``; returns the result of the last one."""
        result = Result("ok", "OK")
        for stmt in parse_script(sql):
            result = self.execute_statement(stmt, base_dir)
        return result

    def execute_statement(self, stmt: Statement, base_dir: str | None = None, script_tag: int | None = None) -> Result:
        """Run one parsed statement (``script_tag``: the statement's number in a script, kept with what it
        inserts into memory streams, so a script run again on a state directory does not insert twice)."""
        base = base_dir or self.base_dir or os.getcwd()
        handler = getattr(self, f"_do_{type(stmt).__name__}", None)
        if handler is None:
            raise SqlError(Diagnostic(f"{type(stmt).__name__} statements are not supported yet", stmt.span, stmt.source))
        with self._lock:
            self.script_tag = script_tag
            try:
                return handler(stmt, base)
            finally:
                self.script_tag = None

    def execute_in_session(self, stmt: Statement, settings: dict, base_dir: str | None = None) -> Result:
        """Run one statement under a client's own settings, as a server does: a SET changes
        ``settings`` only (not the engine's, and nothing is saved); a standing query created
        here keeps the settings it was created with."""
        with self._lock:
            saved, self.catalog.settings = self.catalog.settings, settings
            self._in_session = True
            try:
                return self.execute_statement(stmt, base_dir)
            finally:
                self.catalog.settings, self._in_session = saved, False

    def query(self, sql: str) -> QueryHandle:
        """Start a continuous query and return its handle.

        Over materialized views too: the handle's result keeps up with them
        (``execute`` answers a SELECT over views once, as a pull query).
        """
        stmt = parse_statement(sql)
        if not isinstance(stmt, QueryStatement):
            raise DsmsError("query() takes a SELECT statement")
        with self._lock:
            return self._start_query(stmt).query

    def plan(self, sql: str | Statement) -> PlannedQuery:
        """Plan a query (SELECT, or the query of CREATE SINK / VIEW / MATERIALIZED VIEW) without running it."""
        stmt = parse_statement(sql) if isinstance(sql, str) else sql
        inner = stmt.statement if isinstance(stmt, Explain) else stmt
        query = getattr(inner, "query", None)
        if query is None:
            raise DsmsError("plan() takes a query or a CREATE SINK / VIEW / MATERIALIZED VIEW statement")
        return plan_query(query, self.catalog, stmt.source)

    def explain(self, sql: str | Statement | PlannedQuery) -> str:
        """What EXPLAIN prints: the route that runs the query and why, then that route's plan.

        On the runtime, the operator DAG (each operator with its changelog
        mode and watermark); on DuckDB or Spark, the lowered statement.
        """
        planned = sql if isinstance(sql, PlannedQuery) else self.plan(sql)
        return self.session.explain(planned, self.catalog.settings)

    def declare(self, sql: str | Statement) -> None:
        """Add a materialized view to the catalog without running its query (``dsms explain`` plans
        the statements after it against it)."""
        stmt = parse_statement(sql) if isinstance(sql, str) else sql
        if not isinstance(stmt, CreateMaterializedView):
            raise DsmsError("declare() takes a CREATE MATERIALIZED VIEW statement")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        self.catalog.add(bind_create_mv(stmt, planned.schema), name=stmt.name, source=stmt.source)

    @staticmethod
    def engine_names() -> tuple[str, ...]:
        """The values of ``SET 'engine'``: auto and each registered route that can be asked for."""
        return engine_names()

    def set(self, key: str, value: str, save: bool = True) -> None:
        """SET ``key`` = ``value`` (``save=False``: for this engine only, not kept in its state directory)."""
        self._set(key, value, None, save)

    def script_progress(self, statements: list[Statement]) -> ScriptProgress:
        """Which statements of a script have taken effect in the state directory (``dsms run``)."""
        return ScriptProgress(self.durable, statements, self.scheduler.memory.values())

    def statuses(self) -> list[QueryStatus]:
        """Each query's id, kind and stats (``dsms run``'s progress line and summary)."""
        return [QueryStatus(q.id, q.kind, q.job.stats()) for q in self.queries.running.values()]

    def subscribe(self, name: str, callback, snapshot: bool = True, format: str = "arrow") -> Subscription:
        """Call ``callback`` with each batch of changes of a sink, materialized view or query.

        Each batch is a table with a leading ``op`` column (+I, -U, +U, -D),
        as pyarrow (``format='arrow'``) or pandas (``'pandas'``). With
        ``snapshot``, the first call brings the rows the view (or memory
        sink) holds now, as +I. Callbacks run on the thread that drives the
        engine (``step``, ``run_until_idle``), after the query's turn.
        Returns the subscription; ``.cancel()`` ends it.
        """
        with self._lock:
            return self.queries.subscribe(name, callback, snapshot, format)

    def checkpoint(self) -> None:
        """Checkpoint every standing query now (needs a state directory; otherwise does nothing)."""
        with self._lock:
            self.queries.checkpoint_all(force=True)

    def route(self, planned: PlannedQuery) -> RouteChoice:
        """The engine that runs ``planned`` under this session's settings, and why (planner/analysis/routing.py)."""
        return self.session.choose(planned, self.catalog.settings)

    def insert(self, name: str, rows, columns: list[str] | None = None) -> int:
        """Append rows to a memory stream, or upsert them into a memory table by its primary key.

        Running queries see them on their next step. A row whose key a
        table already holds replaces that row (an update).
        """
        source = memory_source(self.catalog, name)
        log = self.scheduler.memory_log(source)
        table = to_table(rows, data_schema(log), columns)
        with self._lock:
            log.append(as_inserted(source, table))
        return table.num_rows

    def delete(self, name: str, rows, columns: list[str] | None = None) -> int:
        """Delete rows of a memory table by its primary key.

        ``rows`` are given like ``insert``'s, or as tuples of key values;
        only the key columns matter (and, for a table with a WATERMARK, the
        time column: the time the row stops being valid). Deleting a key
        the table does not hold does nothing.

        Example:
            >>> import dsms
            >>> engine = dsms.Engine()
            >>> _ = engine.execute("CREATE TABLE t (id INT, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) "
            ...                    "WITH (connector = 'memory')")
            >>> q = engine.query("SELECT * FROM t")
            >>> _ = engine.insert("t", [(1, "a"), (2, "b")]); _ = engine.insert("t", [(1, "c")])
            >>> _ = engine.delete("t", [{"id": 2}])
            >>> engine.run_until_idle()
            >>> q.snapshot().to_pylist()
            [{'id': 1, 'v': 'c'}]
        """
        source = memory_source(self.catalog, name)
        log = self.scheduler.memory_log(source)
        changes = as_deleted(source, log, rows, columns)
        with self._lock:
            log.append(changes)
        return changes.num_rows

    def end_input(self, name: str | None = None) -> None:
        """End a memory stream (or all of them): its queries flush every window and finish."""
        if name is not None:
            self.scheduler.memory_log(memory_source(self.catalog, name)).close()
            return
        for obj in self.catalog.of_kind("stream", "table"):
            if isinstance(obj, SourceDef) and obj.descriptor.insertable:
                self.scheduler.memory_log(obj).close()

    def step(self) -> bool:
        """Give every query one turn; True if any made progress.

        A query that fails is marked failed (SHOW QUERIES shows why) and the
        others go on; ``step`` does not raise for it. Subscribers are called
        and due checkpoints taken after the turn.
        """
        with self._lock:
            moved = self.scheduler.step()
            self.queries.after_step()
        return moved

    def flush(self) -> None:
        """Wait until every standing query has processed all input given so far (SQL: ``FLUSH``).

        Unlike :meth:`run_until_idle` it does not raise for a query that failed
        meanwhile (SHOW QUERIES says why); pull queries flush first, so they
        read their writes.

        Example:
            >>> import dsms
            >>> engine = dsms.Engine()
            >>> _ = engine.execute("CREATE STREAM s (x INT) WITH (connector = 'memory');"
            ...                    "CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM s;"
            ...                    "INSERT INTO s VALUES (1), (2);")
            >>> engine.execute("SELECT * FROM n").table.to_pylist()
            [{'n': 2}]
        """
        with self._lock:
            while self.step():
                pass

    def run_until_idle(self) -> None:
        """Process everything available now: all memory inserts, all of every bounded file.

        Raises the error of a query that failed meanwhile, once the others are idle.
        """
        while self.step():
            pass
        self.queries.raise_new_failure()

    def close(self) -> None:
        """Stop every query; with a state directory, checkpoint them first (they come back on reopening)."""
        with self._lock:
            self.queries.close()
            for log in self.scheduler.memory.values():
                if log.journal is not None:
                    log.journal.close()
            if self.durable is not None:
                self.durable.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- statement handlers ---------------------------------------------------------

    def _do_CreateSource(self, stmt: CreateSource, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"{stmt.kind} {stmt.name.value} already exists")
        source = bind_create_source(stmt, base)
        replaced = self.catalog.get(source.name) if stmt.or_replace else None
        if replaced is not None:
            check_unread(self.catalog, replaced, stmt, "replace")
            self.scheduler.drop_source(replaced.name)  # a new stream: what the old one was given goes with it
        self.catalog.add(source, replace=stmt.or_replace, name=stmt.name, source=stmt.source)
        self._save_create(source.kind, source.name, stmt, base)
        return Result("ok", f"Created {source.kind} {source.name}")

    def _do_CreateView(self, stmt: CreateView, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"view {stmt.name.value} already exists")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        replaced = self.catalog.get(stmt.name.value) if stmt.or_replace else None
        if replaced is not None:
            check_unread(self.catalog, replaced, stmt, "replace")
        self.catalog.add(bind_create_view(stmt, planned.schema), replace=stmt.or_replace, name=stmt.name,
                         source=stmt.source)
        self._save_create("view", stmt.name.value, stmt, base)
        return Result("ok", f"Created view {stmt.name.value}")

    def _do_CreateSink(self, stmt: CreateSink, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"sink {stmt.name.value} already exists")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        sink = bind_create_sink(stmt, planned.schema, planned.changelog, base)
        check_sink_target(sink, self.catalog, stmt)
        self.catalog.add(sink, name=stmt.name, source=stmt.source)
        self._start_standing(sink.name, "sink", planned, stmt, base, sink)
        return Result("ok", f"Created sink {sink.name}", warnings=planned.warnings)

    def _do_CreateMaterializedView(self, stmt: CreateMaterializedView, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"materialized view {stmt.name.value} already exists")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        mv = bind_create_mv(stmt, planned.schema)
        self.catalog.add(mv, name=stmt.name, source=stmt.source)
        self._start_standing(mv.name, "materialized view", planned, stmt, base)
        return Result("ok", f"Created materialized view {mv.name}", warnings=planned.warnings)

    def _start_standing(self, name: str, kind: str, planned, stmt: Statement, base: str, sink=None) -> RunningQuery:
        """Start the query of a sink or materialized view (restored from its checkpoint when replaying)."""
        if self._replaying is not None:
            return self.queries.restore(name, kind, planned, sink, self._replaying["uid"])
        try:
            query = self.queries.start(name, kind, planned, sink)
        except BaseException:
            self.catalog.drop(name)
            raise
        if self.durable is not None:
            query.uid = self._save_create(kind, name, stmt, base)
            self.queries.checkpoint(query)  # where it starts: a restart before the next one starts here
        return query

    def _do_QueryStatement(self, stmt: QueryStatement, base: str) -> Result:
        views = pulled_views(stmt.query.tree, self.catalog)
        if views is not None:
            self.flush()  # read your writes: the views have taken in what was inserted before
            table = run_pull(stmt, self.catalog, views, lambda name: self.sink(name).snapshot())
            return Result("rows", table=table)
        return self._start_query(stmt)

    def _start_query(self, stmt: QueryStatement) -> Result:
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        query = self.queries.start(f"query_{next(self._ids)}", "query", planned)
        return Result("query", query=query.handle, warnings=planned.warnings)

    def _do_Insert(self, stmt: Insert, base: str) -> Result:
        source = memory_source(self.catalog, stmt.target.value, stmt)
        log = self.scheduler.memory_log(source)
        table = insert_rows(stmt, data_schema(log), self.catalog, self.scheduler.open_reader)
        log.append(as_inserted(source, table), tag=self.script_tag)
        return Result("ok", f"Inserted {table.num_rows} row{'s' if table.num_rows != 1 else ''} into {source.name}")

    def _do_Flush(self, stmt, base: str) -> Result:
        self.flush()
        return Result("ok", "Flushed")

    def _do_Show(self, stmt: Show, base: str) -> Result:
        if stmt.what == "queries":
            return Result("rows", table=self.queries.show())
        if stmt.what == "progress":
            query = self.queries.get(stmt.name, stmt.source) if stmt.name is not None else None
            return Result("rows", table=self.queries.progress(query))
        return Result("rows", table=show_catalog(self.catalog, stmt))

    def _do_Describe(self, stmt: Describe, base: str) -> Result:
        return Result("rows", table=describe(self.catalog, stmt))

    def _do_Explain(self, stmt: Explain, base: str) -> Result:
        inner = stmt.statement
        query = getattr(inner, "query", None)
        if query is None:
            raise SqlError(Diagnostic("EXPLAIN takes a query or a CREATE SINK / VIEW / MATERIALIZED VIEW",
                                      stmt.span, stmt.source))
        planned = plan_query(query, self.catalog, stmt.source)
        if "lowered" in stmt.options:
            if stmt.target is not None and stmt.target not in engine_names()[1:]:
                raise SqlError(Diagnostic(f"no engine named '{stmt.target}'", stmt.span, stmt.source,
                                          help=did_you_mean(stmt.target, engine_names()[1:])))
            text = self.session.explain_lowered(planned, self.catalog.settings, stmt.target)
        else:
            text = self.session.explain(planned, self.catalog.settings, logical="logical" in stmt.options)
        return Result("rows", message=text, table=pa.table({"plan": text.split("\n")}))

    def _do_Drop(self, stmt: Drop, base: str) -> Result:
        name = stmt.name.value
        if stmt.kind == "query":
            query = self.queries.running.get(name.lower())
            if query is None:
                if stmt.if_exists:
                    return Result("ok", f"query {name} does not exist")
                self.queries.get(stmt.name, stmt.source)
            if query.kind == "query":
                self.queries.drop(query.id)
                return Result("ok", f"Dropped query {query.id}")
            # A sink or materialized view is its query: dropping the query drops the object.
            return self._drop_object(self.catalog.get(query.id), stmt)
        obj = self.catalog.get(name)
        if obj is None or obj.object_kind != stmt.kind:
            if stmt.if_exists:
                return Result("ok", f"{stmt.kind} {name} does not exist")
            self.catalog.require(stmt.name, stmt.source, kinds=(stmt.kind,))
        return self._drop_object(obj, stmt)

    def _drop_object(self, obj, stmt: Drop) -> Result:
        check_unread(self.catalog, obj, stmt, "drop")
        if obj.object_kind in ("stream", "table"):  # a running SELECT was planned with it too
            readers = [q.id for q in self.queries.running.values()
                       if q.kind == "query" and not q.job.done and obj.name.lower() in _scanned(q.planned.optimized)]
            if readers:
                raise SqlError(Diagnostic(
                    f"cannot drop {obj.object_kind} '{obj.name}': " + ", ".join(f"query '{r}'" for r in readers)
                    + (" reads it" if len(readers) == 1 else " read it"), stmt.name.span, stmt.source,
                    help="drop " + ", ".join(f"query {r}" for r in readers) + " first"))
        if obj.object_kind in ("sink", "materialized view"):
            self.queries.drop(obj.name)
        if obj.object_kind in ("stream", "table"):
            self.scheduler.drop_source(obj.name)
        self.catalog.drop(obj.name)
        if self.durable is not None:
            self.durable.record_drop(obj.name)
        return Result("ok", f"Dropped {obj.object_kind} {obj.name}")

    def _do_PauseQuery(self, stmt: PauseQuery, base: str) -> Result:
        query = self.queries.get(stmt.name, stmt.source)
        return Result("ok", self.queries.pause(query))

    def _do_ResumeQuery(self, stmt: ResumeQuery, base: str) -> Result:
        query = self.queries.get(stmt.name, stmt.source)
        return Result("ok", self.queries.resume(query))

    def sink(self, name: str) -> QueryHandle:
        """The results of a memory sink or a materialized view."""
        query = self.queries.running.get(name.lower())
        if query is not None and query.handle is None and query.job.error is not None:
            raise DsmsError(f"{query.kind} '{query.id}' failed: {query.job.error}")
        if query is None or query.handle is None:
            raise DsmsError(f"no sink or materialized view named '{name}' collects results in memory")
        return query.handle


def _scanned(node) -> set[str]:
    """The (lower-case) names of the streams and tables a plan reads."""
    names = {node.source.name.lower()} if hasattr(node, "source") and hasattr(node.source, "kind") else set()
    for child in node.inputs:
        names |= _scanned(child)
    return names
