"""Running the planner's per-batch SQL with DuckDB over Arrow tables."""

from __future__ import annotations

from contextlib import contextmanager

import duckdb
import pyarrow as pa

from ..planner.physical.specs import BATCH


class Duck:
    """One DuckDB connection, used by one job on one thread."""

    def __init__(self, threads: int | None = None):
        self.con = duckdb.connect()
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.calls = 0

    def run(self, sql: str, table: pa.Table) -> pa.Table:
        """Run ``sql`` with ``table`` visible as the relation ``__input``."""
        return self.sql(sql, **{BATCH: table})

    def sql(self, sql: str, **tables: pa.Table) -> pa.Table:
        """Run ``sql`` with each of ``tables`` visible as a relation of its name; its rows."""
        with registered(self.con, **tables):
            self.calls += 1
            return self.con.sql(sql).to_arrow_table()

    def execute_all(self, statements, table: pa.Table | None = None, params: list | None = None) -> None:
        """Run ``statements`` in order, with ``table`` visible as ``__input``."""
        self.run_all(statements, table, params, result=False)

    def run_all(self, statements, table: pa.Table | None = None, params: list | None = None,
                result: bool = True) -> pa.Table | None:
        """Run ``statements`` in order with ``table`` visible as ``__input``; the last one's rows.

        Operators whose state lives in DuckDB tables update it with a few
        statements per batch and read their output with the last.
        """
        if not statements:
            return None
        with registered(self.con, **({} if table is None else {BATCH: table})):
            body = statements[:-1] if result else statements
            for stmt in body:
                # Fetch what a statement with parameters returns, or the connection stays busy.
                self.con.execute(stmt, params).fetchall() if params else self.con.execute(stmt)
            self.calls += len(statements)
            if not result:
                return None
            last = statements[-1]
            return (self.con.sql(last, params=params) if params else self.con.sql(last)).to_arrow_table()

    def query(self, sql: str) -> pa.Table:
        self.calls += 1
        return self.con.sql(sql).to_arrow_table()

    def close(self) -> None:
        self.con.close()


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, **tables: pa.Table):
    """Within the block, each of ``tables`` is visible to ``con`` as a relation of its name (not copied)."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield con
    finally:
        for name in tables:
            con.unregister(name)


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns, by name, in order and with its types.

    DuckDB may widen a type (SUM of BIGINT is HUGEINT) or give a column
    another name's case; the plan's schema is what downstream relies on.
    """
    if table.schema.equals(schema, check_metadata=False):
        return table
    names = table.column_names
    lowered = {n.lower(): i for i, n in enumerate(names)}
    columns = []
    for field in schema:
        i = lowered[field.name.lower()] if field.name not in names else names.index(field.name)
        column = table.column(i)
        if column.type != field.type:
            column = column.cast(field.type)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)
