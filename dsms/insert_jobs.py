"""Continuous INSERT INTO, EXECUTE STATEMENT SET and CREATE TABLE … AS SELECT, as in Flink and ksqlDB.

``INSERT INTO target SELECT …`` over streams is a standing job (a query
``insert_<n>`` in SHOW QUERIES) that keeps writing the query's results
into ``target``:

* a memory stream or table: its log, so every query reading it sees them
  (``runtime/insert_output.py``, exactly once across restarts);
* a table declared with a sink connector (``CREATE TABLE t (…) WITH
  (connector = 'kafka' | 'file' | 'jdbc' | 'print' | …)``) or a sink made
  by CREATE SINK: a writer of that connector, checkpointed as a sink's.

Over bounded sources the job finishes when they end, as Flink's does (on
the DuckDB route it is one batch statement). ``INSERT INTO memory_stream
VALUES (…)`` (a query that reads no source) still inserts its rows at once.

``EXECUTE STATEMENT SET BEGIN INSERT …; INSERT …; END`` runs its inserts as
one job whose plan reads each source once (``planner.plan_statement_set``).
``CREATE TABLE t WITH (…) AS SELECT …`` declares ``t`` with the query's
columns and starts the insert that fills it (its query's id is ``t``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from sqlglot import exp

from .grammar import (
    CreateSink,
    CreateTableAs,
    Diagnostic,
    Insert,
    Name,
    Query,
    SqlError,
    Statement,
    StatementSet,
    parse_statement,
)
from .inserts import as_inserted, insert_rows, memory_source
from .planner import PlannedQuery, plan_query, plan_statement_set
from .planner.catalog import SinkDef, SourceDef
from .planner.ddl import bind_create_sink, bind_create_source
from .planner.explain import explain_physical
from .planner.types import Field, sql_name, to_sql_type
from .query import Result
from .runtime.insert_output import FanOutput, LogOutput, fan_parts
from .runtime.memory import data_schema

if TYPE_CHECKING:
    from .engine import Engine

_FILE = "file"


@dataclass
class InsertPlan:
    """One INSERT, planned: its query (results shaped as the target's columns) and where they go."""

    target: SourceDef | SinkDef
    planned: PlannedQuery
    sink: SinkDef | None  # a connector's writer; None: the target's memory log


class InsertJobs:
    """The statement handlers of continuous inserts, for an engine."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.targets: dict[str, list[str]] = {}  # query id -> the names it writes
        self.ctas_ddl: dict[str, str] = {}  # a CTAS query's id -> its table declared by its columns

    # -- statements ---------------------------------------------------------------------

    def insert(self, stmt: Insert, base: str) -> Result:
        target = self._target(stmt.target, stmt)
        if _is_insertable(target) and isinstance(stmt.query.tree, exp.Values):
            return self._insert_now(stmt, target)  # planned once, with each value cast to its column
        planned = plan_query(stmt.query, self.engine.catalog, stmt.source)
        if _is_insertable(target) and not scanned_sources(planned.optimized):
            return self._insert_now(stmt, target)  # VALUES: the rows go in at once
        plan = self._plan(stmt, target, planned, base)
        qid = self._new_id("insert")
        self._start(qid, [plan], stmt, base, kind="insert")
        return Result("ok", f"Started query {qid}: INSERT INTO {target.name}", warnings=planned.warnings)

    def statement_set(self, stmt: StatementSet, base: str) -> Result:
        plans, earlier = [], []
        for i, ins in enumerate(stmt.inserts, 1):
            plans.append(self._plan_insert(ins, base, earlier))
            earlier.append((f"INSERT {i} of this statement set", scanned_sources(plans[-1].planned.optimized),
                            plans[-1].target.name.lower()))
        qid = self._new_id("statement_set")
        self._start(qid, plans, stmt, base, kind="statement set")
        names = ", ".join(dict.fromkeys(p.target.name for p in plans))
        return Result("ok", f"Started query {qid}: {len(plans)} INSERT{'s' if len(plans) != 1 else ''} into {names}")

    def create_table_as(self, stmt: CreateTableAs, base: str) -> Result:
        catalog = self.engine.catalog
        if stmt.if_not_exists and catalog.get(stmt.name.value) is not None:
            return Result("ok", f"{stmt.kind} {stmt.name.value} already exists")
        table, planned, ddl = self.declare(stmt, base)
        try:
            plan = self._plan(Insert(stmt.span, stmt.source, target=stmt.name, query=stmt.query), table, planned, base)
            self._start(table.name, [plan], stmt, base, kind="insert", save_kind=stmt.kind)
        except BaseException:
            catalog.drop(table.name)
            raise
        self.ctas_ddl[table.name.lower()] = ddl
        return Result("ok", f"Created {table.kind} {table.name} and started query {table.name}: "
                      f"INSERT INTO {table.name}", warnings=planned.warnings)

    def declare(self, stmt: CreateTableAs, base: str) -> tuple[SourceDef, PlannedQuery, str]:
        """Add a CTAS's table to the catalog (its columns are its query's): the table, the planned query
        and the table's declaration by its columns."""
        planned = plan_query(stmt.query, self.engine.catalog, stmt.source)
        ddl = declaration(stmt, planned)
        table = bind_create_source(parse_statement(ddl), base)
        self.engine.catalog.add(table, name=stmt.name, source=stmt.source)
        return table, planned, ddl

    def explain(self, stmt: Statement, base: str) -> str:
        """EXPLAIN of an INSERT or a statement set: the job's operators, and where each root writes."""
        if isinstance(stmt, StatementSet):
            plans = [self._plan_insert(ins, base) for ins in stmt.inserts]
            planned = plan_statement_set([p.planned for p in plans])
            roots = planned.physical.outputs
            lines = ["route: runtime (a statement set runs as one job; each source is read once)",
                     explain_physical(planned.physical)]
            lines += [f"#{root} -> INSERT INTO {p.target.name}" for root, p in zip(roots, plans)]
            return "\n".join(lines)
        plan = self._plan_insert(stmt, base)
        return self.engine.explain(plan.planned) + f"\n-> INSERT INTO {plan.target.name}"

    # -- planning -----------------------------------------------------------------------

    def _plan_insert(self, stmt: Insert, base: str, earlier: list = ()) -> InsertPlan:
        target = self._target(stmt.target, stmt)
        planned = plan_query(stmt.query, self.engine.catalog, stmt.source)
        return self._plan(stmt, target, planned, base, list(earlier))

    def _target(self, name: Name, stmt: Statement) -> SourceDef | SinkDef:
        obj = self.engine.catalog.get(name.value)
        if not isinstance(obj, (SourceDef, SinkDef)):  # unknown, or a view: says which and what there is
            self.engine.catalog.require(name, stmt.source, kinds=("stream", "table", "sink"))
        if isinstance(obj, SinkDef) and obj.descriptor.collects:
            raise _error(f"cannot insert into sink '{obj.name}': it keeps its own query's results in the engine",
                         name, stmt, help="insert into a memory stream, and read it where the results are needed")
        if isinstance(obj, SourceDef) and not obj.descriptor.insertable and not obj.descriptor.sink:
            raise _error(f"cannot insert into {obj.kind} '{obj.name}': connector '{obj.connector}' is not a sink",
                         name, stmt, help="declare the target with a connector that writes (SHOW CONNECTORS)")
        return obj

    def _plan(self, stmt: Insert, target: SourceDef | SinkDef, planned: PlannedQuery, base: str,
              earlier: list = ()) -> InsertPlan:
        catalog = self.engine.catalog
        reads = scanned_sources(planned.optimized)
        if target.name.lower() in reads:
            raise _error(f"INSERT INTO '{target.name}' reads '{target.name}' itself: its rows would feed it "
                         "forever", stmt.target, stmt, help="insert into another stream")
        loop = self._path_from(target.name.lower(), reads, earlier)
        if loop:
            running = [who for who, _ in loop if who.startswith("query")]
            raise _error(f"INSERT INTO '{target.name}' would feed its own input: " + ", ".join(
                f"{who} inserts into '{into}'" for who, into in loop) + ", which this query reads",
                stmt.target, stmt, help=(f"drop {', '.join(running)} first, or " if running else "")
                + "insert into another stream")
        fields = _target_fields(target)
        planned = _shaped(stmt, fields, planned, catalog)
        if _is_insertable(target):
            if target.kind == "stream" and planned.changelog == "updating":
                raise SqlError(Diagnostic(
                    f"stream '{target.name}' is append-only, but this query's result is updating (rows are "
                    "retracted and replaced)", stmt.query.span, stmt.source,
                    help="insert into a memory TABLE with a PRIMARY KEY, or make the query append-only"))
            return InsertPlan(target, planned, None)
        options = dict(target.options) if isinstance(target, SinkDef) else _sink_options(target)
        as_sink = CreateSink(stmt.span, stmt.source, name=Name(target.name, stmt.target.span), options=options,
                             query=stmt.query)
        sink = bind_create_sink(as_sink, planned.schema, planned.changelog, target.base_dir or base)
        self._check_one_writer(sink, target, stmt)
        return InsertPlan(target, planned, sink)

    def _path_from(self, name: str, reads: set[str], earlier: list) -> list[tuple[str, str]]:
        """The inserts through which rows written into ``name`` reach one of ``reads``: running ones, and
        ``earlier`` ones of the same statement set ((who, reads, target) triples). (who, the name it writes)
        pairs, in order; empty: none."""
        paths: dict[str, list[tuple[str, str]]] = {name: []}
        todo = [name]
        while todo:
            here = todo.pop()
            steps = [(f"query '{qid}'", into) for qid in self.readers_of(here)
                     for into in self.targets.get(qid.lower(), ())]
            steps += [(who, into) for who, read, into in earlier if here in read]
            for who, into in steps:
                if into not in paths:
                    paths[into] = paths[here] + [(who, into)]
                    if into in reads:
                        return paths[into]
                    todo.append(into)
        return []

    def _check_one_writer(self, sink: SinkDef, target, stmt: Insert) -> None:
        """A file (or a directory of part files) has one writer, and no source of the catalog reads it."""
        if sink.connector != _FILE:
            return
        path = sink.path
        for obj in self.engine.catalog.of_kind("stream", "table", "sink"):
            if obj is target or getattr(obj, "connector", None) != _FILE or obj.path != path:
                continue
            role = "writes" if isinstance(obj, SinkDef) else "reads"
            raise _error(f"'{target.name}' writes to {path}, which {obj.object_kind} '{obj.name}' {role}",
                         stmt.target, stmt, help="write to another path")
        writers = [qid for qid, names in self.targets.items() if target.name.lower() in names
                   and qid in self.engine.queries.running]
        if isinstance(target, SinkDef):
            writers.append(target.name)
        if writers:
            raise _error(f"'{target.name}' writes to the file {path}, and query '{writers[0]}' already writes it "
                         "(a file has one writer)", stmt.target, stmt,
                         help=f"DROP QUERY {writers[0]} first, or write to another path")

    # -- running ------------------------------------------------------------------------

    def _start(self, qid: str, plans: list[InsertPlan], stmt: Statement, base: str, kind: str,
               save_kind: str | None = None) -> None:
        engine = self.engine
        names = [p.target.name.lower() for p in plans]
        if len(set(names)) != len(names) and any(p.sink is not None and p.sink.connector == _FILE for p in plans):
            raise SqlError(Diagnostic("a statement set writes the same file twice (a file has one writer)",
                                      stmt.span, stmt.source))
        if len(plans) == 1:
            planned, engine_name = plans[0].planned, None
            sink = plans[0].sink
        else:
            planned, engine_name, sink = plan_statement_set([p.planned for p in plans]), "runtime", None

        def open_output(saved):
            outputs = [self._output(qid, i, p, part) for i, (p, part) in
                       enumerate(zip(plans, _parts(saved, len(plans))))]
            return outputs[0] if len(outputs) == 1 else FanOutput(outputs)

        replaying = engine._replaying
        if replaying is not None:
            self.targets[qid.lower()] = names
            engine.queries.restore(qid, kind, planned, sink, replaying["uid"], open_output=open_output,
                                   engine=engine_name)
            return
        # Saved first: a CTAS's memory stream gets its journal (kept under the entry) when its log opens.
        uid = engine._save_create(save_kind or kind, qid, stmt, base)
        try:
            query = engine.queries.start(qid, kind, planned, uid=uid, open_output=open_output, engine=engine_name)
        except BaseException:
            if uid is not None:
                engine.durable.record_drop(qid)
            raise
        self.targets[qid.lower()] = names
        if uid is not None:
            engine.queries.checkpoint(query)  # where it starts: a restart before the next one starts here

    def _output(self, qid: str, index: int, plan: InsertPlan, saved):
        engine = self.engine
        durable = engine.durable is not None
        if plan.sink is not None:
            return engine.session.open_output("insert", plan.planned, plan.sink, saved, durable=durable)
        target = plan.target
        keys = target.primary_key if target.kind == "table" else None
        output = LogOutput(engine.scheduler.memory_log(target), target.name, f"{qid}#{index}", keys)
        if saved is not None:
            output.restore(saved.output)
        return output

    def _insert_now(self, stmt: Insert, target: SourceDef) -> Result:
        source = memory_source(self.engine.catalog, target.name, stmt)
        log = self.engine.scheduler.memory_log(source)
        table = insert_rows(stmt, data_schema(log), self.engine.catalog, self.engine.scheduler.open_reader)
        log.append(as_inserted(source, table), tag=self.engine.script_tag)
        return Result("ok", f"Inserted {table.num_rows} row{'s' if table.num_rows != 1 else ''} into {source.name}")

    def _new_id(self, prefix: str) -> str:
        replaying = self.engine._replaying
        if replaying is not None:
            return replaying["name"]
        taken = set(self.engine.queries.running)
        return next(f"{prefix}_{n}" for n in itertools.count(1) if f"{prefix}_{n}" not in taken)

    # -- what else must know of them ----------------------------------------------------

    def writers_of(self, name: str) -> list[str]:
        """The running inserts that write ``name``."""
        return [qid for qid, names in self.targets.items() if name.lower() in names
                and qid in self.engine.queries.running]

    def check_unwritten(self, obj, stmt) -> None:
        """Refuse to drop what a running insert writes."""
        writers = self.writers_of(obj.name)
        if writers:
            raise _error(f"cannot drop {obj.object_kind} '{obj.name}': query '{writers[0]}' inserts into it",
                         stmt.name, stmt, help=f"DROP QUERY {writers[0]} first")

    def readers_of(self, name: str) -> list[str]:
        """The running inserts whose queries read ``name``."""
        return [q.id for q in self.engine.queries.running.values() if q.id.lower() in self.targets
                and not q.job.done and name.lower() in scanned_sources(q.planned.optimized)]

    def dropped(self, qid: str) -> None:
        """An insert was dropped (DROP QUERY): forget it; a CTAS table stays, declared by its columns."""
        self.targets.pop(qid.lower(), None)
        durable = self.engine.durable
        ddl = self.ctas_ddl.pop(qid.lower(), None)
        if durable is None:
            return
        if ddl is not None:
            durable.record_redeclared(qid, ddl)
        else:
            durable.record_drop(qid)


