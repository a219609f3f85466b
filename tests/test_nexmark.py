"""Nexmark queries with joins (q3, a q4-like average closing price, q8), three-way joins and joins
feeding window aggregates, on generated data, against the same questions asked of DuckDB."""

import pyarrow as pa
import pytest

from changes import Recorder, feed_interleaved, feed_mixed
from nexmark import DDL, generate
from oracle import duck, rows

DATA = generate()


def run(sql: str, ddl: str = DDL, inputs=None, max_batch: int = 10, settings: str = "") -> Recorder:
    rec = Recorder(ddl)
    if settings:
        rec.engine.execute(settings)
    rec.query("q", sql)
    feed_interleaved(rec, inputs or DATA, seed=7, max_batch=max_batch)
    rec.end()
    return rec


Q3 = """SELECT P.name, P.city, P.state, A.id
FROM auction AS A INNER JOIN person AS P ON A.seller = P.id
WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"""


def test_q3_persons_joined_with_auctions():
    """As written in Nexmark, a regular join of two streams: exact, with a warning about its state."""
    rec = run(Q3)
    assert rec.queries["q"].warnings
    assert rows(rec.final("q")) == rows(duck(Q3, auction=DATA["auction"], person=DATA["person"]))


def test_q3_with_persons_as_a_table_that_changes():
    """Persons as a table with updates (people move) and deletes; asked for as a regular join, the
    result follows the table: it ends at the join with the final persons."""
    ddl = DDL.replace("CREATE STREAM person (id BIGINT, name VARCHAR, city VARCHAR, state VARCHAR, ts TIMESTAMP(3),\n"
                      "  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)",
                      "CREATE TABLE person (id BIGINT, name VARCHAR, city VARCHAR, state VARCHAR, ts TIMESTAMP(3),\n"
                      "  PRIMARY KEY (id) NOT ENFORCED)")
    people = DATA["person"].to_pylist()
    log = [{**p, "seq": i, "op": "u"} for i, p in enumerate(people)]
    for i, p in enumerate(people[::3]):  # a third of them move, some twice; a few leave
        log.append({**p, "state": "CA" if p["state"] != "CA" else "NY", "seq": len(log), "op": "u"})
        if i % 4 == 0:
            log.append({**p, "seq": len(log), "op": "d"})
    log = pa.Table.from_pylist(log)
    rec = Recorder(ddl)
    rec.engine.execute("SET 'join.stream_table' = 'regular'")
    q = rec.query("q", Q3)
    assert q.changelog == "updating"
    feed_mixed(rec, {"auction": DATA["auction"], "person": log}, seed=2, max_batch=10)
    final_people = duck("""SELECT * EXCLUDE (seq, op) FROM log QUALIFY row_number() OVER (PARTITION BY id
                           ORDER BY seq DESC) = 1 AND op = 'u'""", log=log)
    assert rows(rec.final("q")) == rows(duck(Q3, auction=DATA["auction"], person=final_people))


Q4_LIKE = """SELECT Q.category, AVG(Q.final) AS avg_final, COUNT(*) AS auctions
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '20' SECOND AND B.ts <= A.expires
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category"""


def test_q4_like_average_closing_price_per_category():
    """The bids of each auction's first 20 s (an interval join), the closing price per auction (a group
    aggregate, updating) and its average per category (an aggregate over an updating input)."""
    rec = run(Q4_LIKE, max_batch=12)
    assert "IntervalJoin(INNER" in rec.engine.explain(Q4_LIKE)
    assert not rec.queries["q"].warnings
    want = duck(Q4_LIKE.replace("AVG(Q.final)", "TRUNC(AVG(Q.final))::BIGINT"), auction=DATA["auction"],
                bid=DATA["bid"])
    assert rows(rec.final("q")) == rows(want)


Q8 = """SELECT P.id, P.name, P.starttime
FROM (
  SELECT P.id, P.name,
         TUMBLE_START(P.ts, INTERVAL '10' SECOND) AS starttime,
         TUMBLE_END(P.ts, INTERVAL '10' SECOND) AS endtime
  FROM person P
  GROUP BY P.id, P.name, TUMBLE(P.ts, INTERVAL '10' SECOND)
) P
JOIN (
  SELECT A.seller,
         TUMBLE_START(A.ts, INTERVAL '10' SECOND) AS starttime,
         TUMBLE_END(A.ts, INTERVAL '10' SECOND) AS endtime
  FROM auction A
  GROUP BY A.seller, TUMBLE(A.ts, INTERVAL '10' SECOND)
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime"""


