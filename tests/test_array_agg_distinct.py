"""ARRAY_AGG(DISTINCT x) and COLLECT(DISTINCT x) (planner/aggregate_ordered.py) against oracles written apart.

Flink computes a DISTINCT aggregate through a per-group map of each value's
count: a value reaches the inner aggregate when its first copy arrives and
leaves it when its last copy is retracted. So over an append-only input
ARRAY_AGG(DISTINCT x) is each value once, where ARRAY_AGG(x) lists it first
(NULL too, unless IGNORE NULLS): the oracle is DuckDB's ``list(v ORDER BY i)``
with its repeats dropped in Python. COLLECT(DISTINCT x) counts each non-NULL
value once: DuckDB's ``histogram(DISTINCT v)``. Over an updating input the
oracle replays the table's changes through such a count map by hand.
"""

import json
import random

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dsms

from changes import changelog, final_table, restarted
from oracle import duck, events, run_query

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""
_RAW = events(500, seed=43, keys=3, span_s=80, null_rate=0.12)  # disorder 4 s < the 5 s bound: none is late
EV = _RAW.set_column(1, "v", pc.subtract(pc.abs(_RAW.column("v")), pc.multiply(pc.divide(pc.abs(
    _RAW.column("v")), 6), 6)))  # v mod 6: each value comes many times
NUMBERED = EV.append_column("i", pa.array(range(EV.num_rows)))  # the arrival order

AGGS = ("ARRAY_AGG(DISTINCT v) AS a, ARRAY_AGG(DISTINCT v IGNORE NULLS) AS ai, COLLECT(DISTINCT v) AS c, "
        "COLLECT(DISTINCT k) AS ck, ARRAY_AGG(v) AS every, COUNT(*) AS n, "
        "ARRAY_AGG(DISTINCT v IGNORE NULLS) FILTER (WHERE price > 5) AS af, COLLECT(DISTINCT v) FILTER (WHERE price > 5) AS cf")
ORACLE = ("list(v ORDER BY i) AS a, list(v ORDER BY i) FILTER (WHERE v IS NOT NULL) AS ai, histogram(DISTINCT v) AS c, "
          "histogram(DISTINCT k) AS ck, list(v ORDER BY i) AS every, COUNT(*) AS n, "
          "list(v ORDER BY i) FILTER (WHERE v IS NOT NULL AND price > 5) AS af, "
          "histogram(DISTINCT v) FILTER (WHERE price > 5) AS cf")


def first_each(values) -> tuple | None:
    """Each value once, where it first comes (NULL is a value)."""
    return None if values is None else tuple(dict.fromkeys(values))


def by_key(table: pa.Table, keys: list[str], oracle: bool = False) -> dict:
    """Rows by their key columns; the oracle's arrays have their repeats dropped here."""
    out = {}
    for r in table.to_pylist():
        key = tuple(r[k] for k in keys)
        assert key not in out
        a, ai, af = (first_each(r[c]) if oracle else (None if r[c] is None else tuple(r[c])) for c in ("a", "ai", "af"))
        out[key] = (a, ai, dict(r["c"] or []), dict(r["ck"] or []), tuple(r["every"]), r["n"], af, dict(r["cf"] or []))
    return out


def test_group_aggregate_over_small_batches_matches_duckdb():
    q, changes = changelog(DDL, f"SELECT k, {AGGS} FROM ev GROUP BY k", EV, max_batch=20, seed=4)
    want = by_key(duck(f"SELECT k, {ORACLE} FROM ev GROUP BY k", ev=NUMBERED), ["k"], oracle=True)
    assert by_key(final_table(changes), ["k"]) == want
    assert by_key(q.snapshot(), ["k"]) == want
    assert all(len(a) < len(every) for a, _, _, _, every, *_ in want.values())  # repeats were dropped
    assert any(None in a and None not in ai for a, ai, *_ in want.values())  # NULL once, unless IGNORE NULLS
    assert all(set(c.values()) == {1} for _, _, c, *_ in want.values())
    assert q.schema.field("a").type == pa.list_(pa.int64())
    assert q.schema.field("c").type == pa.map_(pa.int64(), pa.int32())


def test_global_aggregate():
    got = run_query(DDL, f"SELECT {AGGS} FROM ev", {"ev": EV}, max_batch=25, seed=5)
    assert by_key(got, []) == by_key(duck(f"SELECT {ORACLE} FROM ev", ev=NUMBERED), [], oracle=True)


