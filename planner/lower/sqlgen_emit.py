"""DuckDB statements that turn "what a window result is now" into changes.

An operator that emits early results or corrections (EMIT CHANGES,
ALLOWED LATENESS, periodic firing) keeps the rows it has emitted in a
DuckDB table. To emit, it registers the current rows of some *scope* (a
set of windows, or of session partitions) as ``__cur`` (rows outside the
scope are ignored) and the scope as ``__scope``, and runs :attr:`EmitSql.diff`; the last statement returns
the changes against what was emitted before for that scope::

    identity in both, values differ    -> -U emitted row, +U current row
    identity only in the current rows  -> +I
    identity only in the emitted rows  -> -D   (a session merged away)
    unchanged                          -> nothing

and the emitted table then holds the current rows for that scope.
``evict`` drops rows of windows that can no longer change (parameter: a
bound in epoch microseconds on ``window_end``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..physical.specs import OP
from ..vocabulary import ChangeOp
from .sqlgen_group import q, sql_type


@dataclass(frozen=True)
class EmitSql:
    setup: str
    diff: tuple[str, ...]  # the last statement returns the changes (with __op)
    evict: str  # one parameter: rows with epoch_us(window_end) below it go
    table: str


def emit_sql(op_id: int, schema: pa.Schema, identity: tuple[str, ...], scope: tuple[str, ...]) -> EmitSql:
    """Statements for an emitted-rows table with ``schema`` (the operator's output, without __op)."""
    table, old, pairs = f"__emitted_{op_id}", f"__emitted_old_{op_id}", f"__emitted_pairs_{op_id}"
    cols = [f.name for f in schema]
    values = [c for c in cols if c not in identity]

    def on(a: str, b: str, names) -> str:
        return " AND ".join(f"{a}.{q(c)} IS NOT DISTINCT FROM {b}.{q(c)}" for c in names) or "TRUE"

    def rows(alias: str, op: ChangeOp, group: int, rank: str = "0", prefix: str = "") -> str:
        items = ", ".join(f"{alias}.{q(prefix + c)} AS {q(c)}" for c in cols)
        return f"{items}, CAST({op.sql} AS TINYINT) AS {q(OP)}, {group} AS __g, {rank} AS __rank"

    changed = " OR ".join(f"o.{q(c)} IS DISTINCT FROM c.{q(c)}" for c in values) or "FALSE"
    paired = ", ".join([f"o.{q(c)} AS {q('__o_' + c)}" for c in cols] + [f"c.{q(c)} AS {q('__n_' + c)}" for c in cols])
    setup = f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(f'{q(f.name)} {sql_type(f.type)}' for f in schema)})"
    cur = f"__emitted_cur_{op_id}"
    diff = (
        f"CREATE OR REPLACE TEMP TABLE {old} AS SELECT e.* FROM {table} e SEMI JOIN __scope s ON {on('e', 's', scope)}",
        f"CREATE OR REPLACE TEMP TABLE {cur} AS SELECT c.* FROM __cur c SEMI JOIN __scope s ON {on('c', 's', scope)}",
        f"CREATE OR REPLACE TEMP TABLE {pairs} AS SELECT row_number() OVER () AS __rank, {paired} "
        f"FROM {old} o JOIN {cur} c ON {on('o', 'c', identity)} WHERE {changed}",
        f"CREATE OR REPLACE TEMP TABLE __emit_changes_{op_id} AS SELECT {', '.join(q(c) for c in cols)}, {q(OP)} FROM ("
        f"SELECT {rows('o', ChangeOp.DELETE, 0)} FROM {old} o ANTI JOIN {cur} c ON {on('o', 'c', identity)} UNION ALL "
        f"SELECT {rows('p', ChangeOp.UPDATE_BEFORE, 1, 'p.__rank * 2', '__o_')} FROM {pairs} p UNION ALL "
        f"SELECT {rows('p', ChangeOp.UPDATE_AFTER, 1, 'p.__rank * 2 + 1', '__n_')} FROM {pairs} p UNION ALL "
        f"SELECT {rows('c', ChangeOp.INSERT, 2)} FROM {cur} c ANTI JOIN {old} o ON {on('c', 'o', identity)}"
        f") AS changes ORDER BY __g, __rank",
        f"DELETE FROM {table} USING __scope s WHERE {on(table, 's', scope)}",
        f"INSERT INTO {table} SELECT {', '.join(q(c) for c in cols)} FROM {cur}",
        f"SELECT * FROM __emit_changes_{op_id}",
    )
    return EmitSql(setup, diff, f"DELETE FROM {table} WHERE epoch_us({q('window_end')}) < ?", table)
