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
    return sorted(tuple(_plain(v) for v in r.values()) for r in q.snapshot().to_pylist())


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
