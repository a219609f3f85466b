"""Pull queries over materialized views as a `dsms server` answers them: planned once, run on reader threads.

Oracle: DuckDB over the same rows the clients inserted (the CSV they were copied from). Whether a pull
was answered by a reader thread is read from /metrics (``dsms_pull_queries_total``).
"""

from __future__ import annotations

import asyncio
import urllib.request

import asyncpg
import duckdb
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_helpers import DsmsServer

DDL = ["CREATE STREAM sales (shop VARCHAR, item BIGINT, qty BIGINT, price DOUBLE, ts TIMESTAMP(3)) "
       "WITH (connector = 'memory')",
       "CREATE MATERIALIZED VIEW per_shop AS SELECT shop, COUNT(*) AS n, SUM(qty) AS qty, SUM(qty * price) AS revenue "
       "FROM sales GROUP BY shop",
       "CREATE MATERIALIZED VIEW per_item AS SELECT item, SUM(qty) AS qty FROM sales GROUP BY item",
       "CREATE VIEW big_shops AS SELECT shop, revenue FROM per_shop WHERE n > 20"]


def _rows(n: int, start: int = 0) -> list[tuple]:
    return [(f"shop{(start + i) % 13}", (start + i) % 37, 1 + (start + i) % 5, round(0.25 * ((start + i) % 11), 2),
             f"2024-01-01 00:00:{(start + i) % 60:02d}") for i in range(n)]


def _served(server: DsmsServer) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {s.labels["served_by"]: s.value for family in text_string_to_metric_families(text)
            for s in family.samples if s.name == "dsms_pull_queries_total"}


