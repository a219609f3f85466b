"""Window aggregates: the runtime, fed out-of-order events in many small batches,
against the same question asked of DuckDB as one batch query written here."""

import datetime as dt

import pyarrow as pa
import pytest

import dsms

from oracle import BASE, duck, events, feed, late_mask, rows, run_query, tumble_on_time

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""

EV = events(1500, seed=7)


def with_gap(table: pa.Table) -> pa.Table:
    """Drop two minutes of events so some windows are empty."""
    ts = table.column("ts").to_pylist()
    keep = [not (BASE + dt.timedelta(seconds=100) <= t < BASE + dt.timedelta(seconds=220)) for t in ts]
    return table.filter(pa.array(keep))


def test_tumble_all_aggregates():
    sql = """
    SELECT window_start, window_end, k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(price) AS ap,
           MIN(v) AS lo, MAX(price) AS hi, COUNT(DISTINCT v) AS dv, AVG(v) AS av
    FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws,
           ws + INTERVAL '10 seconds' AS we, k, COUNT(*), COUNT(v), SUM(v), AVG(price), MIN(v), MAX(price),
           COUNT(DISTINCT v), TRUNC(AVG(v))::BIGINT
    FROM ev GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)
    assert got.num_rows > 100


def test_tumble_having_and_empty_windows():
    data = with_gap(EV)
    sql = """
    SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND))
    GROUP BY window_start, window_end, k HAVING COUNT(*) > 3"""
    got = run_query(DDL, sql, {"ev": data})
    want = duck("""
    SELECT time_bucket(INTERVAL '5 seconds', ts, TIMESTAMP '1970-01-01') AS ws, k, COUNT(*) AS n
    FROM ev GROUP BY ALL HAVING COUNT(*) > 3""", ev=data)
    assert rows(got) == rows(want)
    starts = {r[0] for r in rows(got)}
    assert not any(BASE + dt.timedelta(seconds=105) <= s < BASE + dt.timedelta(seconds=215) for s in starts)


def test_hop_per_key():
    sql = """
    SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv, MAX(price) AS hi
    FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
    GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:50:00', TIMESTAMP '2024-03-01 12:10:00',
                                              INTERVAL '10 seconds')) AS ws)
    SELECT ws, ws + INTERVAL '30 seconds' AS we, k, COUNT(*), SUM(v), MAX(price)
    FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '30 seconds'
    GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_hop_whose_size_is_not_a_multiple_of_its_slide():
    # size 15 s, slide 6 s: panes of gcd = 3 s; an event is in two or three windows (as Flink's group HOP).
    sql = """
    SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '6' SECOND, INTERVAL '15' SECOND))
    GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:42', TIMESTAMP '2024-03-01 12:06:00',
                                              INTERVAL '6 seconds')) AS ws)
    SELECT ws, ws + INTERVAL '15 seconds' AS we, k, COUNT(*), SUM(v)
    FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '15 seconds'
    GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)
    assert got.num_rows > 100


def test_cumulate():
    sql = """
    SELECT window_start, window_end, k, COUNT(*) AS n, SUM(price) AS sp
    FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '40' SECOND))
    GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    WITH starts AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:20', TIMESTAMP '2024-03-01 12:06:00',
                                                  INTERVAL '40 seconds')) AS ws),
         w AS (SELECT ws, ws + step * INTERVAL '10 seconds' AS we
               FROM starts, (SELECT unnest([1, 2, 3, 4]) AS step))
    SELECT ws, we, k, COUNT(*), SUM(price) FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.we
    GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_filter_projection_and_scalar_functions_before_the_window():
    sql = """
    SELECT window_start, kk, COUNT(*) AS n, SUM(bucket) AS sb, MAX(sec) AS ms
    FROM TABLE(TUMBLE(TABLE (
        SELECT UPPER(COALESCE(k, 'none')) AS kk, ts,
               CASE WHEN price >= 5 THEN 1 ELSE 0 END AS bucket,
               EXTRACT(SECOND FROM ts) AS sec, CAST(v AS DOUBLE) / 2 AS half
        FROM ev WHERE v IS NOT NULL AND price > 2 AND v % 3 <> 0),
      DESCRIPTOR(ts), INTERVAL '20' SECOND))
    GROUP BY window_start, window_end, kk"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    SELECT time_bucket(INTERVAL '20 seconds', ts, TIMESTAMP '1970-01-01') AS ws, UPPER(COALESCE(k, 'none')) AS kk,
           COUNT(*), SUM(CASE WHEN price >= 5 THEN 1 ELSE 0 END), MAX(EXTRACT(SECOND FROM ts))
    FROM ev WHERE v IS NOT NULL AND price > 2 AND v % 3 <> 0 GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_projections_that_only_pick_columns_skip_the_statement():
    # Renaming window results (and renaming again) is done on the Arrow batch; computing is not.
    sql = """SELECT c AS total, s AS begins FROM (
        SELECT window_start AS s, k AS key, COUNT(*) AS c FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts),
        INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k)"""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    calcs = [op for op in q.job.plan.ops if type(op).__name__ == "CalcSpec"]
    assert [op.picks for op in calcs] == [(("total", "agg0"), ("begins", "window_start"))]
    feed(engine, "ev", EV, max_batch=40)
    engine.end_input()
    engine.run_until_idle()
    want = duck("""SELECT COUNT(*), time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws
                   FROM ev GROUP BY ws, k""", ev=EV)
    assert q.snapshot().column_names == ["total", "begins"] and rows(q.snapshot()) == rows(want)
    computed = engine.query("SELECT v + 1 AS w, k FROM ev")
    assert [op.picks for op in computed.job.plan.ops if type(op).__name__ == "CalcSpec"] == [None]


def test_union_all_of_two_streams():
    ddl = """
    CREATE STREAM imp (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)
      WITH (connector = 'memory');
    CREATE STREAM clk (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)
      WITH (connector = 'memory');
    CREATE VIEW both_kinds AS
      SELECT ad, ts, 1 AS is_imp, 0 AS is_clk FROM imp
      UNION ALL
      SELECT ad, ts, 0 AS is_imp, 1 AS is_clk FROM clk;
    """
    base = events(1200, seed=3, keys=4, disorder_s=3.5)
    imp = base.slice(0, 900).select(["ts"]).append_column("ad", pa.array([i % 4 for i in range(900)], pa.int64()))
    clk = base.slice(900, 300).select(["ts"]).append_column("ad", pa.array([i % 3 for i in range(300)], pa.int64()))
    clk = clk.sort_by("ts")  # a second, independently ordered stream over a shorter time
    sql = """
    SELECT window_start, ad, SUM(is_imp) AS impressions, SUM(is_clk) AS clicks
    FROM TABLE(TUMBLE(TABLE both_kinds, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, ad"""
    got = run_query(ddl, sql, {"imp": imp, "clk": clk})
    want = duck("""
    SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01') AS ws, ad, SUM(i), SUM(c) FROM (
      SELECT ad, ts, 1 AS i, 0 AS c FROM imp UNION ALL SELECT ad, ts, 0, 1 FROM clk) GROUP BY ALL""",
                imp=imp, clk=clk)
    assert rows(got) == rows(want)


def test_stacked_views_and_cascading_windows():
    ddl = DDL + """
    CREATE VIEW positive AS SELECT k, v, ts FROM ev WHERE v > 0;
    CREATE VIEW per_10s AS
      SELECT window_start AS start_10s, window_end AS end_10s, window_time AS rowtime, k, SUM(v) AS sv, COUNT(*) AS n
      FROM TABLE(TUMBLE(TABLE positive, DESCRIPTOR(ts), INTERVAL '10' SECOND))
      GROUP BY window_start, window_end, window_time, k;
    """
    sql = """
    SELECT window_start, window_end, k, SUM(sv) AS sv, SUM(n) AS n, COUNT(*) AS inner_windows
    FROM TABLE(TUMBLE(TABLE per_10s, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE))
    GROUP BY window_start, window_end, k"""
    got = run_query(ddl, sql, {"ev": EV})
    want = duck("""
    WITH inner_w AS (
      SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws, k, SUM(v) AS sv, COUNT(*) AS n
      FROM ev WHERE v > 0 GROUP BY ALL)
    SELECT time_bucket(INTERVAL '1 minute', ws, TIMESTAMP '1970-01-01') AS ows,
           ows + INTERVAL '1 minute', k, SUM(sv), SUM(n), COUNT(*)
    FROM inner_w GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_a_window_over_a_window_must_rename_the_inner_bounds():
    engine = dsms.Engine()
    engine.execute(DDL + """CREATE VIEW w AS SELECT window_start, window_end, window_time, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, window_time""")
    with pytest.raises(dsms.SqlError, match="already has a column named window_start") as e:
        engine.query("SELECT * FROM TABLE(TUMBLE(TABLE w, DESCRIPTOR(window_time), INTERVAL '1' MINUTE))")
    assert "window_time AS rowtime" in str(e.value)


def test_group_window_syntax():
    sql = """
    SELECT k, TUMBLE_START(ts, INTERVAL '15' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '15' SECOND) AS we,
           COUNT(*) AS n
    FROM ev GROUP BY TUMBLE(ts, INTERVAL '15' SECOND), k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    SELECT k, time_bucket(INTERVAL '15 seconds', ts, TIMESTAMP '1970-01-01') AS ws,
           ws + INTERVAL '15 seconds', COUNT(*) FROM ev GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_hop_group_window_syntax():
    sql = """
    SELECT HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n
    FROM ev GROUP BY HOP(ts, INTERVAL '5' SECOND, INTERVAL '10' SECOND)"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:50', TIMESTAMP '2024-03-01 12:06:00',
                                              INTERVAL '5 seconds')) AS ws)
    SELECT ws, COUNT(*) FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '10 seconds'
    GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_window_tvf_without_aggregation():
    data = EV.slice(0, 300)
    got = run_query(DDL, """SELECT k, v, ts, window_start, window_end
        FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '20' SECOND))""", {"ev": data})
    want = duck("""
    WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:40', TIMESTAMP '2024-03-01 12:06:00',
                                              INTERVAL '10 seconds')) AS ws)
    SELECT k, v, ts, ws, ws + INTERVAL '20 seconds' FROM ev JOIN w
    ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '20 seconds'""", ev=data)
    assert rows(got) == rows(want)
    assert got.num_rows == 2 * data.num_rows


