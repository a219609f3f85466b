"""Late events of a partitioned source (Kafka) are judged per window, as Flink's window operator does.

The source's watermark is the minimum over its partitions of their largest
time so far, less the bound, as it stood just before each row. An event
behind it is not dropped by the source: a window operator drops it only
from the windows that had fired when it arrived, and counts it. The Kafka
tests run against the real broker of the ``kafka_broker`` fixture and
produce the events phase by phase, each phase on one partition and read
before the next is produced, so the order the source sees is fixed; the
expected rows are computed by hand in the comments.
"""

from __future__ import annotations

import datetime as dt
import random
import time

import numpy as np
import pytest

import dsms
from dsms.runtime.operators.base import MIN_WATERMARK
from dsms.runtime.operators.source import partitioned_max_before

from oracle import rows

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
S = 1_000_000  # microseconds in a second

TUMBLE = """SELECT window_start, COUNT(*) AS n, SUM(v) AS v
    FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end"""


# -- the watermark before each row, computed for a batch at once ---------------------------------------------

def test_the_watermark_before_each_row_is_the_minimum_over_the_partitions_maxima_before_it():
    # rows     p0:10  p1:4  p0:14  p1:12  p0:11  p1:2
    # p0 max     -     10    10     14     14    14
    # p1 max     -      -     4      4     12    12
    # minimum    -      -     4      4     12    12
    ts = np.array([10, 4, 14, 12, 11, 2], dtype=np.int64)
    parts = np.array([0, 1, 0, 1, 0, 1], dtype=np.int32)
    before, after = partitioned_max_before(ts, parts, {}, [0, 1])
    assert before.tolist() == [MIN_WATERMARK, MIN_WATERMARK, 4, 4, 12, 12]
    assert after == {0: 14, 1: 12}


def test_an_idle_partition_counts_again_after_its_first_row_and_a_finished_one_until_its_last():
    # p1 was idle (not holding): it holds the watermark back after its first row (at index 2).
    ts = np.array([10, 20, 5, 30, 40], dtype=np.int64)
    parts = np.array([0, 0, 1, 0, 0], dtype=np.int32)
    before, _ = partitioned_max_before(ts, parts, {1: 3}, [0])
    assert before.tolist() == [MIN_WATERMARK, 10, 20, 5, 5]
    # p1 finished in the batch (its last row at index 2): it holds the watermark back until then.
    before, _ = partitioned_max_before(ts, parts, {1: 3}, [0], finished={1})
    assert before.tolist() == [MIN_WATERMARK, 3, 3, 20, 30]


def test_the_watermark_before_each_row_does_not_depend_on_how_the_rows_are_cut_into_batches():
    rng = random.Random(11)
    for _ in range(50):
        n = rng.randrange(1, 60)
        ts = np.array([rng.randrange(1000) for _ in range(n)], dtype=np.int64)
        parts = np.array([rng.randrange(3) for _ in range(n)], dtype=np.int32)
        whole, _ = partitioned_max_before(ts, parts, {}, [0, 1, 2])
        pieces, maxima, start = [], {}, 0
        cuts = sorted(rng.sample(range(1, n), min(n - 1, rng.randrange(4)))) + [n] if n > 1 else [n]
        for end in cuts:
            piece, maxima = partitioned_max_before(ts[start:end], parts[start:end], maxima, [0, 1, 2])
            pieces.append(piece)
            start = end
        assert np.concatenate(pieces).tolist() == whole.tolist()
        # and an independent computation, row by row
        expect, seen = [], {}
        for t, p in zip(ts.tolist(), parts.tolist()):
            expect.append(min(seen.get(q, MIN_WATERMARK) for q in range(3)))
            seen[p] = max(seen.get(p, MIN_WATERMARK), t)
        assert whole.tolist() == expect


# -- Kafka, against the real broker ---------------------------------------------------------------------------

def _stamp(seconds: float) -> str:
    return (BASE + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _run_phases(bootstrap: str, phases: list[tuple[int, list[float]]], batch_size: int | None, sql: str = TUMBLE):
    """Produce each phase (partition, event seconds) and let the engine read it before the next."""
    from kafka_helpers import new_topic, produce

    topic = new_topic(bootstrap, "late-parts", 2)
    engine = dsms.Engine()
    size = f", 'batch.size' = '{batch_size}'" if batch_size else ""
    engine.execute(f"""CREATE STREAM ev (v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
        WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}',
              'format' = 'json', 'scan.startup.mode' = 'earliest-offset'{size})""")
    q = engine.query(sql)
    read = 0
    for partition, seconds in phases:
        produce(bootstrap, topic, [{"v": int(sec), "ts": _stamp(sec)} for sec in seconds],
                partition_of=lambda _i, _r, p=partition: p)
        read += len(seconds)
        deadline = time.monotonic() + 30
        while q.job.sources[0][1].rows_read < read:
            assert time.monotonic() < deadline, "the engine did not read the phase in time"
            engine.run_until_idle()
            time.sleep(0.02)
    engine.run_until_idle()
    got = [tuple((v - BASE).total_seconds() if isinstance(v, dt.datetime) else v for v in r) for r in rows(q.snapshot())]
    late = dict(q.job.late)
    engine.close()
    return got, late


# partition  events   watermark before them (min over p0, p1, less 5 s)
# p0         10, 70   -  (p1 has no data yet)
# p1         30       -                    -> watermark min(70, 30) - 5 = 25
# p0         20       25: behind it, [0, 60) has not fired: counts
# p1         80       25                   -> watermark min(70, 80) - 5 = 65: [0, 60) fires
# p1         55       65: [0, 60) fired: dropped (in the same batch as 80 unless one event per batch)
# p0         40, 15   65: [0, 60) fired: dropped and counted by the window aggregate
# p1         61       65: behind it, [60, 120) has not fired: counts
# p0, p1     200, 200 -> watermark 195: [60, 120) fires
PHASES = [(0, [10, 70]), (1, [30]), (0, [20]), (1, [80, 55]), (0, [40, 15]), (1, [61]), (0, [200]), (1, [200])]
WANT = [(0.0, 3, 10 + 30 + 20), (60.0, 3, 70 + 80 + 61)]


@pytest.mark.parametrize("batch_size", [1, None], ids=["one-event-per-batch", "default-batches"])
def test_a_kafka_event_behind_the_watermark_counts_in_its_open_window(kafka_broker, batch_size):
    got, late = _run_phases(kafka_broker, PHASES, batch_size)
    assert got == WANT
    assert late == {"ev": 0, "#1 WindowAggregate": 3}


def test_late_of_a_kafka_source_holds_the_events_behind_its_watermark(kafka_broker):
    # LATE(ev): behind the source's watermark when they arrived (20 at 25; 55, 40, 15 and 61 at 65)
    got, _ = _run_phases(kafka_broker, PHASES, None, "SELECT v FROM LATE(ev)")
    assert sorted(got) == [(15,), (20,), (40,), (55,), (61,)]
