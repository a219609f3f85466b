"""Routes: the same queries on the runtime, on DuckDB and on Spark, over the same files.

Workloads (data generated once under benchmarks/data, in Parquet):

* tumble: the 10 s TUMBLE COUNT/SUM per ad of throughput.py, over its
  5,000,000 impressions, split into four files so Spark has files to read
  in parallel;
* joins: joins.py's impressions, clicks and versioned ads table (interval
  join inner and LEFT, temporal join).

Each query runs through ``dsms.Engine`` with ``SET 'engine'`` on each route
into a JSON file sink, ``--repeat`` times in one fresh process per route
and query; the best run is kept (warm: the first run of a process also
pays for imports and, on Spark, the JVM's warm-up). Spark's start-up (the
JVM and the session) is reported apart, with its first run.
Events/s counts every input row. The routes must write the same number of
rows.

It also measures how the DuckDB route gets its rows: dsms's own Parquet
reader streamed into DuckDB (what the route does: the runtime's parsing,
errors and late-event rule) against DuckDB reading the file itself, the
late-event rule then a window function over ``file_row_number``.

The continuous Spark route (Structured Streaming) runs the tumble workload
over the same four files as a watched directory, with a fifth file holding
one event far ahead that closes every window (so it writes the same rows):
one run of the stream until it has caught up (a micro-batch of the four
files, then one without data in which the watermark closes the windows).
Its time is the run's (the streaming query's start, its micro-batches and
its stop); the session's start-up and the first run of a process (Python
workers starting, the JVM warming up) are reported apart. The runtime on
the same watched directory is its baseline.

    python benchmarks/routes.py [--events N] [--join-events N] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DATA = os.path.join(HERE, "data")

import joins  # noqa: E402
import throughput  # noqa: E402

ROUTES = ("runtime", "duckdb", "spark")
TUMBLE_DDL = """CREATE STREAM impressions (ad_id BIGINT, user_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{dir}', format = 'parquet');"""


def workloads(tumble_dir: str, join_paths: dict) -> dict:
    """name -> (DDL, query)."""
    out = {"tumble 10 s per ad": (TUMBLE_DDL.format(dir=tumble_dir), throughput.QUERY)}
    for name, (query, _, _) in joins.QUERIES.items():
        out[name] = (joins.DDL.format(**join_paths), query)
    return out


def one(route: str, ddl: str, query: str, out: str, repeat: int) -> dict:
    """Run ``query`` on ``route`` ``repeat`` times in this process; the best run and the start-up."""
    import dsms

    runs, startup = [], 0.0
    for _ in range(repeat):
        engine = dsms.Engine()
        engine.scheduler.batch_rows = 256 * 1024
        engine.execute(f"SET 'engine' = '{route}'")
        engine.execute(ddl)
        engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {query}")
        began = time.perf_counter()
        engine.run_until_idle()
        elapsed = time.perf_counter() - began
        job = engine.scheduler.jobs["out"]
        assert job.done and getattr(job, "route", "runtime") == route
        start = job.run_stats.startup_seconds if route == "spark" else 0.0
        startup = max(startup, start)
        runs.append({"seconds": elapsed - start, "events": job.rows_in, "rows_out": job.metrics.rows_out})
        engine.close()
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "startup": startup, "first": runs[0]["seconds"]}


