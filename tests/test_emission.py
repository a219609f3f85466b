"""Emission policies: EMIT CHANGES, periodic firing, allowed lateness.

Each changelog is applied to an empty table with strict checking (a
retraction of a row never emitted fails) and must end equal to DuckDB's
batch answer over the events the query accepted; corrections are checked
against hand-computed rows."""

import datetime as dt

import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from changes import changelog, final_table, ops
from oracle import BASE, duck, events, islands, late_mask, on_time, rows, tumble_on_time

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""

EV = events(1200, seed=31, keys=4)
HOP = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv, MAX(price) AS hi
FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '30' SECOND))
GROUP BY window_start, window_end, k"""
HOP_ORACLE = """
WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:00', TIMESTAMP '2024-03-01 12:06:00',
                                          INTERVAL '10 seconds')) AS ws)
SELECT ws, ws + INTERVAL '30 seconds', k, COUNT(*), SUM(v), MAX(price)
FROM ev JOIN w ON ev.ts >= w.ws AND ev.ts < w.ws + INTERVAL '30 seconds' GROUP BY ALL"""


def test_emit_changes_is_an_updating_result_that_ends_at_the_batch_answer():
    q, changes = changelog(DDL, HOP + " EMIT CHANGES", EV)
    assert q.changelog == "updating"
    assert rows(final_table(changes)) == rows(duck(HOP_ORACLE, ev=EV))
    assert ops(changes) == {"+I", "-U", "+U"}


def test_emit_changes_emits_before_the_window_closes():
    engine = dsms.Engine()
    engine.execute(DDL)
    early, final = engine.query(HOP + " EMIT CHANGES"), engine.query(HOP)
    engine.insert("ev", EV.slice(0, 10))  # about 2 s of events: no window has closed
    engine.run_until_idle()
    assert final.poll().num_rows == 0
    assert early.poll().num_rows > 0


def test_set_emit_changes_applies_to_window_aggregates_without_a_clause():
    engine = dsms.Engine()
    engine.execute("SET 'emit' = 'changes'")
    q, changes = changelog(DDL, HOP, EV.slice(0, 500), engine=engine)
    assert q.changelog == "updating"
    assert rows(final_table(changes)) == rows(duck(HOP_ORACLE, ev=EV.slice(0, 500)))
    # An explicit EMIT FINAL wins over the setting.
    assert engine.plan(HOP + " EMIT FINAL").changelog == "append-only"


def test_set_emit_changes_keeps_an_inner_window_of_a_cascade_append_only():
    engine = dsms.Engine()
    engine.execute(DDL + """SET 'emit' = 'changes';
      CREATE VIEW per_10s AS SELECT window_time AS rowtime, k, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end,
        window_time, k""")
    plan = engine.plan("""SELECT window_start, SUM(n) AS n FROM TABLE(TUMBLE(TABLE per_10s, DESCRIPTOR(rowtime),
        INTERVAL '1' MINUTE)) GROUP BY window_start, window_end""")
    assert plan.changelog == "updating"
    assert "emit changes" in plan.explain() and plan.explain().count("emit changes") == 1


def test_allowed_lateness_corrects_windows_and_matches_the_accepted_events():
    data = events(1000, seed=5, keys=3, disorder_s=25)  # far beyond the 5 s bound
    # Judged per window (Flink's isWindowLate): an event counts unless its window's last millisecond plus
    # the lateness was at or below the watermark when it arrived, i.e. its last millisecond at or below
    # the watermark of a 5 + 10 s bound.
    accepted = tumble_on_time(data, 5 + 10, 10)
    beyond = data.num_rows - accepted.num_rows
    assert 0 < beyond < data.num_rows - on_time(data, 5 + 10).num_rows  # fewer than behind the 15 s line
    assert sum(late_mask(data.column("ts").to_pylist(), 5)) > beyond + 20
    sql = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k
    ALLOWED LATENESS INTERVAL '10' SECOND"""
    q, changes = changelog(DDL, sql, data)
    want = duck("""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws,
        ws + INTERVAL '10 seconds', k, COUNT(*), SUM(v) FROM ev GROUP BY ALL""", ev=accepted)
    assert rows(final_table(changes)) == rows(want)
    assert {"-U", "+U"} <= ops(changes)  # corrections happened
    assert q.job.late == {"ev": 0, "#1 WindowAggregate": beyond}  # only events beyond the lateness, by the window


def test_the_source_option_allowed_lateness_makes_windows_correct_themselves():
    ddl = DDL.replace("connector = 'memory'", "connector = 'memory', 'allowed_lateness' = '10 s'")
    data = events(400, seed=8, keys=3, disorder_s=25)
    accepted = tumble_on_time(data, 15, 10)  # judged per window: see the test above
    sql = """SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
    GROUP BY window_start, window_end, k"""
    engine = dsms.Engine()
    engine.execute(ddl)
    assert "lateness 10s" in engine.explain(sql)
    q, changes = changelog(ddl, sql, data)
    want = duck("""SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'), k, COUNT(*)
                   FROM ev GROUP BY ALL""", ev=accepted)
    assert rows(final_table(changes)) == rows(want)


def at(seconds, k="a", v=1):
    return {"k": k, "v": v, "price": 1.0, "ts": BASE + dt.timedelta(seconds=seconds)}


def step(engine, q, batch):
    engine.insert("ev", batch)
    engine.run_until_idle()
    return [(r["op"], r["window_start"].second, r["k"], r["n"]) for r in q.poll().to_pylist()]


