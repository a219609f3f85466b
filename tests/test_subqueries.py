"""Subqueries (IN, NOT IN, EXISTS, NOT EXISTS, scalar; correlated by equalities) as regular joins.

Tables change under the subqueries (upserts and deletes interleaved with stream events in small
random batches); the changelog is applied strictly and must end at DuckDB's query over the final
tables. The same queries run over files on the runtime, DuckDB and Spark routes and must agree with
DuckDB's own subqueries over the same data.
"""

import pytest
from spans import assert_error_at
from test_regular_join import F1, F2, T1, T2
from test_routes import run, same, sorted_rows

import dsms

from changes import Recorder, feed_mixed
from oracle import duck, events, rows
from route_data import generate
from route_shapes import final_state

DDL = """
CREATE TABLE t1 (id BIGINT, k VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE TABLE t2 (id BIGINT, k VARCHAR, w BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
CREATE STREAM s2 (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
"""

S, S2 = events(260, seed=41, keys=6, span_s=100), events(200, seed=42, keys=6, span_s=100)

# (dsms query, DuckDB oracle over the final tables t1, t2 and the whole streams s, s2)
OVER_TABLES = {
    "in": ("SELECT id, k, v FROM t1 WHERE k IN (SELECT k FROM t2 WHERE w > 10)",
           "SELECT id, k, v FROM t1 WHERE k IN (SELECT k FROM t2 WHERE w > 10)"),
    "in_correlated": ("SELECT id, k, v FROM t1 WHERE v IN (SELECT w FROM t2 WHERE t2.k = t1.k)",
                      "SELECT id, k, v FROM t1 WHERE v IN (SELECT w FROM t2 WHERE t2.k = t1.k)"),
    # t1.k has NULLs (dropped: UNKNOWN); the set has none (with a NULL in it no row would pass)
    "not_in": ("SELECT id, k, v FROM t1 WHERE k NOT IN (SELECT k FROM t2 WHERE w > 23 AND k IS NOT NULL)",
               "SELECT id, k, v FROM t1 WHERE k NOT IN (SELECT k FROM t2 WHERE w > 23 AND k IS NOT NULL)"),
    "not_in_correlated": ("SELECT id, v FROM t1 WHERE v NOT IN (SELECT w FROM t2 WHERE t2.k = t1.k)",
                          "SELECT id, v FROM t1 WHERE v NOT IN (SELECT w FROM t2 WHERE t2.k = t1.k)"),
    "exists": ("SELECT id, k FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.k AND t2.w < 15)",
               "SELECT id, k FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.k AND t2.w < 15)"),
    "not_exists": ("SELECT id, k FROM t1 WHERE NOT EXISTS (SELECT * FROM t2 WHERE t1.k = t2.k)",
                   "SELECT id, k FROM t1 WHERE NOT EXISTS (SELECT * FROM t2 WHERE t1.k = t2.k)"),
    "exists_uncorrelated": ("SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE w = 9)",
                            "SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE w = 9)"),
    "scalar_where": ("SELECT id, v FROM t1 WHERE v > (SELECT AVG(w) FROM t2)",
                     "SELECT id, v FROM t1 WHERE v > (SELECT CAST(trunc(AVG(w)) AS BIGINT) FROM t2)"),
    "scalar_select_correlated": (
        "SELECT id, (SELECT MAX(w) FROM t2 WHERE t2.k = t1.k) AS top, "
        "(SELECT COUNT(*) FROM t2 WHERE t2.k = t1.k) AS n FROM t1",
        "SELECT id, (SELECT MAX(w) FROM t2 WHERE t2.k = t1.k), (SELECT COUNT(*) FROM t2 WHERE t2.k = t1.k) FROM t1"),
    "stream_in_table": ("SELECT k, v FROM s WHERE v IN (SELECT w FROM t2 WHERE w >= 15) AND k <> 'k1'",
                        "SELECT k, v FROM s WHERE v IN (SELECT w FROM t2 WHERE w >= 15) AND k <> 'k1'"),
    "stream_not_exists_stream": ("SELECT k, v FROM s WHERE NOT EXISTS (SELECT 1 FROM s2 WHERE s2.v = s.v)",
                                 "SELECT k, v FROM s WHERE NOT EXISTS (SELECT 1 FROM s2 WHERE s2.v = s.v)"),
    "subquery_and_join": ("SELECT t1.id, t2.id AS id2 FROM t1 JOIN t2 ON t1.k = t2.k "
                          "WHERE t1.v IN (SELECT v FROM s WHERE s.price > 5) AND t2.w > 5",
                          "SELECT t1.id, t2.id AS id2 FROM t1 JOIN t2 ON t1.k = t2.k "
                          "WHERE t1.v IN (SELECT v FROM s WHERE s.price > 5) AND t2.w > 5"),
}


