"""What the PostgreSQL-protocol front end costs: pull-query latency under concurrent clients, INSERT and
COPY rows/s over the wire against ``engine.insert`` in process, and SUBSCRIBE latency from an INSERT
on one connection to the change arriving on another.

A `dsms server` is started on a free port in a temporary folder; clients are asyncpg (pull latency,
INSERT) and psycopg 3 (COPY, SUBSCRIBE).

    python benchmarks/server.py [--rows N] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import asyncpg
import psycopg

import dsms

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
DDL = ["CREATE STREAM clicks (ad BIGINT, cost DOUBLE, ts TIMESTAMP(3)) WITH (connector = 'memory')",
       "CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n, SUM(cost) AS spend FROM clicks GROUP BY ad"]
PULL = "SELECT n, spend FROM per_ad WHERE ad = $1"


def start_server(folder: str) -> tuple[subprocess.Popen, int]:
    log = open(os.path.join(folder, "server.log"), "w")
    proc = subprocess.Popen([DSMS, "server", "--state-dir", os.path.join(folder, "state"), "--port", "0"],
                            cwd=folder, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        found = re.search(r"postgresql://[\d.]+:(\d+)", open(log.name).read())
        if found:
            return proc, int(found.group(1))
        time.sleep(0.1)
    raise RuntimeError("the server did not start: " + open(log.name).read())


def csv_rows(n: int, start: int = 0) -> str:
    return "".join(f"{(start + i) % 1000},{i % 97 / 7},2024-01-01 00:00:{i % 60:02d}\n" for i in range(n))


async def pull_latency(url: str, clients: int, seconds: float) -> list[float]:
    """Each client runs the pull query back to back for ``seconds``; every latency in ms."""
    latencies: list[float] = []

    async def client(k: int) -> None:
        conn = await asyncpg.connect(url)
        stmt = await conn.prepare(PULL)
        end = time.perf_counter() + seconds
        i = k
        while time.perf_counter() < end:
            t = time.perf_counter()
            await stmt.fetch(i % 1000)
            latencies.append((time.perf_counter() - t) * 1000)
            i += clients
        await conn.close()

    await asyncio.gather(*(client(k) for k in range(clients)))
    return latencies


def feed_while(url: str, stop: threading.Event, rows_per_copy: int = 1000, pause: float = 0.1) -> int:
    """COPY batches into the stream until ``stop``, so pull queries run while the engine processes input."""
    sent = 0
    with psycopg.connect(url, autocommit=True) as c:
        while not stop.is_set():
            with c.cursor().copy("COPY clicks FROM STDIN WITH (FORMAT csv)") as copy:
                copy.write(csv_rows(rows_per_copy, sent))
            sent += rows_per_copy
            stop.wait(pause)
    return sent


def insert_statements(statements: int, per_statement: int) -> list[str]:
    return ["INSERT INTO clicks VALUES " + ", ".join(f"({(s * per_statement + i) % 1000}, {i / 7}, "
                                                     "TIMESTAMP '2024-01-01 00:00:00')" for i in range(per_statement))
            for s in range(statements)]


async def insert_rate(url: str, statements: list[str], rows: int) -> float:
    conn = await asyncpg.connect(url)
    t = time.perf_counter()
    for statement in statements:
        await conn.execute(statement)
    rate = rows / (time.perf_counter() - t)
    await conn.close()
    return rate


def in_process_insert_statements(statements: list[str], rows: int) -> float:
    """The same INSERT … VALUES statements run by engine.execute in process (parsing them is most of it)."""
    engine = dsms.Engine()
    engine.execute(DDL[0])
    t = time.perf_counter()
    for statement in statements:
        engine.execute(statement)
    rate = rows / (time.perf_counter() - t)
    engine.close()
    return rate


def copy_rate(url: str, rows: int) -> float:
    data = csv_rows(rows).encode()
    with psycopg.connect(url, autocommit=True) as c:
        t = time.perf_counter()
        with c.cursor().copy("COPY clicks FROM STDIN WITH (FORMAT csv)") as copy:
            copy.write(data)
        return rows / (time.perf_counter() - t)


def in_process_rate(rows: int) -> float:
    """engine.insert of the same rows, as a table parsed from the same CSV (what COPY does in the server)."""
    import pyarrow.csv as pacsv

    engine = dsms.Engine()
    for statement in DDL[:1]:
        engine.execute(statement)
    t = time.perf_counter()
    table = pacsv.read_csv(io.BytesIO(csv_rows(rows).encode()),
                           pacsv.ReadOptions(column_names=["ad", "cost", "ts"]))
    engine.insert("clicks", table)
    rate = rows / (time.perf_counter() - t)
    engine.close()
    return rate


def subscribe_latency(url: str, samples: int) -> list[float]:
    """ms from an INSERT's return on one connection to its change arriving on a subscriber."""
    arrived: dict[int, float] = {}
    ready = threading.Event()
    sub = psycopg.connect(url, autocommit=True)

    def listen() -> None:
        try:
            for row in sub.cursor().stream("SUBSCRIBE TO per_ad WITH (SNAPSHOT = FALSE)"):
                ready.set()
                if row[0] in ("+I", "+U") and row[1] >= 100_000:
                    arrived.setdefault(row[1], time.perf_counter())
        except psycopg.errors.QueryCanceled:
            pass

    listener = threading.Thread(target=listen)
    listener.start()
    out = []
    with psycopg.connect(url, autocommit=True) as writer:
        writer.execute("INSERT INTO clicks VALUES (99999, 0, TIMESTAMP '2024-01-01 00:00:00')")
        ready.wait(30)
        for k in range(samples):
            ad = 100_000 + k
            writer.execute(f"INSERT INTO clicks VALUES ({ad}, 1.0, TIMESTAMP '2024-01-01 00:00:00')")
            sent = time.perf_counter()  # the insert has returned: from here the engine and the wire
            while ad not in arrived and time.perf_counter() - sent < 10:
                time.sleep(0.0002)
            if ad in arrived:
                out.append((arrived[ad] - sent) * 1000)
    sub.cancel()
    listener.join()
    sub.close()
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000, help="rows for the INSERT/COPY rates")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of pull queries per client count")
    parser.add_argument("--inserts", type=int, default=5, help="INSERT … VALUES statements (100 rows each)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        proc, port = start_server(folder)
        url = f"postgresql://dsms@127.0.0.1:{port}/dsms"
        try:
            with psycopg.connect(url, autocommit=True) as c:
                for statement in DDL:
                    c.execute(statement)
                with c.cursor().copy("COPY clicks FROM STDIN WITH (FORMAT csv)") as copy:
                    copy.write(csv_rows(10_000))
                c.execute("FLUSH")
            print("pull query (asyncpg, prepared, one row of a 1000-row materialized view):")
            for clients in (1, 10, 50):
                lat = asyncio.run(pull_latency(url, clients, args.seconds))
                print(f"  {clients:>2} clients: p50 {statistics.median(lat):6.1f} ms  p99 {pct(lat, 99):6.1f} ms  "
                      f"({len(lat) / args.seconds:6.0f} queries/s)")
            stop, fed = threading.Event(), []
            feeder = threading.Thread(target=lambda: fed.append(feed_while(url, stop)))
            feeder.start()
            t = time.perf_counter()
            lat = asyncio.run(pull_latency(url, 10, args.seconds))
            stop.set()
            feeder.join()
            print(f"  10 clients while COPY feeds {fed[0] / (time.perf_counter() - t):,.0f} rows/s: "
                  f"p50 {statistics.median(lat):6.1f} ms  p99 {pct(lat, 99):6.1f} ms  "
                  f"({len(lat) / args.seconds:6.0f} queries/s)")
            inproc = in_process_rate(args.rows)
            copy = copy_rate(url, args.rows)
            statements = insert_statements(args.inserts, 100)
            insert = asyncio.run(insert_rate(url, statements, args.inserts * 100))
            insert_inproc = in_process_insert_statements(statements, args.inserts * 100)
            print(f"engine.insert in process: {inproc:10,.0f} rows/s")
            print(f"COPY FROM STDIN (CSV):    {copy:10,.0f} rows/s  ({copy / inproc:.2f} x engine.insert)")
            print(f"INSERT … VALUES, 100 rows a statement: {insert:8,.0f} rows/s over the wire, "
                  f"{insert_inproc:8,.0f} by engine.execute in process ({insert / insert_inproc:.2f} x); "
                  f"{insert / inproc:.4f} x engine.insert")
            lat = subscribe_latency(url, 200)
            print(f"SUBSCRIBE, INSERT -> change at another client: p50 {statistics.median(lat):.1f} ms  "
                  f"p99 {pct(lat, 99):.1f} ms  ({len(lat)} inserts)")
        finally:
            proc.terminate()
            proc.wait(60)


if __name__ == "__main__":
    main()
