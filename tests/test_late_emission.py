"""Window aggregates with EMIT CHANGES or ALLOWED LATENESS judge late events per window, as Flink does.

Flink's group window operator with ``table.exec.emit.allow-lateness``
(``isWindowLate``) drops an event from a window only when the window's
cleanup time, its last millisecond plus the allowed lateness, is at or
below the watermark when the event arrives; a late event within the
lateness updates the fired window (a retraction and an update). The
expected rows are computed by hand in the comments (watermark = largest
time so far - 5 s); the same events fed one at a time, in random batches
and all at once must give the same final rows, on the runtime and (final
rows only) on the DuckDB route.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

import dsms

from changes import changelog, final_table
from oracle import BASE, duck, events, rows, tumble_on_time

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'memory');"""


def table(seconds: list[float]) -> pa.Table:
    return pa.Table.from_pylist([{"k": "a", "v": int(s), "ts": BASE + dt.timedelta(seconds=s)} for s in seconds])


def run(sql: str, seconds: list[float], batch: int) -> tuple[list[tuple], dict]:
    """The final rows (the changelog applied) and the late counts, feeding ``batch`` events at a time."""
    data = table(seconds)
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    changes = []
    for i in range(0, data.num_rows, batch):
        engine.insert("ev", data.slice(i, batch))
        engine.run_until_idle()
        changes.append(q.poll())
    final = final_table([c for c in changes if c.num_rows])
    got = sorted(((r["window_start"] - BASE).total_seconds(), r["n"], r["sv"]) for r in final.to_pylist())
    late = dict(q.job.late)
    engine.close()
    return got, late


TUMBLE = """SELECT window_start, COUNT(*) AS n, SUM(v) AS sv
FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end"""


@pytest.mark.parametrize("batch", [1, 2, 100])
def test_emit_changes_counts_an_event_behind_the_watermark_in_its_open_window(batch):
    # arrival  ts   watermark before it   [0, 60): cleanup at 59.999 (no lateness)
    # 1, 2     10 30  -, 5                open
    # 3        20   25                    open: counts (behind the watermark)
    # 4        70   25
    # 5        40   65                    past its cleanup time: dropped, counted by the window aggregate
    got, late = run(TUMBLE + " EMIT CHANGES", [10, 30, 20, 70, 40], batch)
    assert got == [(0.0, 3, 60), (60.0, 1, 70)]
    assert late == {"ev": 0, "#1 WindowAggregate": 1}


@pytest.mark.parametrize("batch", [1, 3, 100])
def test_allowed_lateness_drops_an_event_only_past_its_windows_cleanup_time(batch):
    # lateness 10 s: [0, 60) fires at watermark 59.999 and is cleaned up at 69.999.
    # arrival  ts   watermark before it
    # 1-3      10 30 20  -, 5, 25         all count in [0, 60) (20 is behind the watermark, the window open)
    # 4        66   25                    watermark 61: [0, 60) fires
    # 5        50   61                    [0, 60) fired, before its cleanup: updates it
    # 6        76   61                    watermark 71: [0, 60) cleaned up
    # 7        55   71                    dropped, counted by the window aggregate
    # 8        200  71                    watermark 195: [60, 120) fires
    sql = TUMBLE + " ALLOWED LATENESS INTERVAL '10' SECOND"
    got, late = run(sql, [10, 30, 20, 66, 50, 76, 55, 200], batch)
    assert got == [(0.0, 4, 110), (60.0, 2, 142)]
    assert late == {"ev": 0, "#1 WindowAggregate": 1}


def test_a_hop_event_past_the_cleanup_of_its_earlier_window_updates_only_the_later_one():
    # HOP size 20 s, slide 10 s, lateness 5 s. 12 is in [0, 20) and [10, 30).
    # arrival  ts   watermark before it
    # 1, 2     1 11  -, -4
    # 3        40   6                     watermark 35: [0, 20) (cleanup 24.999) and [10, 30) (34.999) gone
    # 4        12   35                    both windows past their cleanup: dropped
    # 5        45   35                    watermark 40
    # 6        28   40                    [10, 30) past its cleanup (34.999); [20, 40) fired (39.999) but not
    #                                     past its cleanup (44.999): only [20, 40) takes it
    sql = """SELECT window_start, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND))
    GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL '5' SECOND"""
    for batch in (1, 100):
        got, late = run(sql, [1, 11, 40, 12, 45, 28], batch)
        # [-10, 10): 1; [0, 20): 1, 11; [10, 30): 11; [20, 40): 28 (fired empty at 40, so 28 inserts it);
        # [30, 50) and [40, 60) have not fired (watermark 40), and no change was asked for before they do.
        assert got == [(-10.0, 1, 1), (0.0, 2, 12), (10.0, 1, 11), (20.0, 1, 28)], batch
        assert late == {"ev": 0, "#1 WindowAggregate": 1}


def test_final_rows_with_allowed_lateness_match_a_per_window_oracle_on_the_runtime_and_duckdb(tmp_path):
    data = events(600, seed=13, keys=3, disorder_s=25)
    sql = """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k
    ALLOWED LATENESS INTERVAL '10' SECOND"""
    accepted = tumble_on_time(data, 5 + 10, 10)
    assert accepted.num_rows < data.num_rows
    want = rows(duck("""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), k, COUNT(*), SUM(v)
                        FROM ev GROUP BY ALL""", ev=accepted))
    _, changes = changelog(DDL, sql, data)
    assert rows(final_table(changes)) == want
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps({"k": r["k"], "v": r["v"], "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]})
                            + "\n" for r in data.to_pylist()))
    engine = dsms.Engine()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    engine.execute("SET 'engine' = 'duckdb'")
    q = engine.query(sql)
    engine.run_until_idle()
    assert q.done and q.job.route == "duckdb"
    assert rows(q.snapshot()) == want
    engine.close()
