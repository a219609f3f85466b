"""ORDER BY a time attribute and LIMIT on continuous queries (Flink's rules), and window order in printed results.

The oracle is computed by hand in Python: the late rule (an event more
than the watermark bound behind the largest time before it is dropped by
an operator that acts on event time), then a plain sort.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random

import pytest

import dsms
from dsms.cli import run_script

ROUTES = ("runtime", "duckdb", "spark")
BOUND_S = 5
START = dt.datetime(2024, 5, 1, 9, 0, 0)


def events(n: int, seed: int) -> list[dict]:
    """Events whose times wander back up to 8 s (so some are late for a 5 s bound)."""
    rng = random.Random(seed)
    rows, t = [], 0.0
    for i in range(n):
        t += rng.uniform(0, 2)
        at = max(0.0, t - rng.choice([0, 0, 0, 1, 3, 8]))
        rows.append({"id": i, "k": rng.randrange(5), "ts": (START + dt.timedelta(milliseconds=int(at * 1000)))})
    return rows


def on_time(rows: list[dict]) -> list[dict]:
    """The rows an event-time operator keeps: not more than the bound behind the largest time before them."""
    kept, top = [], None
    for r in rows:
        if top is None or r["ts"] >= top - dt.timedelta(seconds=BOUND_S):
            kept.append(r)
        top = r["ts"] if top is None else max(top, r["ts"])
    return kept


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("order")
    rows = events(400, seed=3)
    (folder / "ev.jsonl").write_text("".join(
        json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n" for r in rows))
    return str(folder), rows


DDL = f"""CREATE STREAM ev (id INT, k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '{BOUND_S}' SECOND)
  WITH (connector = 'file', path = 'ev.jsonl', format = 'json', 'batch.size' = '37')"""


def run(folder: str, query: str, route: str) -> list[tuple]:
    """The rows of ``query`` on ``route``, in the order the query emitted them."""
    with dsms.Engine(base_dir=folder) as engine:
        engine.execute(DDL)
        engine.execute(f"SET 'engine' = '{route}'")
        handle = engine.query(query)
        engine.run_until_idle()
        assert handle.job.route == route
        return [tuple(r.values()) for r in handle.snapshot().to_pylist()]


@pytest.mark.parametrize("route", ROUTES)
def test_order_by_time_then_other_columns_emits_in_that_order(data, route, request):
    if route == "spark":
        request.getfixturevalue("spark_session")
    folder, rows = data
    want = sorted(((r["ts"], r["k"], r["id"]) for r in on_time(rows)), key=lambda x: (x[0], -x[1], x[2]))
    assert run(folder, "SELECT ts, k, id FROM ev ORDER BY ts, k DESC, id", route) == want


@pytest.mark.parametrize("route", ROUTES)
def test_order_by_time_with_limit_keeps_the_first_rows_by_time(data, route, request):
    if route == "spark":
        request.getfixturevalue("spark_session")
    folder, rows = data
    want = sorted((r["ts"], r["id"]) for r in on_time(rows))[:7]
    assert run(folder, "SELECT ts, id FROM ev ORDER BY ts, id LIMIT 7", route) == want


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_limit_keeps_the_first_rows_to_arrive(data, route):
    folder, rows = data
    # Nothing acts on event time here, so no row is late: the first 5 rows of the file, where k > 1.
    want = [(r["id"], r["k"]) for r in rows if r["k"] > 1][:5]
    assert run(folder, "SELECT id, k FROM ev WHERE k > 1 LIMIT 5", route) == want


def test_limit_after_an_aggregate_runs_on_the_runtime(data):
    folder, rows = data
    with dsms.Engine(base_dir=folder) as engine:
        engine.execute(DDL)
        query = ("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), "
                 "INTERVAL '10' SECOND)) GROUP BY window_start, window_end LIMIT 3")
        assert engine.explain(engine.plan(query)).startswith("route: runtime")
        engine.execute("SET 'engine' = 'duckdb'")
        with pytest.raises(dsms.DsmsError, match="the duckdb route cannot run Limit"):
            engine.query(query)
        engine.execute("SET 'engine' = 'auto'")
        handle = engine.query(query)
        engine.run_until_idle()
    counts: dict[dt.datetime, int] = {}
    top = None  # a window counts an event unless the watermark had reached the window's last millisecond
    for r in rows:
        start = r["ts"].replace(second=r["ts"].second // 10 * 10, microsecond=0)
        last_ms = start + dt.timedelta(seconds=10, milliseconds=-1)
        if top is None or top - dt.timedelta(seconds=BOUND_S) < last_ms:
            counts[start] = counts.get(start, 0) + 1
        top = r["ts"] if top is None else max(top, r["ts"])
    assert [tuple(r.values()) for r in handle.snapshot().to_pylist()] == sorted(counts.items())[:3]


def test_order_by_on_memory_streams_waits_for_the_watermark():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) "
                   "WITH (connector = 'memory')")
    q = engine.query("SELECT k, ts FROM s ORDER BY ts")
    engine.insert("s", [(1, "2024-05-01 09:00:02"), (2, "2024-05-01 09:00:05"), (3, "2024-05-01 09:00:04"),
                        (9, "2024-05-01 09:00:01")])  # 4 s behind 09:00:05: late, dropped
    engine.run_until_idle()  # watermark 09:00:03: only the row at 09:00:02 is due
    assert [r["k"] for r in q.snapshot().to_pylist()] == [1]
    engine.insert("s", [(4, "2024-05-01 09:00:09")])  # watermark 09:00:07
    engine.run_until_idle()
    assert [r["k"] for r in q.snapshot().to_pylist()] == [1, 3, 2]
    assert q.job.state_rows == 1  # the row at 09:00:09 waits


@pytest.mark.parametrize("sql, message", [
    ("SELECT k, ts FROM ev ORDER BY k", "must start with an event-time attribute, ascending ('k' is not one)"),
    ("SELECT k, ts FROM ev ORDER BY ts DESC", "('ts' is descending)"),
    ("SELECT k, COUNT(*) AS n FROM ev GROUP BY k ORDER BY k", "ORDER BY needs an append-only result"),
    ("SELECT k, COUNT(*) AS n FROM ev GROUP BY k LIMIT 3", "LIMIT needs an append-only result"),
    ("SELECT k, ts FROM ev ORDER BY ts LIMIT 3 OFFSET 1", "OFFSET is not supported on a continuous query"),
    ("SELECT k, ts FROM ev ORDER BY k + 1", "ORDER BY of a continuous query takes columns of its result"),
])
def test_order_by_and_limit_that_flink_refuses_on_streams(data, sql, message):
    folder, _ = data
    with dsms.Engine(base_dir=folder) as engine:
        engine.execute(DDL)
        with pytest.raises(dsms.SqlError, match=message.replace("(", r"\(").replace(")", r"\)")):
            engine.query(sql)


WINDOWED = """SELECT window_start, k, COUNT(*) AS n
  FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
  GROUP BY window_start, window_end, k;"""


@pytest.mark.parametrize("route", ROUTES)
def test_dsms_run_prints_a_windowed_result_in_window_order(data, route, request):
    if route == "spark":
        request.getfixturevalue("spark_session")
    folder, rows = data
    out = io.StringIO()
    assert run_script(DDL + ";\n" + WINDOWED, folder, quiet=True, out=out, engine=route) == 0
    starts = [line.split("|")[0].strip() for line in out.getvalue().splitlines()[2:] if "|" in line]
    assert len(starts) > 100  # many windows and keys: an unordered result would show
    assert starts == sorted(starts)
