"""Late events judged per window, as Flink judges them, on every route.

An event behind its source's watermark is dropped from a window only when
that window had fired when the event arrived (its end at or below the
watermark then); it still counts in the windows that are open. Expected
rows are computed by hand in the comments (watermark = largest time so far
- 5 s); the runtime is also fed one event at a time and all at once, which
must not change anything.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pyarrow as pa
import pytest

import dsms

from oracle import BASE, duck, events, late_mask, rows, tumble_on_time

ROUTES = ("runtime", "duckdb", "spark")
DDL = """CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""


def write(tmp_path, seconds: list[float], keys: list[str] | None = None) -> str:
    path = tmp_path / "s.jsonl"
    with open(path, "w") as f:
        for i, sec in enumerate(seconds):
            ts = BASE + dt.timedelta(seconds=sec)
            f.write(json.dumps({"k": keys[i] if keys else "a", "v": i, "ts": ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]})
                    + "\n")
    return str(path)


def run(path: str, sql: str, route: str) -> list[tuple]:
    engine = dsms.Engine()
    engine.execute(DDL.format(path=path))
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert q.done and getattr(q.job, "route", "runtime") == route
    return sorted(tuple(_plain(v) for v in r.values()) for r in q.snapshot().to_pylist())


def _plain(v):
    """Window bounds as seconds after BASE."""
    return (v - BASE).total_seconds() if isinstance(v, dt.datetime) else v


@pytest.fixture(params=ROUTES)
def route(request):
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    return request.param


def test_an_event_behind_the_watermark_counts_while_its_window_is_open(tmp_path, route):
    # :10, :30, :20 -> the watermark is :25 when :20 arrives; [0, 60) is open: 3 events (Flink counts 3).
    # Then :70 (watermark :65 closes [0, 60)), :40 (late: [0, 60) fired), :130, :65 (late: [60, 120) fired).
    path = write(tmp_path, [10, 30, 20, 70, 40, 130, 65])
    sql = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
           "GROUP BY window_start, window_end")
    assert run(path, sql, route) == [(0, 3), (60, 1), (120, 1)]


def test_a_hop_event_is_late_for_its_fired_windows_and_counts_in_the_open_ones(tmp_path, route):
    # HOP slide 30 s, size 60 s. :40 arrives at watermark :65: [0, 60) had fired, [30, 90) is open.
    # :65 arrives at watermark :125: both its windows [30, 90) and [60, 120) had fired: dropped.
    path = write(tmp_path, [10, 30, 20, 70, 40, 130, 65])
    sql = ("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), "
           "INTERVAL '30' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end")
    assert run(path, sql, route) == [(-30, 30, 2), (0, 60, 3), (30, 90, 3), (60, 120, 1), (90, 150, 1),
                                     (120, 180, 1)]


def test_cumulate_counts_a_late_event_in_its_larger_open_windows(tmp_path, route):
    # CUMULATE step 20 s, max 60 s. :25 arrives at watermark :45: [0, 40) had fired, [0, 60) is open.
    # :45 arrives at watermark :65: [0, 60) had fired: dropped.
    path = write(tmp_path, [10, 50, 25, 70, 45])
    sql = ("SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), "
           "INTERVAL '20' SECOND, INTERVAL '1' MINUTE)) GROUP BY window_start, window_end")
    assert run(path, sql, route) == [(0, 20, 1), (0, 40, 1), (0, 60, 3), (60, 80, 1), (60, 100, 1), (60, 120, 1)]


def test_windows_with_an_offset_are_judged_by_their_own_ends(tmp_path, route):
    # TUMBLE 1 min offset 15 s: windows [15, 75), [75, 135). :50 arrives at watermark :65 < 75: counts.
    # :74 arrives at watermark :75: [15, 75) had fired: dropped. Group windows follow the same rule.
    path = write(tmp_path, [20, 70, 50, 80, 74])
    sql = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, "
           "INTERVAL '15' SECOND)) GROUP BY window_start, window_end")
    assert run(path, sql, route) == [(15, 3), (75, 1)]


def test_a_window_has_fired_once_the_watermark_reaches_its_last_millisecond(tmp_path, route):
    # As Flink (TimeWindowUtil.isWindowFired: watermark >= end - 1 ms). After :14.999 the watermark is
    # :09.999, the last millisecond of [0, 10): :09.999 and :09.000 arrive late; after :30, :16 is late too.
    path = write(tmp_path, [1, 14.999, 9.999, 9.0, 30, 16, 2])
    sql = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
           "GROUP BY window_start, window_end")
    assert run(path, sql, route) == [(0, 1), (10, 1), (30, 1)]


