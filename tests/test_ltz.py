"""TIMESTAMP_LTZ and the session time zone ('table.local-time-zone'), against independent oracles.

DuckDB's TIMESTAMPTZ with its ``TimeZone`` setting is the oracle for casts,
date parts and windows (dsms lowers with explicit ``timezone(zone, x)``
calls, never the setting); some rows are written by hand. Windows over a
TIMESTAMP_LTZ rowtime are aligned in the session zone, as Flink aligns them:
a 1-day TUMBLE in Asia/Shanghai runs from local midnight to local midnight::

    UTC    2024-03-01 15:00   16:00 ........................ 2024-03-02 16:00
    local  2024-03-01 23:00   2024-03-02 00:00 .............. 2024-03-03 00:00
                              [------------ one window -------------)
"""

from __future__ import annotations

import datetime as dt
import json
import random
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa
import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from oracle import feed, rows

UTC = dt.timezone.utc
LTZ = pa.timestamp("us", tz="UTC")
ZONES = ("UTC", "Asia/Shanghai", "Asia/Kolkata", "America/New_York", "Europe/Berlin")


def instants(n: int, seed: int, start: dt.datetime, span_h: float, disorder_s: float = 0) -> list[dt.datetime]:
    """Instants in arrival order over ``span_h`` hours from ``start`` (UTC), shuffled within ``disorder_s``."""
    rng = random.Random(seed)
    base = [start + dt.timedelta(seconds=rng.uniform(0, span_h * 3600)) for _ in range(n)]
    base.sort()
    keyed = sorted(base, key=lambda t: t.timestamp() + rng.uniform(0, disorder_s))
    return [t.replace(microsecond=t.microsecond // 1000 * 1000) for t in keyed]


def stream_table(ts: list[dt.datetime], seed: int = 0) -> pa.Table:
    rng = random.Random(seed)
    return pa.table({"k": pa.array([rng.choice("abc") for _ in ts]), "v": pa.array([rng.randint(-5, 50) for _ in ts],
                                                                                    pa.int64()),
                     "ts": pa.array(ts, LTZ)})


def oracle(zone: str, sql: str, **tables: pa.Table) -> pa.Table:
    """``sql`` in plain DuckDB with its TimeZone set to ``zone`` (TIMESTAMPTZ casts and parts follow it)."""
    con = duckdb.connect()
    con.execute(f"SET TimeZone = '{zone}'")
    for name, t in tables.items():
        con.register(name, t)
    return con.sql(sql).to_arrow_table()


def naive(table: pa.Table) -> pa.Table:
    """Instants as naive UTC datetimes, so results from different zones compare as values."""
    fields = [pa.field(f.name, pa.timestamp("us")) if pa.types.is_timestamp(f.type) and f.type.tz else f
              for f in table.schema]
    return pa.table([c.cast(pa.timestamp("us", tz="UTC")).cast(pa.timestamp("us")) if pa.types.is_timestamp(c.type)
                     and c.type.tz else c for c in table.columns], schema=pa.schema(fields))


def engine_in(zone: str, ddl: str = "", clock=None) -> dsms.Engine:
    engine = dsms.Engine(clock=clock) if clock else dsms.Engine()
    engine.execute(f"SET 'table.local-time-zone' = '{zone}'")
    if ddl:
        engine.execute(ddl)
    return engine


def run(engine: dsms.Engine, sql: str, data: pa.Table | None = None, stream: str = "s", max_batch: int = 17):
    q = engine.query(sql)
    if data is not None:
        feed(engine, stream, data, max_batch=max_batch)
    engine.end_input()
    engine.run_until_idle()
    return q.snapshot()


# -- types and DDL ----------------------------------------------------------------------------------------------


def test_ddl_spellings_and_types_of_the_time_functions():
    engine = dsms.Engine()
    engine.execute("""CREATE STREAM s (a TIMESTAMP_LTZ(3), b TIMESTAMP(3) WITH LOCAL TIME ZONE, c TIMESTAMP(3),
        pt AS PROCTIME()) WITH (connector = 'memory')""")
    types = {r["column"]: r["type"] for r in engine.execute("DESCRIBE s").table.to_pylist()}
    assert types == {"a": "TIMESTAMP_LTZ(3)", "b": "TIMESTAMP_LTZ(3)", "c": "TIMESTAMP(3)", "pt": "TIMESTAMP_LTZ(3)"}
    planned = engine.plan("SELECT CURRENT_TIMESTAMP AS ct, NOW() AS n, LOCALTIMESTAMP AS lt, CURRENT_DATE AS cd, "
                          "TO_TIMESTAMP_LTZ(0) AS z, CAST(c AS TIMESTAMP_LTZ(3)) AS l, CAST(a AS TIMESTAMP(3)) AS t "
                          "FROM s")
    # Flink 2.x: CURRENT_TIMESTAMP, NOW() and TO_TIMESTAMP_LTZ are TIMESTAMP_LTZ(3); LOCALTIMESTAMP is TIMESTAMP(3).
    assert [str(f.type) for f in planned.schema] == [
        "timestamp[us, tz=UTC]", "timestamp[us, tz=UTC]", "timestamp[us]", "date32[day]",
        "timestamp[us, tz=UTC]", "timestamp[us, tz=UTC]", "timestamp[us]"]
    with pytest.raises(dsms.SqlError, match="unknown time zone 'Asia/Shangai'; did you mean 'Asia/Shanghai'"):
        engine.execute("SET 'table.local-time-zone' = 'Asia/Shangai'")
    with pytest.raises(dsms.SqlError, match="TIMESTAMP WITH TIME ZONE is not supported"):
        engine.execute("CREATE STREAM z (x TIMESTAMP WITH TIME ZONE) WITH (connector = 'memory')")


def test_to_timestamp_ltz_and_casts_by_hand():
    engine = engine_in("Asia/Shanghai")
    got = run(engine, """SELECT CAST(TO_TIMESTAMP_LTZ(1704121200, 0) AS STRING) AS s0,
        CAST(TO_TIMESTAMP_LTZ(1704121200123, 3) AS STRING) AS s3, TO_TIMESTAMP_LTZ(1704121200123456, 6) AS l6,
        TO_TIMESTAMP_LTZ(CAST(NULL AS BIGINT), 3) AS n, TO_TIMESTAMP_LTZ(1.5, 0) AS frac,
        CAST(TO_TIMESTAMP_LTZ(1704121200123, 3) AS BIGINT) AS secs, CAST(1704121200 AS TIMESTAMP_LTZ(3)) AS from_secs,
        CAST(TIMESTAMP '2024-01-01 23:00:00' AS TIMESTAMP_LTZ(3)) AS from_local,
        CAST('2024-01-01 23:00:00.250' AS TIMESTAMP_LTZ(3)) AS from_text,
        CAST(TO_TIMESTAMP_LTZ(1704121200, 0) AS TIMESTAMP(3)) AS to_local,
        CAST(TO_TIMESTAMP_LTZ(1704121200, 0) AS DATE) AS to_date, HOUR(TO_TIMESTAMP_LTZ(1704121200, 0)) AS h,
        FLOOR(TO_TIMESTAMP_LTZ(1704121200, 0) TO DAY) AS day_start,
        CAST(CAST(TO_TIMESTAMP_LTZ(1704121200, 0) AS TIMESTAMP(3)) AS TIMESTAMP_LTZ(3)) AS round_trip""")
    r = naive(got).to_pylist()[0]
    instant = dt.datetime(2024, 1, 1, 15, 0)  # 1704121200 = 2024-01-01 15:00 UTC = 23:00 in Shanghai
    assert r == {"s0": "2024-01-01 23:00:00.000", "s3": "2024-01-01 23:00:00.123",
                 "l6": instant + dt.timedelta(microseconds=123456), "n": None,
                 "frac": dt.datetime(1970, 1, 1, 0, 0, 1, 500000), "secs": 1704121200, "from_secs": instant,
                 "from_local": instant, "from_text": instant + dt.timedelta(milliseconds=250),
                 "to_local": dt.datetime(2024, 1, 1, 23, 0), "to_date": dt.date(2024, 1, 1), "h": 23,
                 "day_start": dt.datetime(2023, 12, 31, 16, 0), "round_trip": instant}
    # Results show instants in the session zone (as Flink prints them).
    assert got.column("from_secs").type == pa.timestamp("us", tz="Asia/Shanghai")
    assert got.column("from_secs")[0].as_py().isoformat() == "2024-01-01T23:00:00+08:00"


@pytest.mark.parametrize("zone", ZONES)
def test_casts_and_parts_agree_with_duckdb_timezone(zone):
    # Around both 2024 DST changes of New York and Berlin, and a year boundary.
    ts = instants(60, 3, dt.datetime(2024, 3, 9, 20, tzinfo=UTC), 60) + \
        instants(60, 4, dt.datetime(2024, 10, 26, 20, tzinfo=UTC), 60) + \
        instants(30, 5, dt.datetime(2023, 12, 31, 10, tzinfo=UTC), 30)
    data = stream_table(ts)
    engine = engine_in(zone, "CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP_LTZ(3)) WITH (connector = 'memory')")
    got = run(engine, """SELECT v, ts, CAST(ts AS STRING) AS s, CAST(ts AS TIMESTAMP(3)) AS l, CAST(ts AS DATE) AS d,
        HOUR(ts) AS h, DAYOFMONTH(ts) AS dm, YEAR(ts) AS y, FLOOR(ts TO DAY) AS fd, FLOOR(ts TO HOUR) AS fh,
        CAST(ts AS BIGINT) AS secs FROM s""", data)
    want = oracle(zone, """SELECT v, ts, strftime(ts::TIMESTAMPTZ::TIMESTAMP, '%Y-%m-%d %H:%M:%S.%g'),
        ts::TIMESTAMPTZ::TIMESTAMP, ts::TIMESTAMPTZ::DATE, hour(ts::TIMESTAMPTZ), day(ts::TIMESTAMPTZ),
        year(ts::TIMESTAMPTZ), date_trunc('day', ts::TIMESTAMPTZ), date_trunc('hour', ts::TIMESTAMPTZ),
        CAST(epoch_ms(ts) // 1000 AS BIGINT) FROM s""", s=data)
    assert rows(naive(got)) == rows(naive(want))
    assert len({r["h"] for r in got.to_pylist()}) > 12


@pytest.mark.parametrize("zone", ZONES + ("Australia/Lord_Howe",))
def test_local_times_become_instants_as_java_time_chooses(zone):
    """A local time in the spring gap moves forward by the gap; one in the autumn overlap is the earlier
    instant (Flink's java.time; Python's zoneinfo with fold=0 is the oracle). DuckDB alone takes the later."""
    local = [dt.datetime(2024, 1, 1) + dt.timedelta(minutes=15 * i) for i in range(4 * 24 * 366)
             if i % 7 == 0 or dt.datetime(2024, 1, 1) + dt.timedelta(minutes=15 * i) in _TRANSITIONS]
    engine = engine_in(zone, "CREATE STREAM s (l TIMESTAMP(3)) WITH (connector = 'memory')")
    got = run(engine, "SELECT l, CAST(l AS TIMESTAMP_LTZ(3)) AS a, CAST(CAST(l AS STRING) AS TIMESTAMP_LTZ(3)) AS b "
                      "FROM s", pa.table({"l": pa.array(local, pa.timestamp("us"))}), max_batch=5000)
    tz = ZoneInfo(zone)
    want = [(t, t.replace(tzinfo=tz).astimezone(UTC).replace(tzinfo=None)) for t in local]
    assert sorted((r["l"], r["a"]) for r in naive(got).to_pylist()) == want
    assert sorted((r["l"], r["b"]) for r in naive(got).to_pylist()) == want


# Local times in the 2024 gaps and overlaps of the zones above.
_TRANSITIONS = {dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 11, 3, 1, 0), dt.datetime(2024, 11, 3, 1, 45),
                dt.datetime(2024, 3, 31, 2, 15), dt.datetime(2024, 10, 27, 2, 0), dt.datetime(2024, 10, 27, 2, 30),
                dt.datetime(2024, 4, 7, 1, 45), dt.datetime(2024, 10, 6, 2, 15)}


# -- windows ------------------------------------------------------------------------------------------------------

DDL = """CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP_LTZ(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'memory')"""


def test_one_day_tumble_in_shanghai_starts_at_local_midnight_by_hand():
    engine = engine_in("Asia/Shanghai", DDL)
    data = pa.table({"k": ["a", "a", "a", "a"], "v": pa.array([1, 2, 4, 8], pa.int64()), "ts": pa.array([
        dt.datetime(2024, 3, 1, 15, 59, 59, 999000), dt.datetime(2024, 3, 1, 16, 0),  # local 23:59:59.999, 00:00
        dt.datetime(2024, 3, 2, 15, 0), dt.datetime(2024, 3, 2, 16, 30)], LTZ)})  # local 23:00, 00:30 (3rd)
    got = run(engine, """SELECT window_start, window_end, window_time, SUM(v) AS sv
        FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' DAY)) GROUP BY window_start, window_end, window_time""",
              data, max_batch=1)
    assert got.schema.field("window_start").type == pa.timestamp("us")  # local TIMESTAMP(3), as Flink
    assert got.schema.field("window_time").type == pa.timestamp("us", tz="Asia/Shanghai")  # TIMESTAMP_LTZ(3)
    assert rows(naive(got)) == [
        (dt.datetime(2024, 3, 1), dt.datetime(2024, 3, 2), dt.datetime(2024, 3, 1, 15, 59, 59, 999000), 1),
        (dt.datetime(2024, 3, 2), dt.datetime(2024, 3, 3), dt.datetime(2024, 3, 2, 15, 59, 59, 999000), 6),
        (dt.datetime(2024, 3, 3), dt.datetime(2024, 3, 4), dt.datetime(2024, 3, 3, 15, 59, 59, 999000), 8)]


WINDOW_QUERIES = {
    "tumble": ("""SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
        FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' DAY)) GROUP BY window_start, window_end, k""",
               """SELECT time_bucket(INTERVAL 1 DAY, l) AS ws, ws + INTERVAL 1 DAY, k, COUNT(*), SUM(v)
                  FROM local GROUP BY ALL"""),
    "hop": ("""SELECT window_start, window_end, COUNT(*) AS n, MAX(v) AS mv
        FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '6' HOUR, INTERVAL '1' DAY)) GROUP BY window_start, window_end""",
            """SELECT ws, ws + INTERVAL 1 DAY, COUNT(*), MAX(v) FROM (SELECT *, time_bucket(INTERVAL 6 HOUR, l)
                  - INTERVAL (6 * i) HOUR AS ws FROM local, range(4) r(i)) GROUP BY ws"""),
    "cumulate": ("""SELECT window_start, window_end, COUNT(*) AS n
        FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '8' HOUR, INTERVAL '1' DAY))
        GROUP BY window_start, window_end""",
                 """SELECT time_bucket(INTERVAL 1 DAY, l) AS ws, ws + INTERVAL (8 * j) HOUR AS we, COUNT(*)
                    FROM local, range(1, 4) r(j) WHERE l < ws + INTERVAL (8 * j) HOUR GROUP BY ALL"""),
    "group_window": ("""SELECT TUMBLE_START(ts, INTERVAL '1' DAY) AS ws, TUMBLE_END(ts, INTERVAL '1' DAY) AS we,
        COUNT(*) AS n FROM s GROUP BY TUMBLE(ts, INTERVAL '1' DAY)""",
                     "SELECT time_bucket(INTERVAL 1 DAY, l) AS ws, ws + INTERVAL 1 DAY, COUNT(*) FROM local GROUP BY ws"),
}
LOCAL = "WITH local AS (SELECT *, ts::TIMESTAMPTZ::TIMESTAMP AS l FROM s) "


@pytest.mark.parametrize("zone", ["Asia/Shanghai", "Asia/Kolkata", "UTC"])
@pytest.mark.parametrize("name", sorted(WINDOW_QUERIES))
def test_windows_align_in_the_session_zone_like_duckdb_local_buckets(zone, name):
    sql, want_sql = WINDOW_QUERIES[name]
    data = stream_table(instants(300, 7, dt.datetime(2024, 3, 1, tzinfo=UTC), 96, disorder_s=1.5))
    got = run(engine_in(zone, DDL), sql, data)
    want = oracle(zone, LOCAL + want_sql, s=data)
    assert rows(got) == rows(want)
    starts = {r[0] for r in rows(got)}
    assert len(starts) > 3 and all(s.hour % 6 == 0 and s.minute == 0 for s in starts)


def test_windows_in_a_zone_with_daylight_saving_time_are_refused_with_a_reason():
    engine = engine_in("America/New_York", DDL)
    with pytest.raises(dsms.SqlError, match="'America/New_York' has it"):
        engine.plan("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' DAY)) "
                    "GROUP BY window_start, window_end")


def test_the_duckdb_route_agrees_with_the_runtime(tmp_path):
    data = stream_table(instants(200, 9, dt.datetime(2024, 3, 1, tzinfo=UTC), 72, disorder_s=1))
    path = tmp_path / "s.jsonl"
    with open(path, "w") as f:  # instants written as Flink's JSON format writes them: UTC with a Z
        for r in data.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"}) + "\n")
    ddl = DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'")
    results = {}
    for route in ("runtime", "duckdb"):
        engine = engine_in("Asia/Shanghai", ddl)
        engine.execute(f"SET 'engine' = '{route}'")
        for name, (sql, _) in WINDOW_QUERIES.items():
            q = engine.query(sql)
            engine.run_until_idle()
            results[route, name] = rows(q.snapshot())
        q = engine.query("SELECT k, CAST(ts AS STRING) AS s, HOUR(ts) AS h, ts FROM s WHERE MINUTE(ts) < 20")
        engine.run_until_idle()
        results[route, "scalar"] = rows(naive(q.snapshot()))
    for name in [*WINDOW_QUERIES, "scalar"]:
        assert results["runtime", name] == results["duckdb", name] and results["runtime", name], name
    want = oracle("Asia/Shanghai", LOCAL + WINDOW_QUERIES["tumble"][1], s=data)
    assert results["runtime", "tumble"] == rows(want)


# -- sources, sinks, display ----------------------------------------------------------------------------------------


def test_json_source_offsets_and_sink_writes_utc_with_z(tmp_path):
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text('{"id": 1, "ts": "2024-01-01 08:00:00+08:00"}\n{"id": 2, "ts": "2024-01-01 00:00:00.5Z"}\n'
                   '{"id": 3, "ts": "2024-01-01 00:00:01"}\n{"id": 4, "ts": 1704067202000}\n')
    engine = engine_in("Asia/Shanghai", f"""
        CREATE STREAM e (id INT, ts TIMESTAMP_LTZ(3)) WITH (connector = 'file', path = '{src}', format = 'json');
        CREATE SINK o WITH (connector = 'file', path = '{out}', format = 'json') AS
          SELECT id, ts, CAST(ts AS STRING) AS local_text FROM e;""")
    engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    lines = [json.loads(line) for line in open(out)]
    assert sorted(lines, key=lambda r: r["id"]) == [
        {"id": 1, "ts": "2024-01-01 00:00:00.000Z", "local_text": "2024-01-01 08:00:00.000"},
        {"id": 2, "ts": "2024-01-01 00:00:00.500Z", "local_text": "2024-01-01 08:00:00.500"},
        {"id": 3, "ts": "2024-01-01 00:00:01.000Z", "local_text": "2024-01-01 08:00:01.000"},
        {"id": 4, "ts": "2024-01-01 00:00:02.000Z", "local_text": "2024-01-01 08:00:02.000"}]


def test_the_session_zone_applies_to_queries_started_after_it_is_set():
    engine = engine_in("UTC", "CREATE STREAM s (ts TIMESTAMP_LTZ(3)) WITH (connector = 'memory')")
    in_utc = engine.query("SELECT ts, CAST(ts AS STRING) AS s FROM s")
    engine.execute("SET 'table.local-time-zone' = 'Asia/Kolkata'")
    in_kolkata = engine.query("SELECT ts, CAST(ts AS STRING) AS s FROM s")
    engine.insert("s", [{"ts": dt.datetime(2024, 1, 1, tzinfo=UTC)}])
    engine.run_until_idle()
    assert in_utc.snapshot().column("s").to_pylist() == ["2024-01-01 00:00:00.000"]
    assert in_kolkata.snapshot().column("s").to_pylist() == ["2024-01-01 05:30:00.000"]
    assert in_kolkata.snapshot().column("ts")[0].as_py().isoformat() == "2024-01-01T05:30:00+05:30"


def test_clock_functions_read_the_clock_in_the_session_zone():
    engine = engine_in("Asia/Kolkata")
    before = dt.datetime.now(UTC)
    got = run(engine, "SELECT CURRENT_TIMESTAMP AS ct, NOW() AS n, LOCALTIMESTAMP AS lt, CURRENT_DATE AS cd")
    after = dt.datetime.now(UTC)
    r = got.to_pylist()[0]
    kolkata = dt.timedelta(hours=5, minutes=30)
    assert before <= r["ct"] <= after and before <= r["n"] <= after
    assert before.replace(tzinfo=None) + kolkata <= r["lt"] <= after.replace(tzinfo=None) + kolkata
    assert r["cd"] in {(before + kolkata).date(), (after + kolkata).date()}


# -- processing time ----------------------------------------------------------------------------------------------

SECOND = 1_000_000
START = dt.datetime(2024, 3, 1, 15, 59, 50, tzinfo=UTC)  # 23:59:50 in Shanghai


@pytest.mark.parametrize("kind, sql", [
    ("group window", """SELECT TUMBLE_START(pt, INTERVAL '1' MINUTE) AS ws, u, COUNT(*) AS n
        FROM clicks GROUP BY TUMBLE(pt, INTERVAL '1' MINUTE), u"""),
    ("tvf", """SELECT window_start AS ws, u, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(pt), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, u"""),
])
def test_processing_time_windows_fire_on_the_engine_clock_in_local_time(kind, sql):
    clock = VirtualClock(int(START.timestamp() * SECOND))
    engine = engine_in("Asia/Shanghai", "CREATE STREAM clicks (u VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory')",
                       clock=clock)
    plan = "\n".join(r["plan"] for r in engine.execute("EXPLAIN " + sql).table.to_pylist())
    assert "processing time" in plan and "until the clock passes" in plan
    q = engine.query(sql)
    engine.insert("clicks", [{"u": "a"}, {"u": "b"}])  # at 23:59:50 local
    engine.run_until_idle()
    clock.advance(9 * SECOND)
    engine.insert("clicks", [{"u": "a"}])  # 23:59:59
    engine.run_until_idle()
    assert q.poll().num_rows == 0
    clock.advance(SECOND)  # 00:00:00: the clock alone closes [23:59, 00:00)
    engine.run_until_idle()
    local_minute = dt.datetime(2024, 3, 1, 23, 59)
    assert sorted((r["ws"], r["u"], r["n"]) for r in q.poll().to_pylist()) == [(local_minute, "a", 2),
                                                                               (local_minute, "b", 1)]
    engine.insert("clicks", [{"u": "c"}])
    engine.run_until_idle()
    clock.advance(60 * SECOND)
    engine.run_until_idle()
    assert [(r["ws"], r["u"], r["n"]) for r in q.poll().to_pylist()] == [(dt.datetime(2024, 3, 2), "c", 1)]


def test_hop_and_cumulate_on_processing_time():
    clock = VirtualClock(int(dt.datetime(2024, 3, 1, tzinfo=UTC).timestamp() * SECOND))
    engine = engine_in("UTC", "CREATE STREAM clicks (u VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory')",
                       clock=clock)
    hop = engine.query("""SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(pt),
        INTERVAL '10' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end""")
    cumulate = engine.query("""SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE clicks,
        DESCRIPTOR(pt), INTERVAL '10' SECOND, INTERVAL '30' SECOND)) GROUP BY window_start, window_end""")
    for second in (0, 5, 12, 25, 31):  # arrivals, each a click
        clock.set(int(dt.datetime(2024, 3, 1, 0, 0, second, tzinfo=UTC).timestamp() * SECOND))
        engine.insert("clicks", [{"u": "x"}])
        engine.run_until_idle()
    clock.advance(60 * SECOND)
    engine.run_until_idle()

    def at(s: int) -> dt.datetime:
        return dt.datetime(2024, 3, 1) + dt.timedelta(seconds=s)
    # HOP 20 s every 10 s: [-10, 10) has 0, 5; [0, 20) 0, 5, 12; [10, 30) 12, 25; [20, 40) 25, 31; [30, 50) 31
    assert sorted((r["window_start"], r["window_end"], r["n"]) for r in hop.snapshot().to_pylist()) == [
        (at(-10), at(10), 2), (at(0), at(20), 3), (at(10), at(30), 2), (at(20), at(40), 2), (at(30), at(50), 1)]
    # CUMULATE 30 s by 10 s: [0, 10) 2, [0, 20) 3, [0, 30) 4, then [30, 40) 1 ...
    assert sorted((r["window_start"], r["window_end"], r["n"]) for r in cumulate.snapshot().to_pylist()) == [
        (at(0), at(10), 2), (at(0), at(20), 3), (at(0), at(30), 4), (at(30), at(40), 1), (at(30), at(50), 1),
        (at(30), at(60), 1)]


def test_the_server_keeps_a_session_zone_per_connection(tmp_path):
    psycopg = pytest.importorskip("psycopg")
    from server_helpers import DsmsServer

    query = "SELECT k, last_ts, CAST(last_ts AS STRING) AS s FROM latest"
    with DsmsServer(str(tmp_path)) as server, psycopg.connect(server.url(), autocommit=True) as shanghai, \
            psycopg.connect(server.url(), autocommit=True) as other:
        shanghai.execute("CREATE STREAM e (k VARCHAR, ts TIMESTAMP_LTZ(3)) WITH (connector = 'memory')")
        shanghai.execute("CREATE MATERIALIZED VIEW latest AS SELECT k, MAX(ts) AS last_ts FROM e GROUP BY k")
        shanghai.execute("INSERT INTO e VALUES ('a', TO_TIMESTAMP_LTZ(1500, 3))")
        shanghai.execute("SET 'table.local-time-zone' = 'Asia/Shanghai'")
        assert shanghai.info.timezone == ZoneInfo("Asia/Shanghai")  # reported to the driver (ParameterStatus)
        (k, t, s), = shanghai.execute(query).fetchall()
        assert s == "1970-01-01 08:00:01.500" and t.utcoffset() == dt.timedelta(hours=8)
        assert t == dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
        (k, t, s), = other.execute(query).fetchall()  # still UTC: the SET was the other connection's
        assert s == "1970-01-01 00:00:01.500" and t.utcoffset() == dt.timedelta(0)
        other.adapters.register_loader("timestamptz", psycopg.types.string.TextLoader)  # the text on the wire
        other.execute("SET TIME ZONE 'Asia/Kolkata'")  # PostgreSQL's spelling sets the session zone too
        (k, t, s), = other.execute(query).fetchall()
        assert (s, t) == ("1970-01-01 05:30:01.500", "1970-01-01 05:30:01.5+05:30")


@pytest.mark.parametrize("select", ["k, ts", "k, CAST(ts AS STRING) AS s", "k, LOCALTIMESTAMP AS lt"])
def test_the_spark_route_refuses_the_session_zone_with_a_reason(select, tmp_path):
    (tmp_path / "s.jsonl").write_text("")
    engine = engine_in("Asia/Shanghai", DDL.replace("connector = 'memory'",
                                                    f"connector = 'file', path = '{tmp_path}/s.jsonl', format = 'json'"))
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="spark route cannot compute in the session time zone .*: the session "
                                             "time zone .* the duckdb route"):
        engine.execute(f"EXPLAIN SELECT {select} FROM s")


