"""SET 'state.ttl': state not touched for the TTL, in processing time (a VirtualClock), is forgotten.

The expected changelogs are written by hand from Flink's rule: a key whose state was last written at
t is gone at t + ttl and later (``ts + ttl <= now``), its next row starts afresh (``+I``), and expiry
itself emits nothing. A regular join expires per join key (both inputs' rows of the key together),
and a row of either input touches its key. The changelogs are applied strictly: a retraction of a
row never emitted fails."""

import gc
import random

import pyarrow as pa
import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from changes import final_table

SECOND = 1_000_000
DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH (connector = 'memory');
CREATE TABLE t (k VARCHAR, rate BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (connector = 'memory');
"""


def ts(seconds: int):
    return pa.scalar(1_700_000_000_000_000 + seconds * SECOND, pa.timestamp("us")).as_py()


class Session:
    def __init__(self, ttl: str = "10 s", key: str = "state.ttl"):
        self.clock = VirtualClock(start_us=1_000 * SECOND)
        self.engine = dsms.Engine(clock=self.clock)
        self.engine.execute(DDL)
        self.engine.execute(f"SET '{key}' = '{ttl}'")

    def at(self, seconds: float) -> "Session":
        """Move the clock to ``seconds`` after the start."""
        self.clock.set(1_000 * SECOND + int(seconds * SECOND))
        return self

    def feed(self, q: dsms.QueryHandle, **rows) -> list[tuple]:
        """Insert ``rows`` by source, run; the changes (sorted: the order across keys is not specified)."""
        for name, values in rows.items():
            self.engine.insert(name, values)
        self.engine.run_until_idle()
        return sorted((tuple(r.values()) for r in q.poll().to_pylist()), key=repr)


def test_a_group_aggregate_forgets_a_key_and_restarts_its_count():
    s = Session(key="table.exec.state.ttl")  # Flink's name works too
    q = s.engine.query("SELECT k, COUNT(*) AS n, MAX(v) AS hi FROM s GROUP BY k")
    assert s.feed(q, s=[("a", 1, ts(0)), ("b", 5, ts(0))]) == [("+I", "a", 1, 1), ("+I", "b", 1, 5)]
    # a is written again at 6 s: its TTL starts again; b was last written at 0 s
    assert s.at(6).feed(q, s=[("a", 3, ts(1))]) == [("+U", "a", 2, 3), ("-U", "a", 1, 1)]
    # at 10 s, b (0 s + 10 s <= 10 s) is gone: its row starts a new count; a (6 s) is kept
    assert s.at(10).feed(q, s=[("a", 2, ts(2)), ("b", 1, ts(2))]) == [
        ("+I", "b", 1, 1), ("+U", "a", 3, 3), ("-U", "a", 2, 3)]
    # a 1 us before its expiry is still there; at 20 s (last written at 10 s) it is gone
    assert s.at(19.999999).feed(q, s=[("a", 0, ts(3))]) == [("+U", "a", 4, 3), ("-U", "a", 3, 3)]
    assert s.at(29.999999).feed(q, s=[("a", 7, ts(4))]) == [("+I", "a", 1, 7)]


def test_expired_state_is_dropped_on_a_tick_without_input_and_stays_flat():
    s = Session(ttl="5 s")
    q = s.engine.query("SELECT k, COUNT(*) AS n FROM s GROUP BY k")
    job = q.job
    for second in range(0, 60, 2):  # 100 new keys every 2 s: about 3 batches' keys are alive at a time
        s.at(second).feed(q, s=[(f"k{second}-{i}", i, ts(second)) for i in range(100)])
        assert job.env.state.rows() <= 300
    s.at(70).engine.run_until_idle()  # no input: the tick expires everything
    assert job.env.state.rows() == 0


def test_a_stream_table_join_forgets_keys_not_touched():
    s = Session()
    q = s.engine.query("SELECT s.k, s.v, t.rate FROM s LEFT JOIN t ON s.k = t.k")
    assert s.feed(q, t=[("a", 10), ("b", 20)], s=[("a", 1, ts(0)), ("b", 2, ts(0))]) == [
        ("+I", "a", 1, 10), ("+I", "b", 2, 20)]
    # an event of a at 6 s touches a's key: a's table row and its earlier events stay with it
    assert s.at(6).feed(q, s=[("a", 3, ts(1))]) == [("+I", "a", 3, 10)]
    # at 12 s the key b (last touched at 0 s) is gone: its update revises nothing; a's update revises both events
    assert s.at(12).feed(q, t=[("a", 11), ("b", 21)]) == [
        ("+U", "a", 1, 11), ("+U", "a", 3, 11), ("-U", "a", 1, 10), ("-U", "a", 3, 10)]
    # b's new row was written at 12 s: a new event of b joins it
    assert s.at(13).feed(q, s=[("b", 4, ts(2))]) == [("+I", "b", 4, 21)]
    # a delete of a key that expired retracts nothing (there is nothing to retract)
    assert s.at(30).feed(q, s=[("c", 5, ts(3))]) == [("+I", "c", 5, None)]
    s.engine.delete("t", [("a",)])
    assert s.feed(q) == []


@pytest.mark.parametrize("kind", ["LEFT", "RIGHT", "FULL OUTER"])
def test_outer_joins_with_a_ttl_never_retract_what_they_did_not_emit(kind):
    """Random keys, values and clock steps: the changelog stays valid (applied strictly), and a row of a
    key that expired is padded, never joined with the rows that expired."""
    rng = random.Random(len(kind))
    s = Session(ttl="3 s")
    q = s.engine.query(f"SELECT s.k, s.v, t.k AS tk, t.rate FROM s {kind} JOIN t ON s.k = t.k")
    changes, now = [], 0.0
    for i in range(120):
        now += rng.choice([0, 0.5, 1, 2, 4])
        s.at(now)
        if rng.random() < 0.4:
            key = rng.choice("abcd")
            if rng.random() < 0.3:
                s.engine.delete("t", [(key,)])
            else:
                s.engine.insert("t", [(key, rng.randrange(100))])
        else:
            s.engine.insert("s", [(rng.choice("abcde"), i, ts(i))])
        s.engine.run_until_idle()
        changes.append(q.poll())
    final = final_table(changes)  # fails on a retraction of a row never emitted
    assert final.num_rows > 20


def test_deduplication_and_top_n_forget_a_partition():
    s = Session()
    last = s.engine.query("SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn "
                          "FROM s) WHERE rn = 1")
    first = s.engine.query("SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn "
                           "FROM s) WHERE rn = 1")
    top = s.engine.query("SELECT k, v, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
                         "FROM s) WHERE rn <= 2")

    def feed(*rows):
        s.engine.insert("s", list(rows))
        s.engine.run_until_idle()
        return [sorted((tuple(r.values()) for r in q.poll().to_pylist()), key=repr) for q in (last, first, top)]

    assert feed(("a", 5, ts(1)), ("b", 7, ts(2)), ("a", 9, ts(3))) == [
        [("+I", "a", 9), ("+I", "b", 7)], [("+I", "a", 5), ("+I", "b", 7)],
        [("+I", "a", 5, 2), ("+I", "a", 9, 1), ("+I", "b", 7, 1)]]
    # at 6 s a row of a touches a's partition (not b's)
    s.at(6)
    assert feed(("a", 1, ts(4))) == [[("+U", "a", 1), ("-U", "a", 9)], [], []]
    # at 12 s b is forgotten by all three: its new row is a new first, last and top row; a is kept
    s.at(12)
    assert feed(("b", 1, ts(5)), ("a", 2, ts(6))) == [
        [("+I", "b", 1), ("+U", "a", 2), ("-U", "a", 1)], [("+I", "b", 1)], [("+I", "b", 1, 1)]]


def test_explain_shows_the_state_bound_of_every_stateful_operator(golden):
    engine = dsms.Engine()
    engine.execute(DDL)
    queries = ["SELECT s.k, s.v, t.rate FROM s JOIN t ON s.k = t.k",
               "SELECT k, COUNT(*) AS n FROM s GROUP BY k",
               "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM s) "
               "WHERE rn = 1",
               "SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
               "GROUP BY window_start, window_end, k"]
    text = []
    for ttl in ("0 ms", "1 h"):
        engine.execute(f"SET 'state.ttl' = '{ttl}'")
        text += [f"-- SET 'state.ttl' = '{ttl}'"] + [engine.execute("EXPLAIN " + sql).message for sql in queries]
    golden("explain/state_ttl.txt", "\n".join(text) + "\n")
    explained = "\n".join(text)
    assert "state: every row of the left stream (grows without bound; SET 'state.ttl' bounds it)" in explained
    assert "until their join key is not touched for 1h (state.ttl)" in explained
    assert "a row per key, until the key is not written for 1h (state.ttl)" in explained


def test_the_setting_is_checked_and_the_batch_routes_refuse_it(tmp_path):
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError, match="invalid duration"):
        engine.execute("SET 'state.ttl' = 'soon'")
    (tmp_path / "s.jsonl").write_text('{"k": "a", "v": 1}\n{"k": "a", "v": 2}\n')
    engine.execute(f"CREATE STREAM f (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '{tmp_path}/s.jsonl', "
                   "format = 'json')")
    engine.execute("SET 'state.ttl' = '1 h'")
    assert not engine.plan("SELECT f.k FROM f JOIN f AS g ON f.k = g.k").warnings  # the TTL bounds it
    engine.execute("SET 'engine' = 'duckdb'")
    with pytest.raises(dsms.UnsupportedPlan, match="cannot bound the state of Aggregate.* by SET 'state.ttl'"):
        engine.query("SELECT k, COUNT(*) AS n FROM f GROUP BY k")
    engine.execute("SET 'engine' = 'auto'")
    q = engine.query("SELECT k, COUNT(*) AS n FROM f GROUP BY k")
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"k": "a", "n": 2}]
    engine.execute("RESET 'table.exec.state.ttl'")
    assert engine.catalog.setting("state.ttl") == "0 ms"
    assert engine.plan("SELECT f.k FROM f JOIN f AS g ON f.k = g.k").warnings


RESTART_CASES = {
    # b's count (last written at 0 s) is gone at 12 s: the view keeps its first count next to its new one,
    # since expiry emits nothing (an upsert sink would overwrite it by key)
    "aggregate": ("SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM s GROUP BY k",
                  [(0, {"s": [("a", 1, ts(0)), ("b", 2, ts(0))]}), (6, {"s": [("a", 3, ts(1))]}),
                   (12, {"s": [("a", 4, ts(2)), ("b", 5, ts(2))]})],
                  [("a", 3, 8), ("b", 1, 2), ("b", 1, 5)]),
    # the key b (last touched at 0 s) is gone at 12 s: its update does not revise the event b 2; a's does
    "join": ("SELECT s.k, s.v, t.rate FROM s JOIN t ON s.k = t.k",
             [(0, {"t": [("a", 10), ("b", 20)], "s": [("a", 1, ts(0)), ("b", 2, ts(0))]}),
              (6, {"s": [("a", 3, ts(1))]}), (12, {"t": [("a", 11), ("b", 21)], "s": [("b", 5, ts(2))]})],
             [("a", 1, 11), ("a", 3, 11), ("b", 2, 20), ("b", 5, 21)]),
}


@pytest.mark.parametrize("case", sorted(RESTART_CASES))
def test_a_restart_from_a_checkpoint_keeps_when_each_key_was_touched(tmp_path, case):
    """The same feed with and without a crash after a checkpoint: the last touch of each key is part of
    the checkpoint, so the same keys expire."""
    sql, steps, want = RESTART_CASES[case]

    def run(crash_after: int | None) -> list:
        state = str(tmp_path / f"state{crash_after}")
        clock = VirtualClock(start_us=1_000 * SECOND)
        engine = dsms.Engine(state_dir=state, clock=clock)
        engine.execute(DDL)
        engine.execute("SET 'state.ttl' = '10 s'")
        engine.execute(f"CREATE MATERIALIZED VIEW mv AS {sql}")
        for i, (second, rows) in enumerate(steps):
            clock.set(1_000 * SECOND + second * SECOND)
            for name, values in rows.items():
                engine.insert(name, values)
            engine.run_until_idle()
            if i == crash_after:
                engine.checkpoint()
                del engine  # a crash: the engine is gone without close()
                gc.collect()
                engine = dsms.Engine(state_dir=state, clock=clock)
        got = sorted(tuple(r.values()) for r in engine.execute("SELECT * FROM mv").table.to_pylist())
        engine.close()
        return got

    assert run(None) == want
    assert run(1) == want