PANE = "(epoch_us(ts) - epoch_us(window_start)) // 5000000"  # a row's 5-second pane, counted from the start
WINDOWS = {
    "tumble": ("TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
               "SELECT *, time_bucket(INTERVAL '10 seconds', ts) AS window_start, "
               "time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end FROM ev", "0"),
    # A window's panes are taken as Flink merges its slices (a HOP window's newest first, a CUMULATE window's
    # oldest first), each pane's values in arrival order; a value is listed where it first comes in that order.
    "hop": ("HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
            "SELECT *, s AS window_start, s + INTERVAL '15 seconds' AS window_end FROM (SELECT *, unnest(range("
            "time_bucket(INTERVAL '5 seconds', ts) - INTERVAL '10 seconds', ts + INTERVAL '1 microsecond', "
            "INTERVAL '5 seconds')) AS s FROM ev)", f"-{PANE}"),
    "cumulate": ("CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)",
                 "SELECT *, time_bucket(INTERVAL '20 seconds', ts) AS window_start, e AS window_end FROM (SELECT *, "
                 "unnest(range(time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds', "
                 "time_bucket(INTERVAL '20 seconds', ts) + INTERVAL '20 seconds' + INTERVAL '1 microsecond', "
                 "INTERVAL '5 seconds')) AS e FROM ev)", PANE),
}


def from_a_file(tmp_path, sql: str, data: pa.Table, route: str) -> pa.Table:
    """The rows of ``sql`` on ``route`` over ``data`` written to a JSON-lines file read in small batches."""
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n" for r in data.to_pylist()))
    engine = dsms.Engine()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json', "
                                                       "'batch.size' = '17'"))
    engine.execute(f"SET 'engine' = '{route}'")
    assert engine.explain(sql).startswith(f"route: {route}")
    q = engine.query(sql)
    engine.run_until_idle()
    return q.snapshot()


@pytest.mark.parametrize("window", ["tumble", "hop", "cumulate"])
@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_windows_list_each_value_where_it_first_comes(window, route, tmp_path):
    tvf, oracle, place = WINDOWS[window]
    sql = f"SELECT window_start, window_end, k, {AGGS} FROM TABLE({tvf}) GROUP BY window_start, window_end, k"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=7) if route == "runtime" \
        else from_a_file(tmp_path, sql, EV, route)
    keys = ["window_start", "window_end", "k"]
    in_panes = ORACLE.replace("ORDER BY i", f"ORDER BY {place}, i")
    want = by_key(duck(f"SELECT window_start, window_end, k, {in_panes} FROM ({oracle}) GROUP BY ALL",
                       ev=NUMBERED), keys, oracle=True)
    assert got.num_rows > 20
    assert by_key(got, keys) == want


def test_a_value_leaves_with_its_last_copy_and_comes_back_at_the_end():
    # Flink's distinct map: 'a' enters at its first copy and stays while a copy is left, so retracting one
    # copy keeps its place (ARRAY_AGG(v) without DISTINCT loses the earliest copy: [b, a]); 'b' leaves with
    # its only copy and enters again at the end.
    ddl = "CREATE TABLE t (id BIGINT, g VARCHAR, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')"
    engine = dsms.Engine()
    engine.execute(ddl)
    q = engine.query("SELECT g, ARRAY_AGG(DISTINCT v) AS d, ARRAY_AGG(v) AS a, COLLECT(DISTINCT v) AS c "
                     "FROM t GROUP BY g")
    steps = [("i", [(1, "a")]), ("i", [(2, "b")]), ("i", [(3, "a")]), ("d", [1]), ("d", [2]), ("i", [(4, "b")])]
    want = [(("a",), ("a",)), (("a", "b"), ("a", "b")), (("a", "b"), ("a", "b", "a")), (("a", "b"), ("b", "a")),
            (("a",), ("a",)), (("a", "b"), ("a", "b"))]
    changes = []
    for (kind, rows), (d, a) in zip(steps, want):
        if kind == "i":
            engine.insert("t", [{"id": i, "g": "x", "v": v} for i, v in rows])
        else:
            engine.delete("t", [{"id": i} for i in rows])
        engine.run_until_idle()
        changes.append(q.poll())
        (row,) = final_table(changes).to_pylist()
        assert (tuple(row["d"]), tuple(row["a"])) == (d, a)
        assert dict(row["c"]) == {v: 1 for v in d}


def random_changes(n: int, seed: int) -> list[tuple[str, list[dict]]]:
    """Random upserts (new ids and changed rows) and deletes of a table keyed by id, in small batches."""
    rng = random.Random(seed)
    live: set[int] = set()
    batches = []
    for _ in range(n):
        rows, kind = [], "d" if live and rng.random() < 0.3 else "u"
        for _ in range(rng.randint(1, 4)):
            if kind == "d":
                if live:
                    i = rng.choice(sorted(live))
                    live.discard(i)
                    rows.append({"id": i})
            else:
                i = rng.randrange(40)
                if i in live or any(r["id"] == i for r in rows):
                    continue
                live.add(i)
                rows.append({"id": i, "g": rng.choice("xy"), "v": None if rng.random() < 0.15 else rng.randrange(5)})
        if rows:
            batches.append((kind, rows))
    return batches