def scanned_sources(node) -> set[str]:
    """The (lower-case) names of the streams and tables a plan reads."""
    names = {node.source.name.lower()} if hasattr(node, "source") and hasattr(node.source, "kind") else set()
    for child in node.inputs:
        names |= scanned_sources(child)
    return names


def declaration(stmt: CreateTableAs, planned: PlannedQuery) -> str:
    """The CREATE TABLE / STREAM of a CTAS target: the query's columns, the statement's options."""
    columns = ", ".join(f'"{f.name}" {sql_name(f.type)}' for f in planned.schema)
    names = {f.name.lower(): f.name for f in planned.schema}
    for key in stmt.primary_key:
        if key.value.lower() not in names:
            raise SqlError(Diagnostic(f"the primary key column '{key.value}' is not a column of the query",
                                      key.span, stmt.source, help=f"the query's columns: {', '.join(names.values())}"))
    if stmt.primary_key:
        columns += ", PRIMARY KEY (" + ", ".join(f'"{names[k.value.lower()]}"' for k in stmt.primary_key) + \
            ") NOT ENFORCED"
    options = dict(stmt.options)
    options.setdefault("connector", "memory")
    with_ = ", ".join(f"'{k}' = '{str(v).replace(chr(39), chr(39) * 2)}'" for k, v in options.items())
    return f'CREATE {stmt.kind.upper()} "{stmt.name.value}" ({columns}) WITH ({with_})'


