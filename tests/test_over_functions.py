"""OVER window functions (LAG, FIRST_VALUE, LAST_VALUE, ROW_NUMBER, RANK, DENSE_RANK) against DuckDB.

The oracle orders rows by time, then by arrival (``seq``). Flink's semantics,
which the oracle spells out with DuckDB's own functions: FIRST_VALUE and
LAST_VALUE skip NULLs; under a RANGE frame the rows with the same time
(peers) share the frame, so each takes the value computed at the last peer
(LAG included: Flink's testLagFunction gives both rows at 14000003 the same
LAG); ROW_NUMBER counts in arrival order; RANK and DENSE_RANK are the rows
so far, peers included (Flink's streaming OVER passes them no order key, so
they count; checked against Flink in benchmarks/flink/conformance.py).
"""

import datetime as dt

import pytest
from spans import assert_error_at
from test_over import DDL, EV, ORACLE_EV, rows
from test_routes import run, same, sorted_rows

import dsms

from oracle import duck, run_query
from route_data import generate

ROWS_SO_FAR = "PARTITION BY k ORDER BY ts, seq ROWS UNBOUNDED PRECEDING"
PEERS = "PARTITION BY k, ts ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"


def test_default_frame_functions_match_duckdb():
    sql = ("SELECT k, v, ts, LAG(v) OVER w AS l1, LAG(v, 2, -1) OVER w AS l2, LAG(price, 0) OVER w AS l0, "
           "FIRST_VALUE(v) OVER w AS f, LAST_VALUE(v) OVER w AS l, RANK() OVER w AS r, DENSE_RANK() OVER w AS d, "
           "COUNT(*) OVER w AS n FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts)")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30)
    per_row = duck(f"""SELECT *, lag(v) OVER a AS l1, COALESCE(lag(v, 2) OVER a, -1) AS l2, price AS l0,
                              first_value(v IGNORE NULLS) OVER a AS f, last_value(v IGNORE NULLS) OVER a AS l
                       FROM ev WINDOW a AS ({ROWS_SO_FAR})""", ev=ORACLE_EV)
    want = duck(f"""SELECT k, v, ts, last_value(l1) OVER p, last_value(l2) OVER p, last_value(l0) OVER p, last_value(f) OVER p,
                           last_value(l) OVER p, COUNT(*) OVER t AS r, COUNT(*) OVER t AS d, COUNT(*) OVER t AS n
                    FROM r WINDOW p AS ({PEERS}), t AS (PARTITION BY k ORDER BY ts)""", r=per_row)
    assert rows(got) == rows(want)
    assert got.num_rows == EV.num_rows


@pytest.mark.parametrize("max_batch", [1, 50])
def test_rows_frame_functions_match_duckdb(max_batch):
    sql = ("SELECT k, v, ts, FIRST_VALUE(v) OVER w AS f, LAST_VALUE(price) OVER w AS lp, SUM(v) OVER w AS s "
           "FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=max_batch)
    want = duck("""SELECT k, v, ts, first_value(v IGNORE NULLS) OVER w, last_value(price IGNORE NULLS) OVER w,
                          SUM(v) OVER w FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts, seq ROWS 3 PRECEDING)""",
                ev=ORACLE_EV)
    assert rows(got) == rows(want)


@pytest.mark.parametrize("max_batch", [1, 50])
def test_lag_reaches_back_its_offset(max_batch):
    """LAG 5 rows back, next to a running COUNT (both over the default frame)."""
    sql = ("SELECT k, v, ts, LAG(v, 5, 0) OVER w AS l5, COUNT(*) OVER w AS n FROM ev "
           "WINDOW w AS (PARTITION BY k ORDER BY ts)")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=max_batch)
    per_row = duck("SELECT *, COALESCE(lag(v, 5) OVER (PARTITION BY k ORDER BY ts, seq), 0) AS l5 FROM ev",
                   ev=ORACLE_EV)
    want = duck(f"SELECT k, v, ts, last_value(l5) OVER ({PEERS}), COUNT(*) OVER (PARTITION BY k ORDER BY ts) "
                "FROM r", r=per_row)
    assert rows(got) == rows(want)


def test_range_interval_first_and_last_value_match_a_self_join():
    sql = ("SELECT k, v, ts, FIRST_VALUE(v) OVER w AS f, LAST_VALUE(v) OVER w AS l FROM ev WINDOW w AS ("
           "PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW)")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=25)
    frame = ("FROM ev AS f WHERE f.k IS NOT DISTINCT FROM e.k AND f.ts BETWEEN e.ts - INTERVAL 10 SECOND AND e.ts "
             "AND f.v IS NOT NULL ORDER BY f.ts {d}, f.seq {d} LIMIT 1")
    want = duck(f"SELECT k, v, ts, (SELECT f.v {frame.format(d='ASC')}), (SELECT f.v {frame.format(d='DESC')}) "
                "FROM ev AS e", ev=ORACLE_EV)
    assert rows(got) == rows(want)


def test_row_number_without_a_filter_is_a_running_count():
    sql = ("SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev")
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    assert q.changelog == "append-only" and "ROW_NUMBER() AS rn" in engine.explain(sql)
    got = run_query(DDL, sql, {"ev": EV}, max_batch=40)
    want = duck("SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY ts, seq) FROM ev", ev=ORACLE_EV)
    assert rows(got) == rows(want)


