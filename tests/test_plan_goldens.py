"""Golden plans: what each optimizer rule rewrites, and the statement each batch route runs.

* ``tests/goldens/rules/<rule>/<case>.txt``: a query, its bound plan, and the
  plan after that one rule (every rule of ``optimizer.RULES`` has cases);
* ``tests/goldens/lowered/<case>.<dialect>.sql``: the query lowered for the
  DuckDB and the Spark SQL route, as ``EXPLAIN LOWERED`` prints it.

Run ``pytest --update-goldens`` to rewrite them, then read the diff: the
rows these statements compute are checked against DuckDB oracles by the
route matrix (tests/test_routes.py); these files pin the plans and the SQL.
"""

import pytest

from dsms.planner import declare, plan_query
from dsms.planner.explain import explain_logical
from dsms.planner.optimizer import RULES, apply_rule

DDL = """
CREATE STREAM bids (auction BIGINT, bidder BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = 'bids.parquet', format = 'parquet');
CREATE STREAM auctions (id BIGINT, seller BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = 'auctions.parquet', format = 'parquet');
"""

RULE_CASES = {
    "merge_projects": {
        # Three projections become one: the expressions are substituted into each other.
        "nested": "SELECT b2 + 1 AS b3, ts FROM (SELECT bidder * 2 AS b2, ts FROM (SELECT bidder, ts FROM bids))",
        # Renames that cancel out leave a projection that passes every column through: it is dropped.
        "renames_cancel": "SELECT a AS auction, bidder, price, ts FROM (SELECT auction AS a, bidder, price, ts FROM bids)",
        # A filter between two projections keeps them apart.
        "filter_between": "SELECT x + 1 AS y FROM (SELECT bidder * 2 AS x FROM bids) WHERE x > 3",
        # Window columns renamed on their way to the aggregate: the renames merge into the aggregate's projection.
        "window_renames": """SELECT ws, n FROM (SELECT window_start AS ws, COUNT(*) AS n
            FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end)""",
    },
}

LOWERED_CASES = {
    "filter_project": "SELECT auction, price * 0.9 AS net, ts FROM bids WHERE price > 10",
    "tumble_aggregate": """SELECT window_start, auction, COUNT(*) AS n, MAX(price) AS top
        FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, auction""",
    "hop_aggregate": """SELECT window_start, window_end, SUM(price) AS volume
        FROM TABLE(HOP(TABLE bids, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
        GROUP BY window_start, window_end""",
    "session_aggregate": """SELECT window_start, window_end, bidder, COUNT(*) AS n
        FROM TABLE(SESSION(TABLE bids PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '30' SECOND))
        GROUP BY window_start, window_end, bidder""",
    "group_aggregate": "SELECT auction, COUNT(*) AS n, AVG(price) AS avg_price FROM bids GROUP BY auction",
    "interval_join": """SELECT a.id, a.seller, b.price FROM auctions a JOIN bids b
        ON a.id = b.auction AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' MINUTE""",
    "window_top_n": """SELECT window_start, auction, n FROM (SELECT *, ROW_NUMBER() OVER (
          PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
        FROM (SELECT window_start, window_end, auction, COUNT(*) AS n
              FROM TABLE(TUMBLE(TABLE bids, DESCRIPTOR(ts), INTERVAL '10' SECOND))
              GROUP BY window_start, window_end, auction)) WHERE rn <= 3""",
    "over_range": """SELECT bidder, ts, SUM(price) OVER (PARTITION BY bidder ORDER BY ts
        RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW) AS recent FROM bids""",
}


@pytest.fixture(scope="module")
def catalog():
    return declare(DDL)


def test_every_rule_has_golden_cases():
    assert {rule.__name__ for rule in RULES} == set(RULE_CASES)


@pytest.mark.parametrize("rule,case", [(r, c) for r in sorted(RULE_CASES) for c in sorted(RULE_CASES[r])])
def test_rule_golden(rule, case, catalog, golden):
    (apply,) = [r for r in RULES if r.__name__ == rule]
    sql = " ".join(RULE_CASES[rule][case].split())
    bound = plan_query(sql, catalog).bound
    text = f"-- {sql}\n-- bound:\n{explain_logical(bound)}\n-- after {rule}:\n{explain_logical(apply_rule(bound, apply))}\n"
    golden(f"rules/{rule}/{case}.txt", text)


@pytest.mark.parametrize("dialect", ["duckdb", "spark"])
@pytest.mark.parametrize("case", sorted(LOWERED_CASES))
def test_lowered_golden(case, dialect, catalog, golden):
    planned = plan_query(LOWERED_CASES[case], catalog)
    golden(f"lowered/{case}.{dialect}.sql", planned.lowered(dialect).explain() + "\n")
