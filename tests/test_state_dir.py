"""A state directory: the catalog and the standing queries come back after a restart, and a crash between
checkpoints neither loses nor duplicates output (file sinks included). Checked against DuckDB."""

import gc
import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

import dsms
from dsms.runtime.journal import Journal

from changes import final_table
from oracle import duck, events, rows

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k;
CREATE SINK per_10s WITH (connector = 'file', path = 'out/per_10s.jsonl', format = 'json') AS
  SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k;
CREATE SINK changes WITH (connector = 'file', path = 'out/changes.jsonl', format = 'changelog-json') AS
  SELECT k, MAX(price) AS top FROM ev GROUP BY k;
"""
ORACLE_PER_KEY = "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k"
ORACLE_PER_10S = """SELECT strftime(time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'),
                    '%Y-%m-%d %H:%M:%S.000') AS window_start, k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY ALL"""
ORACLE_TOP = "SELECT k, MAX(price) AS top FROM ev GROUP BY k"
DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")


def jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path)] if os.path.exists(path) else []


def changelog_final(path) -> pa.Table:
    """Apply a changelog-json file strictly (a retraction of a row never emitted fails)."""
    records = jsonl(path)
    return final_table([pa.Table.from_pylist([{"op": r.pop("op"), **r} for r in records])]) if records else pa.table({})


def check_outputs(engine, tmp_path, data):
    """Every output of DDL equals the oracle over ``data``: no row lost, none twice."""
    assert rows(engine.execute("SELECT * FROM per_key").table) == rows(duck(ORACLE_PER_KEY, ev=data))
    assert rows(pa.Table.from_pylist(jsonl(tmp_path / "out" / "per_10s.jsonl"))) == rows(duck(ORACLE_PER_10S, ev=data))
    assert rows(changelog_final(tmp_path / "out" / "changes.jsonl")) == rows(duck(ORACLE_TOP, ev=data))


def slices(table, n):
    step = -(-table.num_rows // n)
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


def test_a_restarted_engine_lists_and_runs_the_same_queries(tmp_path):
    data = events(800, seed=21)
    first, second = data.slice(0, 500), data.slice(500)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.execute("SET 'emit' = 'final'")
    engine.insert("ev", first)
    engine.run_until_idle()
    listed = engine.execute("SHOW QUERIES").table.select(["id", "kind", "status"]).to_pylist()
    engine.close()

    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path / "elsewhere"))
    assert engine.execute("SHOW QUERIES").table.select(["id", "kind", "status"]).to_pylist() == listed
    assert [o.name for o in engine.catalog.objects.values()] == ["ev", "per_key", "per_10s", "changes"]
    assert engine.catalog.setting("emit") == "final"
    # What the views held is back before anything runs again.
    assert rows(engine.execute("SELECT * FROM per_key").table) == rows(duck(ORACLE_PER_KEY, ev=first))
    engine.insert("ev", second)
    engine.end_input()
    engine.run_until_idle()
    check_outputs(engine, tmp_path, data)
    assert {r["status"] for r in engine.execute("SHOW QUERIES").table.to_pylist()} == {"finished"}
    engine.close()


@pytest.mark.parametrize("crashes", [[3], [1, 4], [0, 2, 5]])
def test_a_crash_between_checkpoints_loses_nothing_and_duplicates_nothing(tmp_path, crashes):
    data = events(1200, seed=22, disorder_s=3)
    parts = slices(data, 7)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.execute("SET 'checkpoint.interval' = '1 h'")  # only the explicit checkpoints below
    for i, part in enumerate(parts):
        engine.insert("ev", part)
        engine.run_until_idle()
        if i not in crashes:
            if i % 2 == 0:
                engine.checkpoint()
            continue
        # Output written after the last checkpoint is on disk when the engine dies.
        written = os.path.getsize(tmp_path / "out" / "per_10s.jsonl")
        del engine  # a crash: the engine is gone without close()
        gc.collect()
        engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
        # The sink is cut back to the checkpoint; the restored query writes the rest again.
        assert os.path.getsize(tmp_path / "out" / "per_10s.jsonl") <= written
        engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    check_outputs(engine, tmp_path, data)
    engine.close()


def test_output_past_the_checkpoint_is_cut_back_and_written_once(tmp_path):
    data = events(600, seed=23)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.insert("ev", data.slice(0, 200))
    engine.run_until_idle()
    engine.checkpoint()
    at_checkpoint = len(jsonl(tmp_path / "out" / "per_10s.jsonl"))
    engine.insert("ev", data.slice(200, 300))
    engine.run_until_idle()
    engine.scheduler.jobs["per_10s"].output.writer.flush()
    assert len(jsonl(tmp_path / "out" / "per_10s.jsonl")) > at_checkpoint  # windows past the checkpoint are out
    del engine  # a crash: the engine is gone without close()
    gc.collect()
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    assert len(jsonl(tmp_path / "out" / "per_10s.jsonl")) == at_checkpoint
    engine.insert("ev", data.slice(500))
    engine.end_input()
    engine.run_until_idle()
    check_outputs(engine, tmp_path, data)
    engine.close()


QUERIES = {
    "hop": """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts),
              INTERVAL '5' SECOND, INTERVAL '15' SECOND)) GROUP BY window_start, window_end, k""",
    "cumulate": """SELECT window_start, window_end, COUNT(DISTINCT k) AS keys, AVG(price) AS p FROM TABLE(CUMULATE(
                   TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND)) GROUP BY window_start, window_end""",
    "session": """SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(SESSION(TABLE ev PARTITION BY k,
                  DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY window_start, window_end, k""",
    "over": """SELECT k, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING
               AND CURRENT ROW) AS s FROM ev""",
    "topn": """SELECT * FROM (SELECT window_start, k, price, ROW_NUMBER() OVER (PARTITION BY window_start ORDER BY
               price DESC) AS rn FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '20' SECOND))) WHERE rn <= 2""",
    "dedup": "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev) WHERE rn = 1",
    "global_topn": """SELECT k, price FROM (SELECT k, price, ROW_NUMBER() OVER (ORDER BY price DESC) AS rn FROM ev)
                      WHERE rn <= 3""",
    "changes": """SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10'
                  SECOND)) GROUP BY window_start, window_end, k EMIT CHANGES""",
    "lateness": """SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                   GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL '5' SECOND""",
    "ordered_window": """SELECT window_start, k, FIRST_VALUE(v) AS fv, LISTAGG(CAST(v AS STRING)) AS lv, BIT_OR(v) AS bo
                         FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
                         GROUP BY window_start, window_end, k""",
    "ordered_group": """SELECT k, LAST_VALUE(price) AS lp, LISTAGG(k) AS lk, STDDEV_POP(price) AS sp,
                        SUM(DISTINCT v) AS sd FROM ev GROUP BY k""",
    "grouping_sets": """SELECT window_start, k, GROUPING(k) AS g, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev,
                        DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ROLLUP (k)""",
    "self_join": """SELECT a.k, a.v, b.v AS bv FROM ev a JOIN ev b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '1'
                    SECOND AND a.ts""",
}


def run_view(tmp_path, sql, data, crash_after=None):
    """The final contents of a materialized view over ``data`` fed in parts, crashing after part ``crash_after``."""
    state = str(tmp_path / ("state" if crash_after is None else f"state{crash_after}"))
    engine = dsms.Engine(state_dir=state)
    engine.execute(DDL.split(";")[0])
    engine.execute(f"CREATE MATERIALIZED VIEW mv AS {sql}")
    changes = []
    engine.subscribe("mv", changes.append)
    for i, part in enumerate(slices(data, 6)):
        engine.insert("ev", part)
        engine.run_until_idle()
        if i == crash_after:
            engine.checkpoint()
            del engine  # a crash: the engine is gone without close()
            gc.collect()
            engine = dsms.Engine(state_dir=state)
            changes = [engine.execute("SELECT * FROM mv").table]  # the restored contents, then what follows
            changes[0] = changes[0].add_column(0, "op", pa.repeat(pa.scalar("+I"), changes[0].num_rows))
            engine.subscribe("mv", changes.append, snapshot=False)
    engine.end_input()
    engine.run_until_idle()
    contents = engine.execute("SELECT * FROM mv").table
    engine.close()
    return contents, final_table(changes) if changes else None


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_every_operator_continues_from_its_checkpoint_as_if_nothing_happened(tmp_path, name):
    data = events(700, seed=24, disorder_s=3)
    whole, whole_changes = run_view(tmp_path, QUERIES[name], data)
    assert whole.num_rows >= 3
    for cut in (1, 4):
        resumed, resumed_changes = run_view(tmp_path, QUERIES[name], data, crash_after=cut)
        assert rows(resumed) == rows(whole), cut
        # The changes after the restart apply (strictly) to what the view held: none lost, none twice.
        assert rows(resumed_changes) == rows(whole), cut
    assert rows(whole_changes) == rows(whole)


def test_memory_stream_inserts_and_their_end_survive_a_restart(tmp_path):
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state)
    engine.execute("CREATE STREAM s (x BIGINT) WITH (connector = 'memory')")
    engine.execute("CREATE TABLE t (id INT, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')")
    engine.insert("s", [(1,), (2,)])
    engine.execute("INSERT INTO s VALUES (3)")
    engine.insert("t", [(1, "a"), (2, "b")])
    engine.insert("t", [(1, "c")])
    engine.delete("t", [(2,)])
    del engine  # a crash: the engine is gone without close()
    gc.collect()
    engine = dsms.Engine(state_dir=state)
    assert engine.query("SELECT x FROM s") is not None
    q, t = engine.query("SELECT SUM(x) AS total FROM s"), engine.query("SELECT * FROM t")
    engine.end_input("s")
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"total": 6}] and t.snapshot().to_pylist() == [{"id": 1, "v": "c"}]
    engine.close()
    engine = dsms.Engine(state_dir=state)
    q = engine.query("SELECT COUNT(*) AS n FROM s")
    engine.run_until_idle()
    assert q.done and q.snapshot().to_pylist() == [{"n": 3}]  # the stream had ended
    engine.close()


def test_a_torn_journal_frame_is_cut_off(tmp_path):
    path = str(tmp_path / "s.log")
    journal = Journal(path)
    journal.append(pa.table({"x": [1, 2]}))
    journal.append(pa.table({"x": [3]}))
    journal.close()
    whole = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(whole - 5)  # a crash in the middle of the second frame
    tables, ended, _ = Journal(path).load()
    assert [t.to_pylist() for t in tables] == [[{"x": 1}, {"x": 2}]] and not ended
    assert os.path.getsize(path) < whole - 5


def test_settings_paused_and_failed_status_come_back(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"k": "a"}\n{"k": 1\n')
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL.split(";")[0])
    engine.execute("SET 'emit' = 'changes'")  # the next view is planned to emit early
    engine.execute("""CREATE MATERIALIZED VIEW early AS SELECT window_start, COUNT(*) AS n
                      FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' HOUR)) GROUP BY window_start, window_end""")
    engine.execute("RESET 'emit'")
    engine.execute("SET 'checkpoint.interval' = '2 s'")
    engine.execute("CREATE STREAM f (k VARCHAR) WITH (connector = 'file', path = 'bad.jsonl', format = 'json')")
    engine.execute("CREATE MATERIALIZED VIEW copy AS SELECT k FROM f")
    engine.execute("PAUSE QUERY early")
    with pytest.raises(dsms.SourceError):
        engine.run_until_idle()
    engine.close()

    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    assert engine.catalog.setting("emit") == "final" and engine.catalog.setting("checkpoint.interval") == "2 s"
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["early"] == ("paused", "") and status["copy"][0] == "failed" and "line 2" in status["copy"][1]
    engine.execute("RESUME QUERY early")
    engine.insert("ev", events(20, seed=3))
    engine.run_until_idle()
    # Still planned with EMIT CHANGES: the hour-long window shows before it closes.
    assert engine.execute("SELECT n FROM early").table.to_pylist() == [{"n": 20}]
    engine.close()


