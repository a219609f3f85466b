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

import pyarrow as pa

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
    QueryStatement,
    ResetOption,
    SetOption,
    Show,
    SqlError,
    Statement,
    parse_script,
)
from .planner import Catalog, PlannedQuery, explain_logical, explain_physical, plan_query
from .planner.catalog import DEFAULT_SETTINGS, SourceDef
from .planner.ddl import bind_create_mv, bind_create_sink, bind_create_source, bind_create_view
from .planner.functions import SCALAR_FUNCTIONS
from .planner.logical import UPDATING
from .planner.routing import ENGINES, Route, choose_route, parse_size
from .planner.types import sql_name
from .query import QueryHandle, Result
from .runtime.batch_job import BatchJob
from .runtime.convert import to_table
from .runtime.duckdb_route import DuckDBRoute
from .runtime.estimate import estimated_bytes
from .runtime.memory import data_schema, keyed_changes
from .runtime.output import CollectOutput, SinkOutput
from .runtime.scheduler import Scheduler
from .runtime.spark_route import SparkRoute

_SETTING_VALUES = {"engine": ENGINES, "emit": ("final", "changes"),
                   "strict": ("true", "false"), "join.stream_table": ("lookup", "regular")}


class Engine:
    """Declare streams, run continuous queries over them, read their results.

    Args:
        state_dir: where durable state lives (None: in memory).
        clock: the processing-time clock (``dsms.runtime.clock.VirtualClock`` in tests).
        base_dir: the folder relative file paths resolve against (default: the current one).
    """

    def __init__(self, state_dir: str | None = None, clock=None, base_dir: str | None = None):
        self.catalog = Catalog()
        self.state_dir = state_dir
        self.base_dir = base_dir
        self.scheduler = Scheduler(clock=clock)
        self._ids = itertools.count(1)
        self.queries: dict[str, QueryHandle] = {}

    # -- statements ---------------------------------------------------------------

    def execute(self, sql: str, base_dir: str | None = None) -> Result:
        """Run every statement of ``sql``; returns the result of the last one."""
        result = Result("ok", "OK")
        for stmt in parse_script(sql):
            result = self.execute_statement(stmt, base_dir)
        return result

    def execute_statement(self, stmt: Statement, base_dir: str | None = None) -> Result:
        base = base_dir or self.base_dir or os.getcwd()
        handler = getattr(self, f"_do_{type(stmt).__name__}", None)
        if handler is None:
            raise SqlError(Diagnostic(f"{type(stmt).__name__} statements are not supported yet", stmt.span, stmt.source))
        return handler(stmt, base)

    def query(self, sql: str) -> QueryHandle:
        """Start a continuous query and return its handle."""
        result = self.execute(sql)
        if result.query is None:
            raise DsmsError("query() takes a SELECT statement")
        return result.query

    def plan(self, sql: str) -> PlannedQuery:
        """Plan a query (SELECT, or the query of CREATE SINK / VIEW) without running it."""
        from . import plan

        return plan(sql, self.catalog)

    def explain(self, sql: str) -> str:
        return self.plan(sql).explain()

    def explain_planned(self, planned: PlannedQuery, logical: bool = False) -> str:
        """EXPLAIN's text: the planner's warnings, the route and why, then the DAG."""
        dag = explain_logical(planned.optimized) if logical else explain_physical(planned.physical)
        return "\n".join([f"warning: {w}" for w in planned.warnings] + [self.route(planned).describe(), dag])

    def route(self, planned: PlannedQuery) -> Route:
        """The engine that runs ``planned`` under this session's settings, and why (planner/routing.py)."""
        return choose_route(planned.optimized, self.catalog.settings, estimated_bytes)

    def _start(self, name: str, planned: PlannedQuery, output):
        """Start a query on its route: a runtime job, or a batch job run on the next step."""
        route = self.route(planned)
        if route.engine == "runtime":
            return self.scheduler.start(name, planned.physical, output)
        executor = (DuckDBRoute if route.engine == "duckdb" else SparkRoute)(dict(self.catalog.settings))
        job = BatchJob(executor, planned.lowered(route.engine), output, planned.physical.root.schema, route.reason)
        self.scheduler.add(name, job)
        return job

    def insert(self, name: str, rows, columns: list[str] | None = None) -> int:
        """Append rows to a memory stream, or upsert them into a memory table by its primary key.

        Running queries see them on their next step. A row whose key a
        table already holds replaces that row (an update).
        """
        source = self._memory_source(name)
        log = self.scheduler.memory_log(source)
        table = to_table(rows, data_schema(log), columns)
        log.append(keyed_changes(table, source.primary_key, 0, source.name) if source.kind == "table" else table)
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
        source = self._memory_source(name)
        if source.kind != "table":
            raise DsmsError(f"cannot delete from '{source.name}': it is an append-only stream "
                            "(only a TABLE with a PRIMARY KEY takes updates and deletes)")
        log = self.scheduler.memory_log(source)
        if columns is None and isinstance(rows, (list, tuple)) and rows and isinstance(rows[0], (list, tuple)) \
                and len(rows[0]) == len(source.primary_key):
            columns = list(source.primary_key)  # tuples of key values
        table = to_table(rows, data_schema(log), columns)
        if source.watermark is not None and table.column(source.watermark.column).null_count:
            raise DsmsError(f"a delete from '{source.name}' needs its time in '{source.watermark.column}': "
                            "the table has a WATERMARK, so each change says from when it holds")
        log.append(keyed_changes(table, source.primary_key, 3, source.name))
        return table.num_rows

    def end_input(self, name: str | None = None) -> None:
        """End a memory stream (or all of them): its queries flush every window and finish."""
        if name is not None:
            self.scheduler.memory_log(self._memory_source(name)).close()
            return
        for obj in self.catalog.of_kind("stream", "table"):
            if isinstance(obj, SourceDef) and obj.connector == "memory":
                self.scheduler.memory_log(obj).close()

    def step(self) -> bool:
        return self.scheduler.step()

    def run_until_idle(self) -> None:
        """Process everything available now: all memory inserts, all of every bounded file."""
        self.scheduler.run_until_idle()

    def close(self) -> None:
        for name in list(self.scheduler.jobs):
            self.scheduler.stop(name)

    # -- statement handlers ---------------------------------------------------------

    def _do_CreateSource(self, stmt: CreateSource, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"{stmt.kind} {stmt.name.value} already exists")
        source = bind_create_source(stmt, base)
        self.catalog.add(source, replace=stmt.or_replace, name=stmt.name, source=stmt.source)
        return Result("ok", f"Created {source.kind} {source.name}")

    def _do_CreateView(self, stmt: CreateView, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"view {stmt.name.value} already exists")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        self.catalog.add(bind_create_view(stmt, planned.schema), replace=stmt.or_replace, name=stmt.name,
                         source=stmt.source)
        return Result("ok", f"Created view {stmt.name.value}")

    def _do_CreateSink(self, stmt: CreateSink, base: str) -> Result:
        if stmt.if_not_exists and self.catalog.get(stmt.name.value) is not None:
            return Result("ok", f"sink {stmt.name.value} already exists")
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        sink = bind_create_sink(stmt, planned.schema, planned.changelog, base)
        self.catalog.add(sink, name=stmt.name, source=stmt.source)
        schema = planned.physical.root.schema
        updating = planned.changelog == UPDATING
        if sink.options.get("connector", "memory").lower() == "file":
            from .runtime.connectors import open_file_sink

            output = SinkOutput(open_file_sink(sink.options, sink.path, schema, updating))
        else:
            output = CollectOutput(schema, updating)
        job = self._start(sink.name, planned, output)
        self.queries[sink.name.lower()] = QueryHandle(self, sink.name, job, output, planned.changelog,
                                                      planned.warnings) \
            if isinstance(output, CollectOutput) else None
        return Result("ok", f"Created sink {sink.name}", warnings=planned.warnings)

    def _do_CreateMaterializedView(self, stmt: CreateMaterializedView, base: str) -> Result:
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        mv = bind_create_mv(stmt, planned.schema)
        self.catalog.add(mv, name=stmt.name, source=stmt.source)
        output = CollectOutput(planned.physical.root.schema, planned.changelog == UPDATING, keep_changes=False)
        job = self._start(mv.name, planned, output)
        self.queries[mv.name.lower()] = QueryHandle(self, mv.name, job, output, planned.changelog, planned.warnings)
        return Result("ok", f"Created materialized view {mv.name}", warnings=planned.warnings)

    def _do_QueryStatement(self, stmt: QueryStatement, base: str) -> Result:
        planned = plan_query(stmt.query, self.catalog, stmt.source)
        name = f"query-{next(self._ids)}"
        output = CollectOutput(planned.physical.root.schema, planned.changelog == UPDATING)
        job = self._start(name, planned, output)
        handle = QueryHandle(self, name, job, output, planned.changelog, planned.warnings)
        self.queries[name] = handle
        return Result("query", query=handle, warnings=planned.warnings)

    def _do_Insert(self, stmt: Insert, base: str) -> Result:
        source = self._memory_source(stmt.target.value, stmt)
        log = self.scheduler.memory_log(source)
        schema = data_schema(log)
        columns = [c.value for c in stmt.columns] or [f.name for f in schema]
        query = _cast_values(stmt.query, [schema.field(_column_index(schema, c, stmt)).type for c in columns])
        planned = plan_query(query, self.catalog, stmt.source)
        from .runtime.job import Job

        collected = CollectOutput(planned.physical.root.schema, False, keep_changes=False)
        job = Job(planned.physical, collected, _scratch_env(), self.scheduler.open_reader)
        job.run()
        rows = collected.snapshot()
        if rows.num_columns != len(columns):
            raise SqlError(Diagnostic(f"INSERT gives {rows.num_columns} values per row, but {len(columns)} columns "
                                      f"are expected ({', '.join(columns)})", stmt.query.span, stmt.source))
        table = to_table(rows.rename_columns(columns), schema)
        log.append(keyed_changes(table, source.primary_key, 0, source.name) if source.kind == "table" else table)
        return Result("ok", f"Inserted {table.num_rows} row{'s' if table.num_rows != 1 else ''} into {source.name}")

    def _do_Show(self, stmt: Show, base: str) -> Result:
        what = stmt.what
        kinds = {"streams": ("stream",), "tables": ("table",), "views": ("view",), "sinks": ("sink",),
                 "materialized views": ("materialized view",)}
        if what in kinds:
            objs = self.catalog.of_kind(*kinds[what])
            rows = [{"name": o.name, "kind": o.object_kind,
                     "connector": (o.connector if isinstance(o, SourceDef) else o.options.get("connector", "")
                                   if hasattr(o, "options") else ""),
                     "columns": ", ".join(f.name for f in o.schema)} for o in objs]
            return Result("rows", table=_rows_table(rows, ["name", "kind", "connector", "columns"]))
        if what == "functions":
            return Result("rows", table=pa.table({"name": SCALAR_FUNCTIONS}))
        if what == "queries":
            rows = []
            for name, job in self.scheduler.jobs.items():
                rows.append({"id": name, "status": "finished" if job.done else "running",
                             "rows_in": job.rows_in, "rows_out": job.metrics.rows_out,
                             "late": sum(job.late.values()), "state_rows": job.state_rows})
            return Result("rows", table=_rows_table(rows, ["id", "status", "rows_in", "rows_out", "late", "state_rows"]))
        raise SqlError(Diagnostic(f"SHOW {what.upper()} is not supported yet", stmt.span, stmt.source))

    def _do_Describe(self, stmt: Describe, base: str) -> Result:
        obj = self.catalog.require(stmt.name, stmt.source, kinds=("stream", "table", "view", "sink", "materialized view"))
        computed = dict(obj.computed) if isinstance(obj, SourceDef) else {}
        key = set(obj.primary_key) if isinstance(obj, SourceDef) else set()
        rows = []
        for f in obj.schema:
            extra = []
            if f.rowtime and isinstance(obj, SourceDef) and obj.watermark:
                extra.append(f"WATERMARK AS {f.name} - INTERVAL '{obj.watermark.delay_us / 1e6:g}' SECOND")
            elif f.rowtime:
                extra.append("event time")
            if f.name in computed:
                extra.append(f"AS {computed[f.name].sql()}")
            if f.name in key:
                extra.append("PRIMARY KEY")
            rows.append({"column": f.name, "type": sql_name(f.type), "nullable": f.nullable, "extra": "; ".join(extra)})
        return Result("rows", table=_rows_table(rows, ["column", "type", "nullable", "extra"]))

    def _do_Explain(self, stmt: Explain, base: str) -> Result:
        inner = stmt.statement
        query = getattr(inner, "query", None)
        if query is None:
            raise SqlError(Diagnostic("EXPLAIN takes a query or a CREATE SINK / VIEW / MATERIALIZED VIEW",
                                      stmt.span, stmt.source))
        planned = plan_query(query, self.catalog, stmt.source)
        if "lowered" in stmt.options:
            route = self.route(planned)
            target = stmt.target or (route.engine if route.engine != "runtime" else "duckdb")
            text = planned.explain() if target == "runtime" else planned.lowered(target).explain()
        else:
            text = self.explain_planned(planned, logical="logical" in stmt.options)
        return Result("rows", message=text, table=pa.table({"plan": text.split("\n")}))

    def _do_SetOption(self, stmt: SetOption, base: str) -> Result:
        if stmt.key is None:
            rows = [{"key": k, "value": v} for k, v in sorted(self.catalog.settings.items())]
            return Result("rows", table=_rows_table(rows, ["key", "value"]))
        allowed = _SETTING_VALUES.get(stmt.key)
        if allowed and stmt.value.lower() not in allowed:
            raise SqlError(Diagnostic(f"invalid value '{stmt.value}' for '{stmt.key}'", stmt.span, stmt.source,
                                      help="expected one of: " + ", ".join(allowed)))
        if stmt.key == "batch.max_bytes":
            try:
                parse_size(stmt.value)
            except ValueError as e:
                raise SqlError(Diagnostic(str(e), stmt.span, stmt.source)) from None
        if stmt.key == "batch.size":
            if not stmt.value.isdigit() or int(stmt.value) < 1:
                raise SqlError(Diagnostic(f"'batch.size' needs a positive whole number, not '{stmt.value}'",
                                          stmt.span, stmt.source))
            self.scheduler.batch_rows = int(stmt.value)  # for queries started from now on
        self.catalog.settings[stmt.key] = stmt.value
        return Result("ok", f"Set {stmt.key} = {stmt.value}")

    def _do_ResetOption(self, stmt: ResetOption, base: str) -> Result:
        if stmt.key is None:
            self.catalog.settings = dict(DEFAULT_SETTINGS)
        elif stmt.key in DEFAULT_SETTINGS:
            self.catalog.settings[stmt.key] = DEFAULT_SETTINGS[stmt.key]
        else:
            self.catalog.settings.pop(stmt.key, None)
        return Result("ok", "Reset")

    def _do_Drop(self, stmt: Drop, base: str) -> Result:
        name = stmt.name.value
        if stmt.kind == "query":
            if self.scheduler.stop(name) is None and not stmt.if_exists:
                raise SqlError(Diagnostic(f"no running query '{name}'", stmt.name.span, stmt.source))
            self.queries.pop(name.lower(), None)
            return Result("ok", f"Dropped query {name}")
        obj = self.catalog.get(name)
        if obj is None or obj.object_kind != stmt.kind:
            if stmt.if_exists:
                return Result("ok", f"{stmt.kind} {name} does not exist")
            self.catalog.require(stmt.name, stmt.source, kinds=(stmt.kind,))
        if stmt.kind in ("sink", "materialized view"):
            self.scheduler.stop(obj.name)
            self.queries.pop(obj.name.lower(), None)
        if stmt.kind in ("stream", "table"):
            self.scheduler.drop_source(obj.name)
        self.catalog.drop(name)
        return Result("ok", f"Dropped {stmt.kind} {obj.name}")

    # -- helpers --------------------------------------------------------------------

    def _memory_source(self, name: str, stmt: Statement | None = None) -> SourceDef:
        obj = self.catalog.get(name)
        if not isinstance(obj, SourceDef):
            from .grammar import Name, Span

            span = stmt.target.span if isinstance(stmt, Insert) else None
            self.catalog.require(Name(name, span or Span(0, 0)), stmt.source if stmt else None, kinds=("stream", "table"))
        if obj.connector != "memory":
            raise DsmsError(f"cannot insert into '{obj.name}': only streams and tables with connector = 'memory' take inserts "
                            f"(it reads {obj.connector})")
        return obj

    def sink(self, name: str) -> QueryHandle:
        """The results of a memory sink or a materialized view."""
        handle = self.queries.get(name.lower())
        if handle is None:
            raise DsmsError(f"no sink or materialized view named '{name}' collects results in memory")
        return handle


