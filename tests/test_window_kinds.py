"""A window kind added by a program: one class and its registration, run on the runtime and DuckDB routes.

TWIN(TABLE s, DESCRIPTOR(ts), size) puts each row in two windows: its
window of ``size`` and its window of twice the size (two resolutions at
once, as a dashboard's 10 s and 20 s rollups)::

    size 10 s      |   [0, 10)   |  [10, 20)   |  [20, 30)   |  [30, 40)   |
    twice          |          [0, 20)          |         [20, 40)          |
    t = 13 s       ->  [10, 20) and [0, 20)

Nothing else in the engine is told about it: the binder, the runtime's
panes, late-event checks and the lowering for DuckDB and Spark ask the
kind. The oracle is plain DuckDB SQL: two tumbling aggregates, unioned.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from logic_tables import OperatorDriver, assert_rows
from spans import assert_error_at
from sqlglot import exp

import dsms
from dsms.planner.windows import (
    Assignment,
    SlicedWindowKind,
    WindowSpec,
    assign_windows,
    floor_to,
    register_window_kind,
    window_kind,
)
from dsms.planner.windows.base import each, lit, plus
from dsms.runtime.operators.window_agg import WindowAggLogic

from oracle import duck, events, rows


class Twin(SlicedWindowKind):
    """Each row in its window of ``size`` and in its window of twice the size."""

    name = "TWIN"
    params = ("size",)

    def check(self, values: dict[str, int]) -> tuple[str, str] | None:
        return ("size", "the size of a TWIN window must be whole seconds") if values["size"] % 1_000_000 else None

    def pane(self, w: WindowSpec) -> int:
        return w.size

    def windows_of_pane(self, w: WindowSpec, pane_start: int) -> list[tuple[int, int]]:
        big = pane_start - (pane_start - w.offset) % (2 * w.size)
        return sorted({(pane_start, pane_start + w.size), (big, big + 2 * w.size)}, key=lambda s: (s[1], s[0]))

    def last_end(self, w: WindowSpec, pane_start):
        return pane_start - (pane_start - w.offset) % (2 * w.size) + 2 * w.size

    def longest(self, w: WindowSpec) -> int:
        return 2 * w.size

    def assign(self, w: WindowSpec, t: exp.Expression) -> Assignment:
        widths = exp.Array(expressions=[lit(w.size), lit(2 * w.size)])  # one row per width
        start = floor_to(t, each(), w.offset)
        return Assignment(start, plus(start, each()), widths)


TWIN = register_window_kind(Twin())

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{path}', format = 'json')"""
# events() moves an event by less than 4 s, so with a 5 s bound none is late on any route
EV = events(600, seed=11, keys=4, span_s=120)

