"""A plain stream-table JOIN is Flink's regular join: table changes revise the events already joined.

The table is a Debezium file whose keys are created, updated, deleted and created again while the
stream's events arrive; both files are watched and grow in small random chunks, interleaved, with a
turn of the engine after each, so events meet every state of the table. The changelog is applied
strictly (a retraction of a row never emitted fails) and must end at the stream joined with the
table's final state, computed here in DuckDB from the Debezium lines (the last envelope per key; a
key whose last envelope is a delete is absent)."""

import json
import random

import pyarrow as pa
import pytest

import dsms

from changes import final_table, ops
from oracle import duck, rows

KEYS = ["a", "b", "c", "d", "e"]
BASE_US = 1_700_000_000_000_000


def debezium_log(n: int, seed: int) -> list[dict]:
    """Envelopes of table d (k, label, rate): creates, updates (with and without before), deletes and
    re-creates of deleted keys, plus a delete of an absent key (which normalization drops)."""
    rng = random.Random(seed)
    current: dict[str, dict] = {}
    out = []
    for i in range(n):
        k = rng.choice(KEYS)
        old = current.get(k)
        if old is not None and rng.random() < 0.25:
            out.append({"op": "d", "before": old, "after": None})
            del current[k]
            continue
        if old is None and rng.random() < 0.05:
            out.append({"op": "d", "before": {"k": k, "label": "gone", "rate": 0}, "after": None})
            continue
        row = {"k": k, "label": f"{k}{i}", "rate": rng.randrange(1, 50)}
        if old is None:
            out.append({"op": rng.choice("cr"), "before": None, "after": row})
        else:
            out.append({"op": "u", "before": old if rng.random() < 0.7 else None, "after": row})
        current[k] = row
    return out


def stream_events(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [{"k": rng.choice(KEYS + ["z", None]), "v": i,
             "ts": pa.scalar(BASE_US + i * 100_000, pa.timestamp("us")).as_py().strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}
            for i in range(n)]


LOG, EVENTS = debezium_log(160, seed=1), stream_events(400, seed=2)
DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = 's.jsonl', format = 'json', watch = 'true', 'batch.size' = '7');
CREATE TABLE d (k VARCHAR, label VARCHAR, rate BIGINT, PRIMARY KEY (k) NOT ENFORCED)
  WITH (connector = 'file', path = 'd.jsonl', format = 'debezium-json', watch = 'true', 'batch.size' = '3');
"""


def final_d() -> pa.Table:
    """The table's final state, from its Debezium envelopes (written independently of the engine)."""
    env = pa.Table.from_pylist([{"seq": i, "op": e["op"], "k": (e["after"] or e["before"])["k"],
                                 "label": (e["after"] or {}).get("label"), "rate": (e["after"] or {}).get("rate")}
                                for i, e in enumerate(LOG)])
    return duck("SELECT k, label, rate FROM env QUALIFY row_number() OVER (PARTITION BY k ORDER BY seq DESC) = 1 "
                "AND op <> 'd'", env=env)


def run_interleaved(tmp_path, sql: str, seed: int) -> tuple[dsms.QueryHandle, list[pa.Table]]:
    """Append the events and the envelopes to their files in random small chunks, interleaved, with a
    turn after each chunk; the query's change batches."""
    engine = dsms.Engine(base_dir=str(tmp_path))
    files = {"s": tmp_path / "s.jsonl", "d": tmp_path / "d.jsonl"}
    for f in files.values():
        f.write_text("")
    engine.execute(DDL)
    q = engine.query(sql)
    rng = random.Random(seed)
    lines = {"s": [json.dumps(e) for e in EVENTS], "d": [json.dumps(e) for e in LOG]}
    pos = {"s": 0, "d": 0}
    changes = []
    while any(pos[n] < len(lines[n]) for n in lines):
        name = rng.choice([n for n in lines if pos[n] < len(lines[n])])
        k = rng.randint(1, 6)
        with open(files[name], "a") as f:
            f.write("".join(line + "\n" for line in lines[name][pos[name]:pos[name] + k]))
        pos[name] += k
        engine.run_until_idle()
        changes.append(q.poll())
    return q, changes