def test_dsms_run_prints_local_time_and_the_print_sink_the_instant(tmp_path, capsys, monkeypatch):
    from dsms.cli import main

    (tmp_path / "in.jsonl").write_text('{"id": 1, "ts": "2024-01-01 00:00:00Z"}\n')
    (tmp_path / "s.sql").write_text("""SET 'table.local-time-zone' = 'Asia/Shanghai';
CREATE STREAM e (id INT, ts TIMESTAMP_LTZ(3)) WITH (connector = 'file', path = 'in.jsonl', format = 'json');
SELECT id, ts, CAST(ts AS STRING) AS s FROM e;
CREATE SINK p WITH (connector = 'print') AS SELECT id, ts FROM e;
""")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "s.sql"]) == 0
    out = capsys.readouterr().out
    assert "| 2024-01-01 08:00:00.000 | 2024-01-01 08:00:00.000" in out  # shown in the session zone, as Flink's client
    assert "+I[1, 2024-01-01 00:00:00.000Z]" in out  # a sink writes the instant (UTC, Z)


def test_session_windows_over_timestamp_ltz_show_local_bounds():
    engine = engine_in("Asia/Shanghai", DDL)
    data = pa.table({"k": ["a", "b", "a", "a"], "v": pa.array([1, 8, 2, 4], pa.int64()), "ts": pa.array([
        dt.datetime(2024, 3, 1, 15, 59, 50), dt.datetime(2024, 3, 1, 16, 0),  # a: one session across local midnight
        dt.datetime(2024, 3, 1, 16, 0, 5), dt.datetime(2024, 3, 1, 16, 1)], LTZ)})
    got = run(engine, """SELECT k, window_start, window_end, window_time, SUM(v) AS sv
        FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' SECOND))
        GROUP BY k, window_start, window_end, window_time""", data, max_batch=1)
    plan = "\n".join(r["plan"] for r in engine.execute("EXPLAIN SELECT window_start, COUNT(*) AS n FROM TABLE(SESSION("
                      "TABLE s, DESCRIPTOR(ts), INTERVAL '30' SECOND)) GROUP BY window_start, window_end").table.to_pylist())
    assert "SESSION(ts, gap=30s, zone=Asia/Shanghai)" in plan
    local = dt.datetime(2024, 3, 1, 23, 59, 50)
    assert rows(naive(got)) == [
        ("a", local, local + dt.timedelta(seconds=45), dt.datetime(2024, 3, 1, 16, 0, 34, 999000), 3),
        ("a", local + dt.timedelta(seconds=70), local + dt.timedelta(seconds=100),
         dt.datetime(2024, 3, 1, 16, 1, 29, 999000), 4),
        ("b", local + dt.timedelta(seconds=10), local + dt.timedelta(seconds=40),
         dt.datetime(2024, 3, 1, 16, 0, 29, 999000), 8)]
