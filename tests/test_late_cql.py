"""CQL row windows and keep-last deduplication judge late events per operator, not at the source.

``[ROWS n]`` is the n latest rows by event time (a Top-N by time): a row
behind the watermark is in the relation when it is among the n latest,
so nothing is ever late for it. With aggregates, ``[PARTITION BY k ROWS n]
GROUP BY k`` is an OVER aggregate over ``n - 1 PRECEDING`` rows (which
drops a row at or below the last time it released for its partition: it
can no longer be placed in order) and the latest row per key of that
(keep-last deduplication, which compares times, never the watermark, as
Flink's ``RowTimeDeduplicateFunction``). Expected rows are computed by
hand (watermark = largest time so far - 5 s); feeding the events one at a
time and all at once must give the same rows.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

import dsms

BASE = dt.datetime(2024, 1, 1)
DDL = """CREATE STREAM s (k VARCHAR, x BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'memory')"""

# arrival  k  ts   watermark before it
# 1, 2     a  10 30  -, 5
# 3        a  20   25      behind the watermark
# 4        b  100  25
# 5        a  50   95      behind the watermark
# 6        a  12   95      behind the watermark
EVENTS = [("a", 10), ("a", 30), ("a", 20), ("b", 100), ("a", 50), ("a", 12)]


def run(sql: str, one_at_a_time: bool) -> tuple[list[tuple], dict]:
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    data = pa.Table.from_pylist([{"k": k, "x": sec, "ts": BASE + dt.timedelta(seconds=sec)} for k, sec in EVENTS])
    for piece in ([data.slice(i, 1) for i in range(data.num_rows)] if one_at_a_time else [data]):
        engine.insert("s", piece)
        engine.run_until_idle()
    got = sorted(tuple(r.values()) for r in q.snapshot().to_pylist())
    late = dict(q.job.late)
    engine.close()
    return got, late


@pytest.mark.parametrize("one_at_a_time", [True, False], ids=["one-event-per-batch", "one-batch"])
def test_a_row_window_keeps_a_row_behind_the_watermark_that_is_among_the_latest(one_at_a_time):
    # the 2 latest per k: a: 50, 30 (20 and 12 are older); b: 100. Nothing is late.
    got, late = run("SELECT k, x FROM s [PARTITION BY k ROWS 2]", one_at_a_time)
    assert got == [("a", 30), ("a", 50), ("b", 100)]
    assert late == {"s": 0, "#1 TopN": 0}


@pytest.mark.parametrize("one_at_a_time", [True, False], ids=["one-event-per-batch", "one-batch"])
def test_a_row_window_aggregate_drops_only_rows_that_cannot_be_placed_in_order(one_at_a_time):
    # The OVER aggregate releases a's rows in time order at the watermark:
    #   20 arrives at 25, after 10 was released: counts (sums 10 | 10+20 | 20+30 at 10, 20, 30);
    #   50 arrives at 95 (10, 20, 30 released): after them, counts, but waits for a later watermark;
    #   12 arrives at 95: at or below 30, the last time released for a: dropped by the OVER aggregate.
    # The relation is the latest released row per k: a -> 20+30 = 50 (b's 100 is not released: watermark 95).
    got, late = run("SELECT k, SUM(x) AS t FROM s [PARTITION BY k ROWS 2] GROUP BY k", one_at_a_time)
    assert got == [("a", 50)]
    assert late == {"s": 0, "#1 OverAggregate": 1, "#2 Deduplicate": 0}


@pytest.mark.parametrize("one_at_a_time", [True, False], ids=["one-event-per-batch", "one-batch"])
def test_keep_last_deduplication_takes_a_late_row_newer_than_the_kept_one(one_at_a_time):
    # a keeps its row with the largest time: 50 (behind the watermark, but newer than a's 30) replaces 30.
    got, late = run("""SELECT k, x FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM s)
                       WHERE rn = 1""", one_at_a_time)
    assert got == [("a", 50), ("b", 100)]
    assert late == {"s": 0, "#1 Deduplicate": 0}
