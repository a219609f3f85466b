"""Pull queries: a SELECT over materialized views answers once, from their current contents.

A ``SELECT`` whose relations are all materialized views (directly or
through views), and that has no ``EMIT`` clause, is a *pull query*, as in
ksqlDB and RisingWave: it reads what each view holds at that moment, runs
to completion over those rows and returns a table; nothing keeps running.
Anything else is a continuous (push) query; ``SELECT … FROM mv EMIT
CHANGES`` asks for one over a view explicitly: it computes the view's
query afresh, as a new query, and keeps its result up to date.

The query is planned against a copy of the catalog in which each view it
reads is a bounded memory stream holding the view's current rows, and run
by a job of its own, so every SQL feature of a continuous query works the
same way here (filters, aggregates, joins of views, Top-N); being
bounded, a pull query may also end with ORDER BY and LIMIT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.eliminate_ctes import eliminate_ctes
from sqlglot.optimizer.merge_subqueries import merge_subqueries
from sqlglot.optimizer.pushdown_projections import pushdown_projections
from sqlglot.optimizer.qualify import qualify

from .grammar import Diagnostic, Query, QueryStatement, SqlError
from .grammar.stream_syntax import EmitClause
from .planner import Catalog, LoweringRefused, plan_query
from .planner.catalog import MaterializedViewDef, SourceDef, ViewDef
from .planner.logical.nodes import Aggregate
from .planner.lower.scan import FILE, MAX_BEFORE, ORDER_TYPES, ROW
from .planner.lower.window import STREAM_ONLY
from .planner.physical.specs import BATCH
from .planner.timeutil import node_span
from .planner.types import Schema
from .runtime.batch_read import ReadPlan
from .runtime.changelog import OP
from .runtime.duck import Duck, conform
from .runtime.memory import MemoryLog
from .runtime.session import log_reader, run_bounded
from .runtime.udf import install


def relation_names(tree: exp.Expression) -> list[str]:
    """The names of the relations a query reads directly (not its CTEs), in order of appearance."""
    ctes = {c.alias.lower() for c in tree.find_all(exp.CTE)}
    names = []
    for table in tree.find_all(exp.Table):
        if table.name:
            if table.name.lower() not in ctes:
                names.append(table.name)
            continue
        inner = table.this  # TUMBLE(s, ts, …) or LATE(s) in FROM name the relation in their first argument
        args = getattr(inner, "expressions", None) or []
        if args and isinstance(args[0], exp.Column) and not args[0].table:
            names.append(args[0].name)
    return names


def pulled_views(tree: exp.Expression, catalog: Catalog, visited: dict | None = None) -> list[MaterializedViewDef] | None:
    """The materialized views a pull query reads, or None if ``tree`` is a continuous query.

    ``visited``, if given, receives every catalog object the query reads
    through (views and materialized views, by lower-case name): what a
    cached plan of the query depends on.
    """
    if any(True for _ in tree.find_all(EmitClause)):
        return None
    found: dict[str, MaterializedViewDef] = {}
    visited = {} if visited is None else visited

    def visit(node: exp.Expression, depth: int) -> bool:
        names = relation_names(node)
        for name in names:
            obj = catalog.get(name)
            if isinstance(obj, (MaterializedViewDef, ViewDef)):
                visited[obj.name.lower()] = obj
            if isinstance(obj, MaterializedViewDef):
                found[obj.name.lower()] = obj
            elif isinstance(obj, ViewDef) and depth < 32:
                if not visit(obj.query, depth + 1):
                    return False
            else:
                return False
        return bool(names)

    return list(found.values()) if visit(tree, 0) else None


def run_pull(stmt: QueryStatement, catalog: Catalog, views: list[MaterializedViewDef], contents) -> pa.Table:
    """Run a pull query over the views' current rows (``contents(name)`` gives a view's rows).

    Returns the result rows as an Arrow table.
    """
    snapshot = Catalog(objects=dict(catalog.objects), settings=dict(catalog.settings), functions=catalog.functions)
    logs: dict[str, MemoryLog] = {}
    for view in views:
        schema = Schema(tuple(f.plain() for f in view.schema))
        snapshot.objects[view.name.lower()] = SourceDef(
            name=view.name, kind="stream", schema=schema, physical=tuple(schema.names), computed=(),
            watermark=None, primary_key=(), options={"connector": "memory"}, base_dir=None, ddl="")
        rows = contents(view.name)
        log = logs[view.name.lower()] = MemoryLog(rows.schema)
        log.append(rows)
        log.close()
    query, finish = _split_order(stmt.query)
    planned = plan_query(query, snapshot, stmt.source)
    result = run_bounded(planned, lambda op: log_reader(logs[op.source.name.lower()], op.columns))
    if OP in result.column_names:  # the changelog op is the engine's, never a column of the answer
        result = result.drop_columns([OP])
    if not result.num_rows and _global_aggregate(planned.optimized):
        result = _over_nothing(query, catalog, views, stmt.source, result.schema)
    if finish is None:
        return result
    duck = Duck()  # ORDER BY / LIMIT of a pull query: over its finished result
    try:
        return duck.run(finish.sql(dialect="duckdb"), result)
    except duckdb.Error as e:
        raise SqlError(Diagnostic(f"cannot order the result: {str(e).splitlines()[0]}",
                                  node_span(finish.args.get("order") or finish) or stmt.query.span,
                                  stmt.source, help="ORDER BY in a pull query names columns of its result")) from None
    finally:
        duck.close()


def pull_schema(stmt: QueryStatement, catalog: Catalog) -> pa.Schema | None:
    """The columns a pull query answers with (None if ``stmt`` is not a pull query), without running it."""
    views = pulled_views(stmt.query.tree, catalog)
    if views is None:
        return None
    query, _ = _split_order(stmt.query)  # ORDER BY / LIMIT keep the columns
    schema = plan_query(query, _snapshot(catalog, views, _NO_FILE), stmt.source).schema.to_arrow()
    return pa.schema([f for f in schema if f.name != OP])


def _global_aggregate(node) -> bool:
    """Whether the plan aggregates without GROUP BY (its answer over no rows is one row)."""
    if isinstance(node, Aggregate) and not node.keys:
        return True
    return any(_global_aggregate(child) for child in node.inputs)


def _over_nothing(query: Query, catalog: Catalog, views, source, schema: pa.Schema) -> pa.Table:
    """A query's answer over empty views, as a batch query gives it: ``COUNT(*)`` is one row of 0.

    A continuous aggregate without GROUP BY says nothing until a row arrives;
    a pull query answers as SQL over the rows the views hold, so the query's
    DuckDB lowering is run over empty relations (the views stand in as
    sources of the batch route, which are never read).
    """
    try:
        lowered = plan_query(query, _snapshot(catalog, views, _NO_FILE), source).lowered("duckdb")
    except LoweringRefused:
        return schema.empty_table()
    tree = lowered.tree.transform(lambda n: None if isinstance(n, exp.Having) and n.this.meta.get(STREAM_ONLY)
                                  else n)
    with duckdb.connect() as con:
        install(con, set())  # the Python functions the query calls
        for spec in lowered.scans:
            con.register(spec.relation, ReadPlan.of(spec).relation_schema.empty_table())
        table = con.sql(tree.sql(dialect="duckdb")).to_arrow_table()
    if table.num_columns != len(schema):
        return schema.empty_table()
    return conform(table.rename_columns(schema.names), schema)


# How the views of a pull query appear to the batch route when it answers over no rows.
_NO_FILE = {"connector": "file", "path": "-", "format": "parquet"}


def _snapshot(catalog: Catalog, views, options: dict) -> Catalog:
    """The catalog with each view read by a pull query as a bounded stream of its current rows."""
    snapshot = Catalog(objects=dict(catalog.objects), settings=dict(catalog.settings), functions=catalog.functions)
    for view in views:
        schema = Schema(tuple(f.plain() for f in view.schema))
        snapshot.objects[view.name.lower()] = SourceDef(
            name=view.name, kind="stream", schema=schema, physical=tuple(schema.names), computed=(),
            watermark=None, primary_key=(), options=dict(options), base_dir=None, ddl="")
    return snapshot


def _split_order(query: Query) -> tuple[Query, exp.Select | None]:
    """A pull query's top-level ORDER BY / LIMIT / OFFSET, split off to run over its finished result.

    A continuous query has no last row to order or count to; a pull query
    does, so it orders and limits as a batch query would.
    """
    tree = query.tree
    if not any(tree.args.get(k) for k in ("order", "limit", "offset")):
        return query, None
    finish = exp.select("*").from_(BATCH)
    tree = tree.copy()
    for key in ("order", "limit", "offset"):
        part = tree.args.get(key)
        if part is not None:
            finish.set(key, part.pop())
    return Query(query.text, tree, query.span), finish


# -- pull queries compiled once: DuckDB SQL over the views' rows, run on any thread --------------------


@dataclass(frozen=True)
class PullPlan:
    """A pull query lowered once to a DuckDB statement over its views' current rows.

    The statement reads each view as a registered Arrow relation and may
    take parameters (``$1``, … where the query had literals standing for
    them), so one plan answers the same query for any values. Running it
    touches no engine state: a server runs it on a reader thread, over a
    snapshot of the views it holds.
    """

    sql: str
    relations: tuple[tuple[str, str, pa.Schema], ...]  # (relation in sql, view name, the columns it reads)
    schema: pa.Schema  # the answer's columns
    point: "PointRead | None" = None  # the same answer as a filter over one view's Arrow table, if it is one

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(view for _, view, _ in self.relations))

    def run(self, con: duckdb.DuckDBPyConnection, rows: Callable[[str], pa.Table], params: Sequence = (),
            registered: dict | None = None) -> pa.Table:
        """The answer over ``rows(view)`` for each view, on the caller's DuckDB connection.

        ``registered``: what the connection already has registered, by relation name (kept up to date
        here), so a view's rows unchanged since the last run are not registered again.
        """
        registered = {} if registered is None else registered
        for relation, view, columns in self.relations:
            table = rows(view)
            held = registered.get(relation)
            if held is None or held[0] is not table or not held[1].equals(columns):
                con.register(relation, _scan_relation(table, columns))
                registered[relation] = (table, columns)
        table = con.execute(self.sql, list(params)).to_arrow_reader().read_all()
        return pa.Table.from_arrays([c.cast(f.type) if c.type != f.type else c
                                     for c, f in zip(table.columns, self.schema)], schema=self.schema)


def compile_pull(stmt: QueryStatement, catalog: Catalog, views: list[MaterializedViewDef],
                 parameters: Sequence[str] = ()) -> PullPlan | None:
    """Lower a pull query to a ``PullPlan``, or None when the batch route cannot answer it alone.

    ``parameters``: literals in ``stmt`` that stand for statement
    parameters (sentinel values the caller chose); each becomes ``$n``
    (``n`` its place in the sequence, from 1). If planning rewrote one so
    that it no longer appears as written, the answer is None and the
    caller plans the query with its values instead.
    """
    query, finish = _split_order(stmt.query)
    try:
        planned = plan_query(query, _snapshot(catalog, views, _NO_FILE), stmt.source)
        lowered = planned.lowered("duckdb")
    except (LoweringRefused, SqlError):
        return None
    tree = lowered.tree.transform(lambda n: None if isinstance(n, exp.Having) and n.this.meta.get(STREAM_ONLY)
                                  else n)
    if finish is not None:
        tree = finish.with_(BATCH, as_=tree)
    names = {view.name.lower(): view.name for view in views}
    relations = []
    for spec in lowered.scans:
        columns = ReadPlan.of(spec).relation_schema
        view = names.get(spec.source.name.lower())
        known = set(spec.source.schema.names) | set(ORDER_TYPES)
        if view is None or spec.time_column is not None or not set(columns.names) <= known:
            return None
        relations.append((spec.relation, view, columns))
    if parameters:
        tree = _as_parameters(tree, parameters)
        if tree is None:
            return None
    schema = planned.schema.to_arrow()
    schema = pa.schema([f for f in schema if f.name != OP])
    simple = _simplified(tree, relations)
    return PullPlan(simple.sql(dialect="duckdb"), tuple(relations), schema, PointRead.of(simple, relations, schema))


_COMPARE = {exp.EQ: "equal", exp.NEQ: "not_equal", exp.GT: "greater", exp.GTE: "greater_equal", exp.LT: "less",
            exp.LTE: "less_equal"}


@dataclass(frozen=True)
class PointRead:
    """A pull query that only filters one view and picks columns (``SELECT a, b FROM v WHERE k = $1 AND
    …``), answered by ``pyarrow.compute`` over the view's table: no SQL to bind, so a point lookup costs
    a filter. Anything else, or a comparison Arrow cannot make, is DuckDB's (the caller falls back)."""

    view: str
    columns: tuple[str, ...]  # the view's columns the answer takes, in order
    conditions: tuple[tuple[str, str, bool, object], ...]  # (column, compute function, is $n, the value or n)

    @staticmethod
    def of(tree: exp.Expression, relations, schema: pa.Schema) -> "PointRead | None":
        if not _selects_from_one_view(tree, relations):
            return None
        columns = _plain_columns(tree)
        if columns is None or len(columns) != len(schema):
            return None
        conditions = _point_conditions(tree.args.get("where"))
        if conditions is None:
            return None
        return PointRead(relations[0][1], tuple(columns), tuple(conditions))

    def run(self, rows: Callable[[str], pa.Table], params: Sequence, schema: pa.Schema) -> pa.Table:
        """The answer (raises pyarrow's errors for a comparison of types it cannot make)."""
        table = rows(self.view)
        mask = None
        for column, function, is_parameter, value in self.conditions:
            operand = params[value - 1] if is_parameter else value
            test = getattr(pc, function)(table.column(column), pa.scalar(operand))
            mask = test if mask is None else pc.and_kleene(mask, test)
        if mask is not None:
            table = table.filter(mask)
        return pa.Table.from_arrays([table.column(c).cast(f.type) for c, f in zip(self.columns, schema)],
                                    schema=schema)


