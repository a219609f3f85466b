"""Continuous INSERT INTO … SELECT and EXECUTE STATEMENT SET (dsms/insert_jobs.py).

Every result is checked against DuckDB batch SQL over the same input, or
against rows computed by hand.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

import dsms

from insert_helpers import clicks, memory_engine, oracle, rows_of

# -- into memory streams -----------------------------------------------------------------------


def test_insert_select_keeps_feeding_a_memory_stream_that_other_queries_read():
    engine = memory_engine()
    engine.execute("CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n, SUM(cost) AS cost "
                   "FROM expensive GROUP BY ad")
    result = engine.execute("INSERT INTO expensive SELECT ad, cost, ts FROM clicks WHERE cost >= 50")
    assert result.message == "Started query insert_1: INSERT INTO expensive"
    data = clicks(300, seed=1)
    for part in (data[:100], data[100:250], data[250:]):  # rows that come after the INSERT statement
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in part])
        engine.run_until_idle()
    want = oracle(data, "SELECT ad, count(*), sum(cost) FROM clicks WHERE cost >= 50 GROUP BY ad")
    assert rows_of(engine.execute("SELECT * FROM per_ad").table) == want
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert (shown["insert_1"]["kind"], shown["insert_1"]["status"], shown["insert_1"]["rows_in"]) == \
        ("insert", "running", 300)
    assert shown["insert_1"]["rows_out"] == sum(1 for r in data if r["cost"] >= 50)


def test_insert_values_still_inserts_at_once():
    engine = memory_engine()
    assert engine.execute("INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00')").message == \
        "Inserted 1 row into clicks"
    assert engine.execute("INSERT INTO expensive SELECT * FROM (VALUES (2, 7, TIMESTAMP '2024-05-01 09:00:01'))"
                          ).message == "Inserted 1 row into expensive"
    assert [r["id"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == []


def test_a_windowed_insert_into_a_memory_table_by_key_upserts():
    engine = memory_engine()
    engine.execute("""CREATE TABLE totals (ad INT, n BIGINT, PRIMARY KEY (ad) NOT ENFORCED) WITH (connector = 'memory');
                      INSERT INTO totals SELECT ad, COUNT(*) FROM clicks GROUP BY ad""")
    q = engine.query("SELECT * FROM totals")
    data = clicks(200, seed=2)
    engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data[:120]])
    engine.run_until_idle()
    engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data[120:]])
    engine.run_until_idle()
    assert rows_of(q.snapshot()) == oracle(data, "SELECT ad, count(*) FROM clicks GROUP BY ad")


def test_pause_resume_and_drop_an_insert():
    engine = memory_engine()
    engine.execute("INSERT INTO expensive SELECT * FROM clicks")
    q = engine.query("SELECT ad FROM expensive")
    assert engine.execute("PAUSE QUERY insert_1").message == "Paused query insert_1"
    engine.execute("INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00')")
    engine.run_until_idle()
    assert q.snapshot().num_rows == 0
    engine.execute("RESUME QUERY insert_1")
    engine.run_until_idle()
    assert q.snapshot().column("ad").to_pylist() == [1]
    with pytest.raises(dsms.SqlError, match="query 'insert_1' inserts into it"):
        engine.execute("DROP STREAM expensive")
    assert engine.execute("DROP QUERY insert_1").message == "Dropped query insert_1"
    engine.execute("INSERT INTO clicks VALUES (2, 5, TIMESTAMP '2024-05-01 09:00:01')")
    engine.run_until_idle()
    assert q.snapshot().column("ad").to_pylist() == [1]


# -- into tables declared with a sink connector -------------------------------------------------

TUMBLE = ("SELECT window_start, ad, COUNT(*) AS n, SUM(cost) AS cost "
          "FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end, ad")
TUMBLE_ORACLE = ("SELECT strftime(time_bucket(INTERVAL 10 SECOND, ts), '%Y-%m-%d %H:%M:%S.000'), ad, count(*), "
                 "sum(cost) FROM clicks GROUP BY 1, ad")


@pytest.mark.parametrize("engine_name", ["runtime", "duckdb"])
def test_insert_into_a_file_table_on_each_route(tmp_path, engine_name):
    data = clicks(400, seed=3)
    (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    with dsms.Engine(base_dir=str(tmp_path)) as engine:
        engine.execute(f"""
            SET 'engine' = '{engine_name}';
            CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
              WITH (connector = 'file', path = 'clicks.jsonl', format = 'json');
            CREATE TABLE per_window (w TIMESTAMP(3), ad INT, n BIGINT, cost BIGINT)
              WITH (connector = 'filesystem', path = 'out.jsonl', format = 'json');
            INSERT INTO per_window {TUMBLE};""")
        engine.run_until_idle()
        status = engine.execute("SHOW QUERIES").table.to_pylist()[0]
        assert (status["id"], status["status"]) == ("insert_1", "finished")  # bounded input: the job ends
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted((r["w"], r["ad"], r["n"], r["cost"]) for r in written) == oracle(data, TUMBLE_ORACLE)
    assert [r["w"] for r in written] == sorted(r["w"] for r in written)  # in window order, as windows fire


def test_insert_into_print_and_blackhole_tables(capsys):
    engine = memory_engine()
    engine.execute("""
        CREATE TABLE shown (ad INT, cost BIGINT) WITH (connector = 'print', 'print-identifier' = 'out');
        CREATE TABLE nothing (ad INT) WITH (connector = 'blackhole');
        INSERT INTO shown SELECT ad, cost FROM clicks WHERE cost > 10;
        INSERT INTO nothing SELECT ad FROM clicks;
        INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00'), (2, 50, TIMESTAMP '2024-05-01 09:00:01');""")
    engine.run_until_idle()
    assert capsys.readouterr().out == "out> +I[2, 50]\n"
    shown = {r["id"]: r["rows_out"] for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert shown == {"insert_1": 1, "insert_2": 2}
    with pytest.raises(dsms.SqlError, match="'shown' cannot be read: its connector 'print' is only written"):
        engine.execute("SELECT * FROM shown")


def test_insert_columns_by_name_and_casts():
    engine = memory_engine()
    engine.execute("CREATE STREAM wide (note VARCHAR, cost DOUBLE, ad BIGINT) WITH (connector = 'memory');"
                   "INSERT INTO wide (ad, cost) SELECT ad, cost FROM clicks")
    q = engine.query("SELECT * FROM wide")
    engine.execute("INSERT INTO clicks VALUES (3, 7, TIMESTAMP '2024-05-01 09:00:00')")
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"note": None, "cost": 7.0, "ad": 3}]


