"""Join and normalize state lives in the job's state store: a snapshot taken mid-run and restored into a
fresh job (with the sources' positions) continues to exactly the uninterrupted result."""

import pyarrow as pa
import pytest

import dsms

from changes import final_table, interleave, restarted
from oracle import events, rows

DDL = """
CREATE STREAM a (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
CREATE STREAM b (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
CREATE TABLE t (k VARCHAR, v BIGINT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
"""
A, B = events(300, seed=51, keys=5, span_s=100), events(260, seed=52, keys=5, span_s=100)
T = events(150, seed=53, keys=5, span_s=100, null_rate=0).select(["k", "v", "ts"])

QUERIES = {
    "interval": "SELECT a.k, a.v, b.v AS bv FROM a FULL JOIN b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '5' "
                "SECOND AND a.ts",
    "temporal": "SELECT a.v, t.v AS tv FROM a LEFT JOIN t FOR SYSTEM_TIME AS OF a.ts ON a.k = t.k",
    "window": "SELECT l.k, l.v, r.v AS rv FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) l "
              "LEFT JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND)) r "
              "ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
    "regular": "SELECT t.k, t.v, b.v AS bv FROM t LEFT JOIN b ON t.k = b.k AND b.v > t.v",
    "lookup": "SELECT a.v, t.v AS tv FROM a LEFT JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON a.k = t.k",
    "stream_table": "SELECT a.v, t.v AS tv FROM a LEFT JOIN t ON a.k = t.k",
}


def run(sql: str, order, cut: int | None):
    """Feed ``order`` (groups of stream slices), stepping after each group; after group ``cut`` move to a new
    engine restored from a snapshot of the first one's state and source positions. The changes, in order."""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    changes = []
    for i, group in enumerate(order):
        for name, part in group:
            engine.insert(name, part)
        engine.run_until_idle()
        changes.append(q.poll())
        if i == cut:
            engine, q, _ = restarted(DDL, sql, q, [p for g in order[: i + 1] for p in g])
    engine.end_input()
    engine.run_until_idle()
    changes.append(q.poll())
    return changes


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_restore_mid_run_changes_nothing(name):
    pieces = interleave({"a": A, "b": B, "t": T}, seed=3)
    order = [pieces[i:i + 5] for i in range(0, len(pieces), 5)]
    whole = run(QUERIES[name], order, cut=None)
    resumed = run(QUERIES[name], order, cut=len(order) // 2)
    assert rows(final_table(resumed)) == rows(final_table(whole))
    assert final_table(whole).num_rows > 50
    assert sum(c.num_rows for c in resumed) == sum(c.num_rows for c in whole)


def test_the_snapshot_holds_the_join_state():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(QUERIES["interval"])
    engine.insert("a", A.slice(0, 100))
    engine.insert("b", B.slice(0, 100))
    engine.run_until_idle()
    snapshot = q.job.env.state.snapshot()
    tables = {k: v for k, v in snapshot.items() if v[0] == "tables"}
    assert tables and sum(t.num_rows for _, data in tables.values() for t in data.values()) == q.job.state_rows
    assert isinstance(next(iter(tables.values()))[1], dict)
    assert all(isinstance(t, pa.Table) for _, data in tables.values() for t in data.values())
