"""Helpers for the PostgreSQL connector tests: DDL for a server, random changes, waiting for a pipeline.

The server is the ``postgres`` fixture (tests/conftest.py): a real
PostgreSQL started from Debian's packages. Oracles are PostgreSQL's own
queries over the source table, never dsms's output.
"""

from __future__ import annotations

import itertools
import random
import time

_ids = itertools.count(1)


def unique(prefix: str) -> str:
    """A fresh table or slot name (every test shares the server)."""
    return f"{prefix}_{next(_ids)}_{int(time.time() * 1000) % 100000}"


def cdc_option_dict(pg, table: str, slot: str, **extra) -> dict:
    return {"connector": "postgres-cdc", "hostname": "127.0.0.1", "port": str(pg.port), "username": "dsms",
            "password": "dsms", "database-name": "dsms", "schema-name": "public", "table-name": table,
            "slot.name": slot, "decoding.plugin.name": "pgoutput", **extra}


def cdc_options(pg, table: str, slot: str, **extra) -> str:
    """The WITH (...) options of a postgres-cdc table on the test server."""
    return ", ".join(f"'{k}' = '{v}'" for k, v in cdc_option_dict(pg, table, slot, **extra).items())


def jdbc_options(pg, table: str) -> str:
    return f"connector = 'jdbc', url = '{pg.jdbc_url}', 'table-name' = '{table}', username = 'dsms', password = 'dsms'"


def execute(pg, *statements: str, params=None) -> None:
    with pg.connect(autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql, params)


def fetch(pg, sql: str) -> list[tuple]:
    """Rows of a query, sorted (NULLs first)."""
    with pg.connect() as conn:
        return sorted(conn.execute(sql).fetchall(), key=lambda r: tuple((v is not None, v) for v in r))


def create_orders(pg, table: str, n: int, seed: int = 0) -> None:
    """A source table of ``n`` orders: (id, customer, amount, note)."""
    execute(pg, f"CREATE TABLE {table} (id int PRIMARY KEY, cust text NOT NULL, amount bigint, note text)")
    rng = random.Random(seed)
    with pg.connect() as conn:
        with conn.cursor().copy(f"COPY {table} (id, cust, amount, note) FROM STDIN") as copy:
            for i in range(1, n + 1):
                copy.write_row((i, f"c{rng.randrange(5)}", rng.randrange(1, 1000), rng.choice(["", None, "x"])))


def random_changes(pg, table: str, rng: random.Random, transactions: int, per_transaction: int = 3) -> None:
    """Inserts, updates (of values, of the customer, of the key) and deletes, in small transactions."""
    with pg.connect() as conn:
        for _ in range(transactions):
            with conn.transaction():
                for _ in range(per_transaction):
                    kind = rng.random()
                    target = rng.randrange(1, 400)
                    if kind < 0.35:
                        conn.execute(f"INSERT INTO {table} VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
                                     (rng.randrange(1, 400), f"c{rng.randrange(6)}", rng.randrange(1, 1000), "new"))
                    elif kind < 0.6:
                        conn.execute(f"UPDATE {table} SET amount = amount + %s WHERE id = %s",
                                     (rng.randrange(1, 50), target))
                    elif kind < 0.75:
                        conn.execute(f"UPDATE {table} SET cust = %s WHERE id = %s", (f"c{rng.randrange(6)}", target))
                    elif kind < 0.85:
                        conn.execute(f"UPDATE {table} SET id = id + 1000 WHERE id = %s AND NOT EXISTS "
                                     f"(SELECT 1 FROM {table} WHERE id = %s)", (target, target + 1000))
                    else:
                        conn.execute(f"DELETE FROM {table} WHERE id = %s", (target,))


def wait_for(condition, engine=None, timeout: float = 30.0) -> bool:
    """Run the engine's queries (if given) until ``condition()`` holds; False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if engine is not None:
            engine.run_until_idle()
        if condition():
            return True
        time.sleep(0.05)
    return False