def _column_index(schema: pa.Schema, name: str, stmt: Insert) -> int:
    lowered = [n.lower() for n in schema.names]
    if name.lower() not in lowered:
        from .grammar.diagnostics import did_you_mean

        span = next((c.span for c in stmt.columns if c.value == name), stmt.span)
        raise SqlError(Diagnostic(f"unknown column '{name}' in INSERT", span, stmt.source,
                                  help=did_you_mean(name, schema.names)))
    return lowered.index(name.lower())


def _cast_values(query, types: list[pa.DataType]):
    """INSERT ... VALUES: each value is cast to its target column's type, as in SQL."""
    from sqlglot import exp

    from .grammar import Query
    from .planner.types import to_sql_type

    tree = query.tree
    if not isinstance(tree, exp.Values):
        return query
    tree = tree.copy()
    for row in tree.expressions:
        values = row.expressions if isinstance(row, exp.Tuple) else [row]
        if len(values) != len(types):
            return query  # the arity error is reported with the statement's span below
        for i, (v, t) in enumerate(zip(values, types)):
            cast = exp.Cast(this=v.copy(), to=to_sql_type(t))
            if isinstance(row, exp.Tuple):
                row.expressions[i] = cast
    return Query(query.text, tree, query.span)


def _scratch_env():
    from .runtime.duck import Duck
    from .runtime.operators.base import Env

    return Env(duck=Duck())


def _rows_table(rows: list[dict], columns: list[str]) -> pa.Table:
    if not rows:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    return pa.Table.from_pylist(rows).select(columns)