def _is_insertable(target) -> bool:
    return isinstance(target, SourceDef) and target.descriptor.insertable


def _target_fields(target: SourceDef | SinkDef) -> list[Field]:
    """The columns an INSERT fills: a stream's or table's physical ones (not computed nor metadata)."""
    if isinstance(target, SinkDef):
        return list(target.schema)
    metadata = {c for c, _ in target.metadata}
    return [target.schema.find(c) for c in target.physical if c not in metadata]


def _sink_options(target: SourceDef) -> dict:
    """A table's options that its connector takes as a sink (the reading ones stay with the table)."""
    allowed = target.descriptor.options_for("sink")
    return {k: v for k, v in target.options.items()
            if k == "connector" or any(o.name == k or (o.is_pattern and o.matches(k)) for o in allowed)}


def _shaped(stmt: Insert, fields: list[Field], planned: PlannedQuery, catalog) -> PlannedQuery:
    """The query's results as the target's columns: by position, or by the INSERT's column list (others
    NULL), each cast to its column's type."""
    names = [f.name for f in fields]
    listed = [c.value for c in stmt.columns] or names
    lowered = [n.lower() for n in names]
    for c in stmt.columns:
        if c.value.lower() not in lowered:
            raise _error(f"unknown column '{c.value}' in INSERT", c, stmt, help=None)
    result = list(planned.schema)
    if len(result) != len(listed):
        raise SqlError(Diagnostic(f"INSERT gives {len(result)} values per row, but {len(listed)} columns are "
                                  f"expected ({', '.join(listed)})", stmt.query.span, stmt.source))
    given = {c.lower(): f for c, f in zip(listed, result)}
    if [f.name for f in result] == names and all(f.type == t.type for f, t in zip(result, fields)):
        return planned
    if len({f.name.lower() for f in result}) != len(result):
        raise SqlError(Diagnostic("the query's columns must have distinct names to be inserted",
                                  stmt.query.span, stmt.source, help="name them with AS"))
    select = []
    for f in fields:
        src = given.get(f.name.lower())
        value: exp.Expression = exp.column(src.name, quoted=True) if src is not None else exp.Null()
        if src is None or src.type != f.type:
            value = exp.Cast(this=value, to=to_sql_type(f.type))
        select.append(exp.alias_(value, f.name, quoted=True))
    inner = exp.Subquery(this=stmt.query.tree.copy(), alias=exp.TableAlias(this=exp.to_identifier("__insert")))
    tree = exp.select(*select).from_(inner)
    return plan_query(Query(stmt.query.text, tree, stmt.query.span), catalog, stmt.source)


def _parts(saved, n: int) -> list:
    """Each output's part of a checkpoint (one output: the checkpoint itself)."""
    if saved is None:
        return [None] * n
    if n == 1:
        return [saved]
    return [_SavedPart(saved, meta, contents) for meta, contents in fan_parts(saved.output, saved.contents, n)]


@dataclass
class _SavedPart:
    """One output's part of a statement set's checkpoint, shaped as a checkpoint (what open_output reads)."""

    whole: object
    output: dict
    contents: pa.Table | None

    @property
    def job(self) -> dict:
        return self.whole.job


def _error(message: str, name, stmt: Statement, help: str | None) -> SqlError:
    return SqlError(Diagnostic(message, getattr(name, "span", None) or stmt.span, stmt.source, help=help))