def _selects_from_one_view(tree: exp.Expression, relations) -> bool:
    """Whether ``tree`` is a bare SELECT … FROM the one view's relation [WHERE …]: any other clause
    (a join, grouping, ordering, a limit, …) needs SQL, so DuckDB answers it."""
    if not isinstance(tree, exp.Select) or len(relations) != 1 or any(
            tree.args.get(k) for k in ("with", "joins", "group", "having", "order", "limit", "offset",
                                       "distinct", "qualify", "windows")):
        return False
    source = tree.args.get("from") or tree.args.get("from_")  # (the key's name in newer sqlglot)
    return source is not None and isinstance(source.this, exp.Table) and source.this.name == relations[0][0]


def _plain_columns(tree: exp.Select) -> list[str] | None:
    """The view columns the SELECT list picks (aliases aside); None if it computes anything."""
    columns = []
    for item in tree.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(inner, exp.Column):
            return None
        columns.append(inner.name)
    return columns


def _point_conditions(where: exp.Where | None) -> list[tuple[str, str, bool, object]] | None:
    """The WHERE clause as ANDed (column, compute function, is $n, the value or n) comparisons; None if a
    part is anything else, so Arrow never answers a filter it would read differently from DuckDB."""
    conditions = []
    for part in (where.this.flatten() if isinstance(where.this, exp.And) else [where.this]) if where else []:
        condition = _point_condition(part)
        if condition is None:
            return None
        conditions.append(condition)
    return conditions


