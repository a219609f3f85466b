"""The throughput benchmark's query on Flink SQL streaming, the dsms runtime and DuckDB batch.

The data is exactly what benchmarks/throughput.py reads: 5,000,000
generated ad impressions (``common.generate()``; 1,000 ads, 10,000 events per
second of event time, up to 4 s out of order, so no event is late). PyFlink
ships no Parquet format, so the impressions are also written as CSV and as
JSON lines (timestamps 'YYYY-MM-DD HH:MM:SS.fff'), and every engine is
measured on the same format:

* Flink SQL in streaming mode on a local mini-cluster (parallelism 2, one
  JVM for all runs): the filesystem source, ``WATERMARK FOR ts AS ts -
  INTERVAL '5' SECOND``, the 10-second TUMBLE COUNT/SUM per ad, a
  filesystem JSON sink; a 1,000-event job first, then the measured runs.
  A job's time is its net run time as Flink measures it
  (JobExecutionResult.getNetRuntime: from the job's start to its end,
  without the JVM start and the job's planning and mini-cluster start,
  which are reported separately).
* the dsms runtime and DuckDB batch, each run in a fresh process, as in
  throughput.py.

The runs are interleaved (round by round: Flink, dsms, DuckDB on each
format), so that other work on a shared machine weighs on all engines
alike; the best of the rounds is reported.

Flink reads the CSV without its header line (Flink's CSV format has no
header option; dsms's CSV format needs one): the same records, line for line.
The three outputs must hold the same rows (counts exactly, sums of the
DOUBLE costs to 1e-9 relative: the engines add in different orders).

    make bench-flink            # or: .venv/bin/python benchmarks/flink/bench.py [--events N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import math
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHMARKS = os.path.dirname(HERE)
RESULTS = os.path.join(BENCHMARKS, "results")
sys.path.insert(0, BENCHMARKS)

import flinkenv  # noqa: E402
from common import (  # noqa: E402
    COLUMNS,
    DATA,
    QUERY,
    WATERMARK,
    duckdb_tumble,
    impressions,
    impressions_ddl,
    run_child,
    time_runtime,
)

OUT_COLUMNS = "window_start TIMESTAMP(3), window_end TIMESTAMP(3), ad_id BIGINT, impressions BIGINT, spend DOUBLE"
TARGET = 10.0  # the runtime's stated target: ten times Flink SQL streaming on this query


# -- data ---------------------------------------------------------------------------

def prepare(events: int) -> dict[str, str]:
    """The Parquet file of throughput.py and its CSV (with and without header) and JSON-lines copies."""
    import duckdb

    stem = os.path.join(DATA, f"impressions_{events}")
    paths = {"parquet": impressions(events), "csv": stem + ".csv", "csv-noheader": stem + ".noheader.csv",
             "json": stem + ".jsonl", "tiny-csv": stem + ".tiny.csv", "tiny-json": stem + ".tiny.jsonl"}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    print("writing the impressions as CSV and JSON lines", file=sys.stderr)
    con = duckdb.connect()
    rows = f"""SELECT ad_id, user_id, cost, strftime(ts, '%Y-%m-%d %H:%M:%S.%g') AS ts
               FROM read_parquet('{paths["parquet"]}')"""
    con.execute(f"COPY ({rows}) TO '{paths['csv']}' (HEADER true)")
    con.execute(f"COPY ({rows}) TO '{paths['csv-noheader']}' (HEADER false)")
    con.execute(f"COPY ({rows}) TO '{paths['json']}' (FORMAT json)")
    con.execute(f"COPY ({rows} LIMIT 1000) TO '{paths['tiny-csv']}' (HEADER false)")
    con.execute(f"COPY ({rows} LIMIT 1000) TO '{paths['tiny-json']}' (FORMAT json)")
    # The copies hold the same values as the Parquet file, bit for bit (hashes of the doubles).
    check = ("SELECT COUNT(*), SUM(ad_id), SUM(user_id), SUM(hash(cost)::HUGEINT), SUM(epoch_ms(ts::TIMESTAMP)), "
             "SUM(hash(ts::TIMESTAMP)::HUGEINT) FROM ")
    want = con.execute(check + f"read_parquet('{paths['parquet']}')").fetchone()
    for fmt, reader in (("csv", f"read_csv('{paths['csv']}', header = true, columns = {_duck_columns()})"),
                        ("json", f"read_json('{paths['json']}', columns = {_duck_columns()})")):
        got = con.execute(check + reader).fetchone()
        if got != want:
            raise SystemExit(f"the {fmt} copy differs from the Parquet file: {got} != {want}")
    return paths


def _duck_columns() -> str:
    return "{'ad_id': 'BIGINT', 'user_id': 'BIGINT', 'cost': 'DOUBLE', 'ts': 'TIMESTAMP'}"


# -- dsms and DuckDB, each in a fresh process ------------------------------------------

def one_dsms(path: str, fmt: str, out: str, batch: int) -> dict:
    return time_runtime(impressions_ddl(path, fmt), QUERY, out, batch)


def one_duckdb(path: str, fmt: str, out: str) -> dict:
    reader = {"parquet": f"read_parquet('{path}')",
              "csv": f"read_csv('{path}', header = true, columns = {_duck_columns()})",
              "json": f"read_json('{path}', columns = {_duck_columns()})"}[fmt]
    return duckdb_tumble(reader, out)


def child(args: list[str]) -> dict:
    return run_child(__file__, args)


# -- Flink ------------------------------------------------------------------------------

def flink_spec(paths: dict, formats: list[str], repeat: int, parallelism: int) -> dict:
    """Per format a 1,000-event job first (the JVM's first, cold job, and a job's fixed cost), then the
    5 M-event runs, round by round (the order the benchmark interleaves them with dsms and DuckDB)."""
    ddl, jobs = [], []
    flink_path = {"csv": paths["csv-noheader"], "json": paths["json"]}
    tiny_path = {"csv": paths["tiny-csv"], "json": paths["tiny-json"]}
    for fmt in formats:
        for name, path in ((f"imp_{fmt}", flink_path[fmt]), (f"tiny_{fmt}", tiny_path[fmt])):
            ddl.append(f"CREATE TABLE {name} ({COLUMNS}, {WATERMARK}) "
                       f"WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = '{fmt}')")
    runs = [(fmt, "tiny", f"tiny_{fmt}") for fmt in formats]
    runs += [(fmt, str(i), f"imp_{fmt}") for i in range(repeat) for fmt in formats]
    for fmt, run, source in runs:
        out = os.path.join(DATA, "flink_out", f"{fmt}_{run}")
        shutil.rmtree(out, ignore_errors=True)
        sink = f"out_{fmt}_{run}"
        ddl.append(f"CREATE TABLE {sink} ({OUT_COLUMNS}) "
                   f"WITH ('connector' = 'filesystem', 'path' = '{out}', 'format' = 'json')")
        jobs.append({"name": f"{fmt}/{run}", "out": out,
                     "sql": f"INSERT INTO {sink} " + QUERY.strip().replace("TABLE impressions", f"TABLE {source}")})
    return {"parallelism": parallelism, "ddl": ddl, "jobs": jobs}


# -- the same rows ----------------------------------------------------------------------

def _ts(s: str) -> str:
    """'2023-11-14 22:13:10', '...10.000' and '...T22:13:10' alike -> milliseconds text."""
    t = dt.datetime.fromisoformat(s.replace("T", " ").rstrip("Z"))
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def load_rows(path: str) -> dict:
    files = sorted(glob.glob(os.path.join(path, "*"))) if os.path.isdir(path) else [path]
    rows = {}
    for name in files:
        if os.path.basename(name).startswith("."):
            continue
        with open(name) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    key = (_ts(r["window_start"]), r["ad_id"])
                    if key in rows:
                        raise SystemExit(f"{path}: the row {key} appears twice")
                    rows[key] = (_ts(r["window_end"]), r["impressions"], r["spend"])
    return rows


def compare(name_a: str, a: dict, name_b: str, b: dict) -> dict:
    """Same keys, same ends and counts, sums equal to 1e-9 relative; how many sums differ in the last bits."""
    problems = []
    for key in sorted(a.keys() - b.keys())[:5]:
        problems.append(f"only in {name_a}: {key} {a[key]}")
    for key in sorted(b.keys() - a.keys())[:5]:
        problems.append(f"only in {name_b}: {key} {b[key]}")
    inexact, worst = 0, 0.0
    for key in a.keys() & b.keys():
        (ea, ca, sa), (eb, cb, sb) = a[key], b[key]
        if ea != eb or ca != cb or not math.isclose(sa, sb, rel_tol=1e-9, abs_tol=1e-9):
            if len(problems) < 10:
                problems.append(f"{key}: {name_a} {a[key]} vs {name_b} {b[key]}")
        elif sa != sb:
            inexact += 1
            worst = max(worst, abs(sa - sb))
    return {"rows": (len(a), len(b)), "problems": problems, "sums_differing_in_last_bits": inexact,
            "largest_sum_difference": worst}


# -- main -------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256 * 1024, help="dsms micro-batch rows (as throughput.py)")
    parser.add_argument("--parallelism", type=int, default=os.cpu_count() or 2, help="Flink parallelism (default: cores)")
    parser.add_argument("--formats", default="csv,json", help="formats Flink reads: csv, json")
    parser.add_argument("--child", nargs="+")
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        result = one_dsms(rest[0], rest[1], rest[2], int(rest[3])) if kind == "dsms" else \
            one_duckdb(rest[0], rest[1], rest[2])
        print(json.dumps(result))
        return

    formats = [f.strip() for f in args.formats.split(",") if f.strip()]
    load_before = os.getloadavg()
    if load_before[0] > 1.0:
        print(f"warning: load average {load_before[0]:.1f} on {os.cpu_count()} cores: other work is running, "
              "and the numbers will show it", file=sys.stderr)
    paths = prepare(args.events)
    os.makedirs(RESULTS, exist_ok=True)
    spec = flink_spec(paths, formats, args.repeat, args.parallelism)
    outputs = {j["name"]: j["out"] for j in spec["jobs"]}
    print(f"starting Flink (parallelism {args.parallelism}); {args.repeat} rounds of Flink, dsms and DuckDB "
          f"on {', '.join(formats)}, then dsms and DuckDB on parquet", file=sys.stderr)
    session = flinkenv.Stepped(spec, log=os.path.join(RESULTS, "flink.log"))
    jobs: dict[str, dict] = {}

    def flink_job(name: str) -> None:
        jobs[name] = session.next()
        if "error" in jobs[name]:
            session.close()
            raise SystemExit(f"Flink job {name} failed: {jobs[name]['error']}")

    try:
        for fmt in formats:
            flink_job(f"{fmt}/tiny")
        runs: dict[str, dict[str, list]] = {fmt: {"dsms": [], "duckdb": []} for fmt in formats + ["parquet"]}
        for i in range(args.repeat):
            for fmt in formats + ["parquet"]:
                print(f"round {i + 1}: {fmt}", file=sys.stderr)
                if fmt in formats:
                    flink_job(f"{fmt}/{i}")
                path = paths[fmt]
                dsms_out = os.path.join(DATA, f"out_dsms_{fmt}.jsonl")
                duck_out = os.path.join(DATA, f"out_duckdb_{fmt}.jsonl")
                runs[fmt]["dsms"].append(child(["dsms", path, fmt, dsms_out, str(args.batch)]))
                runs[fmt]["duckdb"].append(child(["duckdb", path, fmt, duck_out]))
    finally:
        flink = session.close()
    table, checks = [], []
    for fmt in formats + ["parquet"]:
        row = {"format": fmt, **{k: min(v, key=lambda r: r["seconds"]) for k, v in runs[fmt].items()}}
        if fmt in formats:
            measured = [(jobs[f"{fmt}/{i}"]["runs"][0], jobs[f"{fmt}/{i}"]) for i in range(args.repeat)]
            best, best_job = min(measured, key=lambda m: m[0]["net_ms"])
            tiny = jobs[f"{fmt}/tiny"]["runs"][0]
            row["flink"] = {"seconds": best["net_ms"] / 1000, "events": args.events, "submit_s": best["submit_s"],
                            "wall_s": best["submit_s"] + best["wait_s"], "first_s": measured[0][0]["net_ms"] / 1000,
                            "tiny_net_s": tiny["net_ms"] / 1000, "tiny_submit_s": tiny["submit_s"]}
            flink_rows = load_rows(outputs[best_job["name"]])
            dsms_rows = load_rows(os.path.join(DATA, f"out_dsms_{fmt}.jsonl"))
            duck_rows = load_rows(os.path.join(DATA, f"out_duckdb_{fmt}.jsonl"))
            checks.append((fmt, compare("flink", flink_rows, "dsms", dsms_rows),
                           compare("duckdb", duck_rows, "dsms", dsms_rows)))
            row["flink"]["rows_out"] = len(flink_rows)
            if flink.get("jvm_peak_mb"):
                row["flink"]["peak_mb"] = flink["jvm_peak_mb"]
        table.append(row)

    print(f"\n10 s TUMBLE COUNT/SUM per ad, {args.events:,} events, best of {args.repeat} interleaved rounds; "
          f"Flink {flink['flink_version']} (Java {flink['java_version']}) streaming, parallelism {flink['parallelism']}")
    print(f"{'format':<8} {'engine':<16} {'seconds':>8} {'events/s':>12} {'rows out':>9} {'peak MB':>8}")
    for row in table:
        for name, key in (("Flink streaming", "flink"), ("dsms runtime", "dsms"), ("DuckDB batch", "duckdb")):
            if key in row:
                r = row[key]
                peak = f"{r['peak_mb']:>8.0f}" if "peak_mb" in r else f"{'':>8}"
                print(f"{row['format']:<8} {name:<16} {r['seconds']:>8.3f} {r['events'] / r['seconds']:>12,.0f} "
                      f"{r['rows_out']:>9,} {peak}")
    print("\nratios on the same format (events/s):")
    for row in table:
        if "flink" in row:
            rate = {k: row[k]["events"] / row[k]["seconds"] for k in ("flink", "dsms", "duckdb")}
            print(f"  {row['format']:<5} dsms / Flink {rate['dsms'] / rate['flink']:5.2f}x   "
                  f"DuckDB / Flink {rate['duckdb'] / rate['flink']:5.2f}x   dsms / DuckDB {rate['dsms'] / rate['duckdb']:4.2f}x"
                  f"   (target: dsms >= {TARGET:.0f}x Flink)")
    print(f"\nFlink start-up, not in the times above: JVM and table environment {flink['jvm_start_s']:.1f} s; "
          f"per job, planning and the job's mini-cluster start (the JVM's first job is {formats[0]}'s 1,000-event job):")
    for row in table:
        if "flink" in row:
            f = row["flink"]
            print(f"  {row['format']:<5} 1,000-event job: start {f['tiny_submit_s']:.1f} s, runs {f['tiny_net_s']:.2f} s "
                  f"(a fixed cost inside every job's time); {args.events:,}-event jobs: start {f['submit_s']:.1f} s, "
                  f"first run {f['first_s']:.2f} s, best {f['seconds']:.2f} s, submit to result {f['wall_s']:.2f} s")
    print(f"  (Flink's peak memory is the whole JVM's over all its runs; load average before "
          f"{load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    print("\nsame rows:")
    ok = True
    for fmt, vs_flink, vs_duck in checks:
        for label, c in (("Flink vs dsms", vs_flink), ("DuckDB vs dsms", vs_duck)):
            ok &= not c["problems"]
            status = "same rows" if not c["problems"] else "DIFFERENT"
            print(f"  {fmt:<5} {label}: {status} ({c['rows'][0]:,} and {c['rows'][1]:,} rows; "
                  f"{c['sums_differing_in_last_bits']:,} sums differ in the last bits, "
                  f"at most {c['largest_sum_difference']:.1e})")
            for p in c["problems"]:
                print(f"      {p}")
    with open(os.path.join(RESULTS, "flink.json"), "w") as f:
        json.dump({"flink": {k: v for k, v in flink.items() if k != "jobs"}, "table": table,
                   "checks": [{"format": fmt, "flink_vs_dsms": a, "duckdb_vs_dsms": b} for fmt, a, b in checks]},
                  f, indent=1)
    if not ok:
        raise SystemExit("the engines disagree")


if __name__ == "__main__":
    main()
