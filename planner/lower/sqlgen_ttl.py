"""DuckDB statements for ``SET 'state.ttl'``: state keyed by the time it was last touched, expired in bulk.

The runtime sets the DuckDB variable :func:`now_variable` to the
processing time (the injected clock) before an operator handles a batch;
the operator's statements stamp what the batch touches with it. Expiry
is one DELETE per state table over the stamped column, run only when the
oldest stamp has passed the TTL (see ``runtime/operators/ttl.py``).

* **Group aggregate**: the state row of a key carries ``__at``, rewritten
  whenever a batch changes the key. An expired key is gone: its next row
  starts a new count (``+I``), as in Flink; its MIN/MAX multisets go too.
* **Top-N and deduplication**: per partition key, as joins: a key table
  holds each partition's last touch (a batch touches the partitions it
  changes; keep-first deduplication, the keys it emits); an expired
  partition's candidates and emitted rows go, so its next row starts it
  afresh (``+I``), as in Flink.
* **Regular join**: rows are expired per join key, both sides at once. A
  key table holds each join key's last touch: a batch touches the keys it
  holds, on whichever side, so a stream event keeps its table row alive
  (it reads it). When a key expires, its rows of both inputs go together,
  so a later row of that key starts from an empty state and the changelog
  stays valid (an outer join never retracts a padded row it did not emit).
  A retraction of a row that has expired is ignored (nothing to retract).

Expiry emits nothing: the rows already emitted stay, as in Flink.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp


def q(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")


def now_variable(op_id: int) -> str:
    return f"__now_{op_id}"


def now(op_id: int) -> str:
    """The processing time of the batch being handled (microseconds), as SQL."""
    return f"getvariable('{now_variable(op_id)}')"


@dataclass(frozen=True)
class TtlSql:
    setup: tuple[str, ...] = ()  # create the key table (joins)
    tables: tuple[str, ...] = ()  # state tables to checkpoint besides the operator's own
    expire: tuple[str, ...] = ()  # drop what was last touched at or before now - ttl
    oldest: str = ""  # the oldest stamp held (NULL: none)


def group_agg_ttl(op_id: int, state: str, keys: tuple[str, ...], logs: tuple[str, ...], ttl_us: int) -> TtlSql:
    """Expire keys of a group aggregate's state table (``__at`` column) and their multiset logs."""
    cut = f"{now(op_id)} - {ttl_us}"
    gone = f"__expired_{op_id}"
    K = [q(k) for k in keys]
    match = " AND ".join(f"m.{k} IS NOT DISTINCT FROM e.{k}" for k in K) or "TRUE"
    expire = [f"CREATE OR REPLACE TEMP TABLE {gone} AS SELECT {', '.join(K) or '1 AS __unit'} FROM {state} "
              f"WHERE __at <= {cut}"] if logs else []
    expire.append(f"DELETE FROM {state} WHERE __at <= {cut}")
    expire += [f"DELETE FROM {log} AS m USING {gone} AS e WHERE {match}" for log in logs]
    return TtlSql(expire=tuple(expire), oldest=f"SELECT MIN(__at) FROM {state}")


def join_ttl(op_id: int, tables: tuple[str, str], left_keys: list[str], right_keys: list[str],
             ttl_us: int) -> tuple[TtlSql, str]:
    """Key-table statements of a regular join; ``left_keys`` / ``right_keys`` are its equi keys rendered
    over the aliases ``l`` and ``r`` (none: the whole state is one key). Also returns the key table."""
    keys = f"__jk_{op_id}"
    left_keys, right_keys = left_keys or ["TRUE"], right_keys or ["TRUE"]
    names = [f"__k{i}" for i in range(len(left_keys))]
    setup = (f"CREATE TABLE IF NOT EXISTS {keys} AS SELECT "
             + ", ".join(f"{e} AS {n}" for e, n in zip(left_keys, names))
             + f", CAST(0 AS BIGINT) AS __at FROM {tables[0]} AS l LIMIT 0",)
    gone = f"__jx_{op_id}"
    expire = [f"CREATE OR REPLACE TEMP TABLE {gone} AS SELECT * FROM {keys} WHERE __at <= {now(op_id)} - {ttl_us}"]
    for table, alias, exprs in ((tables[0], "l", left_keys), (tables[1], "r", right_keys)):
        match = " AND ".join(f"{e} IS NOT DISTINCT FROM e.{n}" for e, n in zip(exprs, names))
        expire.append(f"DELETE FROM {table} AS {alias} USING {gone} AS e WHERE {match}")
    expire.append(f"DELETE FROM {keys} WHERE __at <= {now(op_id)} - {ttl_us}")
    return TtlSql(setup=setup, tables=(keys,), expire=tuple(expire), oldest=f"SELECT MIN(__at) FROM {keys}"), keys


def touch_keys(op_id: int, keys_table: str, batch: str, alias: str, exprs: list[str]) -> tuple[str, ...]:
    """Stamp the join keys a batch (``batch`` aliased ``alias``, keys ``exprs`` over it) holds with now."""
    exprs = exprs or ["TRUE"]
    names = [f"__k{i}" for i in range(len(exprs))]
    distinct = (f"SELECT DISTINCT {', '.join(f'{e} AS {n}' for e, n in zip(exprs, names))} "
                f"FROM {batch} AS {alias}")
    match = " AND ".join(f"t.{n} IS NOT DISTINCT FROM b.{n}" for n in names)
    return (f"DELETE FROM {keys_table} AS t USING ({distinct}) AS b WHERE {match}",
            f"INSERT INTO {keys_table} SELECT *, {now(op_id)} FROM ({distinct}) AS b")


def partition_ttl(op_id: int, key_ddl: list[tuple[str, str]], tables: tuple[str, ...], ttl_us: int) -> TtlSql:
    """A key table for partitions (``key_ddl``: quoted column names and types; none: one partition) and the
    statements that expire partitions from ``tables`` (each holding the partition columns). The expired
    keys are left in ``expired_table(op_id)`` for state the statements do not reach."""
    keys, gone = f"__ttl_{op_id}", expired_table(op_id)
    names = [f"__k{i}" for i in range(max(len(key_ddl), 1))]
    ddl = ", ".join(f"{n} {t}" for n, (_, t) in zip(names, key_ddl)) or "__k0 BOOLEAN"
    cut = f"{now(op_id)} - {ttl_us}"
    expire = [f"CREATE OR REPLACE TEMP TABLE {gone} AS SELECT * FROM {keys} WHERE __at <= {cut}"]
    for table in tables:
        match = " AND ".join(f"t.{c} IS NOT DISTINCT FROM e.{n}" for (c, _), n in zip(key_ddl, names)) or "TRUE"
        expire.append(f"DELETE FROM {table} AS t USING {gone} AS e WHERE {match}")
    expire.append(f"DELETE FROM {keys} WHERE __at <= {cut}")
    return TtlSql(setup=(f"CREATE TABLE IF NOT EXISTS {keys} ({ddl}, __at BIGINT)",), tables=(keys,),
                  expire=tuple(expire), oldest=f"SELECT MIN(__at) FROM {keys}")


def partition_touch(op_id: int, batch: str, partition: list[str]) -> tuple[str, ...]:
    """Stamp the partitions the rows of ``batch`` belong to (``partition``: quoted column names)."""
    return touch_keys(op_id, f"__ttl_{op_id}", batch, "b", [f"b.{c}" for c in partition])


def expired_table(op_id: int) -> str:
    return f"__ttlx_{op_id}"