def test_a_dropped_object_created_again_starts_afresh(tmp_path):
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state)
    engine.execute(DDL.split(";")[0])
    engine.execute("CREATE MATERIALIZED VIEW mv AS SELECT COUNT(*) AS n FROM ev")
    data = events(30, seed=4)
    engine.insert("ev", data)
    engine.run_until_idle()
    engine.execute("DROP MATERIALIZED VIEW mv")
    engine.execute("CREATE MATERIALIZED VIEW mv AS SELECT COUNT(*) AS n FROM ev WHERE v < 0")
    engine.run_until_idle()
    del engine  # a crash: the engine is gone without close()
    gc.collect()
    engine = dsms.Engine(state_dir=state)
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM mv").table.to_pylist() == duck("SELECT COUNT(*) AS n FROM ev WHERE v < 0",
                                                                        ev=data).to_pylist()
    assert sorted(os.listdir(os.path.join(state, "queries"))) == [engine.queries.running["mv"].uid]
    engine.close()


def test_a_second_engine_on_the_same_directory_is_refused(tmp_path):
    engine = dsms.Engine(state_dir=str(tmp_path))
    with pytest.raises(dsms.DsmsError, match="is in use by another engine"):
        dsms.Engine(state_dir=str(tmp_path))
    engine.close()
    dsms.Engine(state_dir=str(tmp_path)).close()


