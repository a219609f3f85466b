"""Late events under sessions and OVER aggregates, judged as Flink 2.x judges them.

Expected rows are worked out by hand in the comments (times in seconds
after BASE; watermark = largest time so far - 5 s) and were checked against
Flink 2.3 (benchmarks/flink/conformance.py runs the same data). Random
data is checked against an oracle that applies Flink's rule event by event
in Python, then computes the frames with DuckDB, and fed one event at a
time, in odd-sized batches and all at once.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

import dsms

from oracle import BASE, arrival_watermarks, duck, events, rows

DDL = """CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""


def write(tmp_path, data: list[tuple[str, int, float]]) -> str:
    path = tmp_path / "s.jsonl"
    with open(path, "w") as f:
        for k, v, sec in data:
            ts = BASE + dt.timedelta(seconds=sec)
            f.write(json.dumps({"k": k, "v": v, "ts": ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    return str(path)


def run(path: str, sql: str, route: str = "runtime") -> tuple[list[tuple], dict]:
    engine = dsms.Engine()
    engine.execute(DDL.format(path=path))
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert q.done
    return sorted(tuple(_plain(v) for v in r.values()) for r in q.snapshot().to_pylist()), dict(q.job.late)


def _plain(v):
    return (v - BASE).total_seconds() if isinstance(v, dt.datetime) else v


# -- sessions -------------------------------------------------------------------------------------

SESSIONS = [("a", 0, 0), ("a", 1, 5), ("a", 2, 40), ("a", 3, 12), ("a", 4, 28), ("a", 5, 33), ("b", 6, 50),
            ("b", 7, 30)]
# gap 10 s. a: [0, 15) from 0 and 5; 40 moves the watermark to 35, so [0, 15) closes.
#   12 at watermark 35: its own session [12, 22) merges with no open one and had closed: late.
#   28 at watermark 35: [28, 38) is open (38 >= 35): counts; 33 joins it and bridges to 40: [28, 50).
# b: 50, then 30 at watermark 45: [30, 40) had closed: late.   Flink gives the same rows.


def test_a_session_drops_an_event_only_when_the_session_it_merges_into_had_closed(tmp_path):
    path = write(tmp_path, SESSIONS)
    tvf = ("SELECT k, window_start, window_end, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(SESSION(TABLE s PARTITION BY "
           "k, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k")
    got, late = run(path, tvf)
    assert got == [("a", 0, 15, 2, 1), ("a", 28, 50, 3, 11), ("b", 50, 60, 1, 6)]
    assert late == {"s": 0, "#1 WindowAggregate": 2}
    group = ("SELECT k, SESSION_START(ts, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n FROM s "
             "GROUP BY SESSION(ts, INTERVAL '10' SECOND), k")
    assert run(path, group)[0] == [("a", 0, 2), ("a", 28, 3), ("b", 50, 1)]
    rows_only = ("SELECT v, window_start FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), "
                 "INTERVAL '10' SECOND))")
    assert run(path, rows_only)[0] == [(0, 0), (1, 0), (2, 28), (4, 28), (5, 28), (6, 50)]


def test_batch_routes_refuse_sessions_and_auto_runs_them_on_the_runtime(tmp_path):
    path = write(tmp_path, SESSIONS)
    sql = ("SELECT k, COUNT(*) AS n FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), "
           "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k")
    engine = dsms.Engine()
    engine.execute(DDL.format(path=path))
    engine.execute("SET 'engine' = 'duckdb'")
    with pytest.raises(dsms.UnsupportedPlan, match="session drops an event behind the watermark only when.*"
                                                   "the runtime can"):
        engine.query(sql)
    engine.execute("SET 'engine' = 'auto'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert sorted(r["n"] for r in q.snapshot().to_pylist()) == [1, 2, 3]


# -- OVER ------------------------------------------------------------------------------------------

OVER = [("a", 0, 10), ("a", 1, 30), ("b", 2, 26), ("a", 3, 20), ("a", 4, 8), ("b", 5, 25), ("a", 6, 25),
        ("a", 7, 60), ("a", 8, 55), ("a", 9, 30), ("b", 10, 90), ("a", 11, 56)]
# arrival  k  v  ts   watermark then
#  0       a  0  10   -
#  1       a  1  30   5
#  2       b  2  26   25      (after 30; the watermark 25 releases a@10)
#  3..6    a@20 b@25 a@8 a@25 arrive at 25
#  7       a  7  60   25
#  8, 9    a@55 a@30 arrive at 55 (after 60; it releases a@20 a@25 a@30 b@25 b@26)
# 10       b  10 90   55
# 11       a  11 56   85      (after 90; it releases a@55 a@60)


def over(frame: str) -> str:
    return (f"SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY ts {frame}) AS sv, COUNT(*) OVER (PARTITION BY k "
            f"ORDER BY ts {frame}) AS n FROM s")


def test_unbounded_over_drops_rows_at_or_below_the_watermark(tmp_path):
    # a@20 a@8 a@25 b@25 (25 <= 25) a@55 (55 <= 55) a@30 a@56 are late.
    path = write(tmp_path, OVER)
    want = [("a", 0, 0, 1), ("a", 1, 1, 2), ("a", 7, 8, 3), ("b", 2, 2, 1), ("b", 10, 12, 2)]
    got, late = run(path, over("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"))
    assert got == want
    assert late == {"s": 0, "#1 OverAggregate": 7}
    assert run(path, over("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"), "duckdb")[0] == want


def test_bounded_over_drops_rows_at_or_below_the_last_time_released_for_their_partition(tmp_path):
    # ROWS 2: a's last released time is 10 when a@20, a@8, a@25 arrive: a@8 is late, a@20 and a@25 count
    # (released at 55 in time order: a@20 = 0+3, a@25 = 0+3+6, a@30 = 3+6+1). a@55 counts (after 30); a@30
    # is late (30 <= 30). At 85 a@55 and a@60 are released: a@56 is late (56 <= 60).
    path = write(tmp_path, OVER)
    want = [("a", 0, 0, 1), ("a", 1, 10, 3), ("a", 3, 3, 2), ("a", 6, 9, 3), ("a", 7, 16, 3), ("a", 8, 15, 3),
            ("b", 2, 7, 2), ("b", 5, 5, 1), ("b", 10, 17, 3)]
    got, late = run(path, over("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"))
    assert got == want
    assert late == {"s": 0, "#1 OverAggregate": 3}
    assert run(path, over("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW"), "duckdb")[0] == want


def test_a_range_frame_forgets_a_partition_idle_for_one_and_a_half_frames(tmp_path):
    # RANGE 10 s: as ROWS, with frames by time. a@30 at 55 is late (30 <= 30); a's cleanup timer is due
    # 15.001 s after its last row, 60: at watermark 85 a forgets its state, so a@56 counts, alone.
    path = write(tmp_path, OVER)
    got, late = run(path, over("RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW"))
    assert got == [("a", 0, 0, 1), ("a", 1, 10, 3), ("a", 3, 3, 2), ("a", 6, 9, 2), ("a", 7, 15, 2), ("a", 8, 8, 1),
                   ("a", 11, 11, 1), ("b", 2, 7, 2), ("b", 5, 5, 1), ("b", 10, 10, 1)]
    assert late == {"s": 0, "#1 OverAggregate": 2}
    engine = dsms.Engine()
    engine.execute(DDL.format(path=path))
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.UnsupportedPlan, match="RANGE frame forgets a partition"):
        engine.query(over("RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW"))


# -- batch cutting -----------------------------------------------------------------------------------

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


def flink_over_kept(data: pa.Table, bound_s: float, unbounded: bool) -> pa.Table:
    """The rows Flink's OVER operator keeps, event by event (written per event, on purpose): UNBOUNDED drops a
    row at or below the watermark; a bounded ROWS frame one at or below the last time released for its key,
    where a row is released once a watermark at or above its time comes after it."""
    ts, keys = data.column("ts").to_pylist(), data.column("k").to_pylist()
    marks = arrival_watermarks(ts, bound_s)
    keep = []
    for i, (t, w) in enumerate(zip(ts, marks)):
        if w is None or t > w:
            keep.append(True)
            continue
        if unbounded:
            keep.append(False)
            continue
        released = [ts[j] for j in range(i) if keep[j] and keys[j] == keys[i] and ts[j] <= w
                    and (marks[j] is None or marks[j] < w)]
        keep.append(not released or t > max(released))
    return data.filter(pa.array(keep))


SESSION_SQL = ("SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(SESSION(TABLE ev "
               "PARTITION BY k, DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY window_start, window_end, k")
UNBOUNDED_SQL = ("SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND "
                 "CURRENT ROW) AS sv FROM ev")
ROWS_SQL = "SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS sv FROM ev"
RANGE_SQL = ("SELECT k, v, ts, COUNT(*) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '4' SECOND PRECEDING "
             "AND CURRENT ROW) AS n FROM ev")


@pytest.mark.parametrize("sql", [SESSION_SQL, UNBOUNDED_SQL, ROWS_SQL, RANGE_SQL],
                         ids=["session", "over_unbounded", "over_rows", "over_range"])
def test_results_and_late_counts_do_not_depend_on_batch_cutting(sql):
    data = events(300, seed=5, disorder_s=20)
    one = _fed(sql, data, 1)
    assert one == _fed(sql, data, 7) == _fed(sql, data, 100_000)
    assert sum(one[1].values()) > 3  # the operator dropped some, the same ones each time


@pytest.mark.parametrize("unbounded", [True, False])
def test_over_keeps_the_rows_flink_keeps_on_random_data(unbounded):
    data = events(300, seed=9, disorder_s=12)
    sql, frame = (UNBOUNDED_SQL, "UNBOUNDED PRECEDING") if unbounded else (ROWS_SQL, "2 PRECEDING")
    kept = flink_over_kept(data, 5, unbounded)
    assert 0 < data.num_rows - kept.num_rows < data.num_rows / 3
    ordered = kept.append_column("seq", pa.array(range(kept.num_rows)))
    want = duck(f"SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts, seq ROWS {frame}) FROM ev", ev=ordered)
    got, late = _fed(sql, data, 13)
    assert got == rows(want)
    assert late["#1 OverAggregate"] == data.num_rows - kept.num_rows


def flink_sessions(data: pa.Table, bound_s: float, gap_s: float) -> list[tuple]:
    """(start, end, k, count, sum of v) of the sessions per k, event by event as Flink's merging window
    operator builds them (written per event, on purpose): before an event, the sessions whose end is below
    the watermark close; the event's window [t, t + gap) merges with the open sessions it touches; if the
    merged session ends below the watermark, the event is late and dropped."""
    gap = dt.timedelta(seconds=gap_s)
    marks = arrival_watermarks(data.column("ts").to_pylist(), bound_s)
    open_: dict = {}  # k -> [[start, end, n, sum]]
    closed = []
    for r, w in zip(data.to_pylist(), marks):
        for k in list(open_):
            keep = [s for s in open_[k] if w is None or s[1] >= w]
            closed += [(s[0], s[1], k, s[2], s[3]) for s in open_[k] if s not in keep]
            open_[k] = keep
        session = [r["ts"], r["ts"] + gap, 1, r["v"]]
        others = []
        for s in open_.get(r["k"], []):
            if s[0] <= session[1] and r["ts"] <= s[1]:  # sessions that touch merge
                session = [min(s[0], session[0]), max(s[1], session[1]), s[2] + session[2],
                           None if s[3] is None and session[3] is None else (s[3] or 0) + (session[3] or 0)]
            else:
                others.append(s)
        if w is not None and session[1] < w:
            continue  # late: the session it would be in had closed
        open_[r["k"]] = others + [session]
    closed += [(s[0], s[1], k, s[2], s[3]) for k, sessions in open_.items() for s in sessions]
    return sorted(closed, key=lambda x: (x[0], x[1], str(x[2])))


def test_sessions_keep_the_events_flink_keeps_on_random_data():
    data = events(300, seed=5, disorder_s=20)
    got, late = _fed(SESSION_SQL, data, 11)
    want = flink_sessions(data, 5, 3)
    assert sorted(got, key=lambda x: (x[0], x[1], str(x[2]))) == want
    assert late["#1 WindowAggregate"] == data.num_rows - sum(s[3] for s in want) > 3


def test_show_progress_and_show_queries_count_what_the_session_dropped(tmp_path):
    engine = dsms.Engine()
    engine.execute(DDL.format(path=write(tmp_path, SESSIONS)))
    engine.execute("CREATE MATERIALIZED VIEW m AS SELECT k, COUNT(*) AS n FROM TABLE(SESSION(TABLE s PARTITION BY k, "
                   "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k")
    engine.run_until_idle()
    late = {r["operator"].split("(")[0]: r["late"] for r in engine.execute("SHOW PROGRESS m").table.to_pylist()}
    assert late["#0 Source"] == 0 and late["#1 WindowAggregate"] == 2
    assert engine.execute("SHOW QUERIES").table.to_pylist()[0]["late"] == 2
