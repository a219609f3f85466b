"""PostgreSQL connectors: jdbc sink rows/s and postgres-cdc source rows/s, each as a ratio to the bare client.

On a throwaway server (devtools/postgres_server.py), with N generated rows
(id, ad, cost, note, ts):

1. jdbc sink, append-only: a memory stream -> ``INSERT``-only sink; against
   a bare psycopg ``COPY`` of the same rows (already formatted as CSV).
   Without a state directory (a commit per batch) and with one (a commit
   per checkpoint, every 200 ms).
2. jdbc sink, updating: COUNT/SUM per ad (10,000 ads) -> upserts; input rows/s.
3. postgres-cdc snapshot: a table of N rows read by ``scan.startup.mode =
   'initial'`` into a COUNT(*); against a bare ``COPY ... TO STDOUT``.
4. postgres-cdc stream: N inserts (in transactions of 1,000) read from the
   replication stream into a COUNT(*); against a bare psycopg2 replication
   loop that receives the same messages and decodes nothing.

    python benchmarks/connectors_postgres.py [--rows N]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "devtools"))

from postgres_server import PostgresServer, PostgresUnavailable  # noqa: E402

import dsms  # noqa: E402

COLUMNS = "id BIGINT, ad INT, cost BIGINT, note VARCHAR, ts TIMESTAMP(3)"
PG_COLUMNS = "id bigint, ad int, cost bigint, note text, ts timestamp"


def rows(n: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({
        "id": np.arange(n, dtype=np.int64),
        "ad": rng.integers(0, 10_000, n, dtype=np.int32),
        "cost": rng.integers(1, 1000, n),
        "note": pa.array(np.array(["click", "view", "", "long note text"])[rng.integers(0, 4, n)]),
        "ts": pa.array(1_700_000_000_000_000 + np.arange(n, dtype=np.int64) * 1000, pa.timestamp("us")),
    })


def csv_bytes(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return out.getvalue()


def bare_copy(pg, table: pa.Table, target: str) -> float:
    data = csv_bytes(table)  # formatting is not timed: the bare client's best case
    with pg.connect() as conn:
        began = time.perf_counter()
        with conn.cursor().copy(f"COPY {target} FROM STDIN (FORMAT csv)") as copy:
            copy.write(data)
        conn.commit()
        return time.perf_counter() - began


def run_sink(pg, table: pa.Table, target: str, query: str, state_dir: str | None) -> float:
    with dsms.Engine(state_dir=state_dir) as engine:
        engine.execute("SET 'checkpoint.interval' = '200 ms'")
        engine.execute(f"CREATE STREAM clicks ({COLUMNS}) WITH (connector = 'memory')")
        engine.insert("clicks", table)
        began = time.perf_counter()
        engine.execute(f"CREATE SINK out WITH (connector = 'jdbc', url = '{pg.jdbc_url}', 'table-name' = '{target}', "
                       f"username = 'dsms', password = 'dsms') AS {query}")
        engine.run_until_idle()
        engine.checkpoint()  # with a state directory the last rows are committed by a checkpoint
        return time.perf_counter() - began


def cdc_ddl(pg, table: str, slot: str, mode: str) -> str:
    return (f"CREATE TABLE src ({COLUMNS}, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'postgres-cdc', "
            f"hostname = '127.0.0.1', port = '{pg.port}', username = 'dsms', password = 'dsms', "
            f"'database-name' = 'dsms', 'table-name' = '{table}', 'slot.name' = '{slot}', "
            f"'scan.startup.mode' = '{mode}')")


def count_until(engine, query, n: int) -> None:
    while True:
        engine.run_until_idle()
        snap = query.snapshot()
        if snap.num_rows and snap.column(0)[0].as_py() >= n:
            return


def fill(pg, table: str, data: pa.Table, transaction_rows: int) -> None:
    with pg.connect() as conn:
        for start in range(0, data.num_rows, transaction_rows):
            with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv)") as copy:
                copy.write(csv_bytes(data.slice(start, transaction_rows)))
            conn.commit()


def bare_stream(pg, slot: str, publication: str, n: int) -> float:
    import psycopg2
    import psycopg2.extras

    conn = psycopg2.connect(f"host=127.0.0.1 port={pg.port} user=dsms password=dsms dbname=dsms",
                            connection_factory=psycopg2.extras.LogicalReplicationConnection)
    cur = conn.cursor()
    began = time.perf_counter()
    cur.start_replication(slot_name=slot, decode=False, options={"proto_version": "1",
                                                                "publication_names": publication})
    inserts = 0
    while inserts < n:
        message = cur.read_message()
        if message is None:
            continue
        inserts += message.payload[:1] == b"I"
    elapsed = time.perf_counter() - began
    conn.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    n = parser.parse_args().rows
    data = rows(n)
    results = []

    def report(what: str, seconds: float, baseline: float | None, label: str = "rows/s") -> None:
        rate = n / seconds
        ratio = f"{baseline / seconds:.2f}x the bare client" if baseline else ""
        results.append((what, rate, ratio))
        print(f"{what:<58} {rate:>12,.0f} {label}  {ratio}", flush=True)

    try:
        pg = PostgresServer().start()
    except PostgresUnavailable as e:
        print(f"(no PostgreSQL server, so no PostgreSQL connector benchmark: {e})")
        return
    with pg:
        for i in range(4):
            with pg.connect(autocommit=True) as c:
                c.execute(f"CREATE TABLE t{i} ({PG_COLUMNS})")
        copy_s = bare_copy(pg, data, "t0")
        report("bare psycopg COPY (CSV formatted beforehand)", copy_s, None)
        report("jdbc sink, append-only, no state dir", run_sink(pg, data, "t1", "SELECT * FROM clicks", None), copy_s)
        with tempfile.TemporaryDirectory() as state:
            report("jdbc sink, append-only, state dir (checkpoint commits)",
                   run_sink(pg, data, "t2", "SELECT * FROM clicks", state), copy_s)
        with pg.connect(autocommit=True) as c:
            c.execute("CREATE TABLE per_ad (ad int PRIMARY KEY, n bigint, cost bigint)")
        report("jdbc sink, COUNT/SUM per ad (upserts), input", run_sink(
            pg, data, "per_ad", "SELECT ad, COUNT(*) AS n, SUM(cost) AS cost FROM clicks GROUP BY ad", None), copy_s)

        # CDC snapshot: t0 holds the rows now; give it a key.
        with pg.connect(autocommit=True) as c:
            c.execute("ALTER TABLE t0 ADD PRIMARY KEY (id)")
            began = time.perf_counter()
            with c.cursor().copy("COPY t0 TO STDOUT (FORMAT csv)") as copy:
                size = sum(len(block) for block in copy)
            bare_out = time.perf_counter() - began
        report("bare psycopg COPY TO STDOUT", bare_out, None)
        with dsms.Engine() as engine:
            began = time.perf_counter()
            engine.execute(cdc_ddl(pg, "t0", "bench_snap", "initial"))
            count_until(engine, engine.query("SELECT COUNT(*) AS n FROM src"), n)
            report("postgres-cdc snapshot into COUNT(*)", time.perf_counter() - began, bare_out)
        # CDC stream: inserts after the start, read from the replication stream.
        with pg.connect(autocommit=True) as c:
            c.execute("CREATE TABLE s (id bigint PRIMARY KEY, ad int, cost bigint, note text, ts timestamp)")
            c.execute("CREATE PUBLICATION bare_pub FOR TABLE s")
            c.execute("SELECT pg_create_logical_replication_slot('bare', 'pgoutput')")
        with dsms.Engine() as engine:
            engine.execute(cdc_ddl(pg, "s", "bench_stream", "latest-offset"))
            query = engine.query("SELECT COUNT(*) AS n FROM src")
            engine.run_until_idle()  # the slot exists from here
            fill(pg, "s", data, 1000)
            began = time.perf_counter()
            count_until(engine, query, n)
            stream_s = time.perf_counter() - began
        bare_s = bare_stream(pg, "bare", "bare_pub", n)
        report("bare psycopg2 replication loop (no decoding)", bare_s, None, "changes/s")
        report("postgres-cdc stream into COUNT(*)", stream_s, bare_s, "changes/s")
    print(f"({n:,} rows; {size / n:.0f} bytes per row as CSV)")


if __name__ == "__main__":
    main()