# -- dsms run --state-dir -----------------------------------------------------------------------

SCRIPT = """
SET 'checkpoint.interval' = '100 ms';
SET 'engine' = 'runtime';
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = 'ev.jsonl', format = 'json');
CREATE STREAM extra (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3)) WITH (connector = 'memory');
INSERT INTO extra VALUES ('x', 1, 1.0, TIMESTAMP '2024-03-01 12:00:00'), ('y', 2, 2.0, TIMESTAMP '2024-03-01 12:00:01');
CREATE SINK per_10s WITH (connector = 'file', path = 'out/per_10s.jsonl', format = 'json') AS
  SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k;
CREATE SINK changes WITH (connector = 'file', path = 'out/changes.jsonl', format = 'changelog-json') AS
  SELECT k, MAX(price) AS top FROM (SELECT k, price FROM ev UNION ALL SELECT k, price FROM extra) GROUP BY k;
"""


def write_events(tmp_path, data):
    with open(tmp_path / "ev.jsonl", "w") as f:
        for r in data.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")


def check_run_outputs(tmp_path, data):
    extra = pa.table({"k": ["x", "y"], "price": [1.0, 2.0]})
    assert rows(pa.Table.from_pylist(jsonl(tmp_path / "out" / "per_10s.jsonl"))) == rows(duck(ORACLE_PER_10S, ev=data))
    assert rows(changelog_final(tmp_path / "out" / "changes.jsonl")) == rows(duck(
        "SELECT k, MAX(price) AS top FROM (SELECT k, price FROM ev UNION ALL SELECT * FROM extra) GROUP BY k",
        ev=data, extra=extra))


