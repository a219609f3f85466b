"""Late rows in interval and event-time temporal joins, judged as Flink judges them, on every route.

An interval join keeps a row behind its source's watermark: it joins the
other input's rows that Flink's ``TimeIntervalJoin`` still holds (those
whose reach, the last time a partner of theirs could have, is at or above
the row's watermark); a row that came after every possible partner's reach
and found none is dropped and counted. A temporal join joins a late row
with its version when Flink's ``TemporalRowTimeJoinOperator`` still keeps
it (no newer version at or below the row's watermark). Expected rows are
computed by hand in the comments (watermark = largest time so far - 5 s,
seconds after 12:00); the runtime is fed the files one row per batch and
all at once, which must not change anything.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import subprocess
import sys

import pyarrow as pa
import pytest

import dsms

from oracle import BASE, arrival_watermarks, duck, rows

ROUTES = ("runtime", "duckdb", "spark")
STREAM = """CREATE STREAM {name} (k VARCHAR, id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""
RATES = """CREATE TABLE rates (k VARCHAR, rate BIGINT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{path}', format = 'debezium-json');"""
INTERVAL_SQL = ("SELECT a.id AS aid, b.id AS bid FROM a {kind} JOIN b ON a.k = b.k "
                "AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND")
TEMPORAL_SQL = ("SELECT o.id, r.rate FROM o {kind} JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k")


def _text(seconds: float) -> str:
    return (BASE + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def write_stream(path, events: list[tuple[int, float]], key: str = "x") -> str:
    with open(path, "w") as f:
        f.writelines(json.dumps({"k": key, "id": i, "ts": _text(t)}) + "\n" for i, t in events)
    return str(path)


def write_rates(path, versions: list[tuple[int, float]], key: str = "x") -> str:
    """Debezium changes of one key: a create, then updates (each with its before image)."""
    with open(path, "w") as f:
        before = None
        for rate, t in versions:
            after = {"k": key, "rate": rate, "ts": _text(t)}
            f.write(json.dumps({"op": "u" if before else "c", "before": before, "after": after}) + "\n")
            before = after
    return str(path)


def run(ddl: str, sql: str, route: str, batch_rows: int | None = None) -> tuple[list, dict]:
    engine = dsms.Engine(batch_rows=batch_rows)
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert q.done and getattr(q.job, "route", "runtime") == route
    return sorted(tuple(r.values()) for r in q.snapshot().to_pylist()), (q.job.late if route == "runtime" else {})


@pytest.fixture(params=ROUTES)
def route(request):
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    return request.param


def interval_ddl(tmp_path) -> str:
    # b: :10, :30, :90 (on time). a: :40; then, at a's watermark :35, :25, :14 and :33 (behind it).
    #   a1 :40  partners b in [:30, :50]: b2 :30                                  -> (1, 2)
    #   a2 :25  late; partners in [:15, :35]: b2 :30, reach :40 >= :35: held     -> (2, 2)
    #   a3 :14  late; partners in [:04, :24]: b1 :10, reach :20 < :35: gone      -> dropped (inner), counted
    #   a4 :33  late; partners in [:23, :43]: b2 :30                             -> (4, 2)
    b = write_stream(tmp_path / "b.jsonl", [(1, 10), (2, 30), (3, 90)])
    a = write_stream(tmp_path / "a.jsonl", [(1, 40), (2, 25), (3, 14), (4, 33)])
    return STREAM.format(name="a", path=a) + STREAM.format(name="b", path=b)


def test_an_interval_join_joins_a_late_row_with_the_rows_still_held(tmp_path, route):
    ddl = interval_ddl(tmp_path)
    got, late = run(ddl, INTERVAL_SQL.format(kind="INNER"), route)
    assert got == [(1, 2), (2, 2), (4, 2)]
    if route == "runtime":
        assert late == {"a": 0, "b": 0, "#2 IntervalJoin": 1}
        assert run(ddl, INTERVAL_SQL.format(kind="INNER"), route, batch_rows=1) == (got, late)


def test_a_left_interval_join_pads_a_row_too_late_for_its_partners(tmp_path, route):
    ddl = interval_ddl(tmp_path)
    got, late = run(ddl, INTERVAL_SQL.format(kind="LEFT"), route)
    assert got == [(1, 2), (2, 2), (3, None), (4, 2)]  # a3 padded, not dropped
    if route == "runtime":
        assert late == {"a": 0, "b": 0, "#2 IntervalJoin": 0}
        assert run(ddl, INTERVAL_SQL.format(kind="LEFT"), route, batch_rows=1) == (got, late)


def temporal_ddl(tmp_path) -> str:
    # Versions of x: 1 @:10, 2 @:20, 3 @:50. Orders (watermark before each): 1 :12 (-), 2 :30 (:07),
    # 3 :15 (:25), 4 :60 (:25), 5 :22 (:55), 6 :52 (:55).
    #   o1 :12 on time                                  -> rate 1
    #   o2 :30 on time                                  -> rate 2
    #   o3 :15 late; newest version <= :25 is :20 > :15: rate 1 cleaned up -> none
    #   o4 :60 on time                                  -> rate 3
    #   o5 :22 late; newest version <= :55 is :50 > :22 -> none
    #   o6 :52 late; newest version <= :55 is :50 <= :52: kept -> rate 3
    rates = write_rates(tmp_path / "rates.jsonl", [(1, 10), (2, 20), (3, 50)])
    o = write_stream(tmp_path / "o.jsonl", [(1, 12), (2, 30), (3, 15), (4, 60), (5, 22), (6, 52)])
    return STREAM.format(name="o", path=o) + RATES.format(path=rates)


def test_a_temporal_join_joins_a_late_row_with_the_versions_still_kept(tmp_path, route):
    ddl = temporal_ddl(tmp_path)
    got, late = run(ddl, TEMPORAL_SQL.format(kind="INNER"), route)
    assert got == [(1, 1), (2, 2), (4, 3), (6, 3)]
    if route == "runtime":
        assert late == {"o": 0, "rates": 0, "#2 TemporalJoin": 2}  # o3 and o5
        assert run(ddl, TEMPORAL_SQL.format(kind="INNER"), route, batch_rows=1) == (got, late)


def test_a_left_temporal_join_pads_a_late_row_whose_version_is_gone(tmp_path, route):
    ddl = temporal_ddl(tmp_path)
    got, late = run(ddl, TEMPORAL_SQL.format(kind="LEFT"), route)
    assert sorted(got, key=str) == sorted([(1, 1), (2, 2), (3, None), (4, 3), (5, None), (6, 3)], key=str)
    if route == "runtime":
        assert late == {"o": 0, "rates": 0, "#2 TemporalJoin": 0}
        assert run(ddl, TEMPORAL_SQL.format(kind="LEFT"), route, batch_rows=1) == (got, late)


# -- many rows, many batch cuttings, against an oracle written from Flink's rules --------------------------------

def _random_events(n: int, seed: int, disorder_s: float) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return sorted(((i, i * 0.5 - rng.uniform(0, disorder_s)) for i in range(n)), key=lambda e: e[0])


def _with_arrival(events: list[tuple[int, float]]) -> pa.Table:
    ts = [BASE + dt.timedelta(seconds=t) for _, t in events]
    w = [x or dt.datetime(1970, 1, 1) for x in arrival_watermarks(ts, 5)]
    return pa.table({"id": [i for i, _ in events], "ts": pa.array(ts, pa.timestamp("us")),
                     "w": pa.array(w, pa.timestamp("us"))})


# Read straight from its sources, the join takes each row's watermark as a column; through a filter, from
# batches cut before each late row (the same rule either way).
@pytest.mark.parametrize("left_input", ["a", "(SELECT * FROM a WHERE id >= 0)"], ids=["source", "filtered"])
def test_interval_join_rows_and_drops_do_not_depend_on_batches(tmp_path, left_input):
    left, right = _random_events(300, 1, 12), _random_events(200, 2, 12)
    ddl = (STREAM.format(name="a", path=write_stream(tmp_path / "a.jsonl", left))
           + STREAM.format(name="b", path=write_stream(tmp_path / "b.jsonl", right)))
    sql = (f"SELECT a.id AS aid, b.id AS bid FROM {left_input} AS a JOIN b ON a.k = b.k "
           "AND b.ts BETWEEN a.ts - INTERVAL '2' SECOND AND a.ts + INTERVAL '1' SECOND")
    # Flink keeps a pair unless the row that came later (larger watermark) came past the other's reach.
    want = rows(duck("""SELECT a.id AS aid, b.id AS bid FROM a JOIN b ON b.ts BETWEEN a.ts - INTERVAL 2 SECOND AND a.ts + INTERVAL 1 SECOND
                        AND NOT ((a.w > b.ts + INTERVAL 2 SECOND AND a.w >= b.w)
                                 OR (b.w > a.ts + INTERVAL 1 SECOND AND b.w >= a.w))""",
                     a=_with_arrival(left), b=_with_arrival(right)))
    late_rows = duck("SELECT count(*) FROM a WHERE ts < w", a=_with_arrival(left)).column(0)[0].as_py()
    assert late_rows > 20 and len(want) > 100
    results = {batch: run(ddl, sql, "runtime", batch_rows=batch) for batch in (1, 7, None)}
    assert {tuple(r[0]) for r in results.values()} == {tuple(want)}
    assert len({tuple(sorted(r[1].items())) for r in results.values()}) == 1
    assert run(ddl, sql, "duckdb")[0] == want


def test_the_interval_join_counts_its_drops_in_show_progress_and_the_run_summary(tmp_path):
    ddl = interval_ddl(tmp_path)
    engine = dsms.Engine()
    engine.execute(ddl + "SET 'engine' = 'runtime';")
    engine.execute(f"CREATE MATERIALIZED VIEW joined AS {INTERVAL_SQL.format(kind='INNER')}")
    engine.run_until_idle()
    late = {r["operator"].split("(")[0]: r["late"] for r in engine.execute("SHOW PROGRESS joined").table.to_pylist()}
    assert late["#2 IntervalJoin"] == 1 and late["#0 Source"] == late["#1 Source"] == 0
    script = tmp_path / "q.sql"
    script.write_text(ddl + "\n" + INTERVAL_SQL.format(kind="INNER") + ";\n")
    out = subprocess.run([sys.executable, "-m", "dsms.cli", "run", "--engine", "runtime", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "late events dropped: 1 (query_1 #2 IntervalJoin: 1)" in out.stderr, out.stderr
