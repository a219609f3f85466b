"""Embedding dsms in a program: subscriptions, results as Arrow and pandas, the planner alone, and a virtual
clock that drives processing time and idleness without sleeping. Checked against DuckDB or by hand."""

import datetime as dt
import importlib.util
import os
import random
import subprocess
import sys

import pandas as pd
import pyarrow as pa
import pytest

import dsms

from changes import final_table
from oracle import BASE, duck, events, rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECOND = 1_000_000
DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory')"""


def test_subscribers_receive_the_changelog_of_the_final_rows():
    data = events(900, seed=31, disorder_s=3)
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute("CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, MAX(price) AS top FROM ev GROUP BY k")
    engine.execute("""CREATE MATERIALIZED VIEW windows AS SELECT window_start, k, SUM(v) AS sv
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k""")
    got = {"per_key": [], "windows": [], "late": []}
    engine.subscribe("per_key", got["per_key"].append)
    engine.subscribe("windows", got["windows"].append, format="pandas")
    rng, i, late = random.Random(5), 0, None
    while i < data.num_rows:
        n = rng.randint(1, 60)
        engine.insert("ev", data.slice(i, n))
        engine.step() if rng.random() < 0.5 else engine.run_until_idle()
        i += n
        if late is None and i > 400:
            # A subscriber that joins later first gets what the view holds, then the changes.
            late = engine.subscribe("per_key", got["late"].append)
    engine.end_input()
    engine.run_until_idle()
    assert all(isinstance(b, pa.Table) and b.column_names[0] == "op" for b in got["per_key"])
    assert {o for b in got["per_key"] for o in b.column("op").to_pylist()} == {"+I", "-U", "+U"}
    want = duck("SELECT k, COUNT(*) AS n, MAX(price) AS top FROM ev GROUP BY k", ev=data)
    assert rows(final_table(got["per_key"])) == rows(want)
    assert rows(final_table(got["late"])) == rows(want)
    assert all(isinstance(b, pd.DataFrame) for b in got["windows"])
    schema = pa.schema([("op", pa.string()), ("window_start", pa.timestamp("us")), ("k", pa.string()),
                        ("sv", pa.int64())])  # pandas turns an integer column with NULLs into floats
    windows = final_table([pa.Table.from_pandas(b, schema=schema, preserve_index=False) for b in got["windows"]])
    assert rows(windows) == rows(duck("""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01')
        AS window_start, k, SUM(v) AS sv FROM ev GROUP BY ALL""", ev=data))
    # Cancelled: no more calls.
    calls = len(got["late"])
    late.cancel()
    engine.execute("CREATE STREAM more (x INT) WITH (connector = 'memory')")
    assert len(got["late"]) == calls
    with pytest.raises(dsms.SqlError, match="no query 'nope'"):
        engine.subscribe("nope", print)


def test_results_as_arrow_and_pandas():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute("CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n FROM ev GROUP BY k")
    q = engine.query("SELECT k, v FROM ev WHERE v > 90")
    data = events(300, seed=32)
    engine.insert("ev", data)
    engine.run_until_idle()
    frame = q.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["k", "v"]
    assert rows(pa.Table.from_pandas(frame, preserve_index=False)) == rows(duck("SELECT k, v FROM ev WHERE v > 90",
                                                                                ev=data))
    changes = q.poll_pandas()
    assert list(changes.columns) == ["op", "k", "v"] and set(changes["op"]) == {"+I"}
    pulled = engine.execute("SELECT * FROM per_key")
    assert rows(pulled.to_arrow()) == rows(pa.Table.from_pandas(pulled.to_pandas(), preserve_index=False))
    # engine.query() over a view keeps a continuous result (execute() pulls it once).
    live = engine.query("SELECT * FROM per_key")
    engine.run_until_idle()
    assert rows(live.snapshot()) == rows(duck("SELECT k, COUNT(*) AS n FROM ev GROUP BY k", ev=data))