def start_run(tmp_path, *extra):
    return subprocess.Popen([DSMS, "run", str(tmp_path / "job.sql"), "--state-dir", str(tmp_path / "state"),
                             "--batch-size", "10", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_for_checkpoints(tmp_path, proc, count=3, timeout=60):
    """Until the sink's query has checkpointed ``count`` times (it keeps running)."""
    seen, deadline = set(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        folder = tmp_path / "state" / "queries"
        for uid in os.listdir(folder) if folder.exists() else ():
            seen |= {(uid, n) for n in os.listdir(folder / uid) if not n.endswith(".tmp")}
        if len(seen) >= count * 2:
            return
        time.sleep(0.02)
    raise AssertionError("no checkpoints")


@pytest.mark.parametrize("how", ["kill", "interrupt", "terminate"])
def test_a_killed_dsms_run_continues_from_its_checkpoints(tmp_path, how):
    data = events(6000, seed=25, span_s=1200)
    write_events(tmp_path, data)
    (tmp_path / "job.sql").write_text(SCRIPT)
    proc = start_run(tmp_path)
    wait_for_checkpoints(tmp_path, proc)
    sig = {"kill": signal.SIGKILL, "interrupt": signal.SIGINT, "terminate": signal.SIGTERM}[how]
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    # Ctrl-C and SIGTERM stop between two turns: a final checkpoint, the summary, exit 128 + signal.
    assert proc.returncode == (-signal.SIGKILL if how == "kill" else 128 + sig), err
    assert "Traceback" not in err
    # Part of the output is there; the run goes on from the checkpoints, with the same command.
    written = (tmp_path / "out" / "per_10s.jsonl").read_bytes()  # a killed writer may leave half a line
    assert written.count(b"\n") < duck(ORACLE_PER_10S, ev=data).num_rows
    proc = start_run(tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    check_run_outputs(tmp_path, data)
    # Once more: everything has finished, nothing is inserted or written again.
    before = (tmp_path / "out" / "changes.jsonl").read_text()
    proc = start_run(tmp_path, "--quiet")
    proc.communicate(timeout=120)
    assert proc.returncode == 0 and (tmp_path / "out" / "changes.jsonl").read_text() == before
    check_run_outputs(tmp_path, data)


def test_dsms_run_refuses_another_script_on_the_same_state_dir(tmp_path):
    write_events(tmp_path, events(50, seed=26))
    (tmp_path / "job.sql").write_text(SCRIPT)
    assert subprocess.run([DSMS, "run", str(tmp_path / "job.sql"), "--state-dir", str(tmp_path / "state"), "-q"],
                          capture_output=True, timeout=120).returncode == 0
    (tmp_path / "job.sql").write_text(SCRIPT.replace("'100 ms'", "'200 ms'"))
    done = subprocess.run([DSMS, "run", str(tmp_path / "job.sql"), "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "the script differs" in done.stderr and "statement 1" in done.stderr
    # Without a script, the directory alone runs what it holds.
    done = subprocess.run([DSMS, "run", "--state-dir", str(tmp_path / "state"), "-q"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_a_query_whose_input_cannot_be_restored_fails_alone(tmp_path):
    write_events(tmp_path, events(300, seed=27))
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    # ev, extra and per_10s, with ev watching its file (the query keeps running)
    engine.execute(SCRIPT.split(";", 1)[1].split("CREATE SINK changes")[0].replace("format = 'json')",
                                                                                   "format = 'json', watch = 'true')", 1))
    engine.execute("CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM extra")
    engine.run_until_idle()
    engine.close()
    write_events(tmp_path, events(10, seed=28))  # the file is replaced by a shorter one
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["per_10s"][0] == "failed" and "shorter" in status["per_10s"][1]
    assert status["n"] == ("running", "")
    engine.insert("extra", [("z", 1, 1.0, "2024-03-01 12:00:00")])
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 3}]
    engine.close()


def test_a_replaced_stream_comes_back_as_replaced(tmp_path):
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state)
    engine.execute("CREATE STREAM s (x INT) WITH (connector = 'memory')")
    engine.insert("s", [(1,)])
    engine.execute("CREATE VIEW v AS SELECT x FROM s")
    engine.execute("DROP VIEW v")
    engine.execute("CREATE OR REPLACE STREAM s (x INT, y VARCHAR) WITH (connector = 'memory')")
    engine.insert("s", [(2, "b")])
    engine.execute("CREATE OR REPLACE VIEW v AS SELECT y FROM s")
    engine.close()
    engine = dsms.Engine(state_dir=state)
    assert [o.name for o in engine.catalog.objects.values()] == ["s", "v"]
    q = engine.query("SELECT * FROM v")
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"y": "b"}]
    assert len(os.listdir(os.path.join(state, "streams"))) == 1
    engine.close()


def test_a_checkpoint_taken_for_another_plan_is_not_restored(tmp_path):
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state)
    engine.execute(DDL.split(";")[0])
    engine.execute("CREATE MATERIALIZED VIEW mv AS SELECT k, COUNT(*) AS n FROM ev GROUP BY k")
    engine.close()
    catalog = os.path.join(state, "catalog.json")
    saved = json.load(open(catalog))
    saved["objects"][1]["sql"] = saved["objects"][1]["sql"].replace("COUNT(*)", "SUM(v)")  # as if planned anew
    json.dump(saved, open(catalog, "w"))
    engine = dsms.Engine(state_dir=state)
    shown = engine.execute("SHOW QUERIES").table.to_pylist()
    assert shown[0]["status"] == "failed" and "planned differently" in shown[0]["error"]
    engine.close()


def test_a_batch_route_query_cut_short_runs_again_and_a_finished_one_stays_finished(tmp_path):
    # On DuckDB a query is one statement with no state between turns: a restart before it finished runs
    # it again from the start (its sink cut back to empty), one after it finished does not run again.
    data = events(3000, seed=26, span_s=600)
    write_events(tmp_path, data)
    script = SCRIPT.replace("SET 'engine' = 'runtime';", "SET 'engine' = 'duckdb';").replace(
        "UNION ALL SELECT k, price FROM extra", "")
    engine = dsms.Engine(state_dir=str(tmp_path / "state"), base_dir=str(tmp_path))
    engine.execute(script)
    assert engine.execute("SHOW QUERIES").table.column("status").to_pylist() == ["running", "running"]
    del engine  # a crash before its first turn
    gc.collect()
    engine = dsms.Engine(state_dir=str(tmp_path / "state"), base_dir=str(tmp_path))
    engine.run_until_idle()
    shown = engine.execute("SHOW QUERIES").table.to_pylist()
    assert [r["status"] for r in shown] == ["finished", "finished"]
    assert "duckdb" in engine.execute("SHOW PROGRESS per_10s").table.column("operator")[0].as_py()
    engine.close()
    check_batch_outputs(tmp_path, data)
    before = (tmp_path / "out" / "per_10s.jsonl").read_bytes()
    engine = dsms.Engine(state_dir=str(tmp_path / "state"), base_dir=str(tmp_path))
    engine.run_until_idle()
    assert [r["status"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == ["finished", "finished"]
    engine.close()
    assert (tmp_path / "out" / "per_10s.jsonl").read_bytes() == before
    check_batch_outputs(tmp_path, data)


def check_batch_outputs(tmp_path, data):
    assert rows(pa.Table.from_pylist(jsonl(tmp_path / "out" / "per_10s.jsonl"))) == rows(duck(ORACLE_PER_10S, ev=data))
    assert rows(changelog_final(tmp_path / "out" / "changes.jsonl")) == rows(duck(
        "SELECT k, MAX(price) AS top FROM ev GROUP BY k", ev=data))
