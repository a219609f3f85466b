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

import duckdb
import pyarrow as pa
from sqlglot import exp

from .grammar import Diagnostic, Query, QueryStatement, SqlError
from .grammar.stream_syntax import EmitClause
from .planner import Catalog, LoweringRefused, plan_query
from .planner.catalog import MaterializedViewDef, SourceDef, ViewDef
from .planner.logical.nodes import Aggregate
from .planner.lower.window import STREAM_ONLY
from .planner.physical.specs import BATCH
from .planner.timeutil import node_span
from .planner.types import Schema
from .runtime.batch_read import ReadPlan
from .runtime.changelog import OP
from .runtime.duck import Duck, conform
from .runtime.memory import MemoryLog
from .runtime.session import log_reader, run_bounded


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


def pulled_views(tree: exp.Expression, catalog: Catalog) -> list[MaterializedViewDef] | None:
    """The materialized views a pull query reads, or None if ``tree`` is a continuous query."""
    if any(True for _ in tree.find_all(EmitClause)):
        return None
    found: dict[str, MaterializedViewDef] = {}

    def visit(node: exp.Expression, depth: int) -> bool:
        names = relation_names(node)
        for name in names:
            obj = catalog.get(name)
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
    snapshot = Catalog(objects=dict(catalog.objects), settings=dict(catalog.settings))
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
    snapshot = Catalog(objects=dict(catalog.objects), settings=dict(catalog.settings))
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
