"""Tables with a primary key: upserts and deletes from Python and from files, normalized into a
valid changelog, and aggregates over them kept exact by retraction.

The oracle for a table is written here in DuckDB: the last change of each key, unless it is a
delete."""

import json
import random

import pyarrow as pa
import pytest

import dsms

from changes import Recorder, final_table, pieces
from oracle import duck, rows

DDL = """CREATE TABLE t (id BIGINT, grp VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'memory');"""


def change_log(n: int, seed: int, keys: int = 25) -> pa.Table:
    """Random upserts (some repeating the key's row exactly) and deletes (some of absent keys)."""
    rng = random.Random(seed)
    rows, current = [], {}
    for seq in range(n):
        k = rng.randrange(keys)
        r = rng.random()
        if r < 0.2:
            rows.append({"seq": seq, "id": k, "grp": None, "v": None, "op": "d"})
            current.pop(k, None)
        elif r < 0.3 and k in current:
            rows.append({"seq": seq, "id": k, **current[k], "op": "u"})  # the same row again
        else:
            row = {"grp": rng.choice(["a", "b", "c", None]), "v": rng.choice([None, *range(-5, 20)])}
            current[k] = row
            rows.append({"seq": seq, "id": k, **row, "op": "u"})
    return pa.Table.from_pylist(rows)


def feed_changes(rec: Recorder, name: str, log: pa.Table, seed: int, max_batch: int = 12) -> None:
    """Each random slice of the log as runs of insert() and delete() calls, stepping after each slice."""
    for start, length in pieces(log.num_rows, seed, max_batch):
        part = log.slice(start, length).to_pylist()
        run: list[dict] = []
        for r in part + [None]:
            if run and (r is None or r["op"] != run[0]["op"]):
                data = [{"id": x["id"], "grp": x["grp"], "v": x["v"]} for x in run]
                (rec.engine.insert if run[0]["op"] == "u" else rec.engine.delete)(name, data)
                run = []
            if r is not None:
                run.append(r)
        rec.step()


def final_state(log: pa.Table) -> pa.Table:
    return duck("""SELECT id, grp, v FROM log QUALIFY row_number() OVER (PARTITION BY id ORDER BY seq DESC) = 1
                   AND op = 'u'""", log=log)


LOG = change_log(600, seed=3)


def test_upserts_and_deletes_become_a_valid_changelog():
    rec = Recorder(DDL)
    rec.query("all", "SELECT * FROM t")
    feed_changes(rec, "t", LOG, seed=5)
    got = rec.final("all")
    assert rows(got) == rows(final_state(LOG))
    assert rec.ops("all") == {"+I", "-U", "+U", "-D"}
    # Repeats of a key's row give nothing: no change batch retracts and re-adds the same row.
    for change in rec.changes["all"]:
        for i in range(change.num_rows - 1):
            a, b = change.slice(i, 1).to_pylist()[0], change.slice(i + 1, 1).to_pylist()[0]
            if a["op"] == "-U":
                assert b["op"] == "+U" and a != {**b, "op": "-U"}


@pytest.mark.parametrize("max_batch", [16, 1000])
def test_aggregates_over_a_table_match_duckdb(max_batch):
    rec = Recorder(DDL)
    rec.query("agg", """SELECT grp, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, MIN(v) AS lo, MAX(v) AS hi,
                               COUNT(DISTINCT v) AS dv, AVG(v) AS av FROM t GROUP BY grp""")
    rec.query("total", "SELECT COUNT(*) AS n, SUM(v) AS sv, MAX(v) AS hi FROM t WHERE v > 0")
    feed_changes(rec, "t", LOG, seed=max_batch, max_batch=max_batch)
    state = final_state(LOG)
    want = duck("""SELECT grp, COUNT(*), COUNT(v), SUM(v), MIN(v), MAX(v), COUNT(DISTINCT v), TRUNC(AVG(v))::BIGINT
                   FROM state GROUP BY grp""", state=state)
    assert rows(rec.final("agg")) == rows(want)
    assert rows(rec.final("total")) == rows(duck("SELECT COUNT(*), SUM(v), MAX(v) FROM state WHERE v > 0",
                                                 state=state))


def test_insert_values_upserts_and_delete_needs_a_table():
    engine = dsms.Engine()
    engine.execute(DDL + "CREATE STREAM s (x BIGINT) WITH (connector = 'memory');")
    q = engine.query("SELECT id, v FROM t")
    engine.execute("INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20)")
    engine.execute("INSERT INTO t (id, v) VALUES (1, 11)")
    engine.run_until_idle()
    assert sorted(q.snapshot().to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "v": 11}, {"id": 2, "v": 20}]
    with pytest.raises(dsms.DsmsError, match="append-only stream"):
        engine.delete("s", [(1,)])
    with pytest.raises(dsms.DsmsError, match="primary key column 'id'"):
        engine.insert("t", [{"id": None, "v": 1}])


def test_ddl_rules_for_keys_and_changelog_formats():
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError, match="needs a TABLE with a PRIMARY KEY"):
        engine.execute("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'x.jsonl', "
                       "format = 'debezium-json')")
    with pytest.raises(dsms.SqlError, match="cannot have a PRIMARY KEY"):
        engine.execute("CREATE STREAM s (id BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')")
    engine.execute(DDL)
    described = engine.execute("DESCRIBE t").table.to_pylist()
    assert described[0]["nullable"] is False and "PRIMARY KEY" in described[0]["extra"]
    assert engine.plan("SELECT * FROM t").changelog == "updating"
    assert "ChangelogNormalize(key=[id]" in engine.explain("SELECT * FROM t")


