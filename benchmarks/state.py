"""What durable state costs: a standing query with and without a state directory, checkpoints and restarts.

1. Throughput: the 10-second TUMBLE COUNT/SUM per ad of throughput.py (generated Parquet, into a JSON
   file sink) through the runtime without a state directory, with one (a checkpoint every 200 ms), and
   through DuckDB as one batch statement, each in a fresh process; events/s and the ratio to DuckDB.
2. A checkpoint of large state: a materialized view of COUNT/SUM per user over N events (one state row
   and one view row per user): the time of one checkpoint (after the view has applied its pending
   changes, as any read of it does), its size on disk, and the time to open an engine on the
   directory (the restore).
3. Memory-stream inserts: batches of 1,000 rows into a memory stream, with and without the journal.

    python benchmarks/state.py [--events N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import QUERY, duckdb_tumble, impressions, impressions_ddl, run_child  # noqa: E402


def one_runtime(path: str, out: str, state_dir: str | None) -> dict:
    import dsms

    engine = dsms.Engine(state_dir=state_dir)
    engine.execute(f"""
      SET 'checkpoint.interval' = '200 ms';
      {impressions_ddl(path)};
      CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {QUERY};
    """)
    began = time.perf_counter()
    engine.run_until_idle()
    elapsed = time.perf_counter() - began
    query = engine.queries.running["out"]
    result = {"seconds": elapsed, "events": query.job.rows_in, "checkpoints": query.checkpoint_seq}
    engine.close()
    return result


def big_state(path: str, state_dir: str) -> dict:
    import dsms

    engine = dsms.Engine(state_dir=state_dir)
    engine.execute(f"""
      SET 'checkpoint.interval' = '1 h';
      {impressions_ddl(path, options=", watch = 'true'")};
      CREATE MATERIALIZED VIEW per_user AS SELECT user_id, COUNT(*) AS n, SUM(cost) AS spend
        FROM impressions GROUP BY user_id;
    """)
    engine.run_until_idle()
    query = engine.queries.running["per_user"]
    rows = query.job.env.state.rows()
    began = time.perf_counter()
    engine.execute("SELECT COUNT(*) FROM per_user")  # the view applies its pending changes (a pull query does)
    apply = time.perf_counter() - began
    began = time.perf_counter()
    engine.checkpoint()
    seconds = time.perf_counter() - began
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(state_dir) for f in files)
    engine.close()
    began = time.perf_counter()
    engine = dsms.Engine(state_dir=state_dir)
    restore = time.perf_counter() - began
    assert engine.execute("SELECT COUNT(*) AS users FROM per_user").table.column(0)[0].as_py() == rows
    engine.close()
    return {"state_rows": rows, "apply_s": apply, "checkpoint_s": seconds, "bytes": size, "restore_s": restore}


def inserts(state_dir: str | None, batches: int = 1000, rows: int = 1000) -> dict:
    import numpy as np
    import pyarrow as pa

    import dsms

    engine = dsms.Engine(state_dir=state_dir)
    engine.execute("CREATE STREAM s (k BIGINT, v DOUBLE) WITH (connector = 'memory')")
    batch = pa.table({"k": np.arange(rows), "v": np.random.default_rng(1).random(rows)})
    began = time.perf_counter()
    for _ in range(batches):
        engine.insert("s", batch)
    seconds = time.perf_counter() - began
    engine.close()
    return {"seconds": seconds, "rows": batches * rows}


def child(kind: str, *args) -> dict:
    return run_child(__file__, [kind, *args])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "runtime":
            result = one_runtime(rest[0], rest[1], rest[2] if len(rest) > 2 else None)
        elif kind == "duckdb":
            result = duckdb_tumble(f"read_parquet('{rest[0]}')", rest[1])
        elif kind == "big_state":
            result = big_state(rest[0], rest[1])
        else:
            result = inserts(rest[0] if rest else None)
        print(json.dumps(result))
        return

    path = impressions(args.events)
    work = tempfile.mkdtemp()
    try:
        duck = child("duckdb", path, os.path.join(work, "duck.json"))
        plain = child("runtime", path, os.path.join(work, "plain.jsonl"))
        durable = child("runtime", path, os.path.join(work, "durable.jsonl"), os.path.join(work, "state1"))
        print(f"standing query over {args.events:,} events (10 s TUMBLE COUNT/SUM per ad, JSON file sink)")
        for name, r in (("DuckDB batch", duck), ("runtime", plain), ("runtime, state dir", durable)):
            rate = r["events"] / r["seconds"]
            extra = f"  ({r['checkpoints']} checkpoints)" if "checkpoints" in r and name.endswith("dir") else ""
            print(f"  {name:<22} {r['seconds']:7.2f} s  {rate:>12,.0f} events/s  "
                  f"{duck['seconds'] / r['seconds']:6.2f}x DuckDB{extra}")
        big = child("big_state", path, os.path.join(work, "state2"))
        print(f"checkpoint of a view with {big['state_rows']:,} state rows: {big['checkpoint_s']:.2f} s, "
              f"{big['bytes'] / 1e6:.1f} MB on disk (the view's rows brought up to date first: "
              f"{big['apply_s']:.2f} s); opening the engine again (restore): {big['restore_s']:.2f} s")
        memory = child("inserts")
        journal = child("inserts", os.path.join(work, "state3"))
        print(f"memory-stream inserts of 1,000 rows: {memory['rows'] / memory['seconds']:,.0f} rows/s in memory, "
              f"{journal['rows'] / journal['seconds']:,.0f} rows/s journalled "
              f"({journal['seconds'] / memory['seconds']:.1f}x the time)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
