"""Does a long-fed memory stream stay flat? RSS and state-directory size after 1 M and after 5 M rows.

A program inserts ad impressions into a memory stream of an engine with a state directory, in batches
of 10,000 rows; a standing query (the 10-second TUMBLE COUNT/SUM per ad of throughput.py) reads them
into a blackhole sink and is checkpointed every 200 ms. After 1 M and after 5 M rows the process's
resident memory and the state directory's size are printed side by side, with their ratio (1.0: no
growth). The same feed with ``'memory.retention'`` so large that nothing is trimmed shows what the
stream cost before trimming. Each configuration runs in a fresh process.

    python benchmarks/memory.py [--rows N] [--batch N]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import QUERY, run_child  # noqa: E402

CONFIGS = {"trimmed (default)": "16MB", "nothing trimmed": "1TB"}


def rss_mb() -> float:
    """The process's resident memory now (not its peak)."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1024**2


def dir_mb(path: str) -> float:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files) / 1024**2


def batch_of(start: int, rows: int):
    """``rows`` impressions from row ``start`` on: 1,000 ads, 10,000 events per second of event time."""
    import numpy as np
    import pyarrow as pa

    n = np.arange(start, start + rows, dtype=np.int64)
    return pa.table({"ad_id": n % 1000, "user_id": (n * 7919) % 100_000, "cost": (n % 97) / 100.0,
                     "ts": pa.array(1_714_550_400_000_000 + n * 100, pa.timestamp("us"))})


def child(total: int, batch: int, retention: str) -> dict:
    import dsms

    state = tempfile.mkdtemp(prefix="dsms-memory-bench-")
    try:
        engine = dsms.Engine(state_dir=state)
        engine.execute(f"""
          SET 'checkpoint.interval' = '200 ms';
          SET 'memory.retention' = '{retention}';
          CREATE STREAM impressions (ad_id BIGINT, user_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
            WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
          CREATE SINK out WITH (connector = 'blackhole') AS {QUERY};
        """)
        marks, fed, began = {}, 0, time.perf_counter()
        while fed < total:
            engine.insert("impressions", batch_of(fed, batch))
            fed += batch
            engine.run_until_idle()
            if fed in (1_000_000, total):
                engine.checkpoint()
                gc.collect()
                marks[str(fed)] = {"rss_mb": rss_mb(), "state_mb": dir_mb(state)}
        elapsed = time.perf_counter() - began
        query = engine.queries.running["out"]
        result = {"marks": marks, "events_per_s": fed / elapsed, "checkpoints": query.checkpoint_seq,
                  "rows_out": query.job.metrics.rows_out}
        engine.close()
        return result
    finally:
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--child", nargs=2, metavar=("CONFIG", "RETENTION"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.rows, args.batch, args.child[1])))
        return
    first = str(min(1_000_000, args.rows))
    last = str(args.rows)
    print(f"memory stream -> 10 s TUMBLE per ad -> blackhole, checkpoints every 200 ms, {args.rows:,} rows "
          f"in batches of {args.batch:,}")
    print(f"{'':20} {'RSS @' + first:>12} {'RSS @' + last:>12} {'ratio':>6}   "
          f"{'state @' + first:>12} {'state @' + last:>12} {'ratio':>6}   {'events/s':>9}")
    for name, retention in CONFIGS.items():
        r = run_child(__file__, [name, retention], ["--rows", str(args.rows), "--batch", str(args.batch)])
        a, b = r["marks"][first], r["marks"][last]
        print(f"{name:20} {a['rss_mb']:10.0f}MB {b['rss_mb']:10.0f}MB {b['rss_mb'] / a['rss_mb']:6.2f}   "
              f"{a['state_mb']:10.1f}MB {b['state_mb']:10.1f}MB {b['state_mb'] / max(a['state_mb'], 1e-9):6.2f}   "
              f"{r['events_per_s']:9,.0f}")


if __name__ == "__main__":
    main()
