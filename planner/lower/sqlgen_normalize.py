"""DuckDB statements for ChangelogNormalize: an upsert stream -> a valid changelog.

A table with a primary key is read as *changes by key*: an upsert (``+I``
or ``+U``: "this is now the row of its key"), a delete (``-D``: "the key is
gone"), and, from Debezium updates, the row before the update (``-U``).
Such a stream is not yet a changelog downstream operators can apply: an
upsert of a known key must retract the old row first, a delete must carry
the full row it removes, and repeats must vanish. The normalize step keeps
the current row of every key (in a DuckDB table) and turns each change
into what it means, as Flink's ChangelogNormalize does::

    input (by arrival)         state before      output
    +I (1, 'a')                -                 +I (1, 'a')
    +I (1, 'b')                (1, 'a')          -U (1, 'a'), +U (1, 'b')
    +I (1, 'b')                (1, 'b')          nothing (unchanged)
    -D (1, NULL)               (1, 'b')          -D (1, 'b')
    -D (2, NULL)               -                 nothing (unknown key)
    -U (1, 'a'), +U (1, 'c')   (1, 'b')          -U (1, 'b'), +U (1, 'c')   (a -U followed
                                                 by an upsert of its key is redundant)

Every change of a batch is handled in arrival order per key, but
vectorized: the row a change replaces is the previous change of its key in
the batch (``LAG`` over the key, ordered by the arrival number ``__seq``
the runtime adds), or the stored row for the first change of a key.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..physical.specs import BATCH, OP
from ..vocabulary import ADDITIONS, ChangeOp, sql_codes
from .sqlgen_group import q, sql_type

SEQ = "__seq"  # the arrival number of each change in its batch, added by the runtime


@dataclass(frozen=True)
class NormalizeSql:
    setup: tuple[str, ...]
    per_batch: tuple[str, ...]  # run in order; the last returns the changes
    state_table: str


def normalize_sql(op_id: int, columns: list[tuple[str, object]], keys: tuple[str, ...]) -> NormalizeSql:
    """Statements for a normalize operator over ``columns`` ((name, arrow type) pairs, no op column)."""
    state, kinds, changes = f"__norm_{op_id}", f"__nk_{op_id}", f"__ne_{op_id}"
    names = [n for n, _ in columns]
    K = [q(k) for k in keys]
    V = [q(n) for n in names if n not in keys]
    C = [q(n) for n in names]
    w = f"(PARTITION BY {', '.join(K)} ORDER BY {SEQ})"

    def key_match(a: str, b: str) -> str:
        return " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM {b}.{k}" for k in K)

    lagged = "".join(f", LAG({v}) OVER {w} AS __p{i}" for i, v in enumerate(V))
    prev = [f"CASE WHEN p.__pseq IS NULL THEN s.{v} ELSE p.__p{i} END AS __q{i}" for i, v in enumerate(V)]
    same = " AND ".join(f"{v} IS NOT DISTINCT FROM __q{i}" for i, v in enumerate(V)) or "TRUE"
    current = ", ".join(C)
    before = ", ".join(k for k in K) + "".join(f", __q{i} AS {v}" for i, v in enumerate(V))

    def part(items: str, op: ChangeOp, sub: int, where: str) -> str:
        return f"SELECT {items}, CAST({op.sql} AS TINYINT) AS {q(OP)}, {SEQ}, {sub} AS __sub FROM __nq WHERE {where}"

    setup = (f"CREATE TABLE IF NOT EXISTS {state} ({', '.join(f'{q(n)} {sql_type(t)}' for n, t in columns)})",)
    per_batch = (
        # __u: 1 upsert, 0 delete, 2 a -U made redundant by the upsert of its key that follows it
        f"CREATE OR REPLACE TEMP TABLE {kinds} AS SELECT * FROM (SELECT *, CASE WHEN {q(OP)} IN {sql_codes(ADDITIONS)} THEN 1 "
        f"WHEN {q(OP)} = {ChangeOp.UPDATE_BEFORE.sql} AND LEAD({q(OP)}) OVER {w} IN {sql_codes(ADDITIONS)} THEN 2 ELSE 0 END AS __u FROM {BATCH}) "
        f"AS b WHERE __u <> 2",
        f"CREATE OR REPLACE TEMP TABLE {changes} AS "
        f"WITH __np AS (SELECT *, LAG({SEQ}) OVER {w} AS __pseq, LAG(__u) OVER {w} AS __pu{lagged} FROM {kinds}), "
        f"__nq AS (SELECT p.*, CASE WHEN p.__pseq IS NULL THEN s.__present IS NOT NULL ELSE p.__pu = 1 END AS __has"
        f"{''.join(', ' + x for x in prev)} FROM __np p "
        f"LEFT JOIN (SELECT *, TRUE AS __present FROM {state}) AS s ON {key_match('p', 's')}) "
        + " UNION ALL ".join([
            part(before, ChangeOp.UPDATE_BEFORE, 0, f"__u = 1 AND __has AND NOT ({same})"),
            part(current, ChangeOp.UPDATE_AFTER, 1, f"__u = 1 AND __has AND NOT ({same})"),
            part(current, ChangeOp.INSERT, 1, "__u = 1 AND NOT __has"),
            part(before, ChangeOp.DELETE, 0, "__u = 0 AND __has"),
        ]),
        f"DELETE FROM {state} USING (SELECT DISTINCT {', '.join(K)} FROM {kinds}) AS d WHERE {key_match(state, 'd')}",
        f"INSERT INTO {state} SELECT {current} FROM (SELECT *, row_number() OVER (PARTITION BY {', '.join(K)} "
        f"ORDER BY {SEQ} DESC) AS __rn FROM {kinds}) AS l WHERE __rn = 1 AND __u = 1",
        f"SELECT {current}, {q(OP)} FROM {changes} ORDER BY {SEQ}, __sub",
    )
    return NormalizeSql(setup, per_batch, state)
