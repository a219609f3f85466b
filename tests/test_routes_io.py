"""Routes end to end: bad input, file sinks, `dsms run --engine`, EXPLAIN, and what `auto` picks.

Bad rows must stop a batch route exactly where they stop the runtime (the
same file, line and column), or go to the same dead-letter file; sinks on
a batch route are written by the runtime's own writers, so their lines
match the runtime's (an updating result as its final rows). The Spark
route is compared where PySpark is installed (the ``batch_routes`` fixture).
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsms
from dsms.cli import main
from dsms.runtime.changelog import apply_changes

from oracle import duck, events, late_mask, rows, tumble_on_time

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json'{extra});"""
WINDOWS = """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts),
  INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""


def write_jsonl(path, records) -> None:
    with open(path, "w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


def ev_lines(table: pa.Table) -> list[dict]:
    return [{**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]} for r in table.to_pylist()]


def engine_on(route: str, ddl: str) -> dsms.Engine:
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    engine.execute("SET 'batch.size' = '37'")  # the runtime in many micro-batches (batch routes ignore it)
    return engine


def failure(route: str, ddl: str, query: str) -> str:
    engine = engine_on(route, ddl)
    engine.query(query)
    with pytest.raises(dsms.SourceError) as info:
        engine.run_until_idle()
    return str(info.value)


@pytest.mark.parametrize("bad, where", [
    ('{"k": "a", "v": 3, "ts": "2024-01-01 00:00:03"', "line 3"),  # malformed
    ('{"k": "a", "v": "three", "ts": "2024-01-01 00:00:03"}', "line 3, column 'v'"),  # not a BIGINT
    ('{"k": "a", "v": 3, "ts": null}', "column 'ts'"),  # no event time
])
def test_a_bad_row_stops_every_route_with_the_same_file_and_line(tmp_path, bad, where, batch_routes):
    os.makedirs(tmp_path / "in")
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"}])
    write_jsonl(tmp_path / "in" / "b.jsonl", [{"k": "a", "v": 2, "ts": "2024-01-01 00:00:02"}] * 2 + [bad])
    ddl = DDL.format(path=tmp_path / "in", extra="")
    messages = {route: failure(route, ddl, WINDOWS) for route in ("runtime", *batch_routes)}
    assert where in messages["runtime"] and "b.jsonl" in messages["runtime"], messages
    assert all(messages[r] == messages["runtime"] for r in batch_routes), messages


def test_skipped_rows_reach_the_same_dead_letter_file_on_every_route(tmp_path, batch_routes):
    good = ev_lines(events(60, seed=3))
    os.makedirs(tmp_path / "in")
    write_jsonl(tmp_path / "in" / "a.jsonl", good[:30] + ["not json"])
    write_jsonl(tmp_path / "in" / "b.jsonl", good[30:40] + ['{"k": "x", "v": 1.5, "ts": "2024-03-01 12:00:00"}'] +
                good[40:])
    results, letters = {}, {}
    for route in ("runtime", *batch_routes):
        dead = tmp_path / f"{route}.dead.jsonl"
        engine = engine_on(route, DDL.format(path=tmp_path / "in", extra=f", on_error = 'skip', dead_letter = '{dead}'"))
        handle = engine.query(WINDOWS)
        engine.run_until_idle()
        results[route] = rows(handle.snapshot())
        letters[route] = [json.loads(line) for line in open(dead)]
        skipped = handle.job.stats().skipped
        assert skipped == {"ev": 2}, (route, skipped)
    assert [(d["line"], d["column"]) for d in letters["runtime"]] == [(31, None), (11, "v")]
    assert all(letters[r] == letters["runtime"] and results[r] == results["runtime"] for r in batch_routes)


@pytest.fixture(scope="module")
def ev_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ev")
    data = events(300, seed=21, keys=3, span_s=60, disorder_s=5)
    write_jsonl(root / "ev.jsonl", ev_lines(data))
    return root, data


def _sink(route: str, root, fmt: str, query: str) -> str:
    out = root / f"out-{route}.{fmt}"
    engine = engine_on(route, DDL.format(path=root / "ev.jsonl", extra=""))
    engine.execute(f"CREATE SINK o WITH (connector = 'file', path = '{out}', format = '{fmt}', 'sink.mode' = 'overwrite') AS {query}")
    engine.run_until_idle()
    assert engine.scheduler.jobs["o"].done
    return str(out)


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet", "changelog-json", "debezium-json"])
def test_append_only_sinks_hold_the_same_lines_on_every_route(ev_dir, fmt, batch_routes):
    root, data = ev_dir
    outs = {route: _sink(route, root, fmt, WINDOWS) for route in ("runtime", *batch_routes)}
    if fmt == "parquet":
        read = {r: rows(pq.read_table(p)) for r, p in outs.items()}
    else:
        read = {r: sorted(open(p).read().splitlines()) for r, p in outs.items()}
    assert all(read[r] == read["runtime"] for r in batch_routes)
    on_time = data.filter(pa.array([not x for x in late_mask(data.column("ts").to_pylist(), 2)]))
    want = duck("SELECT COUNT(*) FROM (SELECT k FROM ev GROUP BY time_bucket(INTERVAL '10 seconds', ts), k)",
                ev=on_time).column(0)[0].as_py()
    lines = read["runtime"] if fmt != "csv" else read["runtime"][1:]
    assert len(lines) == want and want > 10


def test_an_updating_result_is_written_as_its_final_rows(ev_dir, batch_routes):
    root, data = ev_dir
    query = "SELECT k, COUNT(*) AS n, MAX(v) AS hi FROM ev GROUP BY k"
    runtime = [json.loads(line) for line in open(_sink("runtime", root, "changelog-json", query))]
    ops = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}
    schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("hi", pa.int64()), ("__op", pa.int8())])
    final = apply_changes(None, [pa.Table.from_pylist(
        [{**{c: r[c] for c in ("k", "n", "hi")}, "__op": ops[r["op"]]} for r in runtime], schema)], strict=True)
    want = duck("SELECT k, COUNT(*), MAX(v) FROM ev GROUP BY k", ev=data)
    assert {r["op"] for r in runtime} >= {"-U", "+U"} and rows(final) == rows(want)
    for route in batch_routes:
        lines = [json.loads(line) for line in open(_sink(route, root, "changelog-json", query))]
        assert {r["op"] for r in lines} == {"+I"}
        assert rows(pa.Table.from_pylist(lines).select(["k", "n", "hi"])) == rows(want)
        dbz = [json.loads(line) for line in open(_sink(route, root, "debezium-json", query))]
        assert {(d["op"], d["before"] is None) for d in dbz} == {("c", True)}


def test_dsms_run_engine_flag_and_summary(ev_dir, tmp_path, capsys):
    root, data = ev_dir
    script = tmp_path / "job.sql"
    out = tmp_path / "out.jsonl"
    script.write_text(DDL.format(path=root / "ev.jsonl", extra="") +
                      f"\nCREATE SINK o WITH (connector = 'file', path = '{out}', format = 'json', 'sink.mode' = 'overwrite') AS {WINDOWS};")
    summaries = {}
    for route in ("runtime", "duckdb"):
        assert main(["run", str(script), "--engine", route]) == 0
        err = capsys.readouterr().err
        summaries[route] = [ln for ln in err.splitlines() if ln.startswith(("late events", "sink o"))]
        assert f"({route})" in summaries[route][-1], err
    # The window operator counts what it drops on the runtime; DuckDB drops the same events in its statement
    # (the sinks' rows are compared elsewhere) without counting them.
    dropped = data.num_rows - tumble_on_time(data, 2, 10).num_rows
    assert dropped > 0
    assert summaries["runtime"][0] == f"late events dropped: {dropped:,} (o #1 WindowAggregate: {dropped:,})"
    assert summaries["duckdb"][0] == "late events dropped: 0; not counted on the duckdb route"
    assert main(["run", str(script)]) == 0  # auto: bounded and small
    assert "(duckdb)" in capsys.readouterr().err
    script.write_text("SET 'engine' = 'runtime';\n" + script.read_text())
    assert main(["run", str(script), "--engine", "duckdb"]) == 0  # the script's SET wins
    assert "(runtime)" in capsys.readouterr().err


def test_explain_names_the_route_and_why(ev_dir):
    root, _ = ev_dir
    engine = dsms.Engine()
    engine.execute(DDL.format(path=root / "ev.jsonl", extra=""))
    first = engine.execute("EXPLAIN " + WINDOWS).message.splitlines()[0]
    assert first.startswith("route: duckdb (bounded files, about ") and "within batch.max_bytes (2.0 GiB)" in first
    engine.execute("SET 'batch.max_bytes' = '1KB'")
    first = engine.execute("EXPLAIN " + WINDOWS).message.splitlines()[0]
    assert first.startswith("route: spark (bounded files, about ") and "more than batch.max_bytes (1.0 KiB)" in first
    engine.execute("RESET 'batch.max_bytes'")
    engine.execute("SET 'spark.master' = 'local[1]'")
    assert engine.execute("EXPLAIN " + WINDOWS).message.startswith("route: spark (spark.master is 'local[1]')")
    updating = engine.execute("EXPLAIN SELECT k, COUNT(*) AS n FROM ev GROUP BY k").message
    assert updating.startswith("route: runtime (the result is updating")
    engine.execute("SET 'engine' = 'duckdb'")
    assert engine.execute("EXPLAIN " + WINDOWS).message.startswith("route: duckdb (SET 'engine' = 'duckdb')")
    with pytest.raises(dsms.SqlError, match="invalid size 'lots'"):
        engine.execute("SET 'batch.max_bytes' = 'lots'")


def test_explain_lowered_prints_the_statement_for_each_dialect(ev_dir):
    root, _ = ev_dir
    engine = dsms.Engine()
    engine.execute(DDL.format(path=root / "ev.jsonl", extra=""))
    spark = engine.execute(f"EXPLAIN LOWERED {WINDOWS} FOR spark").message
    duckdb = engine.execute(f"EXPLAIN LOWERED {WINDOWS} FOR duckdb").message
    assert spark.startswith("-- __scan0: ev (json files at ") and "UNIX_MICROS(`ts`)" in spark
    assert "__scan0_prefix" in spark  # Spark reads files in parallel: the earlier files' maxima are added
    assert "EPOCH_US(\"ts\")" in duckdb and "__prefix" not in duckdb
    assert engine.execute(f"EXPLAIN LOWERED {WINDOWS}").message == duckdb  # the route auto picks
    planned = dsms.plan(WINDOWS, engine.catalog)
    assert planned.lowered_sql("spark") in spark and planned.lowered_sql("duckdb") in duckdb
    with pytest.raises(dsms.SqlSyntaxError, match="only follows EXPLAIN LOWERED"):
        engine.execute(f"{WINDOWS} FOR spark")


def test_importing_dsms_loads_neither_pyspark_nor_prompt_toolkit():
    import subprocess
    import sys

    code = "import sys, dsms; print(sorted(m for m in ('pyspark', 'prompt_toolkit') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_spark_settings_reach_the_session(ev_dir, spark_session):
    root, _ = ev_dir
    # The test run's session was made by dsms from spark.* settings (tests/conftest.py).
    assert spark_session.conf.get("spark.sql.shuffle.partitions") == "4"
    assert spark_session.conf.get("spark.sql.session.timeZone") == "UTC"
    engine = engine_on("spark", DDL.format(path=root / "ev.jsonl", extra=""))
    engine.execute("SET 'spark.sql.shuffle.partitions' = '3'")  # a SQL setting reaches a running session
    handle = engine.query(WINDOWS)
    engine.run_until_idle()
    assert handle.done and spark_session.conf.get("spark.sql.shuffle.partitions") == "3"
    spark_session.conf.set("spark.sql.shuffle.partitions", "4")