@pytest.mark.parametrize("sql, message", [
    ("INSERT INTO clicks SELECT * FROM clicks", "reads 'clicks' itself"),
    ("INSERT INTO expensive SELECT ad FROM clicks", "INSERT gives 1 values per row, but 3 columns are expected"),
    ("INSERT INTO expensive (ad, price) SELECT ad, cost FROM clicks", "unknown column 'price' in INSERT"),
    ("INSERT INTO expensive SELECT ad, COUNT(*), MAX(ts) FROM clicks GROUP BY ad",
     "stream 'expensive' is append-only, but this query's result is updating"),
    ("INSERT INTO v SELECT * FROM clicks", "'v' is a view, not a stream or table or sink"),
    ("INSERT INTO nowhere SELECT * FROM clicks", "unknown"),
])
def test_inserts_that_cannot_run_are_refused(sql, message):
    engine = memory_engine()
    engine.execute("CREATE VIEW v AS SELECT * FROM clicks")
    with pytest.raises(dsms.SqlError, match=message):
        engine.execute(sql)


def test_a_file_has_one_writer(tmp_path):
    engine = memory_engine(base_dir=str(tmp_path))
    engine.execute("CREATE TABLE out (ad INT) WITH (connector = 'file', path = 'out.jsonl', format = 'json');"
                   "INSERT INTO out SELECT ad FROM clicks")
    with pytest.raises(dsms.SqlError, match="query 'insert_1' already writes it"):
        engine.execute("INSERT INTO out SELECT ad + 1 FROM clicks")
    with pytest.raises(dsms.SqlError, match="a statement set writes the same file twice"):
        engine.execute("DROP QUERY insert_1; EXECUTE STATEMENT SET BEGIN INSERT INTO out SELECT ad FROM clicks; "
                       "INSERT INTO out SELECT ad FROM clicks; END")