def test_plan_gives_the_dag_without_running_anything(tmp_path):
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    sink = tmp_path / "out.jsonl"
    p = dsms.plan(f"""CREATE SINK s WITH (connector = 'file', path = '{sink}', format = 'changelog-json') AS
        SELECT k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end, k""", engine.catalog)
    assert not sink.exists() and engine.scheduler.jobs == {} and engine.catalog.get("s") is None
    assert p.changelog == "append-only" and [f.name for f in p.schema] == ["k", "n"]
    ops = p.physical.ops
    assert [type(op).__name__ for op in ops] == ["SourceSpec", "WindowAggSpec", "CalcSpec"]
    assert ops[0].source.name == "ev" and ops[0].schema.names == ["k", "ts"]  # only the columns used are read
    assert ops[1].inputs == (0,) and ops[1].window.kind == "TUMBLE" and ops[1].window.size == 60 * SECOND
    assert ops[p.physical.output].schema.names == ["k", "n"]
    assert "WindowAggregate" in p.explain() and "watermark" in p.explain()
    explained = engine.explain("SELECT k FROM ev").split("\n")  # EXPLAIN's text: the route, why, its plan
    assert explained[0].startswith("route: runtime (") and explained[1].startswith("#1 Calc")
    updating = dsms.plan("SELECT k, SUM(v) AS s FROM ev GROUP BY k", engine.catalog)
    assert updating.changelog == "updating" and updating.physical.root.changelog == "updating"


def test_a_virtual_clock_drives_processing_time_windows_without_sleeping():
    clock = dsms.VirtualClock(int(BASE.timestamp() * SECOND))
    engine = dsms.Engine(clock=clock)
    engine.execute("""CREATE STREAM clicks (user_id VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory');
        CREATE MATERIALIZED VIEW per_10s AS SELECT window_start, user_id, COUNT(*) AS n
          FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(pt), INTERVAL '10' SECOND))
          GROUP BY window_start, window_end, user_id""")
    fired = []
    engine.subscribe("per_10s", fired.append)
    # Arrivals at 0 s, 3 s, 9.999 s and 12 s of processing time.
    for at, users in [(0, ["a", "b"]), (3, ["a"]), (6.999, ["b"]), (2.001, ["a"])]:
        clock.advance(int(at * SECOND))
        engine.insert("clicks", [{"user_id": u} for u in users])
        engine.run_until_idle()
        if at < 2.001:
            assert fired == []  # 9.999 s: the first window is still open
    first = final_table(fired)
    assert rows(first) == [(BASE, "a", 2), (BASE, "b", 2)]
    clock.advance(8 * SECOND)  # 20 s: the clock alone closes the second window
    engine.run_until_idle()
    assert rows(final_table(fired)) == [(BASE, "a", 2), (BASE, "b", 2), (BASE + dt.timedelta(seconds=10), "a", 1)]


def test_a_virtual_clock_makes_a_quiet_source_idle_without_sleeping():
    clock = dsms.VirtualClock(int(BASE.timestamp() * SECOND))
    engine = dsms.Engine(clock=clock)
    engine.execute("""
        CREATE STREAM a (x INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH (connector = 'memory');
        CREATE STREAM b (x INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
          WITH (connector = 'memory', idle_timeout = '10 s');
        CREATE MATERIALIZED VIEW per_minute AS SELECT window_start, SUM(x) AS total FROM TABLE(TUMBLE(TABLE (
          SELECT x, ts FROM a UNION ALL SELECT x, ts FROM b), DESCRIPTOR(ts), INTERVAL '1' MINUTE))
          GROUP BY window_start, window_end""")
    engine.insert("b", [(1, "2024-03-01 12:00:05")])
    engine.insert("a", [(10, "2024-03-01 12:00:30"), (100, "2024-03-01 12:01:10")])
    engine.run_until_idle()
    clock.advance(9 * SECOND)
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM per_minute").table.num_rows == 0  # b holds the watermark at 12:00:05
    clock.advance(1 * SECOND)  # b has been quiet for its idle_timeout
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM per_minute").table.to_pylist() == [{"window_start": BASE, "total": 11}]


