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
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# generate and QUERY are also read from here by routes.py.
from common import (  # noqa: E402
    BASE_US,
    DATA,
    QUERY,
    duckdb_tumble,
    generate,  # noqa: F401
    impressions,
    impressions_ddl,
    peak_mb,
    run_child,
    time_runtime,
)


def one_runtime(path: str, out: str, batch: int) -> dict:
    return time_runtime(impressions_ddl(path), QUERY, out, batch)


def one_duckdb(path: str, out: str) -> dict:
    return duckdb_tumble(f"read_parquet('{path}')", out)


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
        while next_end - 1_000 <= watermark:  # a window fires once the watermark reaches its last millisecond
            closing_arrival.setdefault(next_end, arrival)
            next_end += 1_000_000
        engine.run_until_idle()
        emitted = q.poll()
        if emitted.num_rows:
            done = time.perf_counter()
            for we in set(emitted.column("window_end").cast(pa.int64()).to_pylist()):
                if we in closing_arrival:
                    latencies.append(done - closing_arrival.pop(we))
    if not latencies:
        raise SystemExit("no window was closed and emitted while feeding: nothing to measure")
    lat = np.array(latencies) * 1000
    return {"rate": rate, "seconds": seconds, "windows": len(latencies),
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "max_ms": float(lat.max()), "max_behind_ms": behind * 1000, "peak_mb": peak_mb()}


def child(args: list[str]) -> dict:
    return run_child(__file__, args)


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

    path = impressions(args.events)
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