# -- statement sets ------------------------------------------------------------------------------

STATEMENT_SET = """EXECUTE STATEMENT SET BEGIN
  INSERT INTO cheap SELECT ad, cost, ts FROM clicks WHERE cost < 50;
  INSERT INTO expensive SELECT ad, cost, ts FROM clicks WHERE cost >= 50;
  INSERT INTO windows SELECT window_start, ad, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts),
    INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad;
END"""


def statement_set_engine(**kw) -> dsms.Engine:
    engine = memory_engine(**kw)
    engine.execute("""CREATE STREAM cheap (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
                      CREATE STREAM windows (w TIMESTAMP(3), ad INT, n BIGINT) WITH (connector = 'memory');""")
    return engine


def test_a_statement_set_is_one_job_that_reads_each_source_once():
    engine = statement_set_engine()
    plan = engine.execute("EXPLAIN " + STATEMENT_SET).message
    assert plan.count("Source(clicks") == 1  # one scan, shared by the three inserts
    assert plan.splitlines()[-3:] == ["#1 -> INSERT INTO cheap", "#2 -> INSERT INTO expensive",
                                      "#4 -> INSERT INTO windows"]
    assert engine.execute(STATEMENT_SET).message == \
        "Started query statement_set_1: 3 INSERTs into cheap, expensive, windows"
    reads = {n: engine.query(f"SELECT * FROM {n}") for n in ("cheap", "expensive", "windows")}
    data = clicks(500, seed=4)
    engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data])
    engine.end_input("clicks")
    engine.run_until_idle()
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    job = shown["statement_set_1"]
    assert (job["kind"], job["status"], job["rows_in"]) == ("statement set", "finished", 500)  # read once
    assert [op.source.name for op in engine.queries.running["statement_set_1"].job.plan.sources] == ["clicks"]
    assert rows_of(reads["cheap"].snapshot()) == oracle(data, "SELECT ad, cost, ts FROM clicks WHERE cost < 50")
    assert rows_of(reads["expensive"].snapshot()) == oracle(data, "SELECT * FROM clicks WHERE cost >= 50")
    assert rows_of(reads["windows"].snapshot()) == oracle(
        data, "SELECT time_bucket(INTERVAL 10 SECOND, ts), ad, count(*) FROM clicks GROUP BY 1, ad")
    assert job["rows_out"] == len(data) + len(oracle(data, "SELECT DISTINCT time_bucket(INTERVAL 10 SECOND, ts), "
                                                           "ad FROM clicks"))


def test_the_sql_client_spelling_of_a_statement_set():
    engine = statement_set_engine()
    engine.execute("BEGIN STATEMENT SET; INSERT INTO cheap SELECT * FROM clicks; "
                   "INSERT INTO expensive SELECT * FROM clicks; END;")
    engine.execute("INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00')")
    engine.run_until_idle()
    assert engine.execute("SHOW QUERIES").table.to_pylist()[0]["rows_out"] == 2


# -- state directories: restored, exactly once ---------------------------------------------------

CRASHING = """
import os, sys
import dsms
engine = dsms.Engine(state_dir=sys.argv[1])
engine.execute('''SET 'checkpoint.interval' = '1 h';
  CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
  CREATE STREAM expensive (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
  CREATE STREAM cheap (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
  CREATE STREAM windows (w TIMESTAMP(3), ad INT, n BIGINT) WITH (connector = 'memory');
  INSERT INTO expensive SELECT * FROM clicks WHERE cost >= 50;''')
engine.execute(sys.argv[2])
engine.insert("clicks", [tuple(r) for r in __import__("json").loads(sys.argv[3])])
engine.run_until_idle()
for log in engine.scheduler.memory.values():
    log.sync()
os._exit(0)  # a crash: no checkpoint since the queries started, the inserts' rows already in the journal
"""


