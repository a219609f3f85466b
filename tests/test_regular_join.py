"""Regular joins: tables with upserts and deletes (and streams, when asked), an updating result.

Changes of both inputs arrive interleaved in random batches; the changelog is applied strictly
(a retraction of a row never emitted fails) and must end at DuckDB's join of the final tables."""

import random

import pyarrow as pa
import pytest

import dsms

from changes import Recorder, feed_mixed
from oracle import duck, events, late_mask, rows

DDL = """
CREATE TABLE t1 (id BIGINT, k VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE TABLE t2 (id BIGINT, k VARCHAR, w BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
CREATE STREAM s2 (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
"""


def table_log(n: int, seed: int, ids: int, value: str) -> pa.Table:
    """Upserts and deletes of rows (id, k, value): join keys repeat across ids and are sometimes NULL."""
    rng = random.Random(seed)
    out, alive = [], {}
    for seq in range(n):
        i = rng.randrange(ids)
        if rng.random() < 0.2:
            out.append({"seq": seq, "id": i, "k": None, value: None, "op": "d"})
            alive.pop(i, None)
        elif rng.random() < 0.1 and i in alive:
            out.append({"seq": seq, "id": i, **alive[i], "op": "u"})  # an identical upsert: no change
        else:
            row = {"k": rng.choice(["a", "b", "c", "d", None]), value: rng.randrange(0, 30)}
            alive[i] = row
            out.append({"seq": seq, "id": i, **row, "op": "u"})
    return pa.Table.from_pylist(out)


def final_state(log: pa.Table, value: str) -> pa.Table:
    return duck(f"""SELECT id, k, {value} FROM log QUALIFY row_number() OVER (PARTITION BY id ORDER BY seq DESC) = 1
                    AND op = 'u'""", log=log)


T1, T2 = table_log(350, seed=1, ids=30, value="v"), table_log(300, seed=2, ids=25, value="w")
F1, F2 = final_state(T1, "v"), final_state(T2, "w")


@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL OUTER"])
def test_table_table_join_matches_duckdb(kind):
    rec = Recorder(DDL)
    q = rec.query("j", f"""SELECT t1.id, t1.k, t1.v, t2.id AS id2, t2.w FROM t1 {kind} JOIN t2
                           ON t1.k = t2.k AND t1.v <= t2.w + 10""")
    assert q.changelog == "updating" and not q.warnings
    feed_mixed(rec, {"t1": T1, "t2": T2}, seed=len(kind), max_batch=10)
    want = duck(f"""SELECT t1.id, t1.k, t1.v, t2.id AS id2, t2.w FROM t1 {kind} JOIN t2
                    ON t1.k = t2.k AND t1.v <= t2.w + 10""", t1=F1, t2=F2)
    assert rows(rec.final("j")) == rows(want)
    assert {"+I", "-D"} <= rec.ops("j") or {"+I", "-U"} <= rec.ops("j")


def test_aggregates_over_a_join_of_tables():
    rec = Recorder(DDL)
    rec.query("agg", """SELECT t1.k, COUNT(*) AS n, SUM(t2.w) AS sw, MIN(t2.w) AS lo, MAX(t1.v) AS hi,
                               COUNT(DISTINCT t2.id) AS ids FROM t1 JOIN t2 ON t1.k = t2.k GROUP BY t1.k""")
    rec.query("left", """SELECT t1.id, COUNT(t2.id) AS matches FROM t1 LEFT JOIN t2 ON t1.k = t2.k GROUP BY t1.id""")
    feed_mixed(rec, {"t1": T1, "t2": T2}, seed=9, max_batch=20)
    want = duck("""SELECT t1.k, COUNT(*), SUM(t2.w), MIN(t2.w), MAX(t1.v), COUNT(DISTINCT t2.id)
                   FROM t1 JOIN t2 ON t1.k = t2.k GROUP BY t1.k""", t1=F1, t2=F2)
    assert rows(rec.final("agg")) == rows(want)
    want = duck("SELECT t1.id, COUNT(t2.id) FROM t1 LEFT JOIN t2 ON t1.k = t2.k GROUP BY t1.id", t1=F1, t2=F2)
    assert rows(rec.final("left")) == rows(want)


A, B = events(300, seed=31, keys=8, span_s=100), events(250, seed=32, keys=8, span_s=100)


