"""ARRAY_AGG and COLLECT (planner/aggregate_kinds.py) against plain DuckDB batch SQL.

ARRAY_AGG(x) is the values in arrival order, NULLs included (Flink's
default, RESPECT NULLS; IGNORE NULLS skips them), NULL for no rows; the oracle is DuckDB's
``list(v ORDER BY i)`` over the events numbered in arrival order.
COLLECT(x) is the MULTISET of the non-NULL values, stored as
``MAP<T, INT>``; the oracle is DuckDB's ``histogram(v)`` (an empty map
where every value is NULL, as Flink's CollectAggFunction). Both run in
group aggregates (also over an updating input, where the oracle replays
the inner changelog by hand), in TUMBLE, HOP and CUMULATE windows fed in
small random batches, and on the DuckDB route from a file.
"""

import json

import pyarrow as pa
import pytest

import dsms

from changes import changelog, final_table
from oracle import duck, events, run_query

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""
EV = events(600, seed=41, keys=4, span_s=90, null_rate=0.15)  # disorder 4 s < the 5 s bound: no event is late
NUMBERED = EV.append_column("i", pa.array(range(EV.num_rows)))  # the arrival order

AGGS = ("ARRAY_AGG(v) AS a, ARRAY_AGG(v IGNORE NULLS) FILTER (WHERE price > 5) AS ai, COLLECT(v) AS c, "
        "COLLECT(k) AS ck, COUNT(*) AS n")
ORACLE = ("list(v ORDER BY i) AS a, list(v ORDER BY i) FILTER (WHERE v IS NOT NULL AND price > 5) AS ai, "
          "histogram(v) AS c, histogram(k) AS ck, COUNT(*) AS n")


def by_key(table: pa.Table, keys: list[str]) -> dict:
    """Rows by their key columns: arrays as tuples, multisets as dicts."""
    out = {}
    for r in table.to_pylist():
        key = tuple(r[k] for k in keys)
        assert key not in out
        value = []
        for name, v in r.items():
            if name in keys:
                continue
            if name in ("a", "ai"):
                v = None if v is None else tuple(v)
            elif name in ("c", "ck"):
                v = dict(v or [])  # the oracle's histogram of no values is NULL, Flink's an empty multiset
            value.append(v)
        out[key] = tuple(value)
    return out


def test_group_aggregate_over_small_batches_matches_duckdb():
    q, changes = changelog(DDL, f"SELECT k, {AGGS} FROM ev GROUP BY k", EV, max_batch=30, seed=4)
    want = by_key(duck(f"SELECT k, {ORACLE} FROM ev GROUP BY k", ev=NUMBERED), ["k"])
    assert by_key(final_table(changes), ["k"]) == want
    assert by_key(q.snapshot(), ["k"]) == want
    assert any(None in a for a, *_ in want.values())  # NULLs are kept in the arrays, skipped in the multisets
    assert not any(ai and None in ai for _, ai, *_ in want.values())
    assert q.schema.field("a").type == pa.list_(pa.int64())
    assert q.schema.field("c").type == pa.map_(pa.int64(), pa.int32())


def test_global_aggregate_and_result_types():
    got = run_query(DDL, f"SELECT {AGGS} FROM ev", {"ev": EV}, max_batch=25, seed=5)
    assert by_key(got, []) == by_key(duck(f"SELECT {ORACLE} FROM ev", ev=NUMBERED), [])
    engine = dsms.Engine()
    engine.execute(DDL)
    schema = engine.query("SELECT ARRAY_AGG(k) AS a, COLLECT(price) AS c FROM ev").schema
    assert schema.field("a").type == pa.list_(pa.string())  # ARRAY<STRING>
    assert schema.field("c").type == pa.map_(pa.float64(), pa.int32())  # MULTISET<DOUBLE>, stored as MAP<DOUBLE, INT>


def test_tumble_window_keeps_arrival_order():
    sql = (f"SELECT window_start, k, {AGGS} FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
           "GROUP BY window_start, window_end, k")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=6)
    want = duck(f"SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, k, {ORACLE} FROM ev "
                "GROUP BY ALL", ev=NUMBERED)
    assert got.num_rows > 20
    assert by_key(got, ["window_start", "k"]) == by_key(want, ["window_start", "k"])


PANE = "(epoch_us(ts) - epoch_us(window_start)) // 5000000"  # a row's 5-second pane, counted from the start