def test_a_restored_insert_into_a_memory_stream_writes_each_row_once(tmp_path):
    state = str(tmp_path / "state")
    first, second = clicks(150, seed=6), clicks(60, seed=7)
    statement_set = ("EXECUTE STATEMENT SET BEGIN INSERT INTO cheap SELECT * FROM clicks WHERE cost < 50; "
                     "INSERT INTO windows SELECT ts, ad, cost FROM clicks WHERE ad = 1; END")
    rows = json.dumps([[r["ad"], r["cost"], r["ts"]] for r in first])
    done = subprocess.run([sys.executable, "-c", CRASHING, state, statement_set, rows], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with dsms.Engine(state_dir=state) as engine:
        engine.run_until_idle()  # each insert replays from its checkpoint; rows already appended are skipped
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in second])
        engine.run_until_idle()
        expensive = engine.query("SELECT ad, cost, ts FROM expensive")
        cheap = engine.query("SELECT ad, cost, ts FROM cheap")
        ones = engine.query("SELECT ad, n, w FROM windows")
        engine.run_until_idle()
        want = first + second
        assert rows_of(expensive.snapshot()) == oracle(want, "SELECT * FROM clicks WHERE cost >= 50")
        assert rows_of(cheap.snapshot()) == oracle(want, "SELECT * FROM clicks WHERE cost < 50")
        assert rows_of(ones.snapshot()) == oracle(want, "SELECT ad, cost, ts FROM clicks WHERE ad = 1")


def test_an_insert_into_a_file_table_continues_after_a_restart(tmp_path):
    state, out = str(tmp_path / "state"), tmp_path / "out.jsonl"
    first, second = clicks(120, seed=8), clicks(80, seed=9)
    ddl = f"""CREATE TABLE out (ad INT, cost BIGINT) WITH (connector = 'file', path = '{out}', format = 'json');
              INSERT INTO out SELECT ad, cost FROM clicks WHERE cost > 30"""
    with memory_engine(state_dir=state) as engine:
        engine.execute(ddl)
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in first])
        engine.run_until_idle()
    with dsms.Engine(state_dir=state) as engine:
        assert [r["id"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == ["insert_1"]
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in second])
        engine.run_until_idle()
    written = sorted((r["ad"], r["cost"]) for r in map(json.loads, out.read_text().splitlines()))
    assert written == oracle(first + second, "SELECT ad, cost FROM clicks WHERE cost > 30")


# -- Kafka and PostgreSQL ------------------------------------------------------------------------


def test_insert_into_a_kafka_table_exactly_once(kafka_broker, tmp_path):
    from kafka_helpers import consume_all, new_topic, values

    topic = new_topic(kafka_broker, "insert-into", 1)
    data = clicks(200, seed=10)
    with memory_engine(state_dir=str(tmp_path / "state")) as engine:
        engine.execute(f"""CREATE TABLE to_kafka (w TIMESTAMP(3), ad INT, n BIGINT, cost BIGINT) WITH (
                             connector = 'kafka', topic = '{topic}', format = 'json',
                             'properties.bootstrap.servers' = '{kafka_broker}',
                             'sink.delivery-guarantee' = 'exactly-once', 'scan.startup.mode' = 'earliest-offset');
                           INSERT INTO to_kafka {TUMBLE}""")
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data])
        engine.end_input("clicks")
        engine.run_until_idle()
    expected = oracle(data, TUMBLE_ORACLE)
    got = values(consume_all(kafka_broker, topic, expect=len(expected)))
    assert sorted((r["w"], r["ad"], r["n"], r["cost"]) for r in got) == expected


