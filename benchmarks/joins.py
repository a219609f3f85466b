"""Join throughput: impressions joined with their clicks, and with a versioned ads table.

Data (Parquet, generated once under benchmarks/data): N ad impressions (1,000
ads, 10,000 per second of event time, up to 4 s out of order), clicks on 5 %
of them 0-60 s later (out of order too), and a versioned ads table (each ad's
bid price changes every 10 s of event time on average, as upserts by ad).

* interval join: each impression with its clicks within 60 s
  (``c.ts BETWEEN i.ts AND i.ts + INTERVAL '60' SECOND``), inner and LEFT;
* temporal join: each impression with its ad's bid price at the impression's
  time (``ads FOR SYSTEM_TIME AS OF i.ts``).

Each query runs through the dsms runtime (incrementally, with watermarks,
state evicted as they pass) and through DuckDB as one batch statement over
the same files (an ASOF join for the temporal join), into a JSON file, each
in a fresh process; best of ``--repeat`` runs. Events/s counts every input
row (impressions, clicks, ad changes). Both engines must write the same
number of rows.

    python benchmarks/joins.py [--events N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import BASE_US, DATA, run_child, time_duckdb, time_runtime  # noqa: E402

DDL = """
CREATE STREAM impressions (id BIGINT, ad_id BIGINT, user_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{imp}', format = 'parquet');
CREATE STREAM clicks (imp_id BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{clk}', format = 'parquet');
CREATE TABLE ads (ad_id BIGINT, bid DOUBLE, ts TIMESTAMP(3), PRIMARY KEY (ad_id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{ads}', format = 'parquet');
"""

QUERIES = {
    "interval join (inner)": (
        "SELECT i.id, i.ad_id, i.ts, c.ts AS click_ts FROM impressions i JOIN clicks c "
        "ON c.imp_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '60' SECOND",
        "SELECT i.id, i.ad_id, i.ts, c.ts AS click_ts FROM '{imp}' i JOIN '{clk}' c "
        "ON c.imp_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL 60 SECOND",
        ("imp", "clk")),
    "interval join (left)": (
        "SELECT i.id, i.ad_id, i.ts, c.ts AS click_ts FROM impressions i LEFT JOIN clicks c "
        "ON c.imp_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '60' SECOND",
        "SELECT i.id, i.ad_id, i.ts, c.ts AS click_ts FROM '{imp}' i LEFT JOIN '{clk}' c "
        "ON c.imp_id = i.id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL 60 SECOND",
        ("imp", "clk")),
    "temporal join": (
        "SELECT i.id, i.ad_id, i.ts, a.bid FROM impressions i JOIN ads FOR SYSTEM_TIME AS OF i.ts AS a "
        "ON i.ad_id = a.ad_id",
        "SELECT i.id, i.ad_id, i.ts, a.bid FROM '{imp}' i ASOF JOIN (SELECT * FROM read_parquet('{ads}', "
        "file_row_number = true) QUALIFY row_number() OVER (PARTITION BY ad_id, ts ORDER BY file_row_number DESC) "
        "= 1) a ON i.ad_id = a.ad_id AND i.ts >= a.ts",
        ("imp", "ads")),
}


def generate(paths: dict, events: int, ads: int = 1000, rate: int = 10_000) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(11)
    arrival = BASE_US + np.arange(events, dtype=np.int64) * 1_000_000 // rate
    ts = (arrival - rng.integers(0, 4_000_000, events)) // 1000 * 1000
    pq.write_table(pa.table({"id": np.arange(events, dtype=np.int64), "ad_id": rng.integers(0, ads, events),
                             "user_id": rng.integers(0, 1_000_000, events),
                             "ts": pa.array(ts, pa.timestamp("us"))}), paths["imp"], row_group_size=256 * 1024)
    clicked = np.flatnonzero(rng.random(events) < 0.05)
    click_ts = ts[clicked] + rng.integers(0, 60_000_000, len(clicked))
    order = np.argsort(click_ts + rng.integers(0, 3_000_000, len(clicked)), kind="stable")  # arrival order
    pq.write_table(pa.table({"imp_id": clicked[order],
                             "ts": pa.array(click_ts[order] // 1000 * 1000, pa.timestamp("us"))}),
                   paths["clk"], row_group_size=256 * 1024)
    span = int(arrival[-1] - BASE_US)
    changes = max(ads, span // 10_000_000 * ads)  # each ad every 10 s on average
    change_ts = np.sort(BASE_US - 10_000_000 + rng.integers(0, span + 10_000_000, changes))
    ad_ids = np.concatenate([np.arange(ads), rng.integers(0, ads, changes - ads)])  # every ad from the start
    change_ts[:ads] = BASE_US - 10_000_000
    pq.write_table(pa.table({"ad_id": ad_ids, "bid": rng.random(changes).round(4),
                             "ts": pa.array(change_ts // 1000 * 1000, pa.timestamp("us"))}), paths["ads"])


def one_runtime(name: str, paths: dict, out: str, batch: int) -> dict:
    return time_runtime(DDL.format(**paths), QUERIES[name][0], out, batch)


def one_duckdb(name: str, paths: dict, out: str) -> dict:
    return time_duckdb(QUERIES[name][1].format(**paths), out, [f"'{paths[k]}'" for k in QUERIES[name][2]])


def child(args: list[str]) -> dict:
    return run_child(__file__, args)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000, help="impressions")
    parser.add_argument("--batch", type=int, default=256 * 1024, help="runtime micro-batch rows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", choices=sorted(QUERIES), default=None)
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, name, paths, out, *rest = args.child
        paths = json.loads(paths)
        result = one_runtime(name, paths, out, int(rest[0])) if kind == "runtime" else one_duckdb(name, paths, out)
        print(json.dumps(result))
        return

    os.makedirs(DATA, exist_ok=True)
    paths = {k: os.path.join(DATA, f"join_{k}_{args.events}.parquet") for k in ("imp", "clk", "ads")}
    if not all(os.path.exists(p) for p in paths.values()):
        print(f"generating {args.events:,} impressions, their clicks and a versioned ads table")
        generate(paths, args.events)
    print(f"{args.events:,} impressions; best of {args.repeat}; events/s counts every input row")
    print(f"{'query':<22} {'engine':<14} {'seconds':>8} {'events/s':>12} {'rows out':>10} {'peak MB':>8}")
    for name in ([args.only] if args.only else QUERIES):
        runs: dict[str, list[dict]] = {"dsms runtime": [], "duckdb batch": []}
        for _ in range(args.repeat):
            runs["dsms runtime"].append(child(["runtime", name, json.dumps(paths),
                                               os.path.join(DATA, "join_out_runtime.jsonl"), str(args.batch)]))
            runs["duckdb batch"].append(child(["duckdb", name, json.dumps(paths),
                                               os.path.join(DATA, "join_out_duckdb.jsonl")]))
        best = {k: min(v, key=lambda r: r["seconds"]) for k, v in runs.items()}
        for engine, r in best.items():
            print(f"{name:<22} {engine:<14} {r['seconds']:>8.3f} {r['events'] / r['seconds']:>12,.0f} "
                  f"{r['rows_out']:>10,} {r['peak_mb']:>8.0f}")
        rt, dk = best["dsms runtime"], best["duckdb batch"]
        if rt["rows_out"] != dk["rows_out"]:
            raise SystemExit(f"{name}: the engines disagree ({rt['rows_out']} and {dk['rows_out']} rows; "
                             f"{rt['late']} events late in the runtime)")
        ratio = (rt["events"] / rt["seconds"]) / (dk["events"] / dk["seconds"])
        print(f"{name:<22} runtime / duckdb batch: {ratio:.2f}x")


if __name__ == "__main__":
    main()
