"""EXPLAIN goldens: each case is a script whose last statement is explained.

The expected DAG (each operator with its changelog mode and watermark) is
kept in tests/goldens/explain/<case>.txt; run `pytest --update-goldens`
to rewrite them, then read the diff.
"""

import pytest

import dsms

DDL = """
CREATE STREAM imp (ad_id BIGINT, cost DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'memory');
CREATE STREAM clk (ad_id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'memory');
"""

CASES = {
    "tumble_per_key": """SELECT window_start, window_end, ad_id, COUNT(*) AS n, SUM(cost) AS spend
        FROM TABLE(TUMBLE(TABLE imp, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        WHERE cost > 0.5 GROUP BY window_start, window_end, ad_id HAVING COUNT(*) > 1""",
    "union_then_window": """SELECT window_start, kind, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (
          SELECT ad_id, ts, 'imp' AS kind FROM imp UNION ALL SELECT ad_id, ts, 'clk' AS kind FROM clk),
        DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, kind""",
    "hop_panes": """SELECT window_start, COUNT(DISTINCT ad_id) AS ads
        FROM TABLE(HOP(TABLE imp, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end""",
    "cascade": """SELECT window_start, SUM(n) AS n FROM TABLE(TUMBLE(TABLE (
          SELECT window_start AS inner_start, window_time AS rowtime, COUNT(*) AS n
          FROM TABLE(TUMBLE(TABLE imp, DESCRIPTOR(ts), INTERVAL '10' SECOND))
          GROUP BY window_start, window_end, window_time),
        DESCRIPTOR(rowtime), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end""",
    "group_aggregate": """SELECT ad_id, COUNT(*) AS n FROM imp GROUP BY ad_id""",
    "session_emit_changes": """SELECT window_start, window_end, ad_id, COUNT(*) AS n
        FROM TABLE(SESSION(TABLE imp PARTITION BY ad_id, DESCRIPTOR(ts), INTERVAL '30' SECOND))
        GROUP BY window_start, window_end, ad_id EMIT CHANGES""",
    "tumble_allowed_lateness": """SELECT window_start, ad_id, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE imp, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad_id
        ALLOWED LATENESS INTERVAL '1' MINUTE""",
    "over_range": """SELECT ad_id, ts, SUM(cost) OVER (PARTITION BY ad_id ORDER BY ts
        RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW) AS recent FROM imp WHERE cost > 0""",
    "window_top_n": """SELECT window_start, ad_id, n FROM (SELECT *, ROW_NUMBER() OVER (
          PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
        FROM (SELECT window_start, window_end, ad_id, COUNT(*) AS n
              FROM TABLE(TUMBLE(TABLE imp, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, ad_id))
        WHERE rn <= 3""",
    "dedup_last": """SELECT ad_id, cost FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY ad_id ORDER BY ts DESC) AS rn
        FROM imp) WHERE rn = 1""",
    "cql_istream": """ISTREAM(SELECT ad_id, COUNT(*) AS n FROM imp [RANGE 1 MINUTE SLIDE 10 SECONDS] GROUP BY ad_id)""",
    "late_events": """SELECT ad_id, COUNT(*) AS late FROM LATE(imp) GROUP BY ad_id""",
    "match_recognize": """SELECT * FROM (SELECT ad_id, cost * 2 AS c2, ts FROM imp) MATCH_RECOGNIZE (
          PARTITION BY ad_id ORDER BY ts MEASURES FIRST(A.ts) AS start_ts, COUNT(B.c2) AS n
          PATTERN (A B+ C) WITHIN INTERVAL '1' MINUTE
          DEFINE B AS B.c2 > PREV(B.c2), C AS c2 < 1) AS m WHERE n > 2""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_explain_golden(case, golden):
    engine = dsms.Engine()
    engine.execute(DDL)
    golden(f"explain/{case}.txt", engine.execute("EXPLAIN " + CASES[case]).message + "\n")


def test_explain_shows_mode_and_watermark_for_every_operator():
    engine = dsms.Engine()
    engine.execute(DDL)
    route, *lines = engine.execute("EXPLAIN " + CASES["union_then_window"]).message.splitlines()
    assert route.startswith("route: runtime (the batch routes cannot read 'imp' (connector 'memory')")
    assert len(lines) == 7
    assert all("[append-only, watermark: " in ln for ln in lines)
    assert "watermark: min(imp.ts - 5s, clk.ts - 2s)" in lines[1]


FILES = """
CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'ev', format = 'parquet'{watch});
"""
WINDOW_COUNTS = """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS total
    FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""
# EXPLAIN prints the plan of the route that runs the query: the lowered statement on DuckDB and Spark, the
# operator DAG on the runtime, both (with the history's statement) when the runtime backfills.
ROUTE_CASES = {
    "route_duckdb": ("SET 'engine' = 'duckdb'", ""),
    "route_spark": ("SET 'engine' = 'spark'", ""),
    "route_spark_streaming": ("SET 'engine' = 'spark'", ", watch = 'true'"),
    "route_backfill": ("SET 'backfill' = 'duckdb'", ", watch = 'true'"),
}


@pytest.mark.parametrize("case", sorted(ROUTE_CASES))
def test_explain_shows_the_plan_of_the_route_that_runs(case, golden):
    setting, watch = ROUTE_CASES[case]
    engine = dsms.Engine(base_dir="/data")  # (paths in the goldens do not depend on where the tests run)
    engine.execute(setting)
    engine.execute(FILES.format(watch=watch))
    golden(f"explain/{case}.txt", engine.execute("EXPLAIN " + WINDOW_COUNTS).message + "\n")
