"""psycopg 3 and asyncpg against a real `dsms server`: parameters, prepared statements, COPY, types.

Oracles: hand-computed rows, and DuckDB over the same CSV for COPY.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import json

import asyncpg
import duckdb
import psycopg
import pytest

from server_helpers import DsmsServer

DDL = ("CREATE STREAM trades (sym VARCHAR, qty BIGINT, price DECIMAL(10, 2), px DOUBLE, ok BOOLEAN, ts TIMESTAMP(3), "
       "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')")
MV = "CREATE MATERIALIZED VIEW per_sym AS SELECT sym, SUM(qty) AS qty, COUNT(*) AS n FROM trades GROUP BY sym"


@pytest.fixture
def server(tmp_path):
    with DsmsServer(str(tmp_path)) as s:
        with psycopg.connect(s.url(), autocommit=True) as c:
            c.execute(DDL)
            c.execute(MV)
        yield s


def test_psycopg_parameters_are_bound_safely_and_types_round_trip(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        rows = [("abc", 5, decimal.Decimal("10.25"), 0.1 + 0.2, True, dt.datetime(2024, 1, 1, 12, 0, 0, 125000)),
                ("o'hara; DROP STREAM trades", 7, decimal.Decimal("-3.50"), 1e-300, False, dt.datetime(2024, 1, 1, 12, 0, 1))]
        with c.cursor() as cur:
            cur.executemany("INSERT INTO trades VALUES (%s, %s, %s, %s, %s, %s)", rows)
        c.execute("FLUSH")
        got = c.execute("SELECT sym, qty, price, px, ok, ts FROM trades WHERE qty >= %s", (5,)).fetchall()
        assert sorted(got) == sorted(rows)  # decimals exact, doubles at full precision, the quote kept as data
        assert c.execute("SELECT qty, n FROM per_sym WHERE sym = %s", ("o'hara; DROP STREAM trades",)).fetchall() \
            == [(7, 1)]
        prepared = "SELECT n FROM per_sym WHERE sym = %s"
        for _ in range(3):  # psycopg prepares a statement run often; then it runs by name
            assert c.execute(prepared, ("abc",), prepare=True).fetchall() == [(1,)]
        with pytest.raises(psycopg.errors.UndefinedColumn) as info:
            c.execute("SELECT nope FROM per_sym")
        assert info.value.diag.statement_position == "8"


def test_psycopg_transactions_and_errors_inside_them(server):
    with psycopg.connect(server.url()) as c:  # not autocommit: psycopg sends BEGIN first
        c.execute("INSERT INTO trades VALUES ('x', 1, 1.00, 1.0, TRUE, TIMESTAMP '2024-01-01 00:00:00')")
        c.commit()
        with pytest.raises(psycopg.errors.SyntaxError):
            c.execute("SELEC 1")
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            c.execute("SELECT 1")
        c.rollback()
        c.execute("FLUSH")
        assert c.execute("SELECT qty FROM per_sym WHERE sym = 'x'").fetchall() == [(1,)]


def test_copy_from_stdin_feeds_a_memory_stream(server, tmp_path):
    csv = tmp_path / "trades.csv"
    lines = [f"s{i % 7},{i},{i % 100}.{i % 10}5,{i / 3},{'true' if i % 2 else 'false'},2024-01-01 00:{i // 60 % 60:02d}:"
             f"{i % 60:02d}" for i in range(5000)]
    csv.write_text("sym,qty,price,px,ok,ts\n" + "\n".join(lines) + "\n")
    with psycopg.connect(server.url(), autocommit=True) as c:
        with c.cursor() as cur:
            with cur.copy("COPY trades FROM STDIN WITH (FORMAT csv, HEADER true)") as copy:
                copy.write(csv.read_bytes())
            assert cur.rowcount == 5000
        c.execute("FLUSH")
        got = sorted(c.execute("SELECT sym, qty, n FROM per_sym").fetchall())
    expected = duckdb.sql(f"SELECT sym, SUM(qty)::BIGINT, COUNT(*) FROM read_csv('{csv}', header = true) GROUP BY sym "
                          "ORDER BY sym").fetchall()
    assert got == expected


def test_copy_of_a_bad_value_names_the_stream_and_value_and_inserts_nothing(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        with pytest.raises(psycopg.Error) as info:
            with c.cursor().copy("COPY trades (sym, qty) FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write(b"a,1\nb,notanumber\n")
        assert "COPY trades" in str(info.value) and "notanumber" in str(info.value)
        c.execute("FLUSH")
        assert c.execute("SELECT sym FROM trades").fetchall() == []


def test_asyncpg_prepared_statements_with_typed_parameters(server):
    async def main():
        conn = await asyncpg.connect(server.url())
        try:
            await conn.executemany("INSERT INTO trades VALUES ($1, $2, $3, $4, $5, $6)",
                                   [("a", 2, decimal.Decimal("1.10"), 0.5, True, dt.datetime(2024, 1, 1)),
                                    ("a", 3, decimal.Decimal("2.20"), 1 / 3, False, dt.datetime(2024, 1, 1, 0, 0, 1)),
                                    ("b", 4, decimal.Decimal("3.30"), 2.5, True, dt.datetime(2024, 1, 1, 0, 0, 2))])
            await conn.execute("FLUSH")
            stmt = await conn.prepare("SELECT qty, n FROM per_sym WHERE sym = $1")
            a = await stmt.fetch("a")
            b = await stmt.fetchrow("b")
            typed = await conn.fetch("SELECT price, px, ok, ts FROM trades WHERE qty > $1", 2)
            return [tuple(r) for r in a], tuple(b), sorted(tuple(r) for r in typed)
        finally:
            await conn.close()

    a, b, typed = asyncio.run(main())
    assert a == [(5, 2)] and b == (4, 1)
    assert typed == [(decimal.Decimal("2.20"), 1 / 3, False, dt.datetime(2024, 1, 1, 0, 0, 1)),
                     (decimal.Decimal("3.30"), 2.5, True, dt.datetime(2024, 1, 1, 0, 0, 2))]


ARRAYS = ("SELECT ARRAY[1, 2] AS a, ARRAY['x', 'y z', 'q\"u', '', 'NULL'] AS b, ARRAY[CAST(NULL AS INT), 3] AS c, "
          "ARRAY[CAST(0.5 AS DOUBLE)] AS f, ARRAY[ARRAY[1], ARRAY[2, 3]] AS nested, CAST(NULL AS INT ARRAY) AS n")
# What PostgreSQL gives for the same values (hand-written): arrays of scalars as arrays, nested ones as JSON.
ARRAYS_EXPECTED = ([1, 2], ["x", "y z", 'q"u', "", "NULL"], [None, 3], [0.5], [[1], [2, 3]], None)


def test_arrays_go_out_as_postgresql_arrays(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute("INSERT INTO trades VALUES ('a', 1, 1, 1, TRUE, TIMESTAMP '2024-01-01 00:00:00'), "
                  "('a', 2, 1, 1, TRUE, TIMESTAMP '2024-01-01 00:00:01'), "
                  "('b', 5, 1, 1, TRUE, TIMESTAMP '2024-01-01 00:00:02')")
        c.execute("CREATE MATERIALIZED VIEW qtys AS SELECT sym, ARRAY_AGG(qty) AS qtys FROM trades GROUP BY sym")
        c.execute("FLUSH")
        for binary in (False, True):
            with c.cursor(binary=binary) as cur:
                assert cur.execute(ARRAYS).fetchone() == ARRAYS_EXPECTED
                assert [d.type_code for d in cur.description][:4] == [1007, 1009, 1007, 1022]  # int4[], text[], ...
                got = cur.execute("SELECT sym, qtys FROM qtys").fetchall()
                assert sorted((s, sorted(q)) for s, q in got) == [("a", [1, 2]), ("b", [5])]

    async def with_asyncpg():
        conn = await asyncpg.connect(server.url())
        try:
            return tuple((await conn.fetchrow(ARRAYS)).values())
        finally:
            await conn.close()

    # asyncpg describes the statement before it binds it, and would then ask the catalog how to decode an array
    # type: it is told JSON, and gets each array as JSON text.
    got = asyncio.run(with_asyncpg())
    assert [json.loads(v) if v is not None else None for v in got] == list(ARRAYS_EXPECTED)
    out = server.psql("-At", "-F", " ; ", "-c", ARRAYS).stdout.strip()
    assert out == '{1,2} ; {x,"y z","q\\"u","","NULL"} ; {NULL,3} ; {0.5} ; [[1], [2, 3]] ;'
    assert " qtys   | bigint[] |" in server.psql("-c", "\\d qtys").stdout
