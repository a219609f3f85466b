"""``PROCTIME()`` called inside a query (no ``pt AS PROCTIME()`` column needed), where Flink allows it.

Rows arrive in three batches (the clock moves 1 s between them); the
expected rows are worked out by hand from that arrival order::

    batch 1 (t0):      (a, 1) (a, 2) (b, 3)
    batch 2 (t0+1s):   (a, 4) (c, 5) (b, -1)
    batch 3 (t0+2s):   (a, 6)
"""

import datetime as dt

import pytest
from spans import assert_error_at

import dsms
from dsms.runtime.clock import VirtualClock

T0 = 1_700_000_000_000_000
BATCHES = [[("a", 1), ("a", 2), ("b", 3)], [("a", 4), ("c", 5), ("b", -1)], [("a", 6)]]
DDL = ("CREATE STREAM u (k VARCHAR, v INT) WITH (connector = 'memory');"
       "CREATE STREAM w (k VARCHAR, v INT, pt AS PROCTIME()) WITH (connector = 'memory');")


def run(sql: str, stream: str = "u") -> tuple[dsms.QueryHandle, list[tuple]]:
    clock = VirtualClock(start_us=T0)
    engine = dsms.Engine(clock=clock)
    engine.execute(DDL)
    q = engine.query(sql)
    q.plan_text = engine.plan(sql).explain()
    changes = []
    for rows in BATCHES:
        engine.insert(stream, rows)
        engine.run_until_idle()
        changes += [tuple(r.values()) for r in q.poll().to_pylist()]
        clock.advance(1_000_000)
    engine.run_until_idle()  # the clock has moved past the last batch: what waits for it (OVER) comes out
    changes += [tuple(r.values()) for r in q.poll().to_pylist()]
    return q, changes


DEDUP = "SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY {order}) AS rn FROM {s}) WHERE rn = 1"


@pytest.mark.parametrize("order, stream", [("PROCTIME()", "u"), ("PROCTIME() ASC", "w"), ("pt", "w")])
def test_keep_first_row_per_key(order, stream):
    q, got = run(DEDUP.format(order=order, s=stream), stream)
    assert q.changelog == "append-only"
    assert "Deduplicate(first)" in q.plan_text
    assert got == [("+I", "a", 1), ("+I", "b", 3), ("+I", "c", 5)]


def test_keep_last_row_per_key():
    q, got = run(DEDUP.format(order="PROCTIME() DESC", s="u"))
    assert q.changelog == "updating"
    assert "Deduplicate(last)" in q.plan_text
    # Within a batch the last row to arrive wins: (a, 2) over (a, 1). Per key, in order:
    per_key = {k: [(op, v) for op, k2, v in got if k2 == k] for k in "abc"}
    assert per_key == {"a": [("+I", 2), ("-U", 2), ("+U", 4), ("-U", 4), ("+U", 6)],
                       "b": [("+I", 3), ("-U", 3), ("+U", -1)],
                       "c": [("+I", 5)]}
    assert len(got) == 9


def test_top_two_in_arrival_order_over_a_filter():
    _, got = run("SELECT k, v FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) AS rn "
                 "FROM u WHERE v > 0) WHERE rn <= 2")
    net = sorted((k, v) for op, k, v in got if op in ("+I", "+U"))
    assert net == [("a", 1), ("a", 2), ("b", 3), ("c", 5)]
    assert not [c for c in got if c[0] in ("-U", "-D")]  # a later row never outranks an earlier one


def test_over_aggregate_ordered_by_proctime_inline_and_named():
    _, got = run("SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY PROCTIME() ROWS BETWEEN 1 PRECEDING AND "
                 "CURRENT ROW) AS s2 FROM u")
    assert sorted(got) == sorted([("+I", "a", 1, 1), ("+I", "a", 2, 3), ("+I", "b", 3, 3), ("+I", "a", 4, 6),
                                  ("+I", "c", 5, 5), ("+I", "b", -1, 2), ("+I", "a", 6, 10)])
    _, got = run("SELECT k, COUNT(*) OVER w AS n FROM u "
                 "WINDOW w AS (PARTITION BY k ORDER BY PROCTIME() ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)")
    assert sorted(got) == sorted([("+I", "a", 1), ("+I", "a", 2), ("+I", "b", 1), ("+I", "a", 3), ("+I", "c", 1),
                                  ("+I", "b", 2), ("+I", "a", 4)])


def test_proctime_in_the_select_list_is_the_arrival_time_and_star_hides_it():
    q, got = run("SELECT *, PROCTIME() AS seen FROM u")
    assert q.schema.names == ["k", "v", "seen"]
    start = dt.datetime.fromtimestamp(T0 / 1e6, dt.timezone.utc)
    assert [(k, v, seen - start) for _, k, v, seen in got] == [
        ("a", 1, dt.timedelta(0)), ("a", 2, dt.timedelta(0)), ("b", 3, dt.timedelta(0)),
        ("a", 4, dt.timedelta(seconds=1)), ("c", 5, dt.timedelta(seconds=1)), ("b", -1, dt.timedelta(seconds=1)),
        ("a", 6, dt.timedelta(seconds=2))]
    q, _ = run("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY PROCTIME()) AS rn FROM u) "
               "WHERE rn = 1")
    assert q.schema.names == ["k", "v", "rn"]


def test_order_by_proctime_is_arrival_order():
    _, got = run("SELECT k, v FROM u ORDER BY PROCTIME() LIMIT 4")
    assert got == [("+I", "a", 1), ("+I", "a", 2), ("+I", "b", 3), ("+I", "a", 4)]
    _, got = run("SELECT k, v, pt FROM w ORDER BY pt", "w")
    assert [(k, v) for _, k, v, _ in got] == [r for batch in BATCHES for r in batch]


@pytest.mark.parametrize("sql, message", [
    ("SELECT k FROM u ORDER BY /*a*/PROCTIME()/*a*/ DESC", "ORDER BY processing time can only be ascending"),
    ("SELECT k, v, pt FROM w ORDER BY pt, /*a*/v/*a*/", "ORDER BY processing time, then other columns"),
    ("SELECT k FROM u WHERE /*a*/PROCTIME()/*a*/ > TIMESTAMP '2020-01-01 00:00:00'",
     "PROCTIME() is not supported here"),
    ("SELECT u.k, /*a*/PROCTIME()/*a*/ FROM u JOIN w ON u.k = w.k", "needs the processing time of one source"),
])
def test_where_proctime_cannot_go(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    assert_error_at(engine, sql, message)
