"""The rows an operator has emitted, kept to emit changes against them.

Used by operators whose results change after they were first emitted
(EMIT CHANGES, ALLOWED LATENESS, periodic firing). The planner writes
the statements (planner/lower/sqlgen_emit.py); this class runs them in the
job's DuckDB connection and registers the table with the state store.

Input -> output: ``diff(current rows of a scope, the scope)`` -> changes::

    emitted for window w: (w, a, 3)      current: (w, a, 5), (w, b, 1)
    changes:  -U (w, a, 3)   +U (w, a, 5)   +I (w, b, 1)
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.lower.sqlgen_emit import EmitSql
from ..duck import conform, registered
from .base import Env

_UNIT_SCOPE = pa.table({"__unit": pa.array([1], pa.int8())})


class EmitTable:
    def __init__(self, sql: EmitSql, env: Env, op_id: int, schema: pa.Schema):
        self.sql = sql
        self.con = env.duck.con
        self.con.execute(sql.setup)
        env.state.duck_tables(op_id, (sql.table,), env.duck)
        self.schema = schema  # the changes' schema (with __op)

    def diff(self, current: pa.Table, scope: pa.Table | None) -> pa.Table:
        """Changes that turn what was emitted for ``scope`` into ``current``; ``scope`` None: no scope columns."""
        scope = scope if scope is not None and scope.num_columns else _UNIT_SCOPE
        with registered(self.con, __cur=current, __scope=scope):
            for stmt in self.sql.diff[:-1]:
                self.con.execute(stmt)
            out = self.con.sql(self.sql.diff[-1]).to_arrow_table()
        return conform(out, self.schema)

    def evict(self, below_us: int) -> None:
        """Forget rows of windows that ended before ``below_us``."""
        self.con.execute(self.sql.evict, [below_us])
