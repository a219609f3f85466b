"""Throughput and latency of a 10-second TUMBLE COUNT/SUM per ad.

Data: 5,000,000 generated ad impressions in Parquet (1,000 ads, 10,000
events per second of event time, up to 4 s out of order). The same query
runs through the dsms runtime (incrementally, micro-batch by micro-batch,
into a JSON file sink) and through DuckDB as one batch statement (COPY to a
JSON file), each in a fresh process so peak memory is its own. Then the
runtime is fed 100,000 events per second in real time and the latency from
arrival to a window's result is measured.

    make bench                      # or: python benchmarks/throughput.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
BASE_US = 1_700_000_000_000_000  # 2023-11-14 22:13:20

QUERY = """
SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, SUM(cost) AS spend
FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND))
GROUP BY window_start, window_end, ad_id
"""


def generate(path: str, events: int, ads: int = 1000, rate: int = 10_000, disorder_s: float = 4.0) -> None:
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


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited across fork and exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_runtime(path: str, out: str, batch: int) -> dict:
    import dsms

    engine = dsms.Engine()
    engine.execute("SET 'engine' = 'runtime'")  # the incremental runtime, not a batch route
    engine.scheduler.batch_rows = batch
    engine.execute(f"""
      CREATE STREAM impressions (ad_id BIGINT, user_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
      WITH (connector = 'file', path = '{path}', format = 'parquet');
      CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {QUERY};
    """)
    began = time.perf_counter()
    engine.run_until_idle()
    elapsed = time.perf_counter() - began
    job = engine.scheduler.jobs["out"]
    assert job.done
    return {"seconds": elapsed, "events": job.rows_in, "rows_out": job.metrics.rows_out,
            "late": sum(job.late.values()), "peak_mb": peak_mb()}


def one_duckdb(path: str, out: str) -> dict:
    import duckdb

    con = duckdb.connect()
    began = time.perf_counter()
    con.execute(f"""
      COPY (SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS window_start,
                   window_start + INTERVAL '10 seconds' AS window_end, ad_id,
                   COUNT(*) AS impressions, SUM(cost) AS spend
            FROM read_parquet('{path}') GROUP BY ALL ORDER BY window_start, ad_id)
      TO '{out}' (FORMAT json)""")
    elapsed = time.perf_counter() - began
    events = con.execute(f"SELECT COUNT(*) FROM read_parquet('{path}')").fetchone()[0]
    rows = con.execute(f"SELECT COUNT(*) FROM read_json('{out}')").fetchone()[0]
    return {"seconds": elapsed, "events": events, "rows_out": rows, "peak_mb": peak_mb()}


def one_latency(rate: int, seconds: float, ads: int = 1000) -> dict:
    """Feed ``rate`` events/s in real time; latency from the watermark-closing arrival to the result."""
    import numpy as np
    import pyarrow as pa

    import dsms

    engine = dsms.Engine()
    engine.execute("""
      CREATE STREAM impressions (ad_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');""")
    q = engine.query("""SELECT window_end, ad_id, COUNT(*) AS n, SUM(cost) AS spend
      FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '1' SECOND))
      GROUP BY window_start, window_end, ad_id""")
    rng = np.random.default_rng(3)
    tick = 0.01
    per_tick = int(rate * tick)
    start_wall = time.perf_counter()
    event_zero = BASE_US
    closing_arrival: dict[int, float] = {}  # window end -> arrival of the first batch whose watermark passed it
    latencies, behind = [], 0.0
    next_end = None
    ticks = int(seconds / tick)
    for i in range(ticks):
        due = start_wall + i * tick
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        else:
            behind = max(behind, now - due)
        arrival = time.perf_counter()
        now_us = event_zero + int((arrival - start_wall) * 1_000_000)
        ts = now_us - rng.integers(0, 500_000, per_tick)  # up to 0.5 s out of order
        engine.insert("impressions", pa.table({
            "ad_id": rng.integers(0, ads, per_tick), "cost": rng.random(per_tick),
            "ts": pa.array(ts, pa.timestamp("us"))}))
        watermark = int(ts.max()) - 1_000_000
        end = (watermark // 1_000_000) * 1_000_000
        if next_end is None:
            next_end = end + 1_000_000
        while next_end <= watermark:
            closing_arrival.setdefault(next_end, arrival)
            next_end += 1_000_000
        engine.run_until_idle()
        emitted = q.poll()
        if emitted.num_rows:
            done = time.perf_counter()
            for we in set(emitted.column("window_end").cast(pa.int64()).to_pylist()):
                if we in closing_arrival:
                    latencies.append(done - closing_arrival.pop(we))
    lat = np.array(latencies) * 1000
    return {"rate": rate, "seconds": seconds, "windows": len(latencies),
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "max_ms": float(lat.max()), "max_behind_ms": behind * 1000, "peak_mb": peak_mb()}


def child(args: list[str]) -> dict:
    return child_of(__file__, args)


def child_of(script: str, args: list[str], options: list[str] = ()) -> dict:
    """Run one measurement in a fresh process (``script --child args``); its last line is JSON."""
    out = subprocess.run([sys.executable, script, *options, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"benchmark child {args} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--batch", type=int, default=256 * 1024, help="runtime micro-batch rows for the file run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = {"runtime": lambda: one_runtime(rest[0], rest[1], int(rest[2])),
                  "duckdb": lambda: one_duckdb(rest[0], rest[1]),
                  "latency": lambda: one_latency(int(rest[0]), float(rest[1]))}[kind]()
        print(json.dumps(result))
        return

    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"impressions_{args.events}.parquet")
    if not os.path.exists(path):
        print(f"generating {args.events:,} impressions -> {path}")
        generate(path, args.events)
    runs = {"dsms runtime": [], "duckdb batch": []}
    for _ in range(args.repeat):
        runs["dsms runtime"].append(child(["runtime", path, os.path.join(DATA, "out_runtime.jsonl"), str(args.batch)]))
        runs["duckdb batch"].append(child(["duckdb", path, os.path.join(DATA, "out_duckdb.jsonl")]))
    best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
    assert best["dsms runtime"]["rows_out"] == best["duckdb batch"]["rows_out"], "the two engines disagree"
    print(f"\n10 s TUMBLE COUNT/SUM per ad, {args.events:,} events, best of {args.repeat}")
    print(f"{'engine':<14} {'seconds':>8} {'events/s':>14} {'rows out':>9} {'peak MB':>8}")
    for name, r in best.items():
        print(f"{name:<14} {r['seconds']:>8.3f} {r['events'] / r['seconds']:>14,.0f} {r['rows_out']:>9,} {r['peak_mb']:>8.0f}")
    rt, dk = best["dsms runtime"], best["duckdb batch"]
    ratio = (rt["events"] / rt["seconds"]) / (dk["events"] / dk["seconds"])
    print(f"runtime / duckdb batch: {ratio:.2f}x  (targets: runtime >= 3,000,000 events/s and >= 0.10x duckdb)")

    lat = child(["latency", "100000", str(args.latency_seconds)])
    print(f"\nlatency at {lat['rate']:,} events/s for {lat['seconds']:.0f} s (1 s TUMBLE per ad, 1 s watermark bound):")
    print(f"  from the arrival that closes a window to its result: p50 {lat['p50_ms']:.1f} ms, "
          f"p99 {lat['p99_ms']:.1f} ms, max {lat['max_ms']:.1f} ms over {lat['windows']} windows")
    print(f"  feeder fell behind schedule by at most {lat['max_behind_ms']:.1f} ms; peak memory {lat['peak_mb']:.0f} MB")


if __name__ == "__main__":
    main()