def _point_condition(part: exp.Expression) -> tuple[str, str, bool, object] | None:
    """``column <op> $n`` or ``column <op> literal`` as one condition of a PointRead; None otherwise."""
    function = _COMPARE.get(type(part))
    if function is None or not isinstance(part.this, exp.Column):
        return None
    value = part.expression
    if isinstance(value, exp.Placeholder) and str(value.this).isdigit():
        return part.this.name, function, True, int(value.this)
    if isinstance(value, exp.Literal):
        return part.this.name, function, False, (value.this if value.is_string else
                                                 (int(value.this) if value.this.lstrip("-").isdigit()
                                                  else float(value.this)))
    return None


def _simplified(tree: exp.Expression, relations) -> exp.Expression:
    """The lowered statement with its chain of CTEs merged where sqlglot's optimizer can (a point query
    becomes one SELECT … WHERE), so DuckDB binds less on every run; as lowered if it cannot."""
    schema = {relation: {f.name: "UNKNOWN" for f in columns}  # only the names matter to these rules
              for relation, _, columns in relations}
    try:
        simpler = qualify(tree.copy(), schema=schema, dialect="duckdb", validate_qualify_columns=False)
        return eliminate_ctes(merge_subqueries(pushdown_projections(simpler)))
    except (SqlglotError, KeyError, ValueError):
        return tree


def _scan_relation(table: pa.Table, columns: pa.Schema) -> pa.Table:
    """A view's rows as the batch route's scan relation: its columns, then the source order (one file, the
    rows in order) and no running maximum of event time (a view read by a pull query has no watermark)."""
    n = table.num_rows
    order = {FILE: pa.array(np.zeros(n, np.int32)), ROW: pa.array(np.arange(n, dtype=np.int64)),
             MAX_BEFORE: pa.nulls(n, pa.int64())}
    return pa.Table.from_arrays([order[f.name] if f.name in order else table.column(f.name).cast(f.type)
                                 for f in columns], schema=columns)


def _as_parameters(tree: exp.Expression, parameters: Sequence[str]) -> exp.Expression | None:
    """``tree`` with each literal that is a parameter's sentinel made ``$n``; None if one is missing."""
    where = {text: n for n, text in enumerate(parameters, 1)}
    seen: set[int] = set()

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Literal) and node.sql(dialect="duckdb") in where:
            n = where[node.sql(dialect="duckdb")]
            seen.add(n)
            return exp.Placeholder(this=str(n))
        return node

    tree = tree.transform(swap)
    return tree if len(seen) == len(parameters) else None
