"""Group aggregates without a window: an updating result with retractions.

The changelog is checked for validity (it never retracts a row it did not
emit) and, applied to an empty table, must equal DuckDB's batch answer."""

import dsms

from changes import changelog, final_table, ops
from oracle import duck, events, feed, rows

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""
EV = events(1200, seed=21, keys=7)


def test_keyed_aggregates_with_retraction_match_duckdb():
    sql = """SELECT k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, MIN(v) AS lo, MAX(price) AS hi,
                    COUNT(DISTINCT v) AS dv, AVG(v) AS av FROM ev WHERE v IS NOT NULL OR price > 5 GROUP BY k"""
    q, changes = changelog(DDL, sql, EV, max_batch=30, seed=2)
    got = final_table(changes)
    want = duck("""SELECT k, COUNT(*), COUNT(v), SUM(v), MIN(v), MAX(price), COUNT(DISTINCT v), TRUNC(AVG(v))::BIGINT
                   FROM ev WHERE v IS NOT NULL OR price > 5 GROUP BY k""", ev=EV)
    assert rows(got) == rows(want)
    assert rows(q.snapshot()) == rows(want)
    assert ops(changes) == {"+I", "-U", "+U"}


def test_global_aggregate():
    q, changes = changelog(DDL, "SELECT COUNT(*) AS n, SUM(price) AS sp, MAX(v) AS hi FROM ev", EV, max_batch=30,
                           seed=2)
    want = duck("SELECT COUNT(*), SUM(price), MAX(v) FROM ev", ev=EV)
    assert rows(final_table(changes)) == rows(want)


def test_aggregate_over_an_updating_aggregate():
    # How many keys have each count: every change of a key's count moves it between buckets,
    # so the inner aggregate's -U/+U must be subtracted and added by the outer one.
    sql = "SELECT n, COUNT(*) AS keys, MIN(k) AS first_key FROM (SELECT k, COUNT(*) AS n FROM ev GROUP BY k) GROUP BY n"
    data = EV.slice(0, 300)
    q, changes = changelog(DDL, sql, data, max_batch=5, seed=2)
    want = duck("SELECT n, COUNT(*), MIN(k) FROM (SELECT k, COUNT(*) AS n FROM ev GROUP BY k) GROUP BY n", ev=data)
    got = final_table(changes)
    assert rows(got) == rows(want)
    assert any("-D" in c.column("op").to_pylist() for c in changes)


def test_select_distinct_on_a_stream_is_append_only():
    engine = dsms.Engine()
    engine.execute(DDL)
    plan = engine.plan("SELECT DISTINCT k FROM ev")
    assert plan.changelog == "append-only"
    q = engine.query("SELECT DISTINCT k FROM ev")
    feed(engine, "ev", EV)
    assert sorted(q.snapshot().column("k").to_pylist(), key=str) == \
        sorted(duck("SELECT DISTINCT k FROM ev", ev=EV).column("k").to_pylist(), key=str)
    assert engine.plan("SELECT k, COUNT(*) FROM ev GROUP BY k").changelog == "updating"


def test_an_updating_result_is_refused_by_a_json_sink(tmp_path):
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    try:
        engine.execute("CREATE SINK s WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS\n"
                       "SELECT k, COUNT(*) AS n FROM ev GROUP BY k")
    except dsms.SqlError as e:
        assert "append-only" in e.message and "updating" in e.message
        assert "changelog-json" in str(e)
        assert e.line == 2
    else:
        raise AssertionError("a json sink accepted an updating result")


def test_a_window_aggregate_over_an_updating_input_is_refused():
    engine = dsms.Engine()
    engine.execute(DDL)
    try:
        engine.query("""SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE (
              SELECT k, MAX(ts) AS ts FROM ev GROUP BY k), DESCRIPTOR(ts), INTERVAL '1' MINUTE))
            GROUP BY window_start, window_end""")
    except dsms.DsmsError as e:
        assert "event-time attribute" in str(e) or "append-only" in str(e)
    else:
        raise AssertionError("accepted")