def test_tumble_with_offset_and_no_keys():
    sql = """
    SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE,
                                                          INTERVAL '15' SECOND))
    GROUP BY window_start, window_end"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""
    SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01 00:00:15') AS ws, COUNT(*)
    FROM ev GROUP BY ALL""", ev=EV)
    assert rows(got) == rows(want)


def test_results_do_not_depend_on_batching():
    sql = """
    SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND))
    GROUP BY window_start, window_end, k"""
    data = events(800, seed=11, disorder_s=9)  # disorder beyond the bound: some events are late
    one = run_query(DDL, sql, {"ev": data}, max_batch=1)
    small = run_query(DDL, sql, {"ev": data}, max_batch=17, seed=5)
    whole = run_query(DDL, sql, {"ev": data}, max_batch=100_000)
    assert rows(one) == rows(small) == rows(whole)


def test_late_events_are_dropped_per_window_and_counted_by_the_window_operator():
    # As Flink: an event behind the watermark still counts while its window is open; only an event whose
    # window had fired when it arrived is dropped, and the window operator counts it.
    data = events(1000, seed=5, disorder_s=12)  # disorder beyond the 5 s bound
    behind = late_mask(data.column("ts").to_pylist(), 5)
    counted = tumble_on_time(data, 5, 10)
    dropped = data.num_rows - counted.num_rows
    assert 10 < dropped < sum(behind)  # some events behind the watermark still count, some are dropped
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end""")
    feed(engine, "ev", data)
    engine.end_input()
    engine.run_until_idle()
    want = duck("""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), COUNT(*)
                   FROM ev GROUP BY ALL""", ev=counted)
    assert rows(q.snapshot()) == rows(want)
    assert q.job.late == {"ev": 0, "#1 WindowAggregate": dropped}


def test_only_queries_that_act_on_event_time_drop_late_events():
    # As in Flink: a projection or a group aggregate keeps every event; a window drops the late ones.
    data = events(600, seed=9, disorder_s=12)
    late = late_mask(data.column("ts").to_pylist(), 5)
    assert sum(late) > 5
    engine = dsms.Engine()
    engine.execute(DDL)
    plain = engine.query("SELECT k, v, ts FROM ev WHERE price >= 0")
    grouped = engine.query("SELECT k, COUNT(*) AS n FROM ev GROUP BY k")
    bare = engine.query("SELECT k, window_start FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))")
    windowed = engine.query("""SELECT window_start, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end""")
    feed(engine, "ev", data)
    engine.end_input()
    engine.run_until_idle()
    assert plain.snapshot().num_rows == data.num_rows and plain.job.late == {"ev": 0}
    assert bare.snapshot().num_rows == data.num_rows  # a window TVF alone labels rows, as Flink's, and drops none
    assert rows(grouped.snapshot()) == rows(duck("SELECT k, COUNT(*) FROM ev GROUP BY k", ev=data))
    counted = tumble_on_time(data, 5, 10)
    assert rows(windowed.snapshot()) == rows(duck(
        "SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), COUNT(*) FROM ev GROUP BY ALL",
        ev=counted))
    assert windowed.job.late == {"ev": 0, "#1 WindowAggregate": data.num_rows - counted.num_rows}


def test_each_window_is_emitted_once_when_the_watermark_reaches_its_last_millisecond():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, k, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k""")

    def at(seconds, k="a"):
        return {"k": k, "v": 1, "price": 1.0, "ts": BASE + dt.timedelta(seconds=seconds)}

    # Window [12:00:00, 12:00:10) closes when the watermark (max ts - 5 s) reaches its last millisecond,
    # 12:00:09.999 (its window_time), as Flink's windows do.
    engine.insert("ev", [at(1), at(9.999), at(10)])
    engine.run_until_idle()
    assert q.poll().num_rows == 0
    engine.insert("ev", [at(14.998)])
    engine.run_until_idle()
    assert q.poll().num_rows == 0
    engine.insert("ev", [at(14.999)])
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "+I", "window_start": BASE, "k": "a", "n": 2}]
    engine.insert("ev", [at(15, "b"), at(9.999, "c")])  # c: its window had fired, so it is late
    engine.run_until_idle()
    assert q.poll().num_rows == 0 and q.job.late["#1 WindowAggregate"] == 1
    # A stream that ends mid-window: the last window is flushed at end of input.
    engine.end_input()
    engine.run_until_idle()
    flushed = q.poll().to_pylist()
    assert sorted((r["k"], r["n"]) for r in flushed) == [("a", 3), ("b", 1)]  # [10 s, 20 s)
    assert q.done