def stream(route: str, stream_dir: str, out: str, repeat: int) -> dict:
    """The tumble query over ``stream_dir`` watched, continuously: the runtime, or Spark Structured Streaming."""
    import shutil
    import tempfile

    import pyarrow.parquet as pq

    import dsms

    runs, startup = [], 0.0
    for _ in range(repeat):
        folder = tempfile.mkdtemp(prefix="dsms-bench-stream-")  # the files, and a small one added later
        for name in os.listdir(stream_dir):
            os.symlink(os.path.realpath(os.path.join(stream_dir, name)), os.path.join(folder, name))
        ddl = TUMBLE_DDL.format(dir=folder).replace("format = 'parquet'", "format = 'parquet', watch = 'true'")
        engine = dsms.Engine()
        engine.scheduler.batch_rows = 256 * 1024
        engine.execute(f"SET 'engine' = '{route}'")
        engine.execute(ddl)
        engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') "
                       f"AS {throughput.QUERY}")
        began = time.perf_counter()
        engine.run_until_idle()
        elapsed = time.perf_counter() - began
        job = engine.scheduler.jobs["out"]
        assert getattr(job, "streaming", False) == (route == "spark") and job.status == "running"
        if route == "spark":
            startup = max(startup, job.startup_seconds)
            elapsed = job.run_seconds
        run = {"seconds": elapsed, "events": job.rows_in, "rows_out": job.metrics.rows_out}
        # A small file arriving later (its events are behind the watermark: read, dropped as late): the cost
        # of one more run, what a live query pays per new file.
        small = pq.read_table(os.path.join(stream_dir, sorted(os.listdir(stream_dir))[0])).slice(0, 10_000)
        pq.write_table(small, os.path.join(folder, ".zz-more.parquet"))
        os.rename(os.path.join(folder, ".zz-more.parquet"), os.path.join(folder, "zz-more.parquet"))
        before, began = getattr(job, "run_seconds", 0.0), time.perf_counter()
        engine.run_until_idle()
        run["increment"] = job.run_seconds - before if route == "spark" else time.perf_counter() - began
        runs.append(run)
        engine.close()
        shutil.rmtree(folder, ignore_errors=True)
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "startup": startup, "first": runs[0]["seconds"],
            "increment": min(r["increment"] for r in runs)}