QUERY = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total
  FROM TABLE(TWIN(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""
ORACLE = """
  SELECT time_bucket(INTERVAL '{w} seconds', ts, TIMESTAMP '1970-01-01') AS window_start,
         time_bucket(INTERVAL '{w} seconds', ts, TIMESTAMP '1970-01-01') + INTERVAL '{w} seconds' AS window_end,
         k, COUNT(*) AS n, SUM(v) AS total
  FROM ev GROUP BY ALL"""


@pytest.fixture(scope="module")
def ddl(tmp_path_factory):
    path = tmp_path_factory.mktemp("twin") / "ev.jsonl"
    with open(path, "w") as f:
        for r in EV.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n")
    return DDL.format(path=path)


def run(ddl: str, query: str, route: str) -> pa.Table:
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    handle = engine.query(query)
    engine.run_until_idle()
    assert handle.done and getattr(handle.job, "route", "runtime") == route
    return handle.snapshot()


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_an_added_window_kind_aggregates_on_each_route(ddl, route):
    want = duck(ORACLE.format(w=10) + " UNION ALL " + ORACLE.format(w=20), ev=EV)
    assert want.num_rows > 40
    assert rows(run(ddl, QUERY, route)) == rows(want)


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_an_added_window_kind_labels_rows_on_each_route(ddl, route):
    got = run(ddl, "SELECT k, v, ts, window_start, window_end, window_time FROM TABLE(TWIN(TABLE ev, "
                   "DESCRIPTOR(ts), INTERVAL '10' SECOND))", route)
    want = duck("""SELECT k, v, ts, ws AS window_start, ws + INTERVAL (w) SECOND AS window_end,
                          ws + INTERVAL (w) SECOND - INTERVAL 1 MILLISECOND AS window_time
                   FROM (SELECT *, time_bucket(INTERVAL (w) SECOND, ts, TIMESTAMP '1970-01-01') AS ws
                         FROM ev, (VALUES (10), (20)) AS widths(w))""", ev=EV)
    assert got.num_rows == 2 * EV.num_rows
    assert rows(got, want.column_names) == rows(want)


def test_an_added_window_kind_is_planned_from_its_class():
    engine = dsms.Engine()
    engine.execute(DDL.format(path="ev.jsonl"))
    assert "TWIN(ts, size=10s)" in engine.plan(QUERY).explain()
    window = next(op.window for op in engine.plan(QUERY).physical.ops if hasattr(op, "window"))
    assert window.type is TWIN and window.pane == 10_000_000
    assert window.windows_of_pane(30_000_000) == [(20_000_000, 40_000_000), (30_000_000, 40_000_000)]


def test_an_added_window_kind_checks_its_parameters_with_a_span():
    engine = dsms.Engine()
    engine.execute(DDL.format(path="ev.jsonl"))
    assert_error_at(engine, "SELECT * FROM TABLE(TWIN(TABLE ev, DESCRIPTOR(ts), INTERVAL /*a*/'1.5'/*a*/ SECOND))",
                    "must be whole seconds")
    assert_error_at(engine, "SELECT * FROM TABLE(TWIN(TABLE ev PARTITION BY /*a*/k/*a*/, DESCRIPTOR(ts), "
                            "INTERVAL '10' SECOND))", "PARTITION BY is only allowed for SESSION windows")


@pytest.mark.parametrize("kind, values", [
    ("TUMBLE", dict(size=10)), ("HOP", dict(slide=10, size=30)), ("HOP", dict(slide=10, size=25)),
    ("CUMULATE", dict(step=10, size=30)), ("TWIN", dict(size=10))])
@pytest.mark.parametrize("offset", [0, 3])
def test_the_assignment_builder_gives_each_row_the_windows_of_its_panes(kind, values, offset):
    """The SQL every route runs (here on DuckDB) agrees with the kind's panes, for times before and after 0.

    (HOP with a size that is not a multiple of the slide is refused by the binder today; the kind
    already assigns and assembles it, on panes of gcd(slide, size).)
    """
    w = window_kind(kind).spec("t", offset=offset, **values)
    times = list(range(-47, 61, 7))
    select = assign_windows(w, exp.to_table("ev"), None, lambda start, end: [
        exp.alias_(start, "ws"), exp.alias_(end, "we")])
    sql = select.sql("duckdb").replace('EPOCH_US("t")', '"t"')  # integer times stand for microseconds here
    got = sorted(duck(sql, ev=pa.table({"t": times})).select(["t", "ws", "we"]).to_pylist(),
                 key=lambda r: (r["t"], r["ws"], r["we"]))
    want = sorted(({"t": t, "ws": s, "we": e} for t in times for s, e in w.windows_of_pane(w.pane_start(t))
                   if s <= t < e), key=lambda r: (r["t"], r["ws"], r["we"]))
    assert got == want and len(want) >= len(times)


def test_an_added_window_kind_judges_late_rows_per_window_on_the_runtime():
    # TWIN size 10 s:  a@3 -> [0, 10) and [0, 20);  a@12 -> [10, 20) and [0, 20)
    # watermark 9.999 fires [0, 10). Then a@5 is late for [0, 10) but counts in [0, 20), still open;
    # after watermark 20 a@1 is late for both and dropped.
    d = OperatorDriver("CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) "
                       "WITH (connector = 'memory')",
                       "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(TWIN(TABLE s, DESCRIPTOR(ts), "
                       "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k", WindowAggLogic)
    d.batch("""
        k | ts
        a | 00:00:03
        a | 00:00:12
    """)
    assert_rows(d.watermark("00:00:09.999"), """
        window_start | window_end | k | agg0
        00:00:00     | 00:00:10   | a | 1
    """)
    d.batch("""
        k | ts
        a | 00:00:05
    """)
    assert d.logic.late_dropped == 0
    assert_rows(d.watermark("00:00:20"), """
        window_start | window_end | k | agg0
        00:00:00     | 00:00:20   | a | 3
        00:00:10     | 00:00:20   | a | 1
    """)
    d.batch("""
        k | ts
        a | 00:00:01
    """)
    assert d.logic.late_dropped == 1
