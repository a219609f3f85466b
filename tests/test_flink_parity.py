"""Queries Flink 2.3 runs that dsms used to refuse or answer differently, on every route.

Each expected answer is worked out by hand in the comments (times in
seconds after BASE; watermark = largest time so far - 5 s) and was checked
against Flink 2.3 (benchmarks/flink/conformance.py has the same queries).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

import dsms

from oracle import BASE

ROUTES = ("runtime", "duckdb", "spark")
DDL = """CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""


def write(tmp_path, rows: list[tuple[str, int, float]], name: str = "s") -> str:
    """(k, v, seconds after BASE) rows as a JSON-lines file, in this order."""
    path = tmp_path / f"{name}.jsonl"
    with open(path, "w") as f:
        for k, v, sec in rows:
            ts = BASE + dt.timedelta(seconds=sec)
            f.write(json.dumps({"k": k, "v": v, "ts": ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    return str(path)


def run(ddl: list[str], sql: str, route: str) -> list[tuple]:
    engine = dsms.Engine()
    for statement in ddl:
        engine.execute(statement)
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert q.done and getattr(q.job, "route", "runtime") == route
    return sorted((tuple(_plain(v) for v in r.values()) for r in q.snapshot().to_pylist()), key=_nulls_first)


def _nulls_first(row: tuple) -> list:
    return [(v is not None, v) for v in row]


def _plain(v):
    """Timestamps as seconds after BASE."""
    return (v - BASE).total_seconds() if isinstance(v, dt.datetime) else v


@pytest.fixture(params=ROUTES)
def route(request):
    if request.param == "spark":
        request.getfixturevalue("spark_session")
    return request.param


HOP_ROWS = [("a", 0, 1), ("a", 1, 9), ("b", 2, 11.5), ("a", 3, 16), ("b", 4, 23.999)]


def test_hop_whose_size_is_not_a_multiple_of_its_slide(tmp_path, route):
    # HOP slide 4 s, size 10 s: windows [4i, 4i + 10). An event is in 2 or 3 of them:
    #   [-8, 2): 1   [-4, 6): 1   [0, 10): 1 9   [4, 14): 9 11.5   [8, 18): 9 11.5 16
    #   [12, 22): 16   [16, 26): 16 23.999   [20, 30): 23.999
    # Flink 2.3 runs the group window form (the TVF form only without an aggregate).
    ddl = [DDL.format(path=write(tmp_path, HOP_ROWS))]
    want = [(-8, 1), (-4, 1), (0, 2), (4, 2), (8, 3), (12, 1), (16, 2), (20, 1)]
    group = ("SELECT HOP_START(ts, INTERVAL '4' SECOND, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n FROM s "
             "GROUP BY HOP(ts, INTERVAL '4' SECOND, INTERVAL '10' SECOND)")
    assert run(ddl, group, route) == want
    tvf = ("SELECT window_start, COUNT(*) AS n FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '4' SECOND, "
           "INTERVAL '10' SECOND)) GROUP BY window_start, window_end")
    assert run(ddl, tvf, route) == want
    rows = "SELECT v, window_start FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '4' SECOND, INTERVAL '10' SECOND))"
    assert run(ddl, rows, route) == [(0, -8), (0, -4), (0, 0), (1, 0), (1, 4), (1, 8), (2, 4), (2, 8), (3, 8),
                                     (3, 12), (3, 16), (4, 16), (4, 20)]


INTERVAL_ROWS = [("a", 1, 10), ("b", 2, 20), ("a", 3, 30)]
OTHER_ROWS = [("a", 10, 12), ("b", 20, 21), ("c", 30, 40)]


@pytest.mark.parametrize("join, want", [
    ("JOIN", []),
    ("LEFT JOIN", [(1, None), (2, None), (3, None)]),
    ("RIGHT JOIN", [(None, 10), (None, 20), (None, 30)]),
    ("FULL JOIN", [(1, None), (2, None), (3, None), (None, 10), (None, 20), (None, 30)]),
])
def test_an_interval_join_whose_bounds_can_never_hold_runs(tmp_path, route, join, want):
    # r.ts BETWEEN l.ts + 5 s AND l.ts - 5 s holds for no pair: an inner join is empty, an outer one pads
    # every row of its outer side (Flink 2.3 runs it the same way).
    ddl = [DDL.format(path=write(tmp_path, INTERVAL_ROWS, "l")).replace("STREAM s", "STREAM l"),
           DDL.format(path=write(tmp_path, OTHER_ROWS, "r")).replace("STREAM s", "STREAM r")]
    sql = (f"SELECT l.v AS lv, r.v AS rv FROM l {join} r ON l.k = r.k "
           "AND r.ts BETWEEN l.ts + INTERVAL '5' SECOND AND l.ts - INTERVAL '5' SECOND")
    assert run(ddl, sql, route) == sorted(want, key=_nulls_first)


TOPN_ROWS = [("a", 0, 10), ("a", 1, 30), ("b", 2, 26), ("a", 3, 20), ("a", 4, 8), ("b", 5, 25), ("a", 6, 25),
             ("a", 7, 60), ("a", 8, 55), ("a", 9, 30), ("b", 10, 90), ("a", 11, 56)]


def test_an_expression_as_top_n_partition_key(tmp_path, route):
    # PARTITION BY v / 4 (integer division): groups {0..3}, {4..7}, {8..11}; the largest v of each.
    # With k too: (0, a) 3, (0, b) 2, (1, a) 7, (1, b) 5, (2, a) 11, (2, b) 10. The key is not a column.
    ddl = [DDL.format(path=write(tmp_path, TOPN_ROWS))]
    sql = "SELECT * FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY v / 4 ORDER BY v DESC) AS rn FROM s) WHERE rn <= 1"
    assert run(ddl, sql, route) == [("a", 3, 1), ("a", 7, 1), ("a", 11, 1)]
    sql = ("SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY v / 4, k ORDER BY v DESC) AS rn FROM s) "
           "WHERE rn <= 1")
    assert run(ddl, sql, route) == [("a", 3), ("a", 7), ("a", 11), ("b", 2), ("b", 5), ("b", 10)]
