"""MATCH_RECOGNIZE throughput: events/s of a rise-then-fall pattern per key, and how much of it is the walk.

Ticks (key, price, ts) go into a memory stream in batches of 10,000 rows, 1,000 ticks per second of event time
over ``--keys`` keys, prices drawn at random. The query finds, per key, one or more rises followed
by a fall within 10 seconds (PREV in DEFINE, FIRST/LAST/COUNT/AVG in MEASURES). Printed: events/s, the
ratio to an OVER aggregate over the same rows (which also holds rows until the watermark and sorts them
per key), matches found, the share of the time spent in the sequential pattern walk, and the state rows
at the end (bounded by WITHIN).

    python benchmarks/match_recognize.py [--events N] [--keys N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import dsms
from dsms.runtime.operators import match_nfa

BATCH = 10_000
DDL = """CREATE STREAM ticks (k BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')"""
MATCH = """SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES FIRST(A.price) AS start_price, LAST(B.price) AS top, C.price AS bottom,
           COUNT(B.price) AS rises, AVG(B.price) AS avg_rise, MATCH_ROWTIME() AS at
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C) WITHIN INTERVAL '10' SECOND
  DEFINE B AS B.price > PREV(B.price), C AS C.price < PREV(C.price))"""
OVER = """SELECT k, price, ts, MAX(price) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)
  AS hi FROM ticks"""


def batches(events: int, keys: int) -> list[pa.Table]:
    rng = np.random.default_rng(3)
    ts = np.arange(events, dtype=np.int64)  # 1,000 ticks per second (ms)
    table = pa.table({"k": rng.integers(0, keys, events), "price": rng.integers(0, 100, events),
                      "ts": pa.array(ts, pa.timestamp("ms"))})
    return [table.slice(i, BATCH) for i in range(0, events, BATCH)]


def run(sql: str, data: list[pa.Table]) -> tuple[float, int, int]:
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    out = 0
    began = time.perf_counter()
    for b in data:
        engine.insert("ticks", b)
        engine.run_until_idle()
        out += q.poll().num_rows
    state = q.job.env.state.rows()
    engine.end_input()
    engine.run_until_idle()
    out += q.poll().num_rows
    seconds = time.perf_counter() - began
    engine.close()
    return seconds, out, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--keys", type=int, default=1_000)
    args = parser.parse_args()
    data = batches(args.events, args.keys)

    walked = [0.0]
    walk = match_nfa.Matcher.walk

    def timed_walk(self, *a):
        t = time.perf_counter()
        try:
            return walk(self, *a)
        finally:
            walked[0] += time.perf_counter() - t

    match_nfa.Matcher.walk = timed_walk
    seconds, matches, state = run(MATCH, data)
    match_nfa.Matcher.walk = walk
    over_seconds, _, _ = run(OVER, data)
    rate, over_rate = args.events / seconds, args.events / over_seconds
    print(f"events {args.events:,}, keys {args.keys:,}, batches of {BATCH:,}")
    print(f"MATCH_RECOGNIZE  {rate:>12,.0f} events/s   {matches:,} matches, state rows before the end {state:,}")
    print(f"OVER (baseline)  {over_rate:>12,.0f} events/s")
    print(f"ratio MATCH_RECOGNIZE / OVER: {rate / over_rate:.2f}; "
          f"pattern walk: {walked[0] / seconds:.0%} of the MATCH_RECOGNIZE time")


if __name__ == "__main__":
    main()
