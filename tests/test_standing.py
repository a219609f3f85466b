"""Standing queries: sinks and materialized views run in the background while statements keep coming;
SHOW QUERIES, PAUSE / RESUME, DROP, failures, pull queries over views, SHOW PROGRESS."""

import json
import random

import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from oracle import BASE, duck, events, rows

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
PER_KEY = "CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k"
WINDOWS = """CREATE MATERIALIZED VIEW windows AS
  SELECT window_start, k, COUNT(*) AS n, MAX(price) AS top
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""

ORACLE_PER_KEY = "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k"
ORACLE_WINDOWS = """SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS window_start, k,
                    COUNT(*) AS n, MAX(price) AS top FROM ev GROUP BY ALL"""


def engine_with_views(**kw) -> dsms.Engine:
    engine = dsms.Engine(**kw)
    engine.execute(DDL)
    engine.execute(PER_KEY)
    engine.execute(WINDOWS)
    return engine


def pieces(table, seed, max_rows=30):
    rng, i = random.Random(seed), 0
    while i < table.num_rows:
        n = rng.randint(1, max_rows)
        yield table.slice(i, n)
        i += n


def test_two_standing_queries_run_while_statements_keep_being_executed():
    data = events(600, seed=11, disorder_s=3)
    engine = engine_with_views()
    for i, part in enumerate(pieces(data, seed=2)):
        assert engine.execute("INSERT INTO ev SELECT * FROM (VALUES ('x', 1, 1.0, TIMESTAMP '2000-01-01')) "
                              "WHERE false").message == "Inserted 0 rows into ev"
        engine.insert("ev", part)
        engine.step()  # one turn each, as a REPL's loop would give them
        if i % 5 == 0:  # other statements come in meanwhile
            engine.execute(f"CREATE VIEW v{i} AS SELECT k FROM ev WHERE v > {i}")
            shown = engine.execute("SHOW QUERIES").table.to_pylist()
            assert [(r["id"], r["kind"], r["status"]) for r in shown] == [
                ("per_key", "materialized view", "running"), ("windows", "materialized view", "running")]
    engine.end_input()
    engine.run_until_idle()
    assert rows(engine.execute("SELECT * FROM per_key").table) == rows(duck(ORACLE_PER_KEY, ev=data))
    assert rows(engine.execute("SELECT * FROM windows").table) == rows(duck(ORACLE_WINDOWS, ev=data))
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert shown["windows"]["status"] == "finished" and shown["windows"]["rows_in"] == 600
    assert shown["windows"]["rows_out"] == duck(ORACLE_WINDOWS, ev=data).num_rows


def test_pause_stops_progress_and_resume_continues_without_loss():
    data = events(500, seed=12, disorder_s=2)
    engine = engine_with_views()
    parts = list(pieces(data, seed=3))
    half = len(parts) // 2
    for part in parts[:half]:
        engine.insert("ev", part)
        engine.run_until_idle()
    assert engine.execute("PAUSE QUERY windows").message == "Paused query windows"
    before = engine.execute("SELECT * FROM windows").table
    stats = engine.sink("windows").stats()
    for part in parts[half:]:
        engine.insert("ev", part)
        engine.run_until_idle()
    # Paused: nothing read, nothing emitted, its view unchanged; the other query went on.
    paused = engine.sink("windows").stats()
    assert (paused["status"], paused["rows_in"], paused["rows_out"]) == ("paused", stats["rows_in"], stats["rows_out"])
    assert rows(engine.execute("SELECT * FROM windows").table) == rows(before)
    assert engine.sink("per_key").stats()["rows_in"] == data.num_rows
    assert engine.execute("RESUME QUERY windows").message == "Resumed query windows"
    assert engine.execute("RESUME QUERY windows").message == "Query windows is not paused"
    engine.end_input()
    engine.run_until_idle()
    assert rows(engine.execute("SELECT * FROM windows").table) == rows(duck(ORACLE_WINDOWS, ev=data))
    assert rows(engine.execute("SELECT * FROM per_key").table) == rows(duck(ORACLE_PER_KEY, ev=data))


def test_a_failing_query_is_marked_failed_and_the_others_go_on(tmp_path):
    good = "".join(json.dumps({"k": "a", "ts": f"2024-01-01 00:00:0{i}"}) + "\n" for i in range(3))
    (tmp_path / "bad.jsonl").write_text(good + '{"k": "a", "ts": 12\n')
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.execute(PER_KEY)
    engine.execute("""CREATE STREAM f (k VARCHAR, ts TIMESTAMP(3)) WITH (connector = 'file', path = 'bad.jsonl',
                      format = 'json')""")
    engine.execute("SET 'engine' = 'runtime'")  # incrementally: the rows before the bad line are written
    engine.execute("CREATE SINK copy WITH (connector = 'file', path = 'copy.jsonl', format = 'json') AS "
                   "SELECT k FROM f")
    engine.insert("ev", events(50, seed=1))
    with pytest.raises(dsms.SourceError, match="line 4"):
        engine.run_until_idle()  # reported once, after the others ran
    engine.run_until_idle()  # not again
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert shown["copy"]["status"] == "failed" and "bad.jsonl" in shown["copy"]["error"] \
        and "line 4" in shown["copy"]["error"]
    assert shown["per_key"]["status"] == "running" and shown["per_key"]["rows_in"] == 50
    engine.insert("ev", events(10, seed=2))
    engine.run_until_idle()
    assert engine.sink("per_key").stats()["rows_in"] == 60
    with pytest.raises(dsms.SqlError, match="failed and cannot be resumed"):
        engine.execute("RESUME QUERY copy")
    engine.close()
    # The rows before the bad line were written.
    assert (tmp_path / "copy.jsonl").read_text().count("\n") == 3


def test_drop_query_sink_and_materialized_view():
    engine = engine_with_views()
    q = engine.query("SELECT k FROM ev")
    assert [r["id"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == ["per_key", "windows", q.name]
    assert engine.execute(f"DROP QUERY {q.name}").message == f"Dropped query {q.name}"
    with pytest.raises(dsms.SqlError, match="no query 'nope'"):
        engine.execute("DROP QUERY nope")
    assert engine.execute("DROP QUERY IF EXISTS nope").message == "query nope does not exist"
    with pytest.raises(dsms.SqlError, match="cannot drop stream 'ev': materialized view 'per_key', materialized "
                                            "view 'windows' read it"):
        engine.execute("DROP STREAM ev")
    engine.execute("CREATE SINK s AS SELECT * FROM per_key WHERE n > 1")
    with pytest.raises(dsms.SqlError, match="sink 's' reads it"):
        engine.execute("DROP MATERIALIZED VIEW per_key")
    # A sink's (or a view's) query is the object: dropping the query drops it.
    assert engine.execute("DROP QUERY s").message == "Dropped sink s"
    assert engine.catalog.get("s") is None
    assert engine.execute("DROP MATERIALIZED VIEW per_key").message == "Dropped materialized view per_key"
    assert engine.execute("DROP MATERIALIZED VIEW windows").message == "Dropped materialized view windows"
    assert engine.execute("SHOW QUERIES").table.num_rows == 0
    assert engine.execute("DROP STREAM ev").message == "Dropped stream ev"


def test_pause_and_resume_name_unknown_queries_with_a_suggestion():
    engine = engine_with_views()
    with pytest.raises(dsms.SqlError, match="did you mean 'windows'"):
        engine.execute("PAUSE QUERY windws")


def test_pull_queries_read_the_current_contents_of_views():
    data = events(400, seed=13)
    engine = engine_with_views()
    engine.execute("CREATE VIEW busy AS SELECT k, n FROM per_key WHERE n > 70")
    for i, part in enumerate(pieces(data, seed=4, max_rows=80)):
        engine.insert("ev", part)
        engine.run_until_idle()
        seen = data.slice(0, sum(p.num_rows for p in list(pieces(data, seed=4, max_rows=80))[: i + 1]))
        # A pull query answers at once, from what the view holds now.
        got = engine.execute("SELECT k, sv FROM per_key WHERE n > 10")
        assert got.kind == "rows" and got.query is None
        assert rows(got.table) == rows(duck("SELECT k, SUM(v) AS sv FROM ev GROUP BY k HAVING COUNT(*) > 10",
                                            ev=seen))
    # Through a view, aggregated, and joining two materialized views.
    assert rows(engine.execute("SELECT * FROM busy").table) == \
        rows(duck("SELECT k, COUNT(*) AS n FROM ev GROUP BY k HAVING COUNT(*) > 70", ev=data))
    # Bounded, a pull query orders and limits its result as a batch query does.
    top = engine.execute("SELECT k, n FROM per_key ORDER BY n DESC, k LIMIT 3 OFFSET 1").table
    assert top.to_pylist() == duck("SELECT k, COUNT(*) AS n FROM ev GROUP BY k ORDER BY n DESC, k LIMIT 3 OFFSET 1",
                                   ev=data).to_pylist()
    with pytest.raises(dsms.SqlError, match="cannot order the result"):
        engine.execute("SELECT k FROM per_key ORDER BY nope")
    total = engine.execute("SELECT SUM(n) AS total FROM per_key").table
    assert total.to_pylist() == [{"total": 400}]
    joined = engine.execute("""SELECT p.k, p.n, w.top FROM per_key p JOIN windows w ON p.k = w.k
                               WHERE w.window_start = TIMESTAMP '2024-03-01 12:01:00'""").table
    windows_now = engine.execute("SELECT * FROM windows").table
    assert rows(joined) == rows(duck("""SELECT p.k, p.n, w.top FROM p JOIN w ON p.k = w.k
        WHERE w.window_start = TIMESTAMP '2024-03-01 12:01:00'""", p=duck(ORACLE_PER_KEY, ev=data), w=windows_now))
    assert joined.num_rows > 0
    # EMIT CHANGES asks for a continuous query over the view's definition instead.
    push = engine.execute("SELECT * FROM per_key EMIT CHANGES")
    assert push.kind == "query" and push.query.changelog == "updating"
    engine.run_until_idle()
    assert rows(push.query.snapshot()) == rows(duck(ORACLE_PER_KEY, ev=data))
    # A query that reads a stream is continuous too.
    assert engine.execute("SELECT * FROM per_key JOIN ev ON per_key.k = ev.k").kind == "query"


def test_show_progress_names_the_source_that_holds_a_window_back():
    clock = VirtualClock(int(BASE.timestamp() * 1e6))
    engine = dsms.Engine(clock=clock)
    engine.execute("""
      CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
        WITH (connector = 'memory');
      CREATE STREAM views (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
        WITH (connector = 'memory', idle_timeout = '30 s');
      CREATE MATERIALIZED VIEW per_minute AS
        SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (
          SELECT ad, ts FROM clicks UNION ALL SELECT ad, ts FROM views), DESCRIPTOR(ts), INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end""")
    engine.insert("clicks", [(1, "2024-03-01 12:00:10"), (1, "2024-03-01 12:01:30")])
    engine.insert("views", [(1, "2024-03-01 12:00:20")])
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM per_minute").table.num_rows == 0  # the window has not closed: why?
    progress = engine.execute("SHOW PROGRESS per_minute").table.to_pylist()
    window = next(r for r in progress if "WindowAggregate" in r["operator"])
    assert window["next_fire"] == "2024-03-01 12:00:59.999"  # the watermark at the window's last millisecond
    assert window["held_back_by"] == "views at 2024-03-01 12:00:18.000"
    assert window["watermark"] == "2024-03-01 12:00:18.000"
    assert window["state_rows"] >= 1 and window["state_bytes"] > 0
    sources = {r["operator"]: r for r in progress if "Source" in r["operator"]}
    assert {r["idle"] for r in sources.values()} == {"no"}
    # Thirty seconds without events from 'views': it is idle and stops holding the window back.
    clock.advance(30 * 1_000_000)
    engine.run_until_idle()
    progress = engine.execute("SHOW PROGRESS").table.to_pylist()
    assert [r["idle"] for r in progress if "Source(views" in r["operator"]] == ["yes"]
    assert engine.execute("SELECT * FROM per_minute").table.to_pylist() == [
        {"window_start": BASE, "n": 2}]
    window = next(r for r in progress if "WindowAggregate" in r["operator"])
    assert window["held_back_by"] == "clicks at 2024-03-01 12:01:28.000"
    assert window["next_fire"] == "2024-03-01 12:01:59.999"
    with pytest.raises(dsms.SqlError, match="no query 'nope'"):
        engine.execute("SHOW PROGRESS nope")


def test_what_a_standing_query_reads_cannot_be_replaced():
    engine = engine_with_views()
    engine.execute("CREATE VIEW big AS SELECT * FROM ev WHERE v > 50")
    engine.execute("CREATE MATERIALIZED VIEW big_keys AS SELECT k, COUNT(*) AS n FROM big GROUP BY k")
    with pytest.raises(dsms.SqlError, match="cannot replace view 'big': materialized view 'big_keys' reads it"):
        engine.execute("CREATE OR REPLACE VIEW big AS SELECT * FROM ev WHERE v > 60")
    with pytest.raises(dsms.SqlError, match="cannot replace stream 'ev'"):
        engine.execute("CREATE OR REPLACE STREAM ev (x INT) WITH (connector = 'memory')")
    # Without readers, a replaced stream is a new one: what the old one was given is gone.
    engine.execute("CREATE STREAM s (x INT) WITH (connector = 'memory')")
    engine.insert("s", [(1,)])
    engine.execute("CREATE OR REPLACE STREAM s (x INT, y INT) WITH (connector = 'memory')")
    engine.insert("s", [(2, 3)])
    q = engine.query("SELECT * FROM s")
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"x": 2, "y": 3}]