def test_flink_lag_function_rows():
    """The data and expected rows of Flink's OverAggregateITCase.testLagFunction (event times in ms)."""
    engine = dsms.Engine()
    engine.execute("CREATE STREAM t1 (a INT, b BIGINT, c VARCHAR, rowtime TIMESTAMP(3), WATERMARK FOR rowtime AS "
                   "rowtime - INTERVAL '10' SECOND) WITH (connector = 'memory')")
    q = engine.query("SELECT a, b, c, LAG(b) OVER w AS l1, LAG(b, 2) OVER w AS l2, "
                     "LAG(b, 2, CAST(10086 AS BIGINT)) OVER w AS l3 FROM t1 "
                     "WINDOW w AS (PARTITION BY a ORDER BY rowtime)")
    base = dt.datetime(1970, 1, 1)
    for ms, (a, b, c) in [(14000001, (1, 1, "Hi")), (14000005, (1, 2, "Hi")), (14000002, (1, 3, "Hello")),
                          (14000003, (1, 4, "Hello")), (14000003, (1, 5, "Hello")),
                          (14000021, (1, 6, "Hello world")), (14000022, (1, 7, "Hello world"))]:
        engine.insert("t1", [{"a": a, "b": b, "c": c, "rowtime": base + dt.timedelta(milliseconds=ms)}])
        engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    got = sorted(tuple(r.values()) for r in q.snapshot().to_pylist())
    assert got == sorted([(1, 1, "Hi", None, None, 10086), (1, 3, "Hello", 1, None, 10086), (1, 4, "Hello", 4, 3, 3),
                          (1, 5, "Hello", 4, 3, 3), (1, 2, "Hi", 5, 4, 4), (1, 6, "Hello world", 2, 5, 5),
                          (1, 7, "Hello world", 6, 2, 2)])


@pytest.mark.parametrize("sql, message", [
    ("SELECT /*a*/LEAD(v)/*a*/ OVER (PARTITION BY k ORDER BY ts) FROM ev", "LEAD is not supported on a stream"),
    ("SELECT RANK() OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN /*a*/2 PRECEDING/*a*/ AND CURRENT ROW) AS r "
     "FROM ev", "RANK() takes no ROWS or RANGE frame"),
    ("SELECT LAG(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN /*a*/2 PRECEDING/*a*/ AND CURRENT ROW) AS p "
     "FROM ev", "LAG takes no ROWS or RANGE frame"),
    ("SELECT /*a*/ROW_NUMBER() OVER w/*a*/ AS rn, RANK() OVER w AS r FROM ev WINDOW w AS (ORDER BY ts)",
     "ROW_NUMBER() counts over a ROWS window and cannot share its SELECT"),
    ("SELECT v, /*a*/ROW_NUMBER() OVER (PARTITION BY k ORDER BY v)/*a*/ AS rn FROM ev",
     "unless it is ordered by a time attribute ascending"),
    ("SELECT LAG(v, -/*a*/1/*a*/) OVER (ORDER BY ts) AS p FROM ev", "the offset of LAG must be a whole number"),
])
def test_refusals(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    assert_error_at(engine, sql, message)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return generate(str(tmp_path_factory.mktemp("over-functions-data")))


ROUTE_SQL = ("SELECT k, v, ts, LAG(v, 1, -1) OVER w AS p, FIRST_VALUE(v) OVER w AS f, LAST_VALUE(v) OVER w AS l, "
             "RANK() OVER w AS r FROM s WINDOW w AS (PARTITION BY k ORDER BY ts)")
ROUTE_ORACLE_ROWS = f"""SELECT *, COALESCE(lag(v) OVER a, -1) AS p, first_value(v IGNORE NULLS) OVER a AS f,
                              last_value(v IGNORE NULLS) OVER a AS l
                       FROM (SELECT * FROM s_arr_seq WHERE wm IS NULL OR ts > wm) AS s  -- an UNBOUNDED frame's late rule
                       WINDOW a AS ({ROWS_SO_FAR})"""
ROUTE_ORACLE = f"""SELECT k, v, ts, last_value(p) OVER p, last_value(f) OVER p, last_value(l) OVER p,
                          COUNT(*) OVER (PARTITION BY k ORDER BY ts) FROM r WINDOW p AS ({PEERS})"""


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_routes_agree_with_the_oracle(route, data):
    want = sorted_rows(duck(ROUTE_ORACLE, r=duck(ROUTE_ORACLE_ROWS, **data.tables)))
    got = sorted_rows(run(data.ddl(), ROUTE_SQL, route))
    assert same(got, want), f"{route}: {len(got)} vs {len(want)} rows"


def test_spark_route_agrees(data, spark_session):
    want = sorted_rows(duck(ROUTE_ORACLE, r=duck(ROUTE_ORACLE_ROWS, **data.tables)))
    assert same(sorted_rows(run(data.ddl(), ROUTE_SQL, "spark")), want)


def test_state_is_bounded_by_the_lag_offset():
    """Under an UNBOUNDED frame LAG keeps only the last ``offset`` rows of each partition."""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT k, LAG(v, 3) OVER (PARTITION BY k ORDER BY ts) AS p FROM ev")
    engine.insert("ev", EV)
    engine.run_until_idle()
    keys = len(set(EV.column("k").to_pylist()))
    assert 0 < q.job.state_rows <= 3 * keys + EV.num_rows // 10  # + the rows the watermark holds back
