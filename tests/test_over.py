"""OVER aggregates against DuckDB window functions over the same events.

The oracle orders rows by time, then by arrival (a sequence number added
to the oracle's copy of the input), which is how dsms orders equal times
in a ROWS frame; RANGE frames include rows with equal times (peers)."""

import math

import numpy as np
import pyarrow as pa
import pytest

import dsms

from oracle import duck, events, run_query

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
EV = events(900, seed=23, keys=4)  # 10% of events share a timestamp with the one before
ORACLE_EV = EV.append_column("seq", pa.array(np.arange(EV.num_rows)))


def rows(table: pa.Table) -> list[tuple]:
    """Rows for comparison, floats as ``Close`` (running sums add up in another order than DuckDB's)."""
    return sorted([tuple(Close(v) if isinstance(v, float) else v for v in r.values()) for r in table.to_pylist()],
                  key=lambda t: tuple((v is None, str(v) if not isinstance(v, Close) else "") for v in t))


class Close(float):
    def __eq__(self, other):
        return other is not None and math.isclose(self, other, rel_tol=1e-9, abs_tol=1e-9)

    __hash__ = float.__hash__


AGGS = "COUNT(*) OVER w AS c, COUNT(v) OVER w AS cv, SUM(v) OVER w AS s, MIN(price) OVER w AS lo, " \
       "MAX(v) OVER w AS hi, AVG(price) OVER w AS ap, AVG(v) OVER w AS av"
ORACLE_AGGS = "COUNT(*) OVER w, COUNT(v) OVER w, SUM(v) OVER w, MIN(price) OVER w, MAX(v) OVER w, " \
              "AVG(price) OVER w, TRUNC(AVG(v) OVER w)::BIGINT"


@pytest.mark.parametrize("frame, oracle_frame", [
    ("RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW",
     "ORDER BY ts RANGE BETWEEN INTERVAL '10 seconds' PRECEDING AND CURRENT ROW"),
    ("ROWS BETWEEN 4 PRECEDING AND CURRENT ROW", "ORDER BY ts, seq ROWS BETWEEN 4 PRECEDING AND CURRENT ROW"),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ORDER BY ts, seq ROWS UNBOUNDED PRECEDING"),
    ("RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", "ORDER BY ts RANGE UNBOUNDED PRECEDING"),
    ("RANGE BETWEEN INTERVAL '0' SECOND PRECEDING AND CURRENT ROW", "ORDER BY ts RANGE CURRENT ROW"),
])
def test_over_frames_match_duckdb_window_functions(frame, oracle_frame):
    sql = f"SELECT k, v, ts, {AGGS} FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts {frame})"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30)
    want = duck(f"SELECT k, v, ts, {ORACLE_AGGS} FROM ev WINDOW w AS (PARTITION BY k {oracle_frame})", ev=ORACLE_EV)
    assert rows(got) == rows(want)
    assert got.num_rows == EV.num_rows


@pytest.mark.parametrize("max_batch", [1, 7, 100_000])
def test_rows_are_emitted_in_event_time_order_whatever_the_batching(max_batch):
    data = EV.slice(0, 300)
    sql = """SELECT k, ts, v, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s
             FROM ev"""
    got = run_query(DDL, sql, {"ev": data}, max_batch=max_batch, seed=max_batch)
    times = got.column("ts").to_pylist()
    assert times == sorted(times)
    want = duck("""SELECT k, ts, v, SUM(v) OVER (PARTITION BY k ORDER BY ts, seq ROWS 2 PRECEDING) FROM ev""",
                ev=ORACLE_EV.slice(0, 300))
    assert rows(got) == rows(want)


def test_over_in_expressions_without_partition_and_with_a_computed_partition():
    sql = """SELECT ts, v - AVG(v) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW)
                    AS dev,
                    SUM(price) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '30' SECOND PRECEDING AND CURRENT ROW) AS sp
             FROM ev WHERE v IS NOT NULL"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""SELECT ts, v - TRUNC(AVG(v) OVER w)::BIGINT, SUM(price) OVER w FROM ev WHERE v IS NOT NULL
                   WINDOW w AS (ORDER BY ts RANGE BETWEEN INTERVAL '30 seconds' PRECEDING AND CURRENT ROW)""",
                ev=ORACLE_EV)
    assert rows(got) == rows(want)
    assert got.column_names == ["ts", "dev", "sp"]

    sql = """SELECT ts, COUNT(*) OVER (PARTITION BY v % 3 ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)
             FROM ev"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("SELECT ts, COUNT(*) OVER (PARTITION BY v % 3 ORDER BY ts, seq ROWS 5 PRECEDING) FROM ev",
                ev=ORACLE_EV)
    assert rows(got) == rows(want)
    assert got.column_names == ["ts", "EXPR$1"]


@pytest.mark.parametrize("sql, message", [
    ("SELECT SUM(v) OVER (PARTITION BY k ORDER BY v) FROM ev", "not a time attribute"),
    ("SELECT SUM(v) OVER (PARTITION BY k ORDER BY ts DESC) FROM ev", "ascending"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) FROM ev", "CURRENT ROW"),
    ("SELECT SUM(v) OVER (ORDER BY ts ROWS 3 PRECEDING), COUNT(*) OVER (ORDER BY ts ROWS 4 PRECEDING) FROM ev",
     "same window"),
    ("SELECT k, SUM(v) OVER (ORDER BY ts) FROM ev GROUP BY k", "GROUP BY"),
    ("SELECT LEAD(v) OVER (ORDER BY ts) FROM ev", "LEAD is not supported on a stream"),
    ("SELECT SUM(v) OVER w FROM ev", "unknown window"),
])
def test_over_refusals(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message):
        engine.plan(sql)


def test_over_is_append_only_and_keeps_the_time_attribute():
    engine = dsms.Engine()
    engine.execute(DDL)
    plan = engine.plan("SELECT k, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts) AS s FROM ev")
    assert plan.changelog == "append-only"
    assert plan.schema.find("ts").rowtime
    assert "OverAggregate(partition by k, order by ts, RANGE UNBOUNDED PRECEDING" in plan.explain()
