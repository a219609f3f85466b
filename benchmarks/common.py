"""What the benchmarks share: the generated ad impressions, their 10-second tumble query, and timing a run.

Each measurement runs in a fresh process (:func:`run_child`: the script again with
``--child``), so that its peak memory is its own; the child prints its result as
one line of JSON.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
BASE_US = 1_700_000_000_000_000  # 2023-11-14 22:13:20

COLUMNS = "ad_id BIGINT, user_id BIGINT, cost DOUBLE, ts TIMESTAMP(3)"
WATERMARK = "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND"

# The 10-second TUMBLE COUNT/SUM per ad: throughput.py's query, also run by state.py, repl.py, routes.py and
# the Flink comparison.
QUERY = """
SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, SUM(cost) AS spend
FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, ad_id
"""


def impressions_ddl(path: str, fmt: str = "parquet", options: str = "") -> str:
    """CREATE STREAM impressions over a file of them (``options``: more of the WITH clause, after a comma)."""
    return (f"CREATE STREAM impressions ({COLUMNS}, {WATERMARK}) "
            f"WITH (connector = 'file', path = '{path}', format = '{fmt}'{options})")


def generate(path: str, events: int, ads: int = 1000, rate: int = 10_000, disorder_s: float = 4.0) -> None:
    """``events`` ad impressions in Parquet: ``rate`` per second of event time, up to ``disorder_s`` out of order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    arrival_us = BASE_US + np.arange(events, dtype=np.int64) * 1_000_000 // rate
    ts = arrival_us - rng.integers(0, int(disorder_s * 1_000_000), events)
    table = pa.table({
        "ad_id": rng.integers(0, ads, events),
        "user_id": rng.integers(0, 1_000_000, events),
        "cost": rng.random(events).round(4),
        "ts": pa.array(ts // 1000 * 1000, pa.timestamp("us")),
    })
    pq.write_table(table, path, row_group_size=256 * 1024)


def impressions(events: int) -> str:
    """The Parquet file of ``events`` generated impressions under benchmarks/data (generated the first time)."""
    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"impressions_{events}.parquet")
    if not os.path.exists(path):
        print(f"generating {events:,} impressions -> {path}", file=sys.stderr)
        generate(path, events)
    return path


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(script: str, args: list[str], options: list[str] = ()) -> dict:
    """Run one measurement in a fresh process (``script options --child args``); its last line is JSON."""
    out = subprocess.run([sys.executable, script, *options, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"benchmark child {args} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def time_runtime(ddl: str, query: str, out: str, batch: int, fmt: str = "json") -> dict:
    """Run ``query`` over the sources of ``ddl`` into a file sink on the incremental runtime, to the end.

    Returns:
        seconds, events (rows read), rows_out, late (events dropped as late) and peak_mb.
    """
    import dsms

    engine = dsms.Engine()
    engine.execute("SET 'engine' = 'runtime'")  # the incremental runtime, not a batch route
    engine.scheduler.batch_rows = batch
    engine.execute(ddl)
    # Repeated runs write the same file: each replaces the last one's.
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = '{fmt}', "
                   f"'sink.mode' = 'overwrite') AS {query}")
    began = time.perf_counter()
    engine.run_until_idle()
    elapsed = time.perf_counter() - began
    job = engine.scheduler.jobs["out"]
    assert job.done
    return {"seconds": elapsed, "events": job.rows_in, "rows_out": job.metrics.rows_out,
            "late": sum(job.late.values()), "peak_mb": peak_mb()}


def time_duckdb(sql: str, out: str, inputs: list[str], fmt: str = "json") -> dict:
    """COPY the rows of ``sql`` to the file ``out`` with DuckDB, as one batch statement.

    Returns:
        seconds, events (the rows of the ``inputs`` relations), rows_out and peak_mb.
    """
    import duckdb

    con = duckdb.connect()
    began = time.perf_counter()
    con.execute(f"COPY ({sql}) TO '{out}' (FORMAT {fmt})")
    elapsed = time.perf_counter() - began
    events = sum(con.execute(f"SELECT COUNT(*) FROM {relation}").fetchone()[0] for relation in inputs)
    reader = "read_parquet" if fmt == "parquet" else "read_json"
    rows = con.execute(f"SELECT COUNT(*) FROM {reader}('{out}')").fetchone()[0]
    return {"seconds": elapsed, "events": events, "rows_out": rows, "peak_mb": peak_mb()}


def duckdb_tumble(reader: str, out: str) -> dict:
    """:data:`QUERY` as DuckDB batch SQL over ``reader`` (a relation of impressions), into the JSON file ``out``."""
    sql = f"""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS window_start,
                     window_start + INTERVAL '10 seconds' AS window_end, ad_id,
                     COUNT(*) AS impressions, SUM(cost) AS spend
              FROM {reader} GROUP BY ALL ORDER BY window_start, ad_id"""
    return time_duckdb(sql, out, [reader])