def stream_dir_of(tumble_dir: str) -> str:
    """The tumble files, and one more with an event far ahead in time: the watermark passes every window."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = tumble_dir + "_stream"
    if not os.path.isdir(target):
        os.makedirs(target)
        for name in sorted(os.listdir(tumble_dir)):
            os.symlink(os.path.join(tumble_dir, name), os.path.join(target, name))
        schema = pq.read_schema(os.path.join(tumble_dir, sorted(os.listdir(tumble_dir))[0]))
        far = pa.table({"ad_id": [0], "user_id": [0], "cost": [0.0], "ts": pa.array([4102444800000000],
                                                                                   pa.timestamp("us"))})
        pq.write_table(far.cast(schema), os.path.join(target, "part-9-end.parquet"))
    return target


def duckdb_sources(tumble_dir: str, repeat: int) -> dict:
    """The tumble query on DuckDB, its rows from dsms's reader (the route) or from DuckDB's read_parquet."""
    import duckdb
    import pyarrow as pa

    import dsms
    from dsms.runtime.batch_read import ReadPlan, read_scan

    engine = dsms.Engine()
    engine.execute(TUMBLE_DDL.format(dir=tumble_dir))
    lowered = engine.plan(throughput.QUERY).lowered("duckdb")
    spec = lowered.scans[0]
    files = sorted(os.path.join(tumble_dir, f) for f in os.listdir(tumble_dir))
    index = " ".join(f"WHEN '{f}' THEN {i}" for i, f in enumerate(files))
    native = f"""SELECT ad_id, user_id, cost, ts, __file, file_row_number AS __row,
                   max(epoch_us(ts)) OVER (ORDER BY __file, file_row_number
                                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS __mx
                 FROM (SELECT *, CAST(CASE filename {index} END AS INT) AS __file
                       FROM read_parquet({files!r}, file_row_number = true, filename = true))"""
    best = {"dsms reader (the route)": 1e9, "read_parquet + window": 1e9}
    for _ in range(repeat):
        con = duckdb.connect()
        plan = ReadPlan.of(spec)
        con.register(spec.relation, pa.RecordBatchReader.from_batches(plan.relation_schema, read_scan(plan)))
        began = time.perf_counter()
        con.sql(lowered.sql()).fetchall()
        best["dsms reader (the route)"] = min(best["dsms reader (the route)"], time.perf_counter() - began)
        con = duckdb.connect()
        con.execute(f"CREATE VIEW {spec.relation} AS {native}")
        began = time.perf_counter()
        con.sql(lowered.sql()).fetchall()
        best["read_parquet + window"] = min(best["read_parquet + window"], time.perf_counter() - began)
    return best


def split(source: str, target: str, parts: int = 4) -> None:
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    os.makedirs(target, exist_ok=True)
    step = -(-table.num_rows // parts)
    for i in range(parts):
        pq.write_table(table.slice(i * step, step), os.path.join(target, f"part-{i}.parquet"),
                       row_group_size=256 * 1024)


def child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"benchmark child {args[:2]} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=5_000_000, help="tumble workload impressions")
    parser.add_argument("--join-events", type=int, default=2_000_000, help="join workload impressions")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "sources":
            print(json.dumps(duckdb_sources(rest[0], int(rest[1]))))
        elif kind == "stream":
            print(json.dumps(stream(rest[0], rest[1], rest[2], int(rest[3]))))
        else:
            print(json.dumps(one(kind, rest[0], rest[1], rest[2], int(rest[3]))))
        return

    os.makedirs(DATA, exist_ok=True)
    single = os.path.join(DATA, f"impressions_{args.events}.parquet")
    if not os.path.exists(single):
        print(f"generating {args.events:,} impressions -> {single}")
        throughput.generate(single, args.events)
    tumble_dir = os.path.join(DATA, f"impressions_{args.events}_4")
    if not os.path.isdir(tumble_dir):
        split(single, tumble_dir)
    join_paths = {k: os.path.join(DATA, f"join_{k}_{args.join_events}.parquet") for k in ("imp", "clk", "ads")}
    if not all(os.path.exists(p) for p in join_paths.values()):
        print(f"generating {args.join_events:,} impressions, their clicks and a versioned ads table")
        joins.generate(join_paths, args.join_events)

    print(f"best of {args.repeat}; events/s counts every input row; Spark local[*] "
          f"({os.cpu_count()} cores), its start-up apart")
    print(f"{'workload':<24} {'route':<8} {'seconds':>8} {'events/s':>12} {'vs runtime':>10} {'rows out':>10}")
    startups = []
    for name, (ddl, query) in workloads(tumble_dir, join_paths).items():
        out = os.path.join(DATA, "routes_out.jsonl")
        results = {}
        for route in ROUTES:
            results[route] = child([route, ddl, query, out, str(args.repeat)])
        base = results["runtime"]["events"] / results["runtime"]["seconds"]
        for route, r in results.items():
            rate = r["events"] / r["seconds"]
            print(f"{name:<24} {route:<8} {r['seconds']:>8.3f} {rate:>12,.0f} {rate / base:>9.2f}x {r['rows_out']:>10,}")
        if len({r["rows_out"] for r in results.values()}) != 1:
            raise SystemExit(f"{name}: the routes disagree: {[r['rows_out'] for r in results.values()]}")
        startups.append((name, results["spark"]["startup"], results["spark"]["first"]))
    for name, startup, first in startups:
        print(f"spark start-up before {name!r}: {startup:.2f} s (session and JVM); first run {first:.2f} s")
    stream_dir = stream_dir_of(tumble_dir)
    out = os.path.join(DATA, "routes_out.jsonl")
    streams = {route: child(["stream", route, stream_dir, out, str(args.repeat)]) for route in ("runtime", "spark")}
    print(f"\ncontinuous, tumble over {args.events:,} events in a watched directory (4 files and one closing "
          "every window)")
    base = streams["runtime"]["events"] / streams["runtime"]["seconds"]
    for route, r in streams.items():
        rate = r["events"] / r["seconds"]
        name = "runtime" if route == "runtime" else "spark structured streaming"
        print(f"  {name:<28} {r['seconds']:>8.3f} s {rate:>12,.0f} events/s {rate / base:>6.2f}x {r['rows_out']:>10,} rows")
    if streams["runtime"]["rows_out"] != streams["spark"]["rows_out"]:
        raise SystemExit(f"continuous: the routes disagree: {[r['rows_out'] for r in streams.values()]}")
    spark = streams["spark"]
    print(f"  spark start-up: {spark['startup']:.2f} s (session and JVM); first run of the process {spark['first']:.2f} s")
    print(f"  one more file of 10,000 events, one more run: runtime {streams['runtime']['increment']:.3f} s, "
          f"spark {spark['increment']:.2f} s")
    src = child(["sources", tumble_dir, str(args.repeat)])
    print(f"\nDuckDB route, tumble over {args.events:,} events: where its rows come from")
    for how, seconds in src.items():
        print(f"  {how:<26} {seconds:>7.3f} s {args.events / seconds:>12,.0f} events/s")


if __name__ == "__main__":
    main()