@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL OUTER"])
def test_stream_joined_with_a_changing_debezium_table_ends_at_the_final_table(tmp_path, kind):
    sql = f"SELECT s.k, s.v, d.k AS dk, d.label, d.rate FROM s {kind} JOIN d ON s.k = d.k"
    q, changes = run_interleaved(tmp_path, sql, seed=len(kind))
    assert q.changelog == "updating"
    assert {"-U", "+U"} <= ops(changes) and ("-D" in ops(changes) or kind == "INNER")
    want = duck(f"SELECT s.k, s.v, d.k AS dk, d.label, d.rate FROM s {kind} JOIN d ON s.k = d.k",
                s=pa.Table.from_pylist(EVENTS), d=final_d())
    assert want.num_rows > 100
    assert rows(final_table(changes)) == rows(want)


def test_the_lookup_join_keeps_what_each_event_met(tmp_path):
    """The same feed as a lookup join: append-only, and (the table having changed after the events) not
    the final table's join; each event meets the table as it was when it arrived."""
    sql = "SELECT s.k, s.v, d.label FROM s JOIN d FOR SYSTEM_TIME AS OF PROCTIME() ON s.k = d.k"
    q, changes = run_interleaved(tmp_path, sql, seed=9)
    assert q.changelog == "append-only" and ops(changes) == {"+I"}
    final = duck("SELECT s.k, s.v, d.label FROM s JOIN d ON s.k = d.k", s=pa.Table.from_pylist(EVENTS), d=final_d())
    assert rows(final_table(changes)) != rows(final)


def _bounded(tmp_path) -> dsms.Engine:
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(e) + "\n" for e in LOG))
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(DDL.replace("watch = 'true'", "watch = 'false'"))
    return engine


def test_its_result_is_updating_a_json_sink_is_refused(tmp_path):
    engine = _bounded(tmp_path)
    with pytest.raises(dsms.SqlError) as info:
        engine.execute("CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS "
                       "SELECT s.v, d.label FROM s JOIN d ON s.k = d.k")
    assert "can only hold an append-only result" in info.value.message
    assert "changelog-json" in info.value.diagnostic.help


@pytest.mark.parametrize("engine_name", ["runtime", "duckdb"])
@pytest.mark.parametrize("fmt", ["changelog-json", "debezium-json"])
def test_changelog_sinks_hold_the_join_of_the_final_table(tmp_path, fmt, engine_name):
    engine = _bounded(tmp_path)
    engine.execute(f"SET 'engine' = '{engine_name}'")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = '{fmt}') AS "
                   "SELECT s.v, d.label FROM s LEFT JOIN d ON s.k = d.k")
    engine.run_until_idle()
    engine.close()
    current: dict[tuple, int] = {}
    for line in (tmp_path / "out.jsonl").read_text().splitlines():
        r = json.loads(line)
        if fmt == "changelog-json":
            sign, row = (1 if r["op"] in ("+I", "+U") else -1), (r["v"], r["label"])
            changes = [(sign, row)]
        else:
            changes = [(s, (img["v"], img["label"])) for s, img in ((-1, r["before"]), (1, r["after"])) if img]
        for sign, row in changes:
            current[row] = current.get(row, 0) + sign
            assert current[row] >= 0, f"{row} retracted more often than emitted"
    got = sorted(row for row, n in current.items() for _ in range(n))
    want = duck("SELECT s.v, d.label FROM s LEFT JOIN d ON s.k = d.k", s=pa.Table.from_pylist(EVENTS), d=final_d())
    assert got == sorted(tuple(r.values()) for r in want.to_pylist())