def test_group_windows_judge_late_events_per_window(tmp_path, route):
    path = write(tmp_path, [10, 30, 20, 70, 40, 130, 65])
    sql = "SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, COUNT(*) AS n FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)"
    assert run(path, sql, route) == [(0, 3), (60, 1), (120, 1)]


def test_window_top_n_drops_a_row_only_from_a_fired_window(tmp_path, route):
    # Per 1-minute window the largest v. :20 (v=2) arrives at watermark :25, its window open: it wins [0, 60).
    # :40 (v=4) arrives at watermark :65: [0, 60) had fired, so it cannot win it.
    path = write(tmp_path, [10, 30, 20, 70, 40])
    sql = ("SELECT window_start, v FROM (SELECT window_start, window_end, v, ROW_NUMBER() OVER (PARTITION BY "
           "window_start, window_end ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
           "INTERVAL '1' MINUTE))) WHERE rn <= 1")
    assert run(path, sql, route) == [(0, 2), (60, 3)]


RIGHT_DDL = """CREATE STREAM r (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""
JOIN_SQL = ("SELECT L.v AS lv, R.v AS rv, L.window_start FROM TABLE(TUMBLE(TABLE {left}, DESCRIPTOR(ts), INTERVAL "
            "'{size}' SECOND)) L JOIN TABLE(TUMBLE(TABLE {right}, DESCRIPTOR(ts), INTERVAL '{size}' SECOND)) R "
            "ON L.window_start = R.window_start AND L.window_end = R.window_end AND L.k = R.k")


def test_a_window_join_drops_a_row_only_when_its_window_had_fired(tmp_path, route):
    # Left s: :10, :30, :20 -> the watermark of s is :25 when :20 arrives; [0, 60) is open: :20 joins (as in
    # Flink's WindowJoinOperator). :70 moves it to :65: :40 (v=4) arrives after [0, 60) fired: dropped.
    # :130 moves it to :125: :65 (v=6) arrives after [60, 120) fired: dropped. Right r: :05, :65, :125.
    path = write(tmp_path, [10, 30, 20, 70, 40, 130, 65])
    right = tmp_path / "r"
    right.mkdir()
    engine = dsms.Engine()
    engine.execute(DDL.format(path=path) + RIGHT_DDL.format(path=write(right, [5, 65, 125])))
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(JOIN_SQL.format(left="s", right="r", size=60))
    engine.run_until_idle()
    assert q.done and getattr(q.job, "route", "runtime") == route
    got = sorted(tuple(_plain(v) for v in r.values()) for r in q.snapshot().to_pylist())
    assert got == [(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 1, 60), (5, 2, 120)]
    if route == "runtime":  # the batch routes drop the same rows without counting them
        assert q.job.late == {"s": 0, "r": 0, "#4 WindowJoin": 2}
        engine.execute(f"CREATE MATERIALIZED VIEW joined AS {JOIN_SQL.format(left='s', right='r', size=60)}")
        engine.run_until_idle()
        late = {r["operator"].split("(")[0]: r["late"] for r in engine.execute("SHOW PROGRESS joined").table.to_pylist()}
        assert late["#4 WindowJoin"] == 2 and late["#0 Source"] == late["#2 Source"] == 0


def test_a_window_table_function_alone_drops_nothing(tmp_path):
    # As Flink's AlignedWindowTableFunctionOperator: it labels rows with windows; only a consumer judges.
    path = write(tmp_path, [10, 70, 20])
    sql = "SELECT v, window_start FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"
    for route in ("runtime", "duckdb"):
        assert run(path, sql, route) == [(0, 0), (1, 60), (2, 0)]


WINDOWED = [
    "SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), "
    "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k",
    "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
    "INTERVAL '10' SECOND, INTERVAL '1' SECOND)) GROUP BY window_start, window_end",
    "SELECT window_start, window_end, MAX(v) AS hi FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
    "INTERVAL '20' SECOND)) GROUP BY window_start, window_end",
    "SELECT window_start, k, v FROM (SELECT window_start, window_end, k, v, ROW_NUMBER() OVER (PARTITION BY "
    "window_start, window_end ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), "
    "INTERVAL '10' SECOND))) WHERE rn <= 2",
]
MEMORY_DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""


def _fed(sql: str, data: pa.Table, batch: int) -> tuple[list, dict]:
    engine = dsms.Engine()
    engine.execute(MEMORY_DDL)
    q = engine.query(sql)
    for start in range(0, data.num_rows, batch):
        engine.insert("ev", data.slice(start, batch).to_pylist())
        engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    return rows(q.snapshot()), q.job.late


@pytest.mark.parametrize("sql", WINDOWED, ids=["tumble", "hop_offset", "cumulate", "window_top_n"])
def test_results_and_late_counts_do_not_depend_on_batch_cutting(sql):
    data = events(400, seed=21, disorder_s=14)
    assert sum(late_mask(data.column("ts").to_pylist(), 5)) > 20
    one = _fed(sql, data, 1)
    assert one == _fed(sql, data, 7) == _fed(sql, data, 100_000)
    assert sum(one[1].values()) > 0  # the operator dropped some, the same ones each time


def _fed_join(left: pa.Table, right: pa.Table, batch: int) -> tuple[list, dict]:
    """The window join of ``ev`` and ``ref``, fed ``batch`` rows of each in turn (batch sizes change how the
    two inputs interleave, and so the join's own watermark at each row, but not what it drops)."""
    engine = dsms.Engine()
    engine.execute(MEMORY_DDL + MEMORY_DDL.replace("ev (", "ref ("))
    q = engine.query(JOIN_SQL.format(left="ev", right="ref", size=10))
    for start in range(0, max(left.num_rows, right.num_rows), batch):
        for name, data in (("ev", left), ("ref", right)):
            if start < data.num_rows:
                engine.insert(name, data.slice(start, batch).to_pylist())
                engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    return rows(q.snapshot()), q.job.late


def test_a_window_join_drops_the_rows_whose_window_had_fired_for_their_input_whatever_the_batches():
    left, right = events(400, seed=21, disorder_s=14), events(250, seed=8, disorder_s=14)
    kept = {"l": tumble_on_time(left, 5, 10), "r": tumble_on_time(right, 5, 10)}
    dropped = left.num_rows + right.num_rows - kept["l"].num_rows - kept["r"].num_rows
    assert dropped > 10
    want = rows(duck("SELECT l.v AS lv, r.v AS rv, time_bucket(INTERVAL '10 seconds', l.ts, TIMESTAMP '1970-01-01') FROM l "
                     "JOIN r ON l.k = r.k AND time_bucket(INTERVAL '10 seconds', l.ts, TIMESTAMP '1970-01-01') = "
                     "time_bucket(INTERVAL '10 seconds', r.ts, TIMESTAMP '1970-01-01')", **kept))
    for batch in (1, 7, 100_000):
        got, late = _fed_join(left, right, batch)
        assert got == want, batch
        assert late == {"ev": 0, "ref": 0, "#4 WindowJoin": dropped}, batch


def test_the_window_operator_counts_what_it_drops_in_show_progress_and_the_summary(tmp_path):
    data = events(300, seed=4, disorder_s=14)
    dropped = data.num_rows - tumble_on_time(data, 5, 10).num_rows
    assert dropped > 0
    path = tmp_path / "ev.jsonl"
    with open(path, "w") as f:
        for r in data.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    ddl = MEMORY_DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'")
    query = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
             "GROUP BY window_start, window_end")
    engine = dsms.Engine()
    engine.execute(ddl + "SET 'engine' = 'runtime';")
    engine.execute(f"CREATE MATERIALIZED VIEW per_10s AS {query}")
    engine.run_until_idle()
    progress = {r["operator"].split(" ")[0] + " " + r["operator"].split(" ")[1].split("(")[0]: r["late"]
                for r in engine.execute("SHOW PROGRESS per_10s").table.to_pylist()}
    assert progress["#0 Source"] == 0 and progress["#1 WindowAggregate"] == dropped
    assert engine.execute("SHOW QUERIES").table.to_pylist()[0]["late"] == dropped
    assert rows(engine.execute("SELECT * FROM per_10s").table) == rows(duck(
        "SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), COUNT(*) FROM ev GROUP BY ALL",
        ev=tumble_on_time(data, 5, 10)))
    script = tmp_path / "q.sql"
    script.write_text(ddl + "\n" + query + ";\n")
    out = subprocess.run([sys.executable, "-m", "dsms.cli", "run", "--engine", "runtime", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"late events dropped: {dropped:,} (query_1 #1 WindowAggregate: {dropped:,})" in out.stderr, out.stderr