def load_example():
    path = os.path.join(ROOT, "examples", "embedding", "orders_app.py")
    spec = importlib.util.spec_from_file_location("orders_app", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def test_the_embedding_example_runs_and_matches_duckdb(tmp_path):
    app, path = load_example()
    orders = pa.Table.from_pylist(app.make_orders())
    lines = []
    result = app.main(str(tmp_path / "state"), out=lines.append)
    # Windows close once the watermark (latest order - 5 s) passes their end.
    wm = duck("SELECT MAX(ts) - INTERVAL '5 seconds' AS wm FROM o", o=orders).column("wm")[0].as_py()
    want = duck(f"""SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01') AS window_start, region,
        COUNT(*) AS orders, SUM(amount) AS revenue FROM o GROUP BY 1, 2
        HAVING window_start + INTERVAL '1 minute' <= TIMESTAMP '{wm}'""", o=orders)
    assert rows(result["revenue"]) == rows(want)
    assert rows(result["per_customer"]) == rows(duck(
        "SELECT customer, COUNT(*) AS orders, SUM(amount) AS spent FROM o GROUP BY customer", o=orders))
    assert sorted((a["window_start"], a["region"]) for a in result["alerts"]) == sorted(
        (r["window_start"], r["region"]) for r in want.to_pylist() if r["revenue"] > app.ALERT_REVENUE)
    summary = f"{want.num_rows} closed windows, {len(result['alerts'])} alerts"
    assert lines[-1] == summary
    # Run again on the same state directory: everything is there, nothing is inserted twice.
    again = app.main(str(tmp_path / "state"), out=lines.append)
    assert rows(again["per_customer"]) == rows(result["per_customer"]) and again["alerts"] == []
    # And as a script.
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith(summary)


def test_a_reader_of_changes_only_keeps_no_result():
    # An endless query read as a changelog (the shell's changelog mode) must not keep every row it saw.
    from dsms.runtime.output import CollectOutput

    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k BIGINT, v BIGINT) WITH (connector = 'memory')")
    q = engine.query("SELECT k, SUM(v) AS total FROM s GROUP BY k")
    q.keep_changes_only()
    seen = 0
    for i in range(300):
        engine.insert("s", [(i % 3, 1)])
        engine.run_until_idle()
        seen += q.poll().num_rows
    assert seen == 3 + 2 * 297  # each key's first row, then -U/+U per insert
    with pytest.raises(RuntimeError, match="only its changes"):
        q.snapshot()
    # A result nobody reads is applied as it grows: it stays the size of the result, not of the changes.
    out = CollectOutput(pa.schema([("k", pa.int64()), ("__op", pa.int8())]), updating=True)
    row = {"k": pa.array([1], pa.int64())}
    out.write(pa.table({**row, "__op": pa.array([0], pa.int8())}))  # +I
    for _ in range(1000):
        out.write(pa.table({**row, "__op": pa.array([1], pa.int8())}))
        out.write(pa.table({**row, "__op": pa.array([2], pa.int8())}))  # -U then +U
    assert len(out._unapplied) < 64
    assert out.snapshot().num_rows == 1


def test_declare_builds_a_catalog_from_ddl_and_refuses_anything_else():
    from dsms.planner import declare

    catalog = declare("CREATE STREAM a (x INT) WITH (connector = 'memory'); "
                      "CREATE TABLE b (id INT, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')")
    assert [catalog.get(n).object_kind for n in ("a", "b")] == ["stream", "table"]
    planned = dsms.plan("SELECT a.x, b.v FROM a JOIN b ON a.x = b.id", catalog)
    assert planned.changelog == "updating" and planned.optimized.input.strategy == "regular"  # a stream and a table
    planned = dsms.plan("SELECT a.x, b.v FROM a JOIN b FOR SYSTEM_TIME AS OF PROCTIME() ON a.x = b.id", catalog)
    assert planned.changelog == "append-only" and planned.optimized.input.strategy == "lookup"
    with pytest.raises(dsms.SqlError, match="CREATE STREAM and CREATE TABLE statements only"):
        declare("SELECT 1")
