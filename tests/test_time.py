"""Processing time, idle sources and the late-event stream, driven by a virtual clock (no sleeping)."""

import datetime as dt

import pyarrow as pa
import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from oracle import BASE, duck, events, feed, late_mask, rows, tumble_on_time

START_US = int(BASE.timestamp() * 1_000_000)
SECOND = 1_000_000


def engine_at_base() -> tuple[dsms.Engine, VirtualClock]:
    clock = VirtualClock(START_US)
    return dsms.Engine(clock=clock), clock


def test_processing_time_windows_fire_by_the_clock_without_data():
    engine, clock = engine_at_base()
    engine.execute("CREATE STREAM clicks (u VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory')")
    described = engine.execute("DESCRIBE clicks").table.to_pylist()
    assert described[1] == {"column": "pt", "type": "TIMESTAMP_LTZ(3)", "nullable": False, "extra": "AS PROCTIME()"}
    q = engine.query("""SELECT window_start, u, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(pt), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, u""")
    engine.insert("clicks", [{"u": "a"}, {"u": "b"}])
    engine.run_until_idle()
    clock.advance(4 * SECOND)
    engine.insert("clicks", [{"u": "a"}])
    engine.run_until_idle()
    clock.advance(5 * SECOND)
    engine.run_until_idle()
    assert q.poll().num_rows == 0  # 9.0 s: the window [0 s, 10 s) is still open
    clock.advance(1 * SECOND)
    engine.run_until_idle()  # no new data: the clock alone closes the window
    assert [(r["window_start"], r["u"], r["n"]) for r in q.poll().to_pylist()] == [(BASE, "a", 2), (BASE, "b", 1)]
    clock.advance(2 * SECOND)
    engine.insert("clicks", [{"u": "c"}])
    engine.run_until_idle()
    clock.advance(10 * SECOND)
    engine.run_until_idle()
    assert [(r["window_start"], r["u"], r["n"]) for r in q.poll().to_pylist()] == \
        [(BASE + dt.timedelta(seconds=10), "c", 1)]


def test_processing_time_over_and_deduplication():
    engine, clock = engine_at_base()
    engine.execute("CREATE STREAM s (k VARCHAR, v BIGINT, pt AS PROCTIME()) WITH (connector = 'memory')")
    over = engine.query("""SELECT k, v, SUM(v) OVER (PARTITION BY k ORDER BY pt
        RANGE BETWEEN INTERVAL '2' SECOND PRECEDING AND CURRENT ROW) AS s FROM s""")
    first = engine.query("SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt) AS rn FROM s) "
                         "WHERE rn = 1")
    for v in (1, 2, 3, 4):
        engine.insert("s", [{"k": "a", "v": v}])
        engine.run_until_idle()
        clock.advance(SECOND)
    engine.run_until_idle()
    # Arrivals at 0, 1, 2, 3 s: a frame of 2 s reaches the rows at t-2 .. t.
    assert [r["s"] for r in over.snapshot().to_pylist()] == [1, 3, 6, 9]
    assert first.snapshot().to_pylist() == [{"k": "a", "v": 1}]


def test_a_query_cannot_mix_processing_and_event_time():
    engine = dsms.Engine()
    engine.execute("""CREATE STREAM s (k VARCHAR, ts TIMESTAMP(3), pt AS PROCTIME(),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')""")
    engine.plan("SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(pt), INTERVAL '1' MINUTE)) "
                "GROUP BY window_start, window_end")
    # (the runtime refuses it when it builds its plan: when the query starts, or EXPLAIN shows the plan)
    with pytest.raises(dsms.DsmsError, match="both processing time and event time"):
        engine.query("""SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE (SELECT k, ts, SUM(1) OVER (ORDER BY pt) AS c
                       FROM s), DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end""")
    with pytest.raises(dsms.SqlError, match="processing-time windows have no late events"):
        engine.plan("SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(pt), INTERVAL '1' MINUTE)) "
                    "GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL '1' MINUTE")


