"""Throughput of the window family against the tumble rate, and against DuckDB batch.

Same data as throughput.py (5,000,000 ad impressions: 1,000 ads, 1,000,000
users, 10,000 events per second of event time, up to 4 s out of order).
Three queries, each through the dsms runtime (incrementally, into a
Parquet file sink) and through DuckDB as one batch statement (COPY to
Parquet), each in a fresh process:

- tumble:  10 s TUMBLE, COUNT and SUM per ad (the reference rate);
- hop:     HOP of 60 s sliding by 10 s, COUNT and SUM per ad;
- session: SESSION with a 30 s gap per user (1,000,000 users), COUNT and SUM.

Results go to Parquet so that writing millions of session rows costs the
same little for both engines (sessions produce 3.7 M rows, tumbles 51 k).

    python benchmarks/windows.py [--events N] [--repeat R] [--sink parquet|json]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import DATA, impressions, impressions_ddl, run_child, time_duckdb, time_runtime  # noqa: E402

QUERIES = {
    "tumble": """SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, SUM(cost) AS spend
        FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, ad_id""",
    "hop": """SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, SUM(cost) AS spend
        FROM TABLE(HOP(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '60' SECOND))
        GROUP BY window_start, window_end, ad_id""",
    "session": """SELECT window_start, window_end, user_id, COUNT(*) AS impressions, SUM(cost) AS spend
        FROM TABLE(SESSION(TABLE impressions PARTITION BY user_id, DESCRIPTOR(ts), INTERVAL '30' SECOND))
        GROUP BY window_start, window_end, user_id""",
}

DUCKDB = {
    "tumble": """SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS window_start,
                        window_start + INTERVAL '10 seconds' AS window_end, ad_id,
                        COUNT(*) AS impressions, SUM(cost) AS spend
                 FROM read_parquet('{path}') GROUP BY ALL""",
    "hop": """SELECT ws AS window_start, ws + INTERVAL '60 seconds' AS window_end, ad_id,
                     COUNT(*) AS impressions, SUM(cost) AS spend
              FROM (SELECT ad_id, cost, unnest(generate_series(
                      time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') - INTERVAL '50 seconds',
                      time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), INTERVAL '10 seconds')) AS ws
                    FROM read_parquet('{path}')) GROUP BY ALL""",
    "session": """WITH o AS (SELECT user_id, ts, cost, LAG(ts) OVER (PARTITION BY user_id ORDER BY ts) AS prev
                             FROM read_parquet('{path}')),
                       i AS (SELECT *, SUM(CASE WHEN prev IS NULL OR ts - prev > INTERVAL '30 seconds' THEN 1 ELSE 0
                                       END) OVER (PARTITION BY user_id ORDER BY ts ROWS UNBOUNDED PRECEDING) AS isl
                             FROM o)
                  SELECT MIN(ts) AS window_start, MAX(ts) + INTERVAL '30 seconds' AS window_end, user_id,
                         COUNT(*) AS impressions, SUM(cost) AS spend FROM i GROUP BY user_id, isl""",
}


def one_runtime(kind: str, path: str, out: str, batch: int, sink: str) -> dict:
    return time_runtime(impressions_ddl(path), QUERIES[kind], out, batch, fmt=sink)


def one_duckdb(kind: str, path: str, out: str, sink: str) -> dict:
    return time_duckdb(DUCKDB[kind].format(path=path), out, [f"read_parquet('{path}')"], fmt=sink)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--batch", type=int, default=256 * 1024, help="runtime micro-batch rows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sink", choices=("parquet", "json"), default="parquet")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        import json

        engine, kind, path, out, *rest = args.child
        result = one_runtime(kind, path, out, int(rest[0]), args.sink) if engine == "runtime" \
            else one_duckdb(kind, path, out, args.sink)
        print(json.dumps(result))
        return

    path = impressions(args.events)
    ext = "parquet" if args.sink == "parquet" else "jsonl"
    best: dict[tuple[str, str], dict] = {}
    # Rounds interleave the queries, so that a busy machine slows them alike.
    for _ in range(args.repeat):
        for kind in QUERIES:
            for engine in ("runtime", "duckdb"):
                out = os.path.join(DATA, f"out_{kind}_{engine}.{ext}")
                extra = [str(args.batch)] if engine == "runtime" else []
                r = run_child(__file__, [engine, kind, path, out, *extra], ["--sink", args.sink])
                if (kind, engine) not in best or r["seconds"] < best[kind, engine]["seconds"]:
                    best[kind, engine] = r
    for kind in QUERIES:
        assert best[kind, "runtime"]["rows_out"] == best[kind, "duckdb"]["rows_out"], f"{kind}: the engines disagree"

    def rate(r):
        return r["events"] / r["seconds"]

    tumble = rate(best["tumble", "runtime"])
    print(f"\n{args.events:,} events, {args.sink} sink, best of {args.repeat}")
    print(f"{'window':<8} {'runtime s':>9} {'runtime ev/s':>13} {'vs tumble':>9} {'duckdb s':>9} {'duckdb ev/s':>13} "
          f"{'rt/duckdb':>9} {'rows out':>10} {'peak MB':>8}")
    for kind in QUERIES:
        rt, dk = best[kind, "runtime"], best[kind, "duckdb"]
        print(f"{kind:<8} {rt['seconds']:>9.3f} {rate(rt):>13,.0f} {tumble / rate(rt):>8.2f}x {dk['seconds']:>9.3f} "
              f"{rate(dk):>13,.0f} {rate(rt) / rate(dk):>8.2f}x {rt['rows_out']:>10,} {rt['peak_mb']:>8.0f}")
    print("target: session and hop cost at most 3x the tumble rate (the 'vs tumble' column)")


if __name__ == "__main__":
    main()
