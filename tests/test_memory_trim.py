"""Memory streams stay flat: the log and its journal drop what every reader has read and a checkpoint
covers, and a restart around trimming still replays exactly what each query needs. Outputs are checked
against DuckDB over the same events."""

import gc
import json
import os

import pyarrow as pa
import pytest

import dsms
from dsms.runtime import journal as journal_module

from oracle import duck, events, rows

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
SET 'memory.retention' = '0';
SET 'checkpoint.interval' = '1 h';
CREATE MATERIALIZED VIEW per_key AS SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k;
CREATE SINK per_10s WITH (connector = 'file', path = 'out/per_10s.jsonl', format = 'json') AS
  SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k;
"""
ORACLE_PER_KEY = "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k"
ORACLE_PER_10S = """SELECT strftime(time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'),
                    '%Y-%m-%d %H:%M:%S.000') AS window_start, k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY ALL"""


def slices(table, n):
    step = -(-table.num_rows // n)
    return [table.slice(i, step) for i in range(0, table.num_rows, step)]


def check_outputs(engine, tmp_path, data):
    assert rows(engine.execute("SELECT * FROM per_key").table) == rows(duck(ORACLE_PER_KEY, ev=data))
    written = [json.loads(line) for line in open(tmp_path / "out" / "per_10s.jsonl")]
    assert rows(pa.Table.from_pylist(written)) == rows(duck(ORACLE_PER_10S, ev=data))


def journal_path(state) -> str:
    (name,) = os.listdir(os.path.join(state, "streams"))
    return os.path.join(state, "streams", name)


def test_a_long_fed_stream_keeps_a_bounded_log_and_journal(tmp_path):
    data = events(200_000, seed=31, span_s=3600)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    log = engine.scheduler.memory["ev"]
    kept, journal_bytes = [], []
    for part in slices(data, 60):
        engine.insert("ev", part)
        engine.run_until_idle()
        engine.checkpoint()
        kept.append(log.kept)
        journal_bytes.append(os.path.getsize(journal_path(state)))
    engine.end_input()
    engine.run_until_idle()
    check_outputs(engine, tmp_path, data)
    assert log.appended_bytes > 5 * 1024**2  # what was fed, ...
    assert max(kept) <= 1  # ... of which memory keeps no more than one insert
    # The journal is rewritten once a megabyte can go: it stays near that, however long the stream runs.
    assert max(journal_bytes) < 1.6 * 1024**2
    engine.close()


def test_without_a_state_directory_the_log_follows_its_slowest_reader(tmp_path):
    data = events(3000, seed=32)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    first = engine.query("SELECT k, v FROM ev WHERE v > 50")
    log = engine.scheduler.memory["ev"]
    parts = slices(data, 10)
    engine.execute("PAUSE QUERY per_key")  # a paused query holds what it has not read yet
    for part in parts[:5]:
        engine.insert("ev", part)
        engine.run_until_idle()
    assert log.kept == 5 and log.base == 0
    engine.execute("RESUME QUERY per_key")
    engine.run_until_idle()
    assert log.kept == 0 and log.base == 5
    for part in parts[5:]:
        engine.insert("ev", part)
        engine.run_until_idle()
        assert log.kept == 0
    # A query started now reads from the oldest row kept (nothing, with 'memory.retention' = '0').
    late = engine.query("SELECT k, v FROM ev")
    engine.insert("ev", data.slice(0, 7))
    engine.run_until_idle()
    assert late.snapshot().num_rows == 7
    assert rows(first.snapshot()) == rows(duck("SELECT k, v FROM ev WHERE v > 50",
                                               ev=pa.concat_tables([data, data.slice(0, 7)])))


def test_retention_keeps_recent_rows_for_queries_started_later(tmp_path):
    data = events(2000, seed=33)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.execute("SET 'memory.retention' = '10KB'")
    log = engine.scheduler.memory["ev"]
    parts = slices(data, 20)
    for part in parts:
        engine.insert("ev", part)
        engine.run_until_idle()
    assert 0 < log.kept_bytes <= 10 * 1024 and log.base > 0
    later = engine.query("SELECT k, v, ts FROM ev")
    engine.run_until_idle()
    kept = pa.concat_tables(parts[log.base:])
    assert rows(later.snapshot()) == rows(kept.select(["k", "v", "ts"]))


@pytest.mark.parametrize("crashes", [[5], [2, 7], [3, 4, 8]])
def test_a_crash_around_trimming_replays_exactly_what_each_query_needs(tmp_path, monkeypatch, crashes):
    monkeypatch.setattr(journal_module, "REWRITE_BYTES", 0)  # rewrite the journal at every chance
    data = events(3000, seed=34, disorder_s=3)
    parts = slices(data, 10)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    trimmed = 0
    for i, part in enumerate(parts):
        engine.insert("ev", part)
        engine.run_until_idle()
        if i % 3 == 1:
            engine.execute("PAUSE QUERY per_10s")  # one query lags: the journal keeps its rows
        elif i % 3 == 2:
            engine.execute("RESUME QUERY per_10s")
            engine.run_until_idle()
        if i not in crashes:
            if i % 2 == 0:
                engine.checkpoint()
            trimmed = max(trimmed, engine.scheduler.memory["ev"].journal.base)
            continue
        del engine  # a crash: no close(), no last checkpoint
        gc.collect()
        engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
        engine.run_until_idle()
    assert trimmed > 0  # the journal was cut down before crashes
    engine.execute("RESUME QUERY per_10s")
    engine.end_input()
    engine.run_until_idle()
    check_outputs(engine, tmp_path, data)
    engine.close()


def test_a_failed_query_does_not_hold_the_stream(tmp_path):
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE STREAM s (x BIGINT) WITH (connector = 'memory');
                      SET 'memory.retention' = '0';
                      CREATE MATERIALIZED VIEW ok AS SELECT COUNT(*) AS n FROM s;
                      CREATE MATERIALIZED VIEW bad AS SELECT 10 / (x - x) AS boom FROM s;""")
    log = engine.scheduler.memory["s"]
    engine.insert("s", [(1,)])
    with pytest.raises(dsms.DsmsError):
        engine.run_until_idle()
    for i in range(5):
        engine.insert("s", [(i,)])
        engine.run_until_idle()
    assert log.kept == 0
    assert engine.execute("SELECT * FROM ok").table.to_pylist() == [{"n": 6}]


def test_a_failed_query_keeps_its_error_after_a_restart_past_its_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(journal_module, "REWRITE_BYTES", 0)
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute("""CREATE STREAM s (x BIGINT) WITH (connector = 'memory');
                      SET 'memory.retention' = '0';
                      CREATE MATERIALIZED VIEW ok AS SELECT COUNT(*) AS n FROM s;
                      CREATE MATERIALIZED VIEW bad AS SELECT 10 / (x - x) AS boom FROM s;""")
    engine.insert("s", [(1,)])
    with pytest.raises(dsms.DsmsError) as failed:
        engine.run_until_idle()
    for i in range(5):
        engine.insert("s", [(i,)])
        engine.run_until_idle()
        engine.checkpoint()
    assert engine.scheduler.memory["s"].journal.base == 6  # past what 'bad' had checkpointed
    engine.close()
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert shown["bad"]["status"] == "failed" and shown["bad"]["error"] == str(failed.value)
    assert engine.execute("SELECT * FROM ok").table.to_pylist() == [{"n": 6}]
    engine.close()
