"""INSERT INTO … VALUES / SELECT: the rows a statement gives, typed for the stream they go into."""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from .grammar import Diagnostic, Insert, Query, SqlError
from .grammar.diagnostics import did_you_mean
from .planner import Catalog, plan_query
from .planner.types import to_sql_type
from .runtime.convert import to_table
from .runtime.session import run_bounded


def insert_rows(stmt: Insert, schema: pa.Schema, catalog: Catalog, open_reader) -> pa.Table:
    """Run the statement's query (to completion: VALUES, or a SELECT over bounded input) into ``schema``."""
    columns = [c.value for c in stmt.columns] or [f.name for f in schema]
    query = _cast_values(stmt.query, [schema.field(_column_index(schema, c, stmt)).type for c in columns])
    planned = plan_query(query, catalog, stmt.source)
    rows = run_bounded(planned, open_reader, changes_applied=False)
    if rows.num_columns != len(columns):
        raise SqlError(Diagnostic(f"INSERT gives {rows.num_columns} values per row, but {len(columns)} columns "
                                  f"are expected ({', '.join(columns)})", stmt.query.span, stmt.source))
    return to_table(rows.rename_columns(columns), schema)


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
