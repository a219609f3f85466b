"""A pull query that only filters one view and picks its columns is answered as a PointRead (an Arrow
filter over the view's rows, no SQL to bind); any other shape is left to DuckDB.

Oracle: DuckDB over the rows inserted into the stream the view aggregates.
"""

from __future__ import annotations

import duckdb
import pytest

import dsms
from dsms.grammar import parse_statement
from dsms.pull import compile_pull, pulled_views

ROWS = [("a", 1.5), ("b", 4.0), ("a", 2.0), ("c", -1.0), ("b", 0.5), ("b", 3.0)]
DDL = """CREATE STREAM s (k VARCHAR, x DOUBLE) WITH (connector = 'memory');
CREATE MATERIALIZED VIEW per_k AS SELECT k, SUM(x) AS total, COUNT(*) AS cnt FROM s GROUP BY k;
"""
SENTINEL = "'sentinel-1'"  # a literal standing for $1


@pytest.fixture(scope="module")
def engine():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.insert("s", ROWS)
    engine.execute("FLUSH")
    return engine


@pytest.fixture(scope="module")
def oracle():
    con = duckdb.connect()
    con.execute("CREATE TABLE s (k VARCHAR, x DOUBLE)")
    con.executemany("INSERT INTO s VALUES (?, ?)", ROWS)
    con.execute("CREATE VIEW per_k AS SELECT k, SUM(x) AS total, COUNT(*) AS cnt FROM s GROUP BY k")
    return con


def _plan(engine, sql: str):
    stmt = parse_statement(sql)
    views = pulled_views(stmt.query.tree, engine.catalog)
    return compile_pull(stmt, engine.catalog, views, [SENTINEL] if SENTINEL in sql else [])


POINT_READS = [  # (pull query, its parameters, the same question to DuckDB)
    ("SELECT k, total FROM per_k WHERE k = 'b'", [], "SELECT k, total FROM per_k WHERE k = 'b'"),
    ("SELECT k AS key, cnt FROM per_k WHERE cnt >= 2 AND total > 3.6", [],
     "SELECT k, cnt FROM per_k WHERE cnt >= 2 AND total > 3.6"),
    ("SELECT cnt, total FROM per_k WHERE total < 0", [], "SELECT cnt, total FROM per_k WHERE total < 0"),
    (f"SELECT total FROM per_k WHERE k = {SENTINEL}", ["a"], "SELECT total FROM per_k WHERE k = 'a'"),
    ("SELECT k, total, cnt FROM per_k", [], "SELECT k, total, cnt FROM per_k"),
]


@pytest.mark.parametrize("sql, params, expected", POINT_READS, ids=[q for q, _, _ in POINT_READS])
def test_a_filter_over_one_view_is_a_point_read_with_duckdbs_answer(engine, oracle, sql, params, expected):
    plan = _plan(engine, sql)
    assert plan is not None and plan.point is not None
    rows = {"per_k": engine.queries.get("per_k").handle.snapshot()}
    answer = plan.point.run(rows.__getitem__, params, plan.schema)
    assert sorted(tuple(r.values()) for r in answer.to_pylist()) == sorted(oracle.execute(expected).fetchall())


NOT_POINT_READS = [
    "SELECT k, total * 2 AS twice FROM per_k",  # computes a column
    "SELECT k, total FROM per_k WHERE k = 'a' OR k = 'b'",  # not ANDed comparisons
    "SELECT k FROM per_k WHERE k LIKE 'a%'",  # not a comparison Arrow makes
    "SELECT k, total FROM per_k WHERE total > cnt",  # compares two columns
    "SELECT k, total FROM per_k ORDER BY total LIMIT 2",  # orders and limits
    "SELECT COUNT(*) AS n FROM per_k",  # aggregates
]


@pytest.mark.parametrize("sql", NOT_POINT_READS)
def test_any_other_pull_query_is_left_to_duckdb(engine, sql):
    plan = _plan(engine, sql)
    assert plan is not None and plan.point is None