def test_stream_stream_regular_join_warns_and_is_exact():
    rec = Recorder(DDL)
    sql = "SELECT s.k, s.v, s2.v AS v2 FROM s LEFT JOIN s2 ON s.k = s2.k AND s.v > s2.v"
    q = rec.query("j", sql)
    assert q.changelog == "updating"  # a padded row is retracted when a match comes
    assert any("grows without bound" in w for w in q.warnings)
    explained = rec.engine.execute("EXPLAIN " + sql).message
    assert explained.startswith("warning: this regular join of two streams")
    assert "RegularJoin(LEFT" in explained and "state: every row of both inputs (grows without bound" in explained
    feed_mixed(rec, {"s": A, "s2": B}, seed=3, max_batch=6)
    # Nothing is late for a regular join: it keeps every row, as in Flink (only operators that
    # fire on the watermark drop late events), so the oracle sees both inputs whole.
    assert sum(late_mask(A.column("ts").to_pylist(), 3)) > 0
    want = duck("SELECT s.k, s.v, s2.v AS v2 FROM s LEFT JOIN s2 ON s.k = s2.k AND s.v > s2.v", s=A, s2=B)
    assert rows(rec.final("j")) == rows(want)
    assert "-D" in rec.ops("j")


def test_strict_refuses_an_unbounded_join():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute("SET 'strict' = 'true'")
    with pytest.raises(dsms.SqlError, match="grows without bound.*strict") as info:
        engine.query("SELECT * FROM s\nJOIN s2 ON s.k = s2.k")
    assert info.value.line == 2 and "interval join" in str(info.value)
    engine.query("SELECT * FROM t1 JOIN t2 ON t1.k = t2.k")  # tables: bounded by their keys
    engine.query("SELECT * FROM s JOIN s2 ON s.k = s2.k AND s2.ts BETWEEN s.ts AND s.ts + INTERVAL '1' MINUTE")


def _events_for_table() -> pa.Table:
    rng = random.Random(5)
    return pa.Table.from_pylist([{"k": rng.choice(["a", "b", "c", None]), "v": i, "price": 1.0,
                                  "ts": pa.scalar(1_700_000_000_000_000 + i * 1_000_000, pa.timestamp("us")).as_py()}
                                 for i in range(200)])


def test_stream_table_regular_join_when_asked():
    """With SET 'join.stream_table' = 'regular', events are joined with the table's final rows: table
    changes arriving after an event revise its joined rows."""
    rec = Recorder(DDL)
    rec.engine.execute("SET 'join.stream_table' = 'regular'")
    q = rec.query("j", "SELECT s.v, t1.id, t1.v AS tv FROM s LEFT JOIN t1 ON s.k = t1.k")
    assert q.changelog == "updating" and "Join(LEFT" in rec.engine.explain(
        "SELECT s.v, t1.id FROM s LEFT JOIN t1 ON s.k = t1.k")
    ev = _events_for_table()
    feed_mixed(rec, {"s": ev, "t1": T1}, seed=4, max_batch=8)
    want = duck("SELECT s.v, t1.id, t1.v AS tv FROM s LEFT JOIN t1 ON s.k = t1.k", s=ev, t1=F1)
    assert rows(rec.final("j")) == rows(want)


def test_three_tables():
    rec = Recorder(DDL + """CREATE TABLE t3 (k VARCHAR, label VARCHAR, PRIMARY KEY (k) NOT ENFORCED)
                             WITH (connector = 'memory');""")
    rec.query("j", """SELECT t1.id, t2.id AS id2, t3.label FROM t1 JOIN t2 ON t1.k = t2.k
                      LEFT JOIN t3 ON t2.k = t3.k WHERE t1.v < 20""")
    labels = pa.Table.from_pylist([{"seq": i, "k": k, "label": f"{k}{i}", "op": "u" if i % 5 else "d"}
                                   for i, k in enumerate(["a", "b", "c", "a", "d", "b", "a", "c", "d", "a"] * 3)])
    feed_mixed(rec, {"t1": T1, "t2": T2, "t3": labels}, seed=6, max_batch=15)
    f3 = duck("""SELECT k, label FROM l QUALIFY row_number() OVER (PARTITION BY k ORDER BY seq DESC) = 1
                 AND op = 'u'""", l=labels)
    want = duck("""SELECT t1.id, t2.id AS id2, t3.label FROM t1 JOIN t2 ON t1.k = t2.k LEFT JOIN t3 ON t2.k = t3.k
                   WHERE t1.v < 20""", t1=F1, t2=F2, t3=f3)
    assert rows(rec.final("j")) == rows(want)


def test_changelog_of_an_update_is_a_retraction_and_an_insertion():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT t1.id, t2.w FROM t1 JOIN t2 ON t1.k = t2.k")
    engine.insert("t1", [(1, "a", 5)])
    engine.insert("t2", [(7, "a", 70)])
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "+I", "id": 1, "w": 70}]
    engine.insert("t2", [(7, "a", 71)])
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "-U", "id": 1, "w": 70}, {"op": "+U", "id": 1, "w": 71}]
    engine.delete("t1", [(1,)])
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "-D", "id": 1, "w": 71}]