@pytest.fixture
def loaded(tmp_path):
    rows = _rows(500)
    with DsmsServer(str(tmp_path)) as server:
        with psycopg.connect(server.url(), autocommit=True) as c:
            for statement in DDL:
                c.execute(statement)
            with c.cursor().copy("COPY sales FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write("".join(",".join(map(str, r)) + "\n" for r in rows))
        oracle = duckdb.connect()
        oracle.execute("CREATE TABLE sales (shop VARCHAR, item BIGINT, qty BIGINT, price DOUBLE, ts TIMESTAMP)")
        oracle.executemany("INSERT INTO sales VALUES (?, ?, ?, ?, ?)", rows)
        yield server, oracle


QUERIES = [  # (pull query, the same question to DuckDB over the inserted rows)
    ("SELECT shop, n, qty FROM per_shop WHERE shop = 'shop3'",
     "SELECT shop, COUNT(*), SUM(qty) FROM sales WHERE shop = 'shop3' GROUP BY shop"),
    ("SELECT shop, qty * 2 AS twice FROM per_shop WHERE n >= 39 ORDER BY twice DESC, shop LIMIT 4",
     "SELECT shop, SUM(qty) * 2 AS twice FROM sales GROUP BY shop HAVING COUNT(*) >= 39 "
     "ORDER BY twice DESC, shop LIMIT 4"),
    ("SELECT COUNT(*) AS shops, SUM(qty) AS qty FROM per_shop",
     "SELECT COUNT(DISTINCT shop), SUM(qty) FROM sales"),
    ("SELECT s.shop, i.qty FROM per_shop AS s JOIN per_item AS i ON s.qty = i.qty",
     "WITH s AS (SELECT shop, SUM(qty) AS qty FROM sales GROUP BY shop), "
     "i AS (SELECT item, SUM(qty) AS qty FROM sales GROUP BY item) SELECT s.shop, i.qty FROM s JOIN i ON s.qty = i.qty"),
    ("SELECT shop, n FROM per_shop WHERE n > 38 AND qty <> 100",
     "SELECT shop, COUNT(*) FROM sales GROUP BY shop HAVING COUNT(*) > 38 AND SUM(qty) <> 100"),
    ("SELECT shop, revenue FROM big_shops",
     "SELECT shop, SUM(qty * price) FROM sales GROUP BY shop HAVING COUNT(*) > 20"),
]


def _same(got: list[tuple], expected: list[tuple], ordered: bool) -> None:
    norm = [tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in got]
    want = [tuple(round(float(v), 6) if isinstance(v, float) else v for v in row) for row in expected]
    assert (norm if ordered else sorted(norm)) == (want if ordered else sorted(want))


def test_pull_queries_are_answered_by_readers_as_duckdb_answers_them(loaded):
    server, oracle = loaded
    with psycopg.connect(server.url(), autocommit=True) as c:
        for pull, question in QUERIES:
            _same(c.execute(pull).fetchall(), oracle.execute(question).fetchall(), "ORDER BY" in pull)
        for shop in ("shop1", "shop12", "nowhere"):  # one prepared plan, many values
            got = c.execute("SELECT n, qty FROM per_shop WHERE shop = %s", (shop,), prepare=True).fetchall()
            _same(got, oracle.execute("SELECT COUNT(*), SUM(qty) FROM sales WHERE shop = ? GROUP BY shop",
                                      [shop]).fetchall(), False)
        # a text value for a BIGINT column: Arrow does not compare them, DuckDB casts (as for a literal)
        got = c.execute("SELECT item, qty FROM per_item WHERE item = %s::text", ("3",)).fetchall()
        assert got == oracle.execute("SELECT item, SUM(qty) FROM sales WHERE item = 3 GROUP BY item").fetchall()
    served = _served(server)
    assert served.get("reader", 0) >= len(QUERIES) + 2, served

    async def asyncpg_client() -> None:
        conn = await asyncpg.connect(server.url())
        stmt = await conn.prepare("SELECT item, qty FROM per_item WHERE item = $1 OR item = $2 ORDER BY item")
        for a, b in ((1, 2), (36, 0), (99, 5)):
            got = [tuple(r) for r in await stmt.fetch(a, b)]
            assert got == oracle.execute("SELECT item, SUM(qty) FROM sales WHERE item IN (?, ?) GROUP BY item "
                                         "ORDER BY item", [a, b]).fetchall()
        await conn.close()

    asyncio.run(asyncpg_client())


def test_a_client_reads_its_own_writes_and_a_pull_follows_the_catalog(loaded):
    server, oracle = loaded
    with psycopg.connect(server.url(), autocommit=True) as c:
        for k in range(5):  # no FLUSH: the pull waits for what this client wrote
            c.execute("INSERT INTO sales VALUES ('fresh', 1, %s, 1.0, TIMESTAMP '2024-01-01 00:00:00')", (k + 1,))
            assert c.execute("SELECT n, qty FROM per_shop WHERE shop = 'fresh'").fetchall() \
                == [(k + 1, sum(range(1, k + 2)))]
        assert c.execute("SELECT COUNT(*) FROM per_shop WHERE n > 1000").fetchall() == [(0,)]
        c.execute("DROP MATERIALIZED VIEW per_item")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT item, qty FROM per_item WHERE item = 3")
        c.execute("CREATE MATERIALIZED VIEW per_item AS SELECT item, MAX(price) AS qty FROM sales GROUP BY item")
        got = c.execute("SELECT item, qty FROM per_item WHERE item = 3").fetchall()  # the new view, not the old plan
    oracle.execute("INSERT INTO sales SELECT 'fresh', 1, k, 1.0, TIMESTAMP '2024-01-01' FROM range(1, 6) t(k)")
    assert got == oracle.execute("SELECT item, MAX(price) FROM sales WHERE item = 3 GROUP BY item").fetchall()


def test_another_clients_writes_are_seen_after_flush(loaded):
    server, _ = loaded
    with psycopg.connect(server.url(), autocommit=True) as reader, \
            psycopg.connect(server.url(), autocommit=True) as writer:
        writer.execute("INSERT INTO sales VALUES ('other', 1, 7, 1.0, TIMESTAMP '2024-01-01 00:00:00')")
        reader.execute("FLUSH")
        assert reader.execute("SELECT qty FROM per_shop WHERE shop = 'other'").fetchall() == [(7,)]
