"""GROUPING SETS, ROLLUP, CUBE and GROUPING() against DuckDB's own, fed in small batches on the runtime.

Group aggregates (the changelog applied strictly, also over an updating
input) and window aggregates (where, as in Flink, window_start and
window_end are in every set). The batch routes run the same shapes in
tests/route_shapes.py.
"""

import pytest

import dsms

from changes import changelog, final_table
from oracle import duck, events, rows, run_query, tumble_on_time

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');"""
EV = events(500, seed=41, keys=4, span_s=90, disorder_s=5)  # some events are late for their window


@pytest.mark.parametrize("group", [
    "GROUPING SETS ((k, m), (k), ())",
    "ROLLUP (k, m)",
    "CUBE (k, m)",
    "k, ROLLUP (m)",
    "GROUPING SETS ((k), (m), (k))",  # a set twice: its rows twice
])
def test_group_aggregate_grouping_sets(group):
    select = ("SELECT k, m, GROUPING(k) AS gk, GROUPING(k, m) AS g, COUNT(*) AS n, SUM(v) AS sv, "
              "STDDEV_POP(price) AS sp, COUNT(DISTINCT v) AS dv FROM (SELECT k, v % 3 AS m, v, price FROM ev) "
              f"GROUP BY {group}")
    q, changes = changelog(DDL, select, EV, max_batch=30, seed=8)
    want = duck(select.replace("STDDEV_POP(price) AS sp", "STDDEV_POP(price)"), ev=EV)
    assert len(want) > 10
    assert rows(final_table(changes)) == rows(want)


def test_grouping_sets_over_an_updating_input_retract():
    inner = "SELECT k, COUNT(*) AS n, MAX(price) AS hi FROM ev GROUP BY k"
    sql = f"SELECT n % 2 AS p, k, GROUPING(n % 2, k) AS g, COUNT(*) AS c, SUM(hi) AS s FROM ({inner}) " \
          "GROUP BY ROLLUP (n % 2, k) HAVING COUNT(*) > 0"
    data = EV.slice(0, 200)
    _, changes = changelog(DDL, sql, data, max_batch=5, seed=9)
    assert rows(final_table(changes)) == rows(duck(sql, ev=data))


def test_window_aggregate_grouping_sets():
    sql = ("SELECT window_start, window_end, k, m, GROUPING(k, m) AS g, COUNT(*) AS n, MAX(price) AS hi, "
           "BIT_OR(v) AS bo FROM TABLE(TUMBLE(TABLE (SELECT k, v % 3 AS m, v, price, ts FROM ev), DESCRIPTOR(ts), "
           "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, GROUPING SETS ((k, m), (k), ())")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=25, seed=10)
    counted = tumble_on_time(EV, 2, 10)  # Flink's late rule, per window
    want = duck("""SELECT ws, ws + INTERVAL '10 seconds', k, m, GROUPING(k, m), COUNT(*), MAX(price), BIT_OR(v)
                   FROM (SELECT time_bucket(INTERVAL '10 seconds', ts) AS ws, k, v % 3 AS m, v, price FROM ev)
                   GROUP BY ws, GROUPING SETS ((k, m), (k), ())""", ev=counted)
    assert counted.num_rows < EV.num_rows  # some events were late
    assert len(want) > 30
    assert rows(got) == rows(want)


def test_group_window_with_rollup():
    sql = ("SELECT TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, k, COUNT(*) AS n FROM ev "
           "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), ROLLUP (k)")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=25)
    want = duck("SELECT time_bucket(INTERVAL '10 seconds', ts) AS ws, k, COUNT(*) FROM ev GROUP BY ws, ROLLUP (k)",
                ev=tumble_on_time(EV, 2, 10))
    assert rows(got) == rows(want)


def test_window_bounds_must_be_in_every_set():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match="window_start and window_end must be in every grouping set"):
        engine.plan("SELECT window_start, k, COUNT(*) FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), "
                    "INTERVAL '10' SECOND)) GROUP BY GROUPING SETS ((window_start, window_end, k), (k))")
    with pytest.raises(dsms.SqlError, match="GROUPING\\(price\\) names a column that is not grouped by"):
        engine.plan("SELECT k, GROUPING(price) FROM ev GROUP BY ROLLUP (k)")


def test_the_grouping_sets_example_of_sql_md():
    """docs/sql.md shows its rows over the docs catalog's clicks (hand-computed there)."""
    engine = dsms.Engine()
    engine.execute(open("tests/docs_catalog.sql").read())
    q = engine.query("""SELECT window_start, window_end, ad_id, GROUPING(ad_id) AS g, COUNT(*) AS clicks
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end, GROUPING SETS ((ad_id), ())""")
    engine.end_input()
    engine.run_until_idle()
    got = sorted(((r["window_start"].strftime("%H:%M"), r["ad_id"], r["g"], r["clicks"])
                  for r in q.snapshot().to_pylist()), key=lambda r: (r[0], r[1] is None, r[1] or 0))
    assert got == [("12:00", 7, 0, 1), ("12:00", 9, 0, 1), ("12:00", None, 1, 2), ("12:01", 7, 0, 1),
                   ("12:01", None, 1, 1)]
