"""Flink as an independent check of dsms: the same queries, the same files, the same final rows?

Small generated event files (JSON lines, out of order by up to 4 s, a few
events that are very late) and a table of Debezium JSON changes (creates,
updates, deletes and re-creates by key) are read by Flink SQL 2.3 in
streaming mode and by dsms (the Python Engine, file sources). Each query's changelog is
collected from both, applied to an empty table, and the final tables are
compared as multisets of rows (DOUBLE values to 1e-9 relative), along with
the column names and types.

Flink runs on a local mini-cluster with parallelism 1 and
``pipeline.auto-watermark-interval = 0``. Flink's SQL watermark assigner
(WatermarkAssignerOperator) emits a watermark on a processing-time timer
every interval, and also right after an event whenever the watermark has
advanced by more than the interval since the last one it emitted; with 0 it
emits one after every event that advances it, which is how dsms defines the
watermark (docs/time.md). (With the default 200 ms, Flink's watermark can
trail dsms's by up to 200 ms of event time, so an event less than that far
behind dsms's watermark could be on time in Flink; the data below has no
such event, so the default gives the same rows: ``--watermark-interval
200``.) One reader keeps the file's order; with more, a second reader
that holds no split holds the watermark back until it finishes, so what is
late would depend on timing. The sources are bounded, so every window fires
at the end of input.

Each case that differs in a way that is understood carries a ``known``
note; the run fails (exit 1) when a case differs without one, or when a
known difference goes away (so the note can be removed).

The data is written by conformance_data.py, the cases are listed in
conformance_cases.py and the answers compared by conformance_compare.py;
this module runs both engines and reports.

    make flink-conformance          # or: .venv/bin/python benchmarks/flink/conformance.py [-k NAME]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import sys
import time

import flinkenv
from conformance_cases import CASES
from conformance_compare import compare, show
from conformance_data import COLUMNS, LTZ_SOURCES, NESTED, SOURCES, TABLES, timestamp_text, write_data

HERE = os.path.dirname(os.path.abspath(__file__))

# -- running ----------------------------------------------------------------------------------

def source_ddl(name: str, path: str, flink: bool) -> str:
    options = (f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'json'" if flink
               else f"connector = 'file', path = '{path}', format = 'json'")
    return f"CREATE TABLE {name} ({COLUMNS}) WITH ({options})"


def table_ddl(name: str, path: str, flink: bool) -> str:
    options = (f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'debezium-json'" if flink
               else f"connector = 'file', path = '{path}', format = 'debezium-json'")
    return f"CREATE TABLE {name} ({TABLES[name]}) WITH ({options})"


def nested_ddl(name: str, path: str, flink: bool) -> str:
    options = (f"'connector' = 'filesystem', 'path' = '{path}', 'format' = 'json'" if flink
               else f"connector = 'file', path = '{path}', format = 'json'")
    return f"CREATE TABLE {name} ({NESTED[name]}) WITH ({options})"


def all_ddl(paths: dict, flink: bool) -> list[str]:
    return ([source_ddl(n, paths[n], flink) for n in SOURCES] + [table_ddl(n, paths[n], flink) for n in TABLES]
            + [nested_ddl(n, paths[n], flink) for n in NESTED]
            + [source_ddl(n, paths[n], flink).replace(COLUMNS, columns) for n, columns in LTZ_SOURCES.items()])


def run_flink(paths: dict, cases: list[dict], watermark_interval_ms: int = 0, parallelism: int = 1) -> dict:
    """Run the cases in Flink: one job per case, one mini-cluster per session time zone and Flink configuration
    (a case's ``flink_config``: what dsms spells in the query, e.g. ``table.exec.emit.allow-lateness``)."""
    result: dict = {}

    def setting(c: dict) -> tuple:
        return c.get("zone"), tuple(sorted(c.get("flink_config", {}).items()))

    for zone, extra in dict.fromkeys(setting(c) for c in cases):
        group = [c for c in cases if setting(c) == (zone, extra)]
        config = {"pipeline.auto-watermark-interval": f"{watermark_interval_ms} ms", **dict(extra)}
        if zone:
            config["table.local-time-zone"] = zone
        if any(c.get("python") for c in group):
            # Flink's Python worker: this venv's Python, the cases' module. A bundle of one row: Flink's Python
            # operator holds the watermark back until its bundle of rows is done, so with bigger bundles an
            # event behind the watermark reaches a window before the watermark that makes it late.
            config.update({"python.files": os.path.join(HERE, "conformance_udfs.py"),
                           "python.executable": flinkenv.PYTHON, "python.client.executable": flinkenv.PYTHON,
                           "python.fn-execution.bundle.size": "1"})
        ddl = all_ddl(paths, flink=True)
        ddl += list(dict.fromkeys(v for c in group for v in c.get("views", [])))  # cases may share a function
        spec = {"parallelism": parallelism, "config": config, "ddl": ddl,
                "jobs": [{"name": c["name"], "sql": c["sql"], "collect": True} for c in group]}
        part = flinkenv.run(spec)
        for e in part["ddl_errors"]:
            print(f"Flink refused: {e['ddl'][:80]}...: {e['error']}", file=sys.stderr)
        result = {**part, "jobs": result.get("jobs", []) + part["jobs"]}
    return result


def run_dsms(paths: dict, case: dict) -> dict:
    import dsms

    engine = dsms.Engine()
    engine.execute("SET 'engine' = 'runtime'")  # the incremental runtime, not a batch route
    if case.get("zone"):
        engine.execute(f"SET 'table.local-time-zone' = '{case['zone']}'")
    try:
        for ddl in all_ddl(paths, flink=False):
            engine.execute(ddl)
        for view in case.get("views", []):
            engine.execute(view)
        began = time.perf_counter()
        q = engine.query(case.get("dsms_sql", case["sql"]))  # dsms spells some Flink settings in the query
        rows = []
        for batch in q.changes():
            types = [f.type for f in batch.schema if f.name != "op"]
            for r in batch.to_pylist():
                op = r.pop("op")
                rows.append([op] + [value(v, t) for v, t in zip(r.values(), types)])
        final = q.snapshot()
        snapshot = [[value(v, t) for v, t in zip(r.values(), final.schema.types)] for r in final.to_pylist()]
        # The snapshot's schema: QueryHandle.schema of an updating query also lists the internal __op column.
        return {"columns": final.schema.names, "types": [arrow_type(t) for t in final.schema.types], "rows": rows,
                "snapshot": snapshot, "late": dict(q.job.late), "seconds": time.perf_counter() - began}
    except Exception as e:  # the point is to report it next to Flink's answer
        return {"error": f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"}
    finally:
        engine.close()


def value(v, t=None):
    """As runner.py gives Flink's values: timestamps as text, dates and times in ISO form, decimals tagged; a MAP
    (of Arrow type ``t``, whose values Arrow gives as pairs) as a dict, also an empty one."""
    import pyarrow as pa

    if t is not None and v is not None and pa.types.is_map(t):
        return {str(a): value(b, t.item_type) for a, b in v}
    if t is not None and v is not None and pa.types.is_list(t):
        return [value(x, t.value_type) for x in v]
    if isinstance(v, dt.datetime):
        return timestamp_text(v)
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return {"decimal": str(v)}
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {str(a): value(b) for a, b in v}  # a MAP (Arrow gives its pairs), keyed as JSON keys them
    if isinstance(v, list):
        return [value(x) for x in v]
    return v


def arrow_type(t) -> str:
    import pyarrow as pa

    if pa.types.is_list(t):
        return f"ARRAY<{arrow_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"MAP<{arrow_type(t.key_type)}, {arrow_type(t.item_type)}>"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP_LTZ(3)" if t.tz else "TIMESTAMP(3)"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    names = {pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT",
             pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.string(): "STRING", pa.large_string(): "STRING",
             pa.bool_(): "BOOLEAN", pa.date32(): "DATE"}
    return names.get(t, str(t))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", help="run the cases whose name contains this")
    parser.add_argument("--rows", type=int, default=6, help="rows of each difference to print")
    parser.add_argument("--json", help="also write the comparison to this file")
    parser.add_argument("--watermark-interval", type=int, default=0, metavar="MS",
                        help="Flink's pipeline.auto-watermark-interval (0: a watermark after every event; "
                             "Flink's default is 200)")
    parser.add_argument("--parallelism", type=int, default=1, help="Flink's parallelism (default 1: see above)")
    args = parser.parse_args()
    began = time.perf_counter()
    cases = [c for c in CASES if not args.k or args.k in c["name"]]
    paths = write_data()
    flink = run_flink(paths, cases, args.watermark_interval, args.parallelism)
    flink_jobs = {j["name"]: j for j in flink["jobs"]}
    flink_s = time.perf_counter() - began
    marks = (f"a watermark every {args.watermark_interval} ms" if args.watermark_interval
             else "a watermark after every event")
    print(f"Flink {flink['flink_version']} (Java {flink['java_version']}), streaming, parallelism "
          f"{flink['parallelism']}, {marks}; {len(cases)} queries in {flink_s:.0f} s\n")
    unexpected, report = 0, []
    for case in cases:
        ours = run_dsms(paths, case)
        found = compare(case, flink_jobs.get(case["name"], {"error": "not run"}), ours)
        known = set(case.get("known", {}))
        new = set(found) - known
        gone = known - set(found)
        status = "same" if not found else ("DIFFERENT" if new else "known difference")
        if gone:
            status += f" (the known {'/'.join(sorted(gone))} difference is gone: update the case)"
        unexpected += bool(new or gone)
        nrows = len(flink_jobs.get(case["name"], {}).get("rows", []))
        print(f"{case['name']:<24} {status}  [Flink {nrows} changes, dsms {len(ours.get('rows', []))}]")
        for kind, detail in found.items():
            if kind == "rows" and isinstance(detail, tuple):
                nf, nd, only_flink, only_dsms, total_f, total_d = detail
                print(f"    rows: {nf} only in Flink, {nd} only in dsms (final tables of {total_f} and {total_d} rows)")
                for r in only_flink[:args.rows]:
                    print(f"      Flink {show(r)}")
                for r in only_dsms[:args.rows]:
                    print(f"      dsms  {show(r)}")
            else:
                print(f"    {kind}: {detail}")
        for kind in sorted(set(found) & known):
            print(f"    known ({kind}): {case['known'][kind]}")
        report.append({"case": case["name"], "status": status, "found": {k: repr(v) for k, v in found.items()},
                       "same_rows": not ({"rows", "error"} & set(found))})
    print(f"\n{len(cases)} queries: the same final rows in {sum(r['same_rows'] for r in report)} "
          f"({sum(1 for r in report if r['status'] == 'same')} with the same names and types too); "
          f"{unexpected} with unexpected differences; {time.perf_counter() - began:.0f} s in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