@pytest.mark.parametrize("name", list(OVER_TABLES))
def test_subqueries_over_changing_tables_match_duckdb(name):
    sql, oracle = OVER_TABLES[name]
    rec = Recorder(DDL)
    rec.query("q", sql)
    feed_mixed(rec, {"t1": T1, "t2": T2, "s": S, "s2": S2}, seed=len(name), max_batch=9)
    rec.end()
    want = duck(oracle, t1=F1, t2=F2, s=S, s2=S2)
    assert len(want) > 0, "the oracle finds no rows: the case proves nothing"
    assert rows(rec.final("q")) == rows(want)


def test_a_subquery_result_is_retracted_when_the_table_changes():
    """Hand-written: k in the subquery's table, then deleted from it, then back."""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT id, k FROM t1 WHERE k IN (SELECT k FROM t2)")
    assert q.changelog == "updating"
    engine.insert("t1", [{"id": 1, "k": "a", "v": 1}, {"id": 2, "k": "b", "v": 2}])
    engine.insert("t2", [{"id": 10, "k": "a", "w": 0}, {"id": 11, "k": "a", "w": 1}])
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "+I", "id": 1, "k": "a"}]
    engine.delete("t2", [{"id": 10}])  # "a" is still in t2 through id 11: no change
    engine.run_until_idle()
    assert q.poll().num_rows == 0
    engine.delete("t2", [{"id": 11}])
    engine.insert("t2", [{"id": 12, "k": "b", "w": 0}])
    engine.run_until_idle()
    assert sorted((r["op"], r["id"]) for r in q.poll().to_pylist()) == [("+I", 2), ("-D", 1)]


def test_not_in_follows_sql_null_semantics():
    """x NOT IN (set): FALSE when x is in it, UNKNOWN (row dropped) when x or an element is NULL, but TRUE for
    an empty set whatever x is."""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT id FROM t1 WHERE k NOT IN (SELECT k FROM t2)")
    engine.insert("t1", [{"id": 1, "k": "a", "v": 0}, {"id": 2, "k": None, "v": 0}, {"id": 3, "k": "c", "v": 0}])
    engine.run_until_idle()
    assert sorted(r["id"] for r in q.snapshot().to_pylist()) == [1, 2, 3]  # empty set: all kept, NULL too
    engine.insert("t2", [{"id": 10, "k": "a", "w": 0}])
    engine.run_until_idle()
    assert sorted(r["id"] for r in q.snapshot().to_pylist()) == [3]  # NULL NOT IN ('a') is UNKNOWN
    engine.insert("t2", [{"id": 11, "k": None, "w": 0}])
    engine.run_until_idle()
    assert q.snapshot().num_rows == 0  # 'c' NOT IN ('a', NULL) is UNKNOWN
    engine.delete("t2", [{"id": 10}, {"id": 11}])
    engine.run_until_idle()
    assert sorted(r["id"] for r in q.snapshot().to_pylist()) == [1, 2, 3]


def test_explain_names_the_join_each_subquery_became():
    engine = dsms.Engine()
    engine.execute(DDL)
    cases = {
        "SELECT id FROM t1 WHERE k IN (SELECT k FROM t2)": "RegularJoin(INNER, keys=[k = __sq_v], as semi join (IN",
        "SELECT id FROM t1 WHERE NOT EXISTS (SELECT 1 FROM t2 WHERE t2.k = t1.k)":
            "RegularJoin(LEFT, keys=[k = __sq_k0], as anti join (NOT EXISTS subquery))",
        "SELECT id FROM t1 WHERE k NOT IN (SELECT k FROM t2)": "as null-aware anti join (NOT IN subquery",
        "SELECT id, (SELECT MAX(w) FROM t2 WHERE t2.k = t1.k) AS m FROM t1":
            "as scalar subquery (LEFT JOIN on one row per key)",
    }
    for sql, label in cases.items():
        assert label in engine.explain(sql), engine.explain(sql)
    # the other conditions of WHERE still make a comma join an interval join
    plan = engine.explain("SELECT s.v FROM s, s2 WHERE s.k = s2.k AND s2.ts BETWEEN s.ts AND s.ts + INTERVAL '1' "
                          "MINUTE AND s.v IN (SELECT v FROM t1)")
    assert "IntervalJoin(INNER" in plan and "as semi join (IN subquery)" in plan


