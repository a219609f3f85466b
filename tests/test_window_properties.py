"""Window properties survive renames and regrouping, as in Flink.

Grouping a window aggregate's rows again by their window_start and
window_end (renamed or not), or joining two such aggregates on them
(Nexmark q5 as Flink's benchmark writes it), is a window operation: its
result is append-only, a ``json`` sink takes it, and it has the rows of the
same question asked of DuckDB over the generated bids.
"""

from __future__ import annotations

import json

import pytest

import dsms

from nexmark import generate
from oracle import duck, rows

BIDS = generate(seed=3)["bid"]
DDL = """CREATE STREAM bid (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH (connector = 'file', path = '{path}', format = 'json');"""
HOP_STARTS = ("unnest(range(time_bucket(INTERVAL '2 seconds', ts, TIMESTAMP '1970-01-01') - INTERVAL '8 seconds', "
              "time_bucket(INTERVAL '2 seconds', ts, TIMESTAMP '1970-01-01') + INTERVAL '1 second', "
              "INTERVAL '2 seconds'))")

REGROUPED = """SELECT ws, we, SUM(n) AS total, MAX(n) AS most FROM (
  SELECT window_start AS ws, window_end AS we, auction, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, auction)
GROUP BY ws, we"""
REGROUPED_ORACLE = """SELECT ws, ws + INTERVAL '10 seconds', SUM(n), MAX(n) FROM (
  SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws, auction, COUNT(*) AS n
  FROM bid GROUP BY ALL) GROUP BY ws"""

REGROUPED_HOP = """SELECT window_start, window_end, COUNT(*) AS auctions FROM (
  SELECT window_start, window_end, auction, COUNT(*) AS n
  FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
  GROUP BY window_start, window_end, auction) WHERE n > 1
GROUP BY window_start, window_end"""
REGROUPED_HOP_ORACLE = f"""SELECT ws, ws + INTERVAL '10 seconds', COUNT(*) FROM (
  SELECT ws, auction FROM (SELECT {HOP_STARTS} AS ws, auction FROM bid) GROUP BY ws, auction HAVING COUNT(*) > 1)
GROUP BY ws"""

Q5 = """SELECT AuctionBids.auction, AuctionBids.num
 FROM (
   SELECT auction, count(*) AS num, window_start AS starttime, window_end AS endtime
   FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
   GROUP BY auction, window_start, window_end
 ) AS AuctionBids
 JOIN (
   SELECT max(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
   FROM (
     SELECT count(*) AS num, window_start AS starttime, window_end AS endtime
     FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
     GROUP BY auction, window_start, window_end
     ) AS CountBids
   GROUP BY CountBids.starttime, CountBids.endtime
 ) AS MaxBids
 ON AuctionBids.starttime = MaxBids.starttime AND
    AuctionBids.endtime = MaxBids.endtime AND
    AuctionBids.num >= MaxBids.maxn"""
Q5_ORACLE = f"""WITH c AS (SELECT ws, auction, COUNT(*) AS num FROM (SELECT {HOP_STARTS} AS ws, auction FROM bid)
                GROUP BY ALL),
     m AS (SELECT ws, MAX(num) AS maxn FROM c GROUP BY ws)
SELECT c.auction, c.num FROM c JOIN m ON c.ws = m.ws AND c.num >= m.maxn"""

CASES = {"regrouped_renamed": (REGROUPED, REGROUPED_ORACLE), "regrouped_hop": (REGROUPED_HOP, REGROUPED_HOP_ORACLE),
         "nexmark_q5": (Q5, Q5_ORACLE)}


@pytest.fixture(scope="module")
def bid_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("bids") / "bid.jsonl"
    with open(path, "w") as f:
        for r in BIDS.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    return str(path)


def _oracle(name: str):
    return duck(CASES[name][1], bid=BIDS)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_regrouped_windows_are_append_only_and_match_duckdb(name, route, bid_file, tmp_path):
    engine = dsms.Engine()
    engine.execute(DDL.format(path=bid_file))
    engine.execute(f"SET 'engine' = '{route}'")
    sql = CASES[name][0]
    q = engine.query(sql)
    assert q.changelog == "append-only"
    engine.run_until_idle()
    assert q.done and getattr(q.job, "route", "runtime") == route
    want = _oracle(name)
    assert want.num_rows > 5
    assert rows(q.snapshot()) == rows(want)
    out = tmp_path / "out.jsonl"  # a json sink takes an append-only result
    engine.execute(f"CREATE SINK s_{name} WITH (connector = 'file', path = '{out}', format = 'json') AS {sql}")
    engine.run_until_idle()
    assert sum(1 for _ in open(out)) == want.num_rows


def test_regrouping_on_spark_matches_too(bid_file, spark_session):
    engine = dsms.Engine()
    engine.execute(DDL.format(path=bid_file))
    engine.execute("SET 'engine' = 'spark'")
    q = engine.query(Q5)
    engine.run_until_idle()
    assert q.job.route == "spark" and rows(q.snapshot()) == rows(_oracle("nexmark_q5"))


def test_computing_on_a_window_bound_stays_an_updating_aggregate(bid_file):
    # Grouping by an expression of window_start is not a window: Flink plans a regular aggregate too.
    engine = dsms.Engine()
    engine.execute(DDL.format(path=bid_file))
    q = engine.query("""SELECT EXTRACT(MINUTE FROM ws) AS m, SUM(n) AS total FROM (
      SELECT window_start AS ws, window_end AS we, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end)
    GROUP BY EXTRACT(MINUTE FROM ws)""")
    assert q.changelog == "updating"
