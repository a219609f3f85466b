"""DuckDB SQL for Top-N and deduplication.

Rows are ranked by the ORDER BY of ``ROW_NUMBER()``, with NULLs smallest
(first ascending, last descending, as in Flink); ties are broken by the
other columns, ascending, so the chosen rows never depend on arrival
order or batching. The runtime registers its inputs under the names each
statement reads.

- window Top-N: ``rank`` over ``__ready`` (the rows of closed windows);
- global Top-N: ``__input`` (a batch, with ``__op`` when updating) is
  folded into a multiset of candidate rows per partition
  (``__topn_rows_<id>``); the partitions it touches are re-ranked and
  compared with what was emitted. Over an append-only input a row that
  falls out of the top can never come back, so only the top rows are kept;
- first row per key: ``first`` keeps one candidate per key until the
  watermark passes it (``__pending``, ``__seen``, ``__rows``);
- last row per key: ``last`` picks each key's latest row of a batch that is
  not older than the one emitted (``__rows``, the emitted table).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..physical.specs import OP
from ..vocabulary import RETRACTIONS, ChangeOp, sql_codes
from .sqlgen_group import q, sql_type

SEQ = "__seq"
RANK = "__rn"


@dataclass(frozen=True)
class TopNSql:
    rank: str = ""  # window: the ranked rows of __ready
    setup: tuple[str, ...] = ()
    per_batch: tuple[str, ...] = ()  # global: run in order; leaves __top_<id> and __touched_<id>
    multiset_diff: tuple[str, ...] = ()  # global without a rank column: the last returns the changes
    first: str = ""  # dedup first: the new candidates
    last: str = ""  # dedup last: the rows that replace the emitted ones
    tables: tuple[str, ...] = ()


def order_clause(order: tuple[tuple[str, bool], ...], columns: list[str]) -> str:
    keys = [f"{q(c)} {'DESC NULLS LAST' if desc else 'ASC NULLS FIRST'}" for c, desc in order]
    ordered = {c for c, _ in order}
    keys += [f"{q(c)} ASC NULLS FIRST" for c in columns if c not in ordered]
    return ", ".join(keys)


def _on(a: str, b: str, names) -> str:
    return " AND ".join(f"{a}.{q(c)} IS NOT DISTINCT FROM {b}.{q(c)}" for c in names) or "TRUE"


def window_topn_sql(columns: list[str], partition: tuple[str, ...], order, limit: int, window_end: str) -> TopNSql:
    P = ", ".join(q(p) for p in partition)
    cols = ", ".join(q(c) for c in columns)
    rank = (f"SELECT {cols}, {RANK} FROM (SELECT *, row_number() OVER (PARTITION BY {P} ORDER BY "
            f"{order_clause(order, columns)}) AS {RANK} FROM __ready) AS r WHERE {RANK} <= {limit} "
            f"ORDER BY {q(window_end)}, {P}, {RANK}")
    return TopNSql(rank=rank)


def global_topn_sql(op_id: int, schema: pa.Schema, partition: tuple[str, ...], order, limit: int,
                    updating_input: bool, input_sql: str | None) -> TopNSql:
    """``schema``: the input columns kept (without __op)."""
    columns = [f.name for f in schema]
    cols = ", ".join(q(c) for c in columns)
    rows_t, d, t, m, top, out = (f"__topn_rows_{op_id}", f"__topn_d_{op_id}", f"__touched_{op_id}",
                                 f"__topn_m_{op_id}", f"__top_{op_id}", f"__topn_out_{op_id}")
    P = [q(p) for p in partition]
    sign = f"CASE WHEN {q(OP)} IN {sql_codes(RETRACTIONS)} THEN -1 ELSE 1 END" if updating_input else "1"
    source = f"({input_sql})" if input_sql else "__input"
    ddl = ", ".join(f"{q(f.name)} {sql_type(f.type)}" for f in schema)
    setup = (f"CREATE TABLE IF NOT EXISTS {rows_t} ({ddl}, __n BIGINT)",
             f"CREATE TABLE IF NOT EXISTS {out} ({ddl})")
    touched = f"SELECT DISTINCT {', '.join(P)} FROM {d}" if P else f"SELECT 1 AS __unit FROM {d} LIMIT 1"
    part = f"PARTITION BY {', '.join(P)} " if P else ""
    per_batch = (
        f"CREATE OR REPLACE TEMP TABLE {d} AS SELECT {cols}, CAST(SUM({sign}) AS BIGINT) AS __n FROM {source} AS b "
        f"GROUP BY ALL",
        f"CREATE OR REPLACE TEMP TABLE {t} AS {touched}",
        f"CREATE OR REPLACE TEMP TABLE {m} AS SELECT {cols}, CAST(SUM(__n) AS BIGINT) AS __n FROM ("
        f"SELECT r.* FROM {rows_t} r SEMI JOIN {t} t ON {_on('r', 't', partition)} UNION ALL "
        f"SELECT * FROM {d}) AS u GROUP BY ALL HAVING SUM(__n) > 0",
        f"DELETE FROM {rows_t} USING {t} t WHERE {_on(rows_t, 't', partition)}",
        f"CREATE OR REPLACE TEMP TABLE {top} AS SELECT {cols}, {RANK} FROM (SELECT *, row_number() OVER ({part}"
        f"ORDER BY {order_clause(order, columns)}) AS {RANK} FROM (SELECT {cols} FROM (SELECT *, "
        f"unnest(range(__n)) FROM {m}) AS x) AS e) AS r WHERE {RANK} <= {limit}",
        # Over an append-only input a row below the top never returns: keep the top only.
        f"INSERT INTO {rows_t} SELECT {cols}, COUNT(*) FROM {top} GROUP BY ALL" if not updating_input
        else f"INSERT INTO {rows_t} SELECT * FROM {m}",
    )
    multiset = (
        f"CREATE OR REPLACE TEMP TABLE __topn_changes_{op_id} AS SELECT {cols}, "
        f"CAST(CASE WHEN __d > 0 THEN {ChangeOp.INSERT.sql} ELSE {ChangeOp.DELETE.sql} END AS TINYINT) AS {q(OP)} FROM ("
        f"SELECT {cols}, __d, unnest(range(abs(__d))) FROM (SELECT {cols}, CAST(SUM(__s) AS BIGINT) AS __d FROM ("
        f"SELECT {cols}, 1 AS __s FROM {top} UNION ALL "
        f"SELECT o.*, -1 AS __s FROM {out} o SEMI JOIN {t} t ON {_on('o', 't', partition)}) AS u "
        f"GROUP BY ALL HAVING SUM(__s) <> 0) AS g) AS x ORDER BY {q(OP)} DESC",
        f"DELETE FROM {out} USING {t} t WHERE {_on(out, 't', partition)}",
        f"INSERT INTO {out} SELECT {cols} FROM {top}",
        f"SELECT * FROM __topn_changes_{op_id}",
    )
    return TopNSql(setup=setup, per_batch=per_batch, multiset_diff=multiset, tables=(rows_t, out))


def dedup_sql(columns: list[str], partition: tuple[str, ...], time_col: str, emitted: str) -> TopNSql:
    """Deduplication: ``first`` and ``last`` (see the module docstring)."""
    cols = ", ".join(q(c) for c in [*columns, SEQ])
    P = ", ".join(q(p) for p in partition)
    part = f"PARTITION BY {P} " if P else ""
    T = q(time_col)
    first = (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({part}ORDER BY {T}, {SEQ}) AS __r FROM ("
             f"SELECT {cols} FROM __pending UNION ALL "
             f"SELECT r.* FROM __rows r ANTI JOIN __seen s ON {_on('r', 's', partition)}) AS u) AS c WHERE __r = 1")
    last = (f"SELECT c.* FROM (SELECT {', '.join(q(c) for c in columns)} FROM (SELECT *, row_number() OVER "
            f"({part}ORDER BY {T} DESC, {SEQ} DESC) AS __r FROM __rows) AS r WHERE __r = 1) AS c "
            f"LEFT JOIN {emitted} e ON {_on('c', 'e', partition)} WHERE e.{T} IS NULL OR c.{T} >= e.{T}")
    return TopNSql(first=first, last=last)
