"""Lookup joins with an updating left side: each change is looked up as it comes and keeps its kind.

As in Flink's lookup join over a changelog input, every change of the left
side (+I, -U, +U, -D) meets the table as it is when the change is
processed and is emitted with its own kind, in arrival order. A retraction
is joined with the table as it is now, not with the row the earlier change
met (Flink does the same). The expected changes below are worked out by
hand, one step (one micro-batch) at a time.
"""

import json

import pytest

import dsms

from changes import Recorder

DDL = """
CREATE TABLE orders (id BIGINT, k VARCHAR, x BIGINT, pt AS PROCTIME(), PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'memory');
CREATE TABLE t (k VARCHAR, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (connector = 'memory');
"""

# (table, action, rows): one micro-batch each; orders rows are (id, k, x), t rows (k, v).
STEPS = [
    ("t", "insert", [("a", 1)]),
    ("orders", "insert", [(1, "a", 10), (2, "b", 20)]),
    ("t", "insert", [("a", 2), ("b", 7)]),
    ("orders", "insert", [(1, "a", 11)]),
    ("orders", "delete", [(2, "b", 20)]),
    ("t", "delete", [("a", 2)]),
    ("orders", "insert", [(1, "b", 12), (3, "c", 30)]),
    ("t", "insert", [("c", 9)]),
    ("orders", "insert", [(3, "c", 31)]),
    ("orders", "delete", [(1, "b", 12)]),
]

# The LEFT JOIN's changes, step by step, as (op, id, x, v):
LEFT = [
    # step 2: t = {a: 1}
    ("+I", 1, 10, 1), ("+I", 2, 20, None),
    # step 4: t = {a: 2, b: 7}; the retraction of (1, 10) meets a = 2, not the 1 it met before
    ("-U", 1, 10, 2), ("+U", 1, 11, 2),
    # step 5
    ("-D", 2, 20, 7),
    # step 7: t = {b: 7}; (1, 11) had k = a, which is gone now
    ("-U", 1, 11, None), ("+U", 1, 12, 7), ("+I", 3, 30, None),
    # step 9: t = {b: 7, c: 9}
    ("-U", 3, 30, 9), ("+U", 3, 31, 9),
    # step 10
    ("-D", 1, 12, 7),
]


def run_steps(sql: str, steps=STEPS) -> tuple[dsms.QueryHandle, list[tuple]]:
    rec = Recorder(DDL)
    q = rec.query("j", sql)
    for name, action, data in steps:
        getattr(rec.engine, action)(name, data)
        rec.step()
    rec.end()
    got = [tuple(r.values()) for c in rec.changes["j"] for r in c.to_pylist()]
    return q, got


@pytest.mark.parametrize("as_of", ["PROCTIME()", "o.pt"])
def test_left_join_keeps_each_change_kind(as_of):
    q, got = run_steps(f"SELECT o.id, o.x, t.v FROM orders AS o LEFT JOIN t FOR SYSTEM_TIME AS OF {as_of} "
                       "ON o.k = t.k")
    assert q.changelog == "updating"
    assert got == LEFT


def test_inner_join_drops_the_changes_without_a_match():
    _, got = run_steps("SELECT o.id, o.x, t.v FROM orders AS o JOIN t FOR SYSTEM_TIME AS OF o.pt ON o.k = t.k")
    assert got == [row for row in LEFT if row[3] is not None]


def test_a_condition_on_the_table_side():
    _, got = run_steps("SELECT o.id, o.x, t.v FROM orders AS o JOIN t FOR SYSTEM_TIME AS OF o.pt "
                       "ON o.k = t.k AND t.v > 5")
    assert got == [row for row in LEFT if row[3] is not None and row[3] > 5]


def test_explain_shows_an_updating_lookup_join():
    engine = dsms.Engine()
    engine.execute(DDL)
    text = engine.execute("EXPLAIN SELECT o.id, t.v FROM orders AS o JOIN t FOR SYSTEM_TIME AS OF o.pt ON o.k = t.k")
    line = next(ln for ln in str(text).splitlines() if "─ #" in ln and "LookupJoin" in ln)
    assert "[updating" in line and "stream=left" in line


def test_json_sink_refused_changelog_json_written(tmp_path):
    engine = dsms.Engine()
    engine.execute(DDL)
    query = "SELECT o.id, o.x, t.v FROM orders AS o LEFT JOIN t FOR SYSTEM_TIME AS OF o.pt ON o.k = t.k"
    with pytest.raises(dsms.SqlError, match="format 'json', which can only hold an append-only result"):
        engine.execute(f"CREATE SINK bad WITH (connector = 'file', path = '{tmp_path}/bad.jsonl', format = 'json') "
                       f"AS {query}")
    out = tmp_path / "out.jsonl"
    engine.execute(f"CREATE SINK good WITH (connector = 'file', path = '{out}', format = 'changelog-json') AS {query}")
    for name, action, data in STEPS:
        getattr(engine, action)(name, data)
        engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["op"], r["id"], r["x"], r["v"]) for r in written] == LEFT


def test_a_debezium_left_side(tmp_path):
    """A CDC file (watched, so it is read as it grows) on the left, its changes interleaved with the table's."""
    log = tmp_path / "orders.jsonl"
    log.write_text("")
    engine = dsms.Engine()
    engine.execute(f"""
        CREATE TABLE orders (id BIGINT, k VARCHAR, x BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH (connector = 'file', path = '{log}', format = 'debezium-json', watch = 'true');
        CREATE TABLE t (k VARCHAR, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (connector = 'memory');""")
    q = engine.query("SELECT o.id, o.x, t.v FROM orders AS o LEFT JOIN t FOR SYSTEM_TIME AS OF PROCTIME() "
                     "ON o.k = t.k")

    def cdc(*changes):
        with log.open("a") as f:
            for op, before, after in changes:
                row = lambda r: None if r is None else dict(zip(("id", "k", "x"), r))  # noqa: E731
                f.write(json.dumps({"op": op, "before": row(before), "after": row(after)}) + "\n")
        engine.run_until_idle()

    def table(action, rows):
        getattr(engine, action)("t", rows)
        engine.run_until_idle()

    table("insert", [("a", 1)])
    cdc(("c", None, (1, "a", 10)), ("c", None, (2, "b", 20)))
    table("insert", [("b", 7)])
    cdc(("u", (1, "a", 10), (1, "b", 11)), ("d", (2, "b", 20), None))
    table("delete", [("b", 7)])
    cdc(("d", (1, "b", 11), None))
    got = [tuple(r.values()) for r in q.poll().to_pylist()]
    assert got == [
        ("+I", 1, 10, 1), ("+I", 2, 20, None),  # t = {a: 1}
        ("-U", 1, 10, 1), ("+U", 1, 11, 7), ("-D", 2, 20, 7),  # t = {a: 1, b: 7}
        ("-D", 1, 11, None),  # t = {a: 1}
    ]