@pytest.mark.parametrize("window, oracle, place", [
    ("HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
     "SELECT *, s AS window_start, s + INTERVAL '15 seconds' AS window_end FROM (SELECT *, unnest(range("
     "time_bucket(INTERVAL '5 seconds', ts) - INTERVAL '10 seconds', ts + INTERVAL '1 microsecond', "
     "INTERVAL '5 seconds')) AS s FROM ev)", f"-{PANE}"),
    ("CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)",
     "SELECT *, time_bucket(INTERVAL '20 seconds', ts) AS window_start, e AS window_end FROM (SELECT *, "
     "unnest(range(time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds', "
     "time_bucket(INTERVAL '20 seconds', ts) + INTERVAL '20 seconds' + INTERVAL '1 microsecond', "
     "INTERVAL '5 seconds')) AS e FROM ev)", PANE),
], ids=["hop", "cumulate"])
@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_hop_and_cumulate_windows_take_their_panes_as_flink(window, oracle, place, route, tmp_path):
    # A window is assembled from its panes, as Flink merges its slices: a HOP window's newest pane first, a
    # CUMULATE window's oldest first; each pane's values in arrival order. The multisets are exact.
    sql = (f"SELECT window_start, window_end, k, {AGGS} FROM TABLE({window}) "
           "GROUP BY window_start, window_end, k")
    if route == "runtime":
        got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=7)
    else:
        got = from_a_file(tmp_path, sql, EV, route)
    keys = ["window_start", "window_end", "k"]
    in_panes = ORACLE.replace("ORDER BY i", f"ORDER BY {place}, i")
    want = duck(f"SELECT window_start, window_end, k, {in_panes} FROM ({oracle}) GROUP BY ALL", ev=NUMBERED)
    assert got.num_rows > 20
    assert by_key(got, keys) == by_key(want, keys)
    assert by_key(got, keys) != by_key(duck(f"SELECT window_start, window_end, k, {ORACLE} FROM ({oracle}) "
                                            "GROUP BY ALL", ev=NUMBERED), keys)  # not plain arrival order


def test_an_updating_input_retracts_the_earliest_occurrence():
    # The outer aggregate sees each key's count change: -U takes away the old count's earliest occurrence
    # (Flink's ArrayAggFunction.retract removes the first equal element), +U appends the new one at the end;
    # COLLECT's counts go down by one.
    inner = "SELECT k, COUNT(*) AS n FROM ev GROUP BY k"
    sql = f"SELECT n % 2 AS p, ARRAY_AGG(n) AS a, COLLECT(k) AS c, COUNT(*) AS total FROM ({inner}) GROUP BY n % 2"
    data = EV.slice(0, 150)
    # One event per batch: the inner changes of a batch are one key's, so the outer aggregate sees them in the
    # order a second run emits them in.
    _, changes = changelog(DDL, sql, data, max_batch=1, seed=13)
    inner_changes = changelog(DDL, inner, data, max_batch=1, seed=13)[1]
    groups: dict = {}
    for batch in inner_changes:
        for r in batch.to_pylist():
            items = groups.setdefault(r["n"] % 2, [])
            if r["op"] in ("+I", "+U"):
                items.append((r["k"], r["n"]))
            else:
                items.remove((r["k"], r["n"]))
    want = {}
    for p, items in groups.items():
        if items:
            counts: dict = {}
            for k, _ in items:
                if k is not None:
                    counts[k] = counts.get(k, 0) + 1
            want[(p,)] = (tuple(n for _, n in items), counts, len(items))
    got = by_key(final_table(changes), ["p"])
    assert got == want
    assert any(len(a) > 1 for a, *_ in want.values())


def from_a_file(tmp_path, sql: str, data: pa.Table, route: str) -> pa.Table:
    """The rows of ``sql`` on ``route`` over ``data`` written to a JSON-lines file."""
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n" for r in data.to_pylist()))
    engine = dsms.Engine()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    engine.execute(f"SET 'engine' = '{route}'")
    assert engine.explain(sql).startswith(f"route: {route}")
    q = engine.query(sql)
    engine.run_until_idle()
    return q.snapshot()