def test_q8_new_persons_who_opened_an_auction_in_the_same_window():
    # Sellers are drawn from all persons, so make some open an auction right after joining.
    auctions = DATA["auction"].to_pylist()
    people = DATA["person"].to_pylist()
    for i, a in enumerate(auctions[::4]):
        p = people[(i * 7) % len(people)]
        a["seller"], a["ts"] = p["id"], p["ts"]
    auctions.sort(key=lambda a: a["ts"])  # moved auctions would otherwise be late
    inputs = {"person": DATA["person"], "auction": pa.Table.from_pylist(auctions), "bid": DATA["bid"]}
    rec = run(Q8, inputs=inputs)
    assert "WindowJoin(INNER" in rec.engine.explain(Q8)
    assert rec.queries["q"].changelog == "append-only"
    want = duck("""
      WITH p AS (SELECT DISTINCT id, name, time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS w
                 FROM person),
           a AS (SELECT DISTINCT seller, time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS w
                 FROM auction)
      SELECT p.id, p.name, p.w FROM p JOIN a ON p.id = a.seller AND p.w = a.w""",
                person=inputs["person"], auction=inputs["auction"])
    assert rows(rec.final("q")) == rows(want)
    assert want.num_rows >= 20


THREE_WAY = """SELECT B.auction, B.price, A.category, P.name
FROM bid B JOIN auction A ON B.auction = A.id AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '30' SECOND
LEFT JOIN person P ON A.seller = P.id AND P.ts BETWEEN A.ts - INTERVAL '60' SECOND AND A.ts"""


def test_three_way_interval_joins():
    rec = run(THREE_WAY)
    plan = rec.engine.explain(THREE_WAY)
    assert plan.count("IntervalJoin(") == 2
    assert rec.ops("q") == {"+I"}
    want = duck(THREE_WAY.replace("INTERVAL '30' SECOND", "INTERVAL 30 SECOND").replace(
        "INTERVAL '60' SECOND", "INTERVAL 60 SECOND"), bid=DATA["bid"], auction=DATA["auction"], person=DATA["person"])
    assert rows(rec.final("q")) == rows(want)


def test_stream_joined_with_a_table_then_a_stream():
    """Bids joined with auctions (interval) and with persons kept as a table (a lookup join, FOR SYSTEM_TIME
    AS OF PROCTIME()); all persons are loaded before the events, so each bid sees every person."""
    ddl = DDL + """CREATE TABLE people (id BIGINT, name VARCHAR, state VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
                   WITH (connector = 'memory');"""
    sql = """SELECT B.auction, B.price, P.name, P.state FROM bid B
             JOIN auction A ON B.auction = A.id AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '30' SECOND
             LEFT JOIN people FOR SYSTEM_TIME AS OF PROCTIME() AS P ON A.seller = P.id"""
    rec = Recorder(ddl)
    rec.query("q", sql)
    rec.engine.insert("people", DATA["person"].select(["id", "name", "state"]))
    rec.step()
    feed_interleaved(rec, {"bid": DATA["bid"], "auction": DATA["auction"]}, seed=3, max_batch=10)
    rec.end()
    assert "LookupJoin(LEFT" in rec.engine.explain(sql)
    want = duck(sql.replace("INTERVAL '30' SECOND", "INTERVAL 30 SECOND").replace(
        "FOR SYSTEM_TIME AS OF PROCTIME() AS P", "AS P"), bid=DATA["bid"], auction=DATA["auction"],
        people=DATA["person"])
    assert rows(rec.final("q")) == rows(want)


@pytest.mark.parametrize("window", ["TUMBLE(TABLE j, DESCRIPTOR(bts), INTERVAL '10' SECOND)",
                                    "HOP(TABLE j, DESCRIPTOR(ats), INTERVAL '5' SECOND, INTERVAL '20' SECOND)"])
def test_a_join_feeding_a_window_aggregate(window):
    """The interval join holds its output watermark back by its bound, so windows over either time
    column fire only when every pair inside them has been emitted."""
    sql = f"""WITH j AS (SELECT A.category, B.price, B.ts AS bts, A.ts AS ats FROM auction A JOIN bid B
                         ON A.id = B.auction AND B.ts BETWEEN A.ts AND A.ts + INTERVAL '25' SECOND)
              SELECT window_start, window_end, category, COUNT(*) AS bids, MAX(price) AS top
              FROM TABLE({window}) GROUP BY window_start, window_end, category"""
    rec = run(sql)
    assert rec.queries["q"].changelog == "append-only"
    column = "bts" if "bts" in window else "ats"
    joined = duck("""SELECT A.category, B.price, B.ts AS bts, A.ts AS ats FROM auction A JOIN bid B
                     ON A.id = B.auction AND B.ts BETWEEN A.ts AND A.ts + INTERVAL 25 SECOND""",
                  auction=DATA["auction"], bid=DATA["bid"])
    if window.startswith("TUMBLE"):
        want = duck(f"""SELECT time_bucket(INTERVAL '10 seconds', {column}, TIMESTAMP '1970-01-01') AS ws,
                        ws + INTERVAL '10 seconds', category, COUNT(*), MAX(price) FROM j GROUP BY ALL""", j=joined)
    else:
        want = duck(f"""WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2023-11-14 22:12:50',
                          TIMESTAMP '2023-11-14 22:16:00', INTERVAL '5 seconds')) AS ws)
                        SELECT ws, ws + INTERVAL '20 seconds', category, COUNT(*), MAX(price) FROM j
                        JOIN w ON {column} >= ws AND {column} < ws + INTERVAL '20 seconds' GROUP BY ALL""", j=joined)
    assert rows(rec.final("q")) == rows(want)
    assert want.num_rows > 20
