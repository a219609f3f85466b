"""Lookup joins: each event joins the table's rows as they are when the event is processed.

A lookup join is asked for with Flink's ``FOR SYSTEM_TIME AS OF`` a processing-time attribute
(``PROCTIME()`` or a ``pt AS PROCTIME()`` column), or for every stream-table join of a session with
``SET 'join.stream_table' = 'lookup'`` (a plain JOIN is a regular join by default).

The feed runs in phases: table changes, then events, then more table changes (updates and
deletes of keys the earlier events joined), then more events. The oracle joins each phase's
events with the table as it stood then, computed in DuckDB from the change log."""

import random

import pyarrow as pa
import pytest

import dsms

from changes import Recorder, apply_piece, pieces
from oracle import duck, rows

DDL = """
CREATE TABLE t (id BIGINT, k VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE STREAM s (k VARCHAR, x BIGINT, ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'memory');
"""
BASE_US = 1_700_000_000_000_000


def table_changes(n: int, seed: int, start: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        op = "d" if rng.random() < 0.25 else "u"
        out.append({"seq": start + i, "id": rng.randrange(20), "k": None if op == "d" else rng.choice("abcde"),
                    "v": None if op == "d" else rng.randrange(100), "op": op})
    return out


def stream_events(n: int, seed: int, start: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"k": rng.choice(["a", "b", "c", "e", "f", None]), "x": start + i,
             "ts": pa.scalar(BASE_US + (start + i) * 100_000, pa.timestamp("us")).as_py()} for i in range(n)]


PHASES = [("t", table_changes(60, 1, 0)), ("s", stream_events(150, 2, 0)), ("t", table_changes(50, 3, 100)),
          ("s", stream_events(150, 4, 1000)), ("t", table_changes(40, 5, 200)), ("s", stream_events(100, 6, 2000))]


LOOKUP = "SET 'join.stream_table' = 'lookup'"


def run_phases(sql: str, max_batch: int = 9, setting: str | None = None):
    rec = Recorder(DDL)
    if setting:
        rec.engine.execute(setting)
    rec.query("j", sql)
    for i, (name, data) in enumerate(PHASES):
        table = pa.Table.from_pylist(data)
        for start, length in pieces(table.num_rows, seed=i, max_batch=max_batch):
            apply_piece(rec.engine, name, table.slice(start, length))
            rec.step()
    return rec


def oracle(sql_for_phase: str) -> pa.Table:
    """Each phase's events joined with the table after the changes before it."""
    log, parts = [], []
    for name, data in PHASES:
        if name == "t":
            log += data
            continue
        state = duck("""SELECT id, k, v FROM log QUALIFY row_number() OVER (PARTITION BY id ORDER BY seq DESC) = 1
                        AND op = 'u'""", log=pa.Table.from_pylist(log))
        parts.append(duck(sql_for_phase, s=pa.Table.from_pylist(data), t=state))
    return pa.concat_tables(parts)


@pytest.mark.parametrize("kind", ["", "LEFT"])
@pytest.mark.parametrize("as_of", ["FOR SYSTEM_TIME AS OF PROCTIME()", "FOR SYSTEM_TIME AS OF s.pt", LOOKUP])
def test_each_event_joins_the_table_as_it_is_then(kind, as_of):
    setting, as_of = (as_of, "") if as_of == LOOKUP else (None, as_of)
    sql = f"SELECT s.x, s.k, t.id, t.v FROM s {kind} JOIN t {as_of} ON s.k = t.k AND t.v > 10"
    rec = run_phases(sql, setting=setting)
    assert rec.queries["j"].changelog == "append-only"
    assert rec.ops("j") == {"+I"}
    got = rec.final("j")
    want = oracle(f"SELECT s.x, s.k, t.id, t.v FROM s {kind} JOIN t ON s.k = t.k AND t.v > 10")
    assert rows(got) == rows(want)
    # Later table changes did not revise earlier events: an event from the first phase keeps its match
    # even if the table row was deleted afterwards.
    assert want.num_rows > 200


def test_table_on_the_left_and_proctime_spelling():
    got = run_phases("SELECT s.x, t.id FROM t RIGHT JOIN s ON s.k = t.k", max_batch=30, setting=LOOKUP).final("j")
    assert rows(got) == rows(oracle("SELECT s.x, t.id FROM s LEFT JOIN t ON s.k = t.k"))
    got = run_phases("SELECT s.x, t.id FROM s JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON s.k = t.k",
                     max_batch=30).final("j")
    assert rows(got) == rows(oracle("SELECT s.x, t.id FROM s JOIN t ON s.k = t.k"))


def test_lookup_into_a_filtered_view_of_a_table():
    sql = "SELECT s.x, big.id FROM s JOIN (SELECT id, k FROM t WHERE v >= 50) AS big ON s.k = big.k"
    got = run_phases(sql, max_batch=30, setting=LOOKUP).final("j")
    assert rows(got) == rows(oracle("SELECT s.x, t.id FROM s JOIN t ON s.k = t.k AND t.v >= 50"))


def test_the_stream_watermark_drives_windows_after_a_lookup():
    """The table has no event time; it must not hold back the windows over the joined events."""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(TUMBLE(TABLE (
                          SELECT s.ts, s.k, t.v FROM s JOIN t FOR SYSTEM_TIME AS OF s.pt ON s.k = t.k),
                          DESCRIPTOR(ts), INTERVAL '5' SECOND))
                        GROUP BY window_start, window_end, k""")
    engine.insert("t", [(1, "a", 10), (2, "a", 5), (3, "b", 1)])
    engine.insert("s", [("a", i, pa.scalar(BASE_US + i * 1_000_000, pa.timestamp("us")).as_py()) for i in range(12)])
    engine.run_until_idle()
    got = sorted((r["k"], r["n"], r["sv"]) for r in q.snapshot().to_pylist())
    # Window [0 s, 5 s) has closed (the watermark is 11 s - 2 s): 5 events, each with two table rows.
    assert got == [("a", 10, 5 * 15)]
    engine.end_input()
    engine.run_until_idle()
    got = sorted((r["k"], r["n"], r["sv"]) for r in q.snapshot().to_pylist())
    assert got == [("a", 4, 2 * 15), ("a", 10, 5 * 15), ("a", 10, 5 * 15)]


def test_a_join_between_a_stream_and_an_aggregate_is_regular():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute(LOOKUP)
    p = engine.plan("SELECT s.x, c.n FROM s JOIN (SELECT k, COUNT(*) AS n FROM s GROUP BY k) AS c ON s.k = c.k")
    assert p.changelog == "updating" and p.warnings