@pytest.mark.parametrize("sql, message", [
    ("SELECT id FROM t1 WHERE EXISTS (SELECT 1 FROM t2 WHERE /*a*/t2.w > t1.v/*a*/)",
     "a correlated condition must equate an expression of the subquery with one of the outer query"),
    ("SELECT id FROM t1 WHERE v > 0 OR /*a*/k IN (SELECT k FROM t2)/*a*/",
     "IN (SELECT ...) and EXISTS must be conditions of WHERE joined by AND"),
    ("SELECT id, (SELECT /*a*/w/*a*/ FROM t2) AS w FROM t1", "a scalar subquery must compute one aggregate"),
    ("SELECT id FROM t1 WHERE k IN (SELECT /*a*/k, w/*a*/ FROM t2)", "the subquery must select exactly one column"),
    ("SELECT id FROM t1 WHERE EXISTS (SELECT /*a*/t1.v/*a*/ FROM t2 WHERE t2.k = t1.k)",
     "may refer to the outer query only in equalities of its WHERE"),
])
def test_refusals_point_at_the_subquery(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    assert_error_at(engine, sql, message)


# -- the routes: files, runtime vs DuckDB vs Spark vs DuckDB's own subqueries ------------------------

T_FINAL, D_FINAL = final_state("t_changes", "rate"), final_state("d_changes", "label")
ROUTE_CASES = {
    "in_table": ("SELECT k, v FROM s WHERE k IN (SELECT k FROM t WHERE rate > 40)",
                 f"SELECT k, v FROM s_all WHERE k IN (SELECT k FROM ({T_FINAL}) WHERE rate > 40)"),
    "not_in_correlated_stream": ("SELECT k, v FROM s WHERE v NOT IN (SELECT v FROM s2 WHERE s2.k = s.k AND "
                                 "s2.v IS NOT NULL)",
                                 "SELECT k, v FROM s_all WHERE v NOT IN (SELECT v FROM s2_all WHERE s2_all.k = "
                                 "s_all.k AND s2_all.v IS NOT NULL)"),
    "exists_debezium": ("SELECT k, v FROM s WHERE EXISTS (SELECT 1 FROM d WHERE d.k = s.k AND d.label <> 'L1')",
                        f"SELECT k, v FROM s_all WHERE EXISTS (SELECT 1 FROM ({D_FINAL}) d WHERE d.k = s_all.k "
                        "AND d.label <> 'L1')"),
    "scalar_correlated": ("SELECT k, v, (SELECT MAX(rate) FROM t WHERE t.k = s.k) AS top FROM s WHERE v > 50",
                          f"SELECT k, v, (SELECT MAX(rate) FROM ({T_FINAL}) t WHERE t.k = s_all.k) FROM s_all "
                          "WHERE v > 50"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return generate(str(tmp_path_factory.mktemp("subquery-data")))


@pytest.mark.parametrize("name", list(ROUTE_CASES))
def test_runtime_and_duckdb_routes_agree_with_duckdb_subqueries(name, data):
    sql, oracle = ROUTE_CASES[name]
    want = sorted_rows(duck(oracle, **data.tables))
    assert want
    for route in ("runtime", "duckdb"):
        got = sorted_rows(run(data.ddl(), sql, route))
        assert same(got, want), f"{name} on {route}: {len(got)} vs {len(want)} rows"


@pytest.mark.parametrize("name", ["not_in_correlated_stream", "scalar_correlated"])
def test_spark_route_agrees(name, data, spark_session):
    sql, oracle = ROUTE_CASES[name]
    assert same(sorted_rows(run(data.ddl(), sql, "spark")), sorted_rows(duck(oracle, **data.tables)))