UNION = """
CREATE STREAM a (x INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH (connector = 'memory', 'idle_timeout' = '5 s');
CREATE STREAM b (x INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH (connector = 'memory', 'idle_timeout' = '5 s');
"""
PER_10S = """SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (SELECT * FROM a UNION ALL SELECT * FROM b),
  DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end"""


def at(seconds: float) -> tuple:
    return (1, BASE + dt.timedelta(seconds=seconds))


def test_an_idle_input_stops_holding_the_watermark_back():
    engine, clock = engine_at_base()
    engine.execute(UNION)
    q = engine.query(PER_10S)
    engine.insert("a", [at(0)])
    engine.insert("b", [at(1)])
    engine.run_until_idle()
    for s in range(2, 36, 3):  # a keeps going for 4 s of processing time; b is quiet
        engine.insert("a", [at(s)])
        engine.run_until_idle()
        clock.advance(SECOND // 3)
    assert q.poll().num_rows == 0  # b's watermark (1 s) holds every window back
    clock.advance(2 * SECOND)
    engine.run_until_idle()  # 6 s without data: b is idle, the union follows a alone
    assert [(r["window_start"].second, r["n"]) for r in q.poll().to_pylist()] == [(0, 5), (10, 3), (20, 4)]
    engine.insert("b", [at(25), at(40)])  # b is back: 25 s is behind what the union passed, so it is late
    engine.run_until_idle()
    assert q.job.late == {"a": 0, "b": 1, "#3 WindowAggregate": 0}
    engine.insert("a", [at(41), at(52)])
    engine.run_until_idle()
    assert [(r["window_start"].second, r["n"]) for r in q.poll().to_pylist()] == [(30, 2)]  # 32, 35; b holds 40


def test_without_idle_timeout_a_quiet_input_holds_the_watermark():
    engine, clock = engine_at_base()
    engine.execute(UNION.replace(", 'idle_timeout' = '5 s'", ""))
    q = engine.query(PER_10S)
    engine.insert("a", [at(0)])
    engine.insert("b", [at(1)])
    engine.run_until_idle()
    engine.insert("a", [at(s) for s in range(2, 60, 3)])
    engine.run_until_idle()
    clock.advance(3600 * SECOND)
    engine.run_until_idle()
    assert q.poll().num_rows == 0


DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""


def test_late_events_can_be_queried_as_a_stream():
    data = events(800, seed=5, disorder_s=12)
    late = late_mask(data.column("ts").to_pylist(), 5)
    engine = dsms.Engine()
    engine.execute(DDL)
    main = engine.query("""SELECT window_start, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end""")
    late_q = engine.query("SELECT k, v, ts FROM LATE(ev)")
    per_key = engine.query("SELECT k, COUNT(*) AS n FROM LATE(ev) GROUP BY k")
    assert late_q.changelog == "append-only"
    feed(engine, "ev", data)
    late_rows = data.filter(pa.array(late))
    assert rows(late_q.snapshot()) == rows(late_rows.select(["k", "v", "ts"]))
    assert rows(per_key.snapshot()) == rows(duck("SELECT k, COUNT(*) FROM l GROUP BY k", l=late_rows))
    # The window operator drops only events whose window had fired; LATE(ev) holds every event that was
    # behind the watermark when it arrived.
    assert main.job.late == {"ev": 0, "#1 WindowAggregate": data.num_rows - tumble_on_time(data, 5, 10).num_rows}
    assert "Late(ev, memory)" in engine.explain("SELECT * FROM LATE(ev)")


def test_late_refusals():
    engine = dsms.Engine()
    engine.execute(DDL + "CREATE STREAM plain (x INT) WITH (connector = 'memory')")
    with pytest.raises(dsms.SqlError, match="no WATERMARK"):
        engine.plan("SELECT * FROM LATE(plain)")
    with pytest.raises(dsms.SqlError, match="unknown"):
        engine.plan("SELECT * FROM LATE(nope)")
    with pytest.raises(dsms.SqlError, match="not an event-time attribute"):
        engine.plan("SELECT COUNT(*) FROM TABLE(TUMBLE(TABLE LATE(ev), DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
                    "GROUP BY window_start, window_end")
