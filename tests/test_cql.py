"""The STREAM/CQL window syntax and relation-to-stream operators.

The oracle computes the relation at each instant with DuckDB (a HOP
window per instant, ROW_NUMBER for row windows, window functions for row
aggregates) and the streams with plain multiset differences in Python."""

import collections
import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

import dsms

from changes import changelog, final_table
from oracle import duck, events, feed, rows, run_query

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
EV = events(700, seed=13, keys=3, span_s=200)
ORACLE_EV = EV.append_column("seq", pa.array(np.arange(EV.num_rows)))
SLIDE = dt.timedelta(seconds=10)
AGG = "SELECT k, COUNT(*) AS n FROM ev [RANGE 30 SECONDS SLIDE 10 SECONDS] GROUP BY k"


def snapshots() -> dict[dt.datetime, collections.Counter]:
    """The relation of AGG at each instant (window end), from DuckDB."""
    table = duck("""
      WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:00', TIMESTAMP '2024-03-01 12:05:00',
                                                INTERVAL '10 seconds')) AS ws)
      SELECT ws + INTERVAL '30 seconds' AS we, k, COUNT(*) AS n
      FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '30 seconds' GROUP BY ALL""", ev=EV)
    out: dict = collections.defaultdict(collections.Counter)
    for r in table.to_pylist():
        out[r["we"]][(r["k"], r["n"])] += 1
    return out


def stream_of(kind: str) -> collections.Counter:
    """ISTREAM / DSTREAM / RSTREAM of AGG, from the snapshots, instant by instant (empty instants included)."""
    snaps = snapshots()
    first, last = min(snaps), max(snaps) + SLIDE
    out, previous, t = collections.Counter(), collections.Counter(), first
    while t <= last:
        current = snaps.get(t, collections.Counter())
        out += {"ISTREAM": current - previous, "DSTREAM": previous - current, "RSTREAM": current}[kind]
        previous, t = current, t + SLIDE
    return out


@pytest.mark.parametrize("kind", ["ISTREAM", "DSTREAM", "RSTREAM"])
def test_relation_to_stream_over_a_sliding_window(kind):
    got = run_query(DDL, f"{kind}({AGG})", {"ev": EV})
    assert collections.Counter((r["k"], r["n"]) for r in got.to_pylist()) == stream_of(kind)


def test_a_sliding_window_query_is_a_relation_of_the_latest_instant():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(AGG)
    assert q.changelog == "updating"
    feed(engine, "ev", EV)  # the input has not ended: the relation is the window ending at the last instant
    watermark = max(EV.column("ts").to_pylist()) - dt.timedelta(seconds=5)
    instant = max(t for t in snapshots() if t <= watermark)
    assert collections.Counter((r["k"], r["n"]) for r in q.snapshot().to_pylist()) == snapshots()[instant]
    # Window bounds can be selected; ISTREAM of a window that only grows is every row once.
    got = run_query(DDL, "ISTREAM(SELECT k, v, window_end FROM ev [RANGE 30 SECONDS SLIDE 10 SECONDS] WHERE v > 90)",
                    {"ev": EV})
    assert got.num_rows == 3 * duck("SELECT COUNT(*) AS c FROM ev WHERE v > 90", ev=EV).column("c")[0].as_py()


def test_rows_windows_are_the_latest_rows_per_partition():
    q, changes = changelog(DDL, "SELECT k, v, ts FROM ev [PARTITION BY k ROWS 3]", EV)
    want = duck("""SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC,
                   k ASC NULLS FIRST, v ASC NULLS FIRST, price ASC NULLS FIRST) AS rn FROM ev) WHERE rn <= 3""", ev=EV)
    assert rows(final_table(changes)) == rows(want)
    got = run_query(DDL, "ISTREAM(SELECT k, v FROM ev [ROWS 10] WHERE v > 50)", {"ev": EV})
    assert rows(got) == rows(duck("SELECT k, v FROM ev WHERE v > 50", ev=EV))


def test_aggregates_over_a_rows_window():
    sql = "SELECT k, SUM(v) AS s, COUNT(*) AS c FROM ev [PARTITION BY k ROWS 4] GROUP BY k"
    q, changes = changelog(DDL, sql, EV)
    want = duck("""SELECT k, SUM(v), COUNT(*) FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC,
                   seq DESC) AS rn FROM ev) WHERE rn <= 4 GROUP BY k""", ev=ORACLE_EV)
    assert rows(final_table(changes)) == rows(want)
    # ISTREAM: each arrival's new value for its key (the window of its last 4 rows, the WHERE picking what counts).
    got = run_query(DDL, "ISTREAM(SELECT k, SUM(v) AS s FROM ev [PARTITION BY k ROWS 4] WHERE price > 5 GROUP BY k)",
                    {"ev": EV})
    want = duck("""SELECT k, SUM(CASE WHEN price > 5 THEN v END) OVER (PARTITION BY k ORDER BY ts, seq
                   ROWS 3 PRECEDING) FROM ev""", ev=ORACLE_EV)
    assert rows(got) == rows(want)


def test_now_and_unbounded_windows():
    got = run_query(DDL, "ISTREAM(SELECT k, v FROM ev [NOW] WHERE v > 90)", {"ev": EV})
    want = duck("SELECT k, v FROM ev WHERE v > 90", ev=EV)
    assert rows(got) == rows(want)
    assert rows(run_query(DDL, "RSTREAM(SELECT k, v FROM ev [NOW] WHERE v > 90)", {"ev": EV})) == rows(want)
    # Over [RANGE UNBOUNDED] a group aggregate is the relation; what ISTREAM adds minus what DSTREAM
    # removes is that relation.
    inserted = run_query(DDL, "ISTREAM(SELECT k, COUNT(*) AS n FROM ev [RANGE UNBOUNDED] GROUP BY k)", {"ev": EV})
    deleted = run_query(DDL, "DSTREAM(SELECT k, COUNT(*) AS n FROM ev [RANGE UNBOUNDED] GROUP BY k)", {"ev": EV})
    net = collections.Counter(map(tuple, map(dict.values, inserted.to_pylist())))
    net -= collections.Counter(map(tuple, map(dict.values, deleted.to_pylist())))
    assert sorted(net.elements(), key=str) == \
        sorted(map(tuple, map(dict.values, duck("SELECT k, COUNT(*) FROM ev GROUP BY k", ev=EV).to_pylist())), key=str)


@pytest.mark.parametrize("sql, message", [
    ("SELECT k, COUNT(*) FROM ev [RANGE 1 MINUTE] GROUP BY k", "needs SLIDE"),
    ("SELECT COUNT(*) FROM ev [NOW]", r"aggregates over a \[NOW\] window"),
    ("RSTREAM(SELECT k, COUNT(*) FROM ev [RANGE UNBOUNDED] GROUP BY k)", "RSTREAM of a relation that changes"),
    ("RSTREAM(SELECT * FROM ev [ROWS 3])", "RSTREAM of a relation that changes"),
    ("SELECT k, COUNT(*) FROM ev [ROWS 3] GROUP BY k", "exactly its PARTITION BY keys"),
    ("SELECT k, COUNT(*) FROM ev [RANGE 1 MINUTE SLIDE 7 SECONDS] GROUP BY k", "whole multiple of its slide"),
])
def test_cql_refusals(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message):
        engine.plan(sql)