def test_duckdb_route_from_a_file_matches_the_runtime(tmp_path):
    path = tmp_path / "ev.jsonl"
    data = EV.slice(0, 300)
    path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n" for r in data.to_pylist()))
    sql = (f"SELECT window_start, k, {AGGS} FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
           "GROUP BY window_start, window_end, k")
    grouped = f"SELECT k, {AGGS} FROM ev GROUP BY k"
    numbered = data.append_column("i", pa.array(range(data.num_rows)))
    want_w = by_key(duck(f"SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, k, {ORACLE} FROM ev "
                         "GROUP BY ALL", ev=numbered), ["window_start", "k"])
    want_g = by_key(duck(f"SELECT k, {ORACLE} FROM ev GROUP BY k", ev=numbered), ["k"])
    for route in ("runtime", "duckdb"):
        engine = dsms.Engine()
        engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json', "
                                                           "'batch.size' = '23'"))
        engine.execute(f"SET 'engine' = '{route}'")
        assert engine.explain(sql).startswith(f"route: {route}")
        w, g = engine.query(sql), engine.query(grouped)
        engine.run_until_idle()
        assert by_key(w.snapshot(), ["window_start", "k"]) == want_w, route
        assert by_key(g.snapshot(), ["k"]) == want_g, route


def test_the_spark_route_refuses_them_naming_the_duckdb_route(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"k": "a", "v": 1, "price": 1.0, "ts": "2024-01-01 00:00:00"}) + "\n")
    engine = dsms.Engine()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    engine.execute("SET 'engine' = 'spark'")
    for call in ("ARRAY_AGG(v)", "COLLECT(v)"):
        with pytest.raises(dsms.DsmsError, match=f"cannot compute {call.split('(')[0]}") as e:
            engine.query(f"SELECT k, {call} AS x FROM ev GROUP BY k")
        assert "duckdb" in str(e.value)


@pytest.mark.parametrize("sql, message", [
    ("SELECT LISTAGG(DISTINCT k) FROM ev", "LISTAGG\\(DISTINCT ...\\) is not supported"),
    ("SELECT ARRAY_AGG(v ORDER BY price) FROM ev", "ARRAY_AGG takes no ORDER BY"),
    ("SELECT ARRAY_AGG(v) FILTER (WHERE price > 1) FROM ev", "ARRAY_AGG keeps NULL values, so FILTER"),
    ("SELECT FIRST_VALUE(v RESPECT NULLS) FROM ev", "FIRST_VALUE skips NULL values: RESPECT NULLS is not supported"),
    ("SELECT k, UPPER(k IGNORE NULLS) FROM ev GROUP BY k", "IGNORE NULLS applies to an aggregate function only"),
    ("SELECT k, ARRAY_AGG(v) FROM ev GROUP BY SESSION(ts, INTERVAL '1' SECOND), k",
     "ARRAY_AGG is not supported in a SESSION window"),
    ("SELECT k, COLLECT(v) FROM ev GROUP BY SESSION(ts, INTERVAL '1' SECOND), k",
     "COLLECT is not supported in a SESSION window"),
])
def test_refusals_say_why_with_a_position(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message) as e:
        engine.plan(sql)
    assert e.value.diagnostic.span is not None


def test_over_an_append_only_input_distinct_is_array_distinct_of_the_arrivals():
    # ARRAY_AGG(DISTINCT v) (tests/test_array_agg_distinct.py) and ARRAY_DISTINCT(ARRAY_AGG(v)) both keep each
    # value where it first arrived.
    sql = "SELECT k, ARRAY_AGG(DISTINCT v) AS d, ARRAY_DISTINCT(ARRAY_AGG(v)) AS a FROM ev GROUP BY k"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30)
    arrays = by_key(duck(f"SELECT k, {ORACLE} FROM ev GROUP BY k", ev=NUMBERED), ["k"])
    want = {key: (tuple(dict.fromkeys(a)),) * 2 for key, (a, *_) in arrays.items()}  # first arrival of each value
    assert {(r["k"],): (tuple(r["d"]), tuple(r["a"])) for r in got.to_pylist()} == want


def test_collect_with_filter_counts_only_the_rows_kept():
    sql = "SELECT k, COLLECT(v) FILTER (WHERE price > 5) AS c FROM ev GROUP BY k"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=20, seed=8)
    want = duck("SELECT k, histogram(v) FILTER (WHERE price > 5) AS c FROM ev GROUP BY k", ev=EV)
    assert by_key(got, ["k"]) == by_key(want, ["k"])
