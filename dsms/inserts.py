"""Rows into memory streams and tables: INSERT INTO … VALUES / SELECT, and ``Engine.insert`` / ``delete``.

A memory stream's log takes the rows as they are; a memory table's log
takes changes by primary key (an insert upserts, a delete retracts).
"""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
from sqlglot import exp

from .grammar import Diagnostic, DsmsError, Insert, Name, Query, Span, SqlError, Statement
from .grammar.diagnostics import did_you_mean
from .planner import Catalog, plan_query
from .planner.catalog import SourceDef
from .planner.literal_cells import LiteralColumn, literal_columns, literal_rows_sql
from .planner.types import to_sql_type
from .planner.vocabulary import ChangeOp
from .runtime.convert import to_table
from .runtime.duck import Duck
from .runtime.errors import EvaluationError
from .runtime.memory import data_schema, keyed_changes
from .runtime.session import run_bounded


def insert_rows(stmt: Insert, schema: pa.Schema, catalog: Catalog, open_reader) -> pa.Table:
    """Run the statement's query (to completion: VALUES, or a SELECT over bounded input) into ``schema``."""
    columns = [c.value for c in stmt.columns] or [f.name for f in schema]
    types = [schema.field(_column_index(schema, c, stmt)).type for c in columns]
    try:
        literal = literal_columns(stmt.query.tree, [to_sql_type(t) for t in types]) \
            if isinstance(stmt.query.tree, exp.Values) else None
        if literal is not None:  # one statement for the whole list, not a plan per cell
            rows = _literal_rows(literal, types)
        else:
            rows = run_bounded(plan_query(_cast_values(stmt.query, types), catalog, stmt.source), open_reader,
                               changes_applied=False)
    except DsmsError as e:
        if isinstance(e, SqlError):
            raise
        # e.g. a value that does not fit its column: point at the statement's values
        raise SqlError(Diagnostic(f"cannot insert these rows: {e}", stmt.query.span, stmt.source)) from None
    if rows.num_columns != len(columns):
        raise SqlError(Diagnostic(f"INSERT gives {rows.num_columns} values per row, but {len(columns)} columns "
                                  f"are expected ({', '.join(columns)})", stmt.query.span, stmt.source))
    return to_table(rows.rename_columns(columns), schema)


_casts = threading.local()  # one DuckDB connection per thread casts VALUES lists (connecting costs ~30 ms)


def _literal_rows(columns: list[LiteralColumn], types: list[pa.DataType]) -> pa.Table:
    texts = pa.table({f"c{i}": pa.array(c.texts, pa.string()) for i, c in enumerate(columns)})
    if getattr(_casts, "duck", None) is None:
        _casts.duck = Duck(threads=1)
    try:
        return _casts.duck.run(literal_rows_sql(columns, types), texts)
    except duckdb.Error as e:
        raise EvaluationError("VALUES", e) from None


def memory_source(catalog: Catalog, name: str, stmt: Statement | None = None) -> SourceDef:
    """The memory stream or table ``name`` (what takes inserts)."""
    obj = catalog.get(name)
    if not isinstance(obj, SourceDef):
        span = stmt.target.span if isinstance(stmt, Insert) else None
        catalog.require(Name(name, span or Span(0, 0)), stmt.source if stmt else None, kinds=("stream", "table"))
    if not obj.descriptor.insertable:
        raise DsmsError(f"cannot insert into '{obj.name}': only streams and tables with connector = 'memory' take "
                        f"inserts (it reads {obj.connector})")
    return obj


def as_inserted(source: SourceDef, table: pa.Table) -> pa.Table:
    """What a memory log takes for ``table``: its rows (a stream), or upserts by key (a table)."""
    return keyed_changes(table, source.primary_key, ChangeOp.INSERT, source.name) if source.kind == "table" else table


def as_deleted(source: SourceDef, log, rows, columns: list[str] | None) -> pa.Table:
    """The deletes of ``rows`` (given like inserts, or as tuples of key values) from the memory table ``source``."""
    if source.kind != "table":
        raise DsmsError(f"cannot delete from '{source.name}': it is an append-only stream "
                        "(only a TABLE with a PRIMARY KEY takes updates and deletes)")
    if columns is None and isinstance(rows, (list, tuple)) and rows and isinstance(rows[0], (list, tuple)) \
            and len(rows[0]) == len(source.primary_key):
        columns = list(source.primary_key)  # tuples of key values
    table = to_table(rows, data_schema(log), columns)
    if source.watermark is not None and table.column(source.watermark.column).null_count:
        raise DsmsError(f"a delete from '{source.name}' needs its time in '{source.watermark.column}': "
                        "the table has a WATERMARK, so each change says from when it holds")
    return keyed_changes(table, source.primary_key, ChangeOp.DELETE, source.name)


def _column_index(schema: pa.Schema, name: str, stmt: Insert) -> int:
    lowered = [n.lower() for n in schema.names]
    if name.lower() not in lowered:
        span = next((c.span for c in stmt.columns if c.value == name), stmt.span)
        raise SqlError(Diagnostic(f"unknown column '{name}' in INSERT", span, stmt.source,
                                  help=did_you_mean(name, schema.names)))
    return lowered.index(name.lower())


def _cast_values(query, types: list[pa.DataType]):
    """INSERT ... VALUES: each value is cast to its target column's type, as in SQL."""
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
