"""Shared by the INSERT INTO and CREATE TABLE … AS SELECT tests: input clicks, an engine, a DuckDB oracle."""

from __future__ import annotations

import random

import duckdb

import dsms

BASE_TS = "2024-05-01 09:00:{:02d}"


def clicks(n: int, seed: int) -> list[dict]:
    """Clicks of a few ads over one minute, slightly out of order."""
    rng = random.Random(seed)
    rows = [{"ad": rng.randrange(4), "cost": rng.randrange(1, 100), "ts": BASE_TS.format(min(59, i * 60 // n))}
            for i in range(n)]
    return rows


def memory_engine(**kw) -> dsms.Engine:
    engine = dsms.Engine(**kw)
    engine.execute("""
        CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3),
          WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');
        CREATE STREAM expensive (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');""")
    return engine


def oracle(rows: list[dict], sql: str) -> list[tuple]:
    """``sql`` over ``rows`` as the table ``clicks``, in DuckDB (sorted rows)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE clicks (ad INT, cost BIGINT, ts TIMESTAMP)")
    if rows:
        con.executemany("INSERT INTO clicks VALUES (?, ?, ?)", [(r["ad"], r["cost"], r["ts"]) for r in rows])
    return sorted(con.execute(sql).fetchall())


def rows_of(table) -> list[tuple]:
    return sorted(tuple(r.values()) for r in table.to_pylist())
