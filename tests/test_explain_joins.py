"""EXPLAIN goldens for joins: each join's kind, its state retention and its changelog mode.

Kept with the other goldens in tests/goldens/explain/ (join_<case>.txt); `pytest --update-goldens`
rewrites them."""

import pytest

import dsms

DDL = """
CREATE STREAM imp (id BIGINT, ad_id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'memory');
CREATE STREAM clk (imp_id BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'memory');
CREATE TABLE ads (ad_id BIGINT, campaign VARCHAR, bid DOUBLE, ts TIMESTAMP(3), PRIMARY KEY (ad_id) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');
CREATE TABLE campaigns (name VARCHAR, owner VARCHAR, PRIMARY KEY (name) NOT ENFORCED) WITH (connector = 'memory');
"""

CASES = {
    "interval_left": """SELECT i.id, i.ad_id, c.ts AS click_ts FROM imp i LEFT JOIN clk c
        ON i.id = c.imp_id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL '60' SECOND""",
    "window": """SELECT l.window_start, l.ad_id, r.ts AS click_ts FROM TABLE(TUMBLE(TABLE imp, DESCRIPTOR(ts),
        INTERVAL '1' MINUTE)) l JOIN TABLE(TUMBLE(TABLE clk, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) r
        ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.id = r.imp_id""",
    "temporal": """SELECT i.id, a.campaign, a.bid FROM imp i JOIN ads FOR SYSTEM_TIME AS OF i.ts AS a
        ON i.ad_id = a.ad_id""",
    "lookup_expression_key": """SELECT i.id, c.owner FROM imp i LEFT JOIN campaigns FOR SYSTEM_TIME AS OF PROCTIME() AS c
        ON c.name = 'x' || CAST(i.ad_id AS VARCHAR)""",
    "stream_table_regular": """SELECT i.id, c.owner FROM imp i LEFT JOIN campaigns c ON c.name = CAST(i.ad_id AS VARCHAR)""",
    "tables": """SELECT a.ad_id, c.owner FROM ads a FULL JOIN campaigns c ON a.campaign = c.name""",
    "streams_unbounded": """SELECT i.id, c.ts FROM imp i JOIN clk c ON i.id = c.imp_id""",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_explain_join_golden(case, golden):
    engine = dsms.Engine()
    engine.execute(DDL)
    golden(f"explain/join_{case}.txt", engine.execute("EXPLAIN " + CASES[case]).message + "\n")