def test_insert_into_a_jdbc_table(postgres):
    from postgres_helpers import execute, fetch, jdbc_options, unique

    table = unique("per_ad")
    execute(postgres, f"CREATE TABLE {table} (ad int PRIMARY KEY, n bigint, cost bigint)")
    data = clicks(300, seed=11)
    with memory_engine() as engine:
        engine.execute(f"""CREATE TABLE per_ad (ad INT, n BIGINT, cost BIGINT, PRIMARY KEY (ad) NOT ENFORCED)
                             WITH ({jdbc_options(postgres, table)});
                           INSERT INTO per_ad SELECT ad, COUNT(*), SUM(cost) FROM clicks GROUP BY ad""")
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data[:100]])
        engine.run_until_idle()
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data[100:]])
        engine.run_until_idle()
    assert fetch(postgres, f"SELECT * FROM {table}") == oracle(
        data, "SELECT ad, count(*), sum(cost) FROM clicks GROUP BY ad")


def test_dsms_run_again_on_its_state_dir_does_not_insert_twice(tmp_path):
    from dsms.cli import run_script

    data = clicks(150, seed=12)
    (tmp_path / "clicks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    script = f"""
        CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH (connector = 'file', path = 'clicks.jsonl', format = 'json');
        CREATE TABLE per_window (w TIMESTAMP(3), ad INT, n BIGINT, cost BIGINT)
          WITH (connector = 'file', path = 'out.jsonl', format = 'json');
        CREATE STREAM copy WITH (connector = 'file', path = 'copy.jsonl', format = 'json') AS
          SELECT ad, cost FROM clicks WHERE cost > 50;
        EXECUTE STATEMENT SET BEGIN INSERT INTO per_window {TUMBLE}; END;"""
    for _ in range(2):
        assert run_script(script, str(tmp_path), quiet=True, state_dir=str(tmp_path / "state")) == 0
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted((r["w"], r["ad"], r["n"], r["cost"]) for r in written) == oracle(data, TUMBLE_ORACLE)
    copied = [tuple(json.loads(line).values()) for line in (tmp_path / "copy.jsonl").read_text().splitlines()]
    assert sorted(copied) == oracle(data, "SELECT ad, cost FROM clicks WHERE cost > 50")


def test_an_insert_that_would_feed_its_own_input_is_refused():
    engine = memory_engine()
    engine.execute("CREATE STREAM third (ad INT, cost BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');"
                   "INSERT INTO expensive SELECT * FROM clicks; INSERT INTO third SELECT * FROM expensive")
    with pytest.raises(dsms.SqlError, match="query 'insert_1' inserts into 'expensive', query 'insert_2' inserts "
                                            "into 'third', which this query reads"):
        engine.execute("INSERT INTO clicks SELECT * FROM third")
    engine.execute("DROP QUERY insert_2")
    engine.execute("INSERT INTO clicks SELECT * FROM third")  # no longer a loop


def test_a_statement_set_into_files_and_kafka_continues_after_a_restart(tmp_path, kafka_broker):
    from kafka_helpers import consume_all, new_topic, values

    state, out = str(tmp_path / "state"), tmp_path / "cheap.jsonl"
    topic = new_topic(kafka_broker, "statement-set", 1)
    first, second = clicks(120, seed=13), clicks(90, seed=14)
    with memory_engine(state_dir=state) as engine:
        engine.execute(f"""
            CREATE TABLE cheap (ad INT, cost BIGINT) WITH (connector = 'file', path = '{out}', format = 'json');
            CREATE TABLE dear (ad INT, cost BIGINT) WITH (connector = 'kafka', topic = '{topic}', format = 'json',
              'properties.bootstrap.servers' = '{kafka_broker}');
            EXECUTE STATEMENT SET BEGIN
              INSERT INTO cheap SELECT ad, cost FROM clicks WHERE cost < 50;
              INSERT INTO dear SELECT ad, cost FROM clicks WHERE cost >= 50;
            END""")
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in first])
        engine.run_until_idle()
    with dsms.Engine(state_dir=state) as engine:
        assert [r["id"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == ["statement_set_1"]
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in second])
        engine.run_until_idle()
    everything = first + second
    written = sorted((r["ad"], r["cost"]) for r in map(json.loads, out.read_text().splitlines()))
    assert written == oracle(everything, "SELECT ad, cost FROM clicks WHERE cost < 50")
    dear = oracle(everything, "SELECT ad, cost FROM clicks WHERE cost >= 50")
    got = values(consume_all(kafka_broker, topic, expect=len(dear)))
    assert sorted((r["ad"], r["cost"]) for r in got) == dear


def test_insert_into_an_existing_sink(tmp_path, capsys):
    engine = memory_engine(base_dir=str(tmp_path))
    engine.execute("""
        CREATE SINK shown WITH (connector = 'print') AS SELECT ad, cost FROM clicks WHERE ad = 1;
        CREATE SINK kept AS SELECT ad FROM clicks;
        CREATE SINK filed WITH (connector = 'file', path = 'f.jsonl', format = 'json') AS SELECT ad FROM clicks;
        INSERT INTO shown SELECT ad + 100, cost FROM clicks WHERE ad = 2;""")
    engine.execute("INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00'), "
                   "(2, 7, TIMESTAMP '2024-05-01 09:00:01')")
    engine.run_until_idle()
    assert sorted(capsys.readouterr().out.splitlines()) == ["+I[1, 5]", "+I[102, 7]"]
    with pytest.raises(dsms.SqlError, match="cannot insert into sink 'kept': it keeps its own query's results"):
        engine.execute("INSERT INTO kept SELECT ad FROM clicks")
    with pytest.raises(dsms.SqlError, match="query 'filed' already writes it"):
        engine.execute("INSERT INTO filed SELECT ad FROM clicks")


def test_dsms_explain_shows_inserts_without_starting_them(tmp_path):
    from dsms.cli import explain_script

    (tmp_path / "s.jsonl").write_text('{"k": 1, "ts": "2024-01-01 00:00:01"}\n')
    out = io.StringIO()
    assert explain_script("""
        CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH (connector = 'file', path = 's.jsonl', format = 'json');
        CREATE TABLE out (k INT) WITH (connector = 'file', path = 'out.jsonl', format = 'json');
        INSERT INTO out SELECT k FROM s;
        CREATE TABLE t WITH (connector = 'file', path = 't.jsonl', format = 'json') AS SELECT k FROM s;
        EXECUTE STATEMENT SET BEGIN INSERT INTO out SELECT k FROM t; END;""", str(tmp_path), out=out) == 0
    text = out.getvalue()
    assert "\n-> INSERT INTO out" in text and "#0 -> INSERT INTO out" in text and "Source(t, file, json)" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]  # nothing was written


def test_the_shell_waits_for_the_end_of_a_statement_set():
    from dsms.repl.tokens import statement_complete

    assert not statement_complete("EXECUTE STATEMENT SET BEGIN\n  INSERT INTO a SELECT * FROM s;")
    assert not statement_complete("BEGIN STATEMENT SET;\nINSERT INTO a SELECT * FROM s;\n")
    assert statement_complete("EXECUTE STATEMENT SET BEGIN\n  INSERT INTO a SELECT * FROM s;\nEND;")
    assert statement_complete("BEGIN STATEMENT SET; INSERT INTO a SELECT * FROM s; END;")
    assert statement_complete("SET 'emit' = 'changes';")


def test_a_statement_set_whose_inserts_feed_each_other_in_a_loop_is_refused():
    engine = statement_set_engine()
    with pytest.raises(dsms.SqlError, match="INSERT 1 of this statement set inserts into 'cheap', which this "
                                            "query reads"):
        engine.execute("EXECUTE STATEMENT SET BEGIN INSERT INTO cheap SELECT * FROM expensive; "
                       "INSERT INTO expensive SELECT * FROM cheap; END")
    engine.execute("EXECUTE STATEMENT SET BEGIN INSERT INTO cheap SELECT * FROM clicks; "
                   "INSERT INTO expensive SELECT * FROM cheap; END")  # a chain, not a loop