# -- files ----------------------------------------------------------------------------------

def _ts(seq: int) -> str:
    return f"2024-01-01 10:{seq // 60:02d}:{seq % 60:02d}"


def test_upsert_json_file_with_delete_markers(tmp_path):
    lines = []
    for r in LOG.to_pylist():
        if r["op"] == "d":
            lines.append(json.dumps({"id": r["id"], "__deleted": True}))
        else:
            lines.append(json.dumps({"id": r["id"], "grp": r["grp"], "v": r["v"], "__deleted": False}
                                    if r["seq"] % 2 else {"id": r["id"], "grp": r["grp"], "v": r["v"]}))
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n")
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE TABLE t (id BIGINT, grp VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED)
                      WITH (connector = 'file', path = 't.jsonl', format = 'json', 'batch.size' = '37')""")
    q = engine.query("SELECT * FROM t")
    changes = list(q.changes())
    assert q.done
    assert rows(final_table(changes)) == rows(final_state(LOG))


def _debezium_lines(log: pa.Table, seed: int) -> list[str]:
    """Envelopes for a change log: c for new keys (sometimes r), u with or without before, d, and a few
    deletes of absent keys and creates of keys that exist (which normalize must absorb)."""
    rng = random.Random(seed)
    current: dict[int, dict] = {}
    lines = []
    for r in log.to_pylist():
        row = {"id": r["id"], "grp": r["grp"], "v": r["v"], "ts": _ts(r["seq"])}
        old = current.get(r["id"])
        if r["op"] == "d":
            before = old or row  # a delete of an absent key: normalize drops it
            lines.append({"op": "d", "before": before, "after": None, "source": {"table": "t"}, "ts_ms": 1})
            current.pop(r["id"], None)
            continue
        if old is None:
            lines.append({"op": rng.choice("cr"), "before": None, "after": row})
        elif rng.random() < 0.2:
            lines.append({"op": "c", "before": None, "after": row})  # a create of an existing key: an upsert
        else:
            lines.append({"op": "u", "before": old if rng.random() < 0.7 else None, "after": row})
        current[r["id"]] = row
    return [json.dumps(x) for x in lines]


def test_debezium_json_file(tmp_path):
    (tmp_path / "t.jsonl").write_text("\n".join(_debezium_lines(LOG, 4)) + "\n")
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE TABLE t (id BIGINT, grp VARCHAR, v BIGINT, ts TIMESTAMP(3),
                        PRIMARY KEY (id) NOT ENFORCED)
                      WITH (connector = 'file', path = 't.jsonl', format = 'debezium-json', 'batch.size' = '50')""")
    q = engine.query("SELECT id, grp, v FROM t")
    agg = engine.query("SELECT grp, SUM(v) AS sv, COUNT(*) AS n FROM t GROUP BY grp")
    changes = list(q.changes())
    engine.run_until_idle()
    state = final_state(LOG)
    assert rows(final_table(changes)) == rows(state)
    assert rows(agg.snapshot()) == rows(duck("SELECT grp, SUM(v), COUNT(*) FROM state GROUP BY grp", state=state))


def test_debezium_bad_envelopes_name_the_line(tmp_path):
    good = json.dumps({"op": "c", "after": {"id": 1, "v": 2}})
    (tmp_path / "t.jsonl").write_text(good + "\n" + json.dumps({"op": "z", "after": {"id": 2}}) + "\n")
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE TABLE t (id BIGINT, v BIGINT, PRIMARY KEY (id) NOT ENFORCED)
                      WITH (connector = 'file', path = 't.jsonl', format = 'debezium-json')""")
    q = engine.query("SELECT * FROM t")
    with pytest.raises(dsms.SourceError, match=r"op must be c, r, u or d.*line 2"):
        engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"id": 1, "v": 2}]


def test_retractions_of_a_versioned_table_are_never_late(tmp_path):
    """A Debezium update's 'before' and a delete carry the time of the row they remove, which the
    watermark has passed: they are neither late nor do they move the watermark."""
    row = {"id": 1, "v": 1, "ts": "2024-01-01 10:00:00"}
    later = {"id": 1, "v": 2, "ts": "2024-01-01 10:05:00"}
    other = {"id": 2, "v": 9, "ts": "2024-01-01 10:06:00"}
    envelopes = [{"op": "c", "after": row}, {"op": "u", "before": row, "after": later},
                 {"op": "c", "after": other}, {"op": "d", "before": later}]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(e) for e in envelopes) + "\n")
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE TABLE t (id BIGINT, v BIGINT, ts TIMESTAMP(3), PRIMARY KEY (id) NOT ENFORCED,
                        WATERMARK FOR ts AS ts) WITH (connector = 'file', path = 't.jsonl', format = 'debezium-json')""")
    q = engine.query("SELECT id, v FROM t")
    engine.run_until_idle()
    assert q.job.late == {"t": 0}
    assert q.snapshot().to_pylist() == [{"id": 2, "v": 9}]