def test_a_correction_by_hand():
    # Window [0, 10) per key; watermark = max ts - 5 s; lateness 1 minute.
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, k, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k
        ALLOWED LATENESS INTERVAL '1' MINUTE""")
    assert step(engine, q, [at(1), at(2), at(3, "b")]) == []
    assert step(engine, q, [at(16)]) == [("+I", 0, "a", 2), ("+I", 0, "b", 1)]  # watermark 11 closes [0, 10)
    assert step(engine, q, [at(4)]) == [("-U", 0, "a", 2), ("+U", 0, "a", 3)]  # late, within the lateness
    assert step(engine, q, [at(5, "c")]) == [("+I", 0, "c", 1)]  # a key new to a closed window
    assert step(engine, q, [at(80)]) == [("+I", 10, "a", 1)]  # watermark 75: [0, 10) is forgotten at 70
    # [0, 10)'s cleanup time is its last millisecond plus the lateness, 69.999 s, at or below the watermark
    # (75): 6 is dropped and counted by the window aggregate; 72 is behind the watermark, but [70, 80) is open.
    assert step(engine, q, [at(6), at(72)]) == []
    assert q.job.late == {"ev": 0, "#1 WindowAggregate": 1}
    assert step(engine, q, [at(86)]) == [("+I", 10, "a", 1)]  # watermark 81: [70, 80) (12:01:10) fires with 72


def test_periodic_early_firing_uses_processing_time():
    clock = VirtualClock(0)
    engine = dsms.Engine(clock=clock)
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, k, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, k
        EMIT CHANGES EVERY INTERVAL '10' SECOND""")
    assert step(engine, q, [at(1), at(2)]) == []
    clock.advance(9_000_000)
    assert step(engine, q, [at(3)]) == []  # 9 s of processing time: not yet
    clock.advance(1_000_000)
    engine.run_until_idle()  # 10 s: the window so far, although nothing arrived
    assert [(r["op"], r["n"]) for r in q.poll().to_pylist()] == [("+I", 3)]
    assert step(engine, q, [at(4), at(5, "b")]) == []
    clock.advance(10_000_000)
    engine.run_until_idle()
    assert [(r["op"], r["k"], r["n"]) for r in q.poll().to_pylist()] == [("-U", "a", 3), ("+U", "a", 4), ("+I", "b", 1)]
    clock.advance(10_000_000)
    engine.run_until_idle()
    assert q.poll().num_rows == 0  # nothing changed
    assert step(engine, q, [at(6), at(70)]) == [("-U", 0, "a", 4), ("+U", 0, "a", 5)]  # the window closes
    engine.end_input()
    engine.run_until_idle()
    assert [(r["op"], r["window_start"].minute) for r in q.poll().to_pylist()] == [("+I", 1)]


SESSION = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))
GROUP BY window_start, window_end, k"""
SESSION_EV = events(200, seed=3, keys=12, span_s=200, disorder_s=4.5)


def test_sessions_emit_changes_retract_merged_sessions():
    q, changes = changelog(DDL, SESSION + " EMIT CHANGES", SESSION_EV, max_batch=3)
    want = duck(islands(8, select="SELECT ws, we, k, COUNT(*), SUM(v) FROM s GROUP BY ws, we, k"), ev=SESSION_EV)
    assert rows(final_table(changes)) == rows(want)
    assert "-D" in ops(changes) and "-U" in ops(changes)  # sessions were extended and merged away


def test_sessions_with_allowed_lateness():
    data = events(500, seed=19, keys=6, span_s=500, disorder_s=16)
    accepted = on_time(data, 15)
    q, changes = changelog(DDL, SESSION + " ALLOWED LATENESS INTERVAL '10' SECOND", data)
    want = duck(islands(8, select="SELECT ws, we, k, COUNT(*), SUM(v) FROM s GROUP BY ws, we, k"), ev=accepted)
    assert rows(final_table(changes)) == rows(want)
    assert {"-U", "+U"} <= ops(changes) or "-D" in ops(changes)


def test_updating_window_results_go_to_changelog_sinks_not_json(tmp_path):
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL)
    for clause in ("EMIT CHANGES", "ALLOWED LATENESS INTERVAL '1' MINUTE"):
        with pytest.raises(dsms.SqlError, match="updating"):
            engine.execute(f"CREATE SINK s WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS "
                           f"{HOP} {clause}")
    engine.execute(f"CREATE SINK s WITH (connector = 'file', path = 'out.jsonl', format = 'changelog-json') AS "
                   f"{SESSION} EMIT CHANGES")
    engine.insert("ev", [at(1), at(3), at(14)])  # sessions [1, 11) and [14, 22); watermark 9
    engine.run_until_idle()
    engine.insert("ev", [at(10)])  # bridges them into [1, 22)
    engine.end_input()
    engine.run_until_idle()
    import json

    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    # The session starting at 1 grows (-U/+U); the one starting at 14 is merged into it (-D).
    assert [(r["op"], r["n"]) for r in lines] == [("+I", 2), ("+I", 1), ("-D", 1), ("-U", 2), ("+U", 4)]


@pytest.mark.parametrize("sql, message", [
    ("SELECT k, COUNT(*) FROM ev GROUP BY k EMIT FINAL", "has no window"),
    ("SELECT k, COUNT(*) FROM ev GROUP BY k ALLOWED LATENESS INTERVAL '1' MINUTE", "has no window"),
    ("SELECT k FROM ev EMIT CHANGES", "computes none"),
    (SESSION + " EMIT CHANGES EVERY INTERVAL '1' SECOND", "not supported for SESSION"),
])
def test_emit_clauses_are_refused_where_they_cannot_apply(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message):
        engine.plan(sql)


def test_emit_changes_on_a_group_aggregate_is_what_it_already_does():
    engine = dsms.Engine()
    engine.execute(DDL)
    assert engine.plan("SELECT k, COUNT(*) FROM ev GROUP BY k EMIT CHANGES").changelog == "updating"