def test_an_updating_input_with_random_upserts_and_deletes_matches_a_hand_replay():
    ddl = "CREATE TABLE t (id BIGINT, g VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')"
    engine = dsms.Engine()
    engine.execute(ddl)
    q = engine.query("SELECT g, ARRAY_AGG(DISTINCT v) AS a, ARRAY_AGG(DISTINCT v IGNORE NULLS) AS ai, "
                     "COLLECT(DISTINCT v) AS c, COUNT(*) AS n FROM t GROUP BY g")
    # The oracle: the table's rows, and per group each value's count and the values in the order they entered.
    table: dict[int, dict] = {}
    counts: dict = {}
    order: dict = {}
    changes = []

    def enter(row, sign):
        g, v = row["g"], row["v"]
        c = counts.setdefault(g, {})
        c[v] = c.get(v, 0) + sign
        if sign > 0 and c[v] == 1:
            order.setdefault(g, []).append(v)
        if sign < 0 and c[v] == 0:
            order[g].remove(v)
            del c[v]

    for kind, rows in random_changes(160, seed=21):
        for r in rows:
            if r["id"] in table:
                enter(table.pop(r["id"]), -1)
            if kind == "u":
                table[r["id"]] = r
                enter(r, +1)
        (engine.insert if kind == "u" else engine.delete)("t", rows)
        engine.run_until_idle()
        changes.append(q.poll())
    want = {}
    for g, values in order.items():
        n = sum(counts[g].values())
        if n:
            kept = tuple(v for v in values if v is not None)
            want[g] = (tuple(values), kept or None, {v: 1 for v in kept}, n)
    got = {r["g"]: (tuple(r["a"]), None if r["ai"] is None else tuple(r["ai"]), dict(r["c"]), r["n"])
           for r in final_table([c for c in changes if c.num_rows]).to_pylist()}
    assert got == want
    assert sum(len(v) for v in order.values()) > 4


def test_explain_shows_distinct_and_spark_refuses_as_without_it(tmp_path):
    engine = dsms.Engine()
    engine.execute(DDL)
    assert "ARRAY_AGG(DISTINCT v)" in engine.explain("SELECT k, ARRAY_AGG(DISTINCT v) AS a FROM ev GROUP BY k")
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"k": "a", "v": 1, "price": 1.0, "ts": "2024-01-01 00:00:00"}) + "\n")
    spark = dsms.Engine()
    spark.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    spark.execute("SET 'engine' = 'spark'")
    for call in ("ARRAY_AGG(DISTINCT v)", "COLLECT(DISTINCT v)"):
        with pytest.raises(dsms.DsmsError, match=f"cannot compute {call.split('(')[0]}"):
            spark.query(f"SELECT k, {call} AS x FROM ev GROUP BY k")


def test_a_restore_mid_run_changes_nothing():
    # The group aggregate's value logs and a HOP window's panes are state: a query moved to a fresh engine
    # after half the input goes on as if it had not moved.
    grouped = f"SELECT k, {AGGS} FROM ev GROUP BY k"
    hop = (f"SELECT window_start, window_end, k, {AGGS} FROM TABLE({WINDOWS['hop'][0]}) "
           "GROUP BY window_start, window_end, k")
    first, rest = EV.slice(0, 260), EV.slice(260)
    for sql, keys, oracle in ((grouped, ["k"], f"SELECT k, {ORACLE} FROM ev GROUP BY k"),
                              (hop, ["window_start", "window_end", "k"],
                               f"SELECT window_start, window_end, k, {ORACLE.replace('ORDER BY i', f'ORDER BY -{PANE}, i')} "
                               f"FROM ({WINDOWS['hop'][1]}) GROUP BY ALL")):
        engine = dsms.Engine()
        engine.execute(DDL)
        q = engine.query(sql)
        changes, pieces = [], [first.slice(i, 13) for i in range(0, first.num_rows, 13)]
        for piece in pieces:
            engine.insert("ev", piece)
            engine.run_until_idle()
            changes.append(q.poll())
        engine, q, _ = restarted(DDL, sql, q, [("ev", piece) for piece in pieces])  # the log as it was fed
        for i in range(0, rest.num_rows, 17):
            engine.insert("ev", rest.slice(i, 17))
            engine.run_until_idle()
            changes.append(q.poll())
        engine.end_input()
        engine.run_until_idle()
        changes.append(q.poll())
        got = by_key(final_table([c for c in changes if c.num_rows]), keys)
        assert got == by_key(duck(oracle, ev=NUMBERED), keys, oracle=True)
