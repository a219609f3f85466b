"""Python aggregate functions (PyFlink's AggregateFunction) in group and window aggregates.

The oracle is DuckDB's own aggregate over the same events (``median`` for a
function that computes a median with ``statistics.median``, ``sum`` for a
running sum, a weighted average for a function of two arguments), or
hand-computed sessions; the runtime gets the events in many small batches
and the DuckDB route reads them from a file; an updating table gets random
upserts and deletes, and its final result is compared with DuckDB's over
the rows that remain. ``Counted`` counts the calls of each method, which
shows that ``retract`` and ``merge`` are called and that values are
accumulated once each, not replayed.
"""

from __future__ import annotations

import collections
import datetime
import json
import random
import statistics
import textwrap

import pyarrow as pa
import pytest

import dsms
from dsms.grammar import SqlError

from changes import ACCT_DDL, churn_acct, final_table, ops
from oracle import duck, events, feed, rows, tumble_on_time


class Median:
    """A Python aggregate function in PyFlink's shape: its accumulator is the list of its values."""

    def create_accumulator(self):
        return []

    def accumulate(self, acc, v):
        acc.append(v)

    def retract(self, acc, v):
        acc.remove(v)

    def merge(self, acc, accs):
        for other in accs:
            acc.extend(other)

    def get_value(self, acc) -> float:
        return float(statistics.median(acc)) if acc else None


class Counted:
    """A sum whose accumulator is two floats (its size never changes), counting the calls of its methods."""

    def __init__(self):
        self.calls = collections.Counter()

    def create_accumulator(self):
        return [0.0, 0.0]

    def accumulate(self, acc, v):
        self.calls["accumulate"] += 1
        acc[0] += v
        acc[1] += 1

    def retract(self, acc, v):
        self.calls["retract"] += 1
        acc[0] -= v
        acc[1] -= 1

    def merge(self, acc, accs):
        self.calls["merge"] += 1
        for other in accs:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc) -> int:
        return int(acc[0]) if acc[1] else None


class WeightedAvg:
    """Two arguments: ``accumulate(acc, value, weight)``."""

    def create_accumulator(self):
        return [0.0, 0.0]

    def accumulate(self, acc, v, w):
        if v is not None and w is not None:
            acc[0] += v * w
            acc[1] += w

    def merge(self, acc, accs):
        for other in accs:
            acc[0] += other[0]
            acc[1] += other[1]

    def get_value(self, acc) -> float:
        return round(acc[0] / acc[1], 3) if acc[1] else None


DDL = """CREATE STREAM ev (k STRING, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory')"""
TUMBLE = """SELECT window_start, k, mid(v) AS m, COUNT(*) AS n
            FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""
TUMBLE_ORACLE = """SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, k, median(v) AS m, COUNT(*) AS n
                   FROM ev GROUP BY ALL"""
HOP = """SELECT window_start, k, mid(v) FILTER (WHERE price > 20) AS m
         FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
         GROUP BY window_start, window_end, k"""
CUMULATE = """SELECT window_start, window_end, k, mid(v) AS m
              FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND))
              GROUP BY window_start, window_end, k"""
CUMULATE_ORACLE = """SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, window_end, k, median(v) AS m
                     FROM (SELECT *, unnest(list_distinct([time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds',
                                          time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds'])) AS window_end
                           FROM ev) GROUP BY ALL"""
HOP_ORACLE = """SELECT time_bucket(INTERVAL '5 seconds', ts) - i * INTERVAL '5 seconds' AS window_start, k,
                       median(v) FILTER (WHERE price > 20) AS m
                FROM ev CROSS JOIN (VALUES (0), (1)) AS o(i) GROUP BY ALL"""


def engine_with_median() -> dsms.Engine:
    engine = dsms.Engine()
    engine.create_function("mid", Median())
    return engine


def present(data: pa.Table) -> int:
    """How many events have a value (NULL values are skipped, as the built-in aggregates skip them)."""
    return data.num_rows - data.column("v").null_count


def test_a_group_aggregate_over_a_stream_matches_duckdb_and_accumulates_each_value_once():
    data = events(500, seed=11)
    engine = engine_with_median()
    counted = Counted()
    engine.create_function("total", counted)
    engine.execute(DDL)
    q = engine.query("SELECT k, mid(v) AS m, total(v) AS t, COUNT(v) AS n FROM ev GROUP BY k")
    feed(engine, "ev", data, max_batch=19)
    assert rows(q.snapshot()) == rows(duck("SELECT k, median(v) AS m, SUM(v) AS t, COUNT(v) AS n FROM ev GROUP BY k",
                                           ev=data))
    # A result is due after every batch: each value was accumulated once, never replayed into a new accumulator.
    assert counted.calls == {"accumulate": present(data)}


def test_tumble_hop_and_cumulate_windows_on_the_runtime_match_duckdb():
    data = events(600, seed=12)
    engine = engine_with_median()
    engine.execute(DDL)
    tumble = engine.query(TUMBLE)
    feed(engine, "ev", data, max_batch=23)
    engine.end_input("ev")
    engine.run_until_idle()
    assert tumble.changelog == "append-only"
    assert rows(tumble.snapshot()) == rows(duck(TUMBLE_ORACLE, ev=tumble_on_time(data, 5, 10)))

    in_order = events(400, seed=13, disorder_s=0, dup_rate=0.3)  # none late: every hop window counts every row
    engine = engine_with_median()
    engine.execute(DDL)
    hop, cumulate = engine.query(HOP), engine.query(CUMULATE)
    feed(engine, "ev", in_order, max_batch=17)
    engine.end_input("ev")
    engine.run_until_idle()
    assert rows(hop.snapshot()) == rows(duck(HOP_ORACLE, ev=in_order))
    assert rows(cumulate.snapshot()) == rows(duck(CUMULATE_ORACLE, ev=in_order))


def test_a_hop_window_merges_the_accumulators_of_its_slices_and_accumulates_each_value_once():
    data = events(400, seed=17, disorder_s=0)
    counted = Counted()
    engine = dsms.Engine()
    engine.create_function("total", counted)
    engine.create_function("wavg", WeightedAvg())
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, k, total(v) AS t, wavg(v, price) AS w
                        FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
                        GROUP BY window_start, window_end, k""")
    feed(engine, "ev", data, max_batch=13)
    engine.end_input("ev")
    engine.run_until_idle()
    expected = duck("""SELECT time_bucket(INTERVAL '5 seconds', ts) - i * INTERVAL '5 seconds' AS window_start, k,
                              SUM(v) AS t, round(SUM(v * price) / SUM(price) FILTER (WHERE v IS NOT NULL), 3) AS w
                       FROM ev CROSS JOIN (VALUES (0), (1), (2)) AS o(i) GROUP BY ALL""", ev=data)
    assert rows(q.snapshot()) == rows(expected)
    # A value is accumulated once, into its 5 s slice, however many of the three windows it is in; each window
    # merges its slices' accumulators.
    assert counted.calls["accumulate"] == present(data)
    several = duck("""SELECT COUNT(*) AS n FROM (
                        SELECT time_bucket(INTERVAL '5 seconds', ts) - i * INTERVAL '5 seconds' AS ws, k,
                               COUNT(DISTINCT time_bucket(INTERVAL '5 seconds', ts)) AS slices
                        FROM ev CROSS JOIN (VALUES (0), (1), (2)) AS o(i) GROUP BY ALL) WHERE slices > 1""", ev=data)
    assert counted.calls["merge"] == several.column("n")[0].as_py() > 0  # the windows of more than one slice
    assert "retract" not in counted.calls


def sessions(data: pa.Table, gap_s: float) -> list[tuple]:
    """Hand-computed session windows per key (an event within the gap of a session's end joins it, touching
    included, as Flink's TimeWindow.intersects): (start, end, key, median of the values)."""
    by_key: dict[str, list] = collections.defaultdict(list)
    for r in data.to_pylist():
        if r["k"] is not None:
            by_key[r["k"]].append((r["ts"], r["v"]))
    gap = datetime.timedelta(seconds=gap_s)
    found = []
    for k, evs in by_key.items():
        current = None  # [start, end, values]
        for ts, v in sorted(evs, key=lambda e: e[0]):
            if current is not None and ts <= current[1]:
                current[1] = max(current[1], ts + gap)
                current[2].append(v)
            else:
                current = [ts, ts + gap, [v]]
                found.append((k, current))
    out = []
    for k, (start, end, values) in found:
        kept = [x for x in values if x is not None]
        out.append((start, end, k, float(statistics.median(kept)) if kept else None))
    return sorted(out, key=repr)


def test_session_windows_merge_accumulators_and_match_hand_computed_sessions():
    data = events(300, seed=18, disorder_s=0, span_s=600)
    engine = engine_with_median()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, window_end, k, mid(v) AS m
                        FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))
                        GROUP BY window_start, window_end, k""")
    feed(engine, "ev", data, max_batch=11)
    engine.end_input("ev")
    engine.run_until_idle()
    got = sorted(((r["window_start"], r["window_end"], r["k"], r["m"]) for r in q.snapshot().to_pylist()
                  if r["k"] is not None), key=repr)
    assert got == sessions(data, 8)


def test_an_event_that_bridges_two_sessions_merges_their_accumulators():
    counted = Counted()
    engine = dsms.Engine()
    engine.create_function("total", counted)
    engine.execute("""CREATE STREAM s (k STRING, v BIGINT, ts TIMESTAMP(3),
                      WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE) WITH (connector = 'memory')""")
    q = engine.query("""SELECT window_start, window_end, total(v) AS t
                        FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND))
                        GROUP BY window_start, window_end, k""")
    # two sessions of two events each:  [0 s, 11 s) and [15 s, 26 s); then 8 s joins them into [0 s, 26 s)
    engine.insert("s", [("a", 1, "2024-01-01 00:00:00"), ("a", 2, "2024-01-01 00:00:01"),
                        ("a", 4, "2024-01-01 00:00:15"), ("a", 8, "2024-01-01 00:00:16")])
    engine.run_until_idle()
    engine.insert("s", [("a", 16, "2024-01-01 00:00:08")])
    engine.end_input("s")
    engine.run_until_idle()
    t = datetime.datetime(2024, 1, 1)
    assert rows(q.snapshot()) == [(t, t + datetime.timedelta(seconds=26), 31)]
    assert counted.calls == {"accumulate": 5, "merge": 1}


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_windows_and_a_group_aggregate_over_a_file_on_both_routes(tmp_path, route):
    data = events(400, seed=14, disorder_s=0)
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n" for r in data.to_pylist()))
    engine = engine_with_median()
    engine.create_function("wavg", WeightedAvg())
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json', "
                                                       "'batch.size' = '29'"))
    engine.execute(f"SET 'engine' = '{route}'")
    assert engine.explain(TUMBLE).startswith(f"route: {route}")
    q, hop = engine.query(TUMBLE), engine.query(HOP)
    grouped = engine.query("SELECT k, mid(v) FILTER (WHERE price > 5) AS m, wavg(v, price) AS w FROM ev GROUP BY k")
    session = engine.query("""SELECT window_start, window_end, k, mid(v) AS m
                              FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '2' SECOND))
                              GROUP BY window_start, window_end, k""") if route == "runtime" else None
    engine.run_until_idle()  # (the DuckDB route runs no session window: what is late depends on arrival)
    assert session is None or sorted(((r["window_start"], r["window_end"], r["k"], r["m"]) for r in session.snapshot().to_pylist()
                   if r["k"] is not None), key=repr) == sessions(data, 2)
    assert rows(q.snapshot()) == rows(duck(TUMBLE_ORACLE, ev=data))
    assert rows(hop.snapshot()) == rows(duck(HOP_ORACLE, ev=data))
    assert rows(grouped.snapshot()) == rows(duck(
        "SELECT k, median(v) FILTER (WHERE price > 5) AS m, "
        "round(SUM(v * price) / SUM(price) FILTER (WHERE v IS NOT NULL), 3) AS w FROM ev GROUP BY k", ev=data))


def test_an_updating_input_retracts_values_from_the_accumulators():
    rng = random.Random(15)
    engine = engine_with_median()
    counted = Counted()
    engine.create_function("total", counted)
    engine.execute(ACCT_DDL)
    q = engine.query("SELECT k, mid(v) AS m, total(v) AS t, COUNT(*) AS n FROM acct GROUP BY k")
    collected, current = churn_acct(engine, q, rng, ["a", "b", "c"], [None, *range(-9, 30)])
    assert {"-U", "+U"} <= ops(collected)
    expected = duck("SELECT k, median(v) AS m, SUM(v) AS t, COUNT(*) AS n FROM acct GROUP BY k", acct=current)
    assert rows(final_table(collected)) == rows(expected)
    # Every value still there was accumulated once more than it was retracted; nothing was replayed.
    assert counted.calls["retract"] > 0
    assert counted.calls["accumulate"] - counted.calls["retract"] == present(current)


def test_the_state_is_the_accumulator_and_does_not_grow_with_the_values():
    engine = dsms.Engine()
    engine.create_function("total", Counted())
    engine.execute(DDL)
    grouped = engine.query("SELECT k, total(v) AS t FROM ev GROUP BY k")
    window = engine.query("SELECT k, total(v) AS t FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' DAY)) "
                          "GROUP BY window_start, window_end, k")
    sizes = []
    for i in range(120):
        engine.insert("ev", [(f"k{j % 3}", i + j, 1.0, f"2024-01-01 00:{i // 60:02}:{i % 60:02}") for j in range(10)])
        engine.run_until_idle()
        if i in (10, 119):
            sizes.append((grouped.stats()["state_bytes"], window.stats()["state_bytes"]))
    assert sizes[0] == sizes[1]  # 12 times the values, the same bytes: one accumulator per key
    assert rows(grouped.snapshot()) == [(f"k{j}", sum(i + jj for i in range(120) for jj in range(10) if jj % 3 == j))
                                        for j in range(3)]


def test_create_function_loads_an_aggregate_class(tmp_path):
    (tmp_path / "aggs.py").write_text(textwrap.dedent('''
        class Spread:
            def create_accumulator(self):
                return [None, None]

            def accumulate(self, acc, v):
                acc[0] = v if acc[0] is None else min(acc[0], v)
                acc[1] = v if acc[1] is None else max(acc[1], v)

            def get_value(self, acc) -> int:
                return None if acc[0] is None else acc[1] - acc[0]
    '''))
    engine = dsms.Engine(base_dir=str(tmp_path))
    assert engine.execute("CREATE FUNCTION spread AS 'aggs.Spread' LANGUAGE PYTHON").message == "Created function spread"
    shown = [r for r in engine.execute("SHOW FUNCTIONS").table.to_pylist() if r["name"] == "spread"]
    assert shown == [{"name": "spread", "kind": "python aggregate", "definition": "aggs.Spread RETURNS BIGINT"}]
    engine.execute(DDL)
    q = engine.query("SELECT k, spread(v) AS s FROM ev GROUP BY k")
    data = events(200, seed=16)
    feed(engine, "ev", data, max_batch=11)
    assert rows(q.snapshot()) == rows(duck("SELECT k, MAX(v) - MIN(v) AS s FROM ev GROUP BY k", ev=data))


class Plain:
    """Neither retract nor merge."""

    def create_accumulator(self):
        return [0]

    def accumulate(self, acc, v):
        acc[0] += 1

    def get_value(self, acc) -> int:
        return acc[0]


@pytest.mark.parametrize("sql, words", [
    ("SELECT k, plain(v) FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end, k", "plain has no merge, which a SESSION window needs"),
    ("SELECT k, plain(v) FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end, k", "plain has no merge, which a HOP window needs"),
    ("SELECT k, plain(v) FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end, k", "plain has no merge, which a CUMULATE window needs"),
    ("SELECT k, plain(v) FROM acct GROUP BY k", "plain has no retract, which its updating input needs"),
    ("SELECT k, mid(v) OVER (PARTITION BY k ORDER BY ts) FROM ev", "mid is not supported over a window"),
    ("SELECT k, mid(DISTINCT v) FROM ev GROUP BY k", "mid(DISTINCT ...) is not supported"),
])
def test_what_it_cannot_do_is_refused_with_a_reason(sql, words):
    engine = engine_with_median()
    engine.create_function("plain", Plain())
    engine.execute(DDL)
    engine.execute("CREATE TABLE acct (id BIGINT, k STRING, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
                   "WITH (connector = 'memory')")
    with pytest.raises(SqlError, match=words.replace("(", r"\(").replace(")", r"\)")):
        engine.query(sql)


def test_without_retract_and_merge_it_still_runs_where_neither_is_needed():
    data = events(200, seed=19)
    engine = dsms.Engine()
    engine.create_function("plain", Plain())
    engine.execute(DDL)
    grouped = engine.query("SELECT k, plain(v) AS n FROM ev GROUP BY k")
    tumble = engine.query("SELECT window_start, k, plain(v) AS n FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), "
                          "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k")
    feed(engine, "ev", data, max_batch=9)
    engine.end_input("ev")
    engine.run_until_idle()
    assert rows(grouped.snapshot()) == rows(duck("SELECT k, COUNT(v) AS n FROM ev GROUP BY k", ev=data))
    assert rows(tumble.snapshot()) == rows(duck("SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, k, "
                                                "COUNT(v) AS n FROM ev GROUP BY ALL", ev=tumble_on_time(data, 5, 10)))


def test_bad_definitions_are_refused():
    class NoValue:
        def create_accumulator(self):
            return 0

        def accumulate(self, acc, v):
            pass

    engine = dsms.Engine()
    with pytest.raises(SqlError, match="it has no get_value"):
        engine.create_function("novalue", NoValue(), returns="INT")
    with pytest.raises(SqlError, match="result type is not declared"):
        engine.create_function("untyped", type("Untyped", (Median,), {"get_value": lambda self, acc: 0})())


class Fragile(Median):
    def accumulate(self, acc, v):
        if v == 13:
            raise ValueError("unlucky")
        acc.append(v)

    def retract(self, acc, v):
        raise KeyError(v)

    def get_value(self, acc) -> float:
        if 7 in acc:
            raise ZeroDivisionError("seven")
        return super().get_value(acc)


@pytest.mark.parametrize("rows_in, words", [
    ([("a", 1), ("a", 13)], r"fragile failed in accumulate on the row fragile\(13\): ValueError: unlucky"),
    ([("a", 7)], r"fragile failed in get_value on the accumulator \[7\]: ZeroDivisionError: seven"),
])
@pytest.mark.parametrize("window", [False, True])
def test_a_failure_names_the_function_the_method_and_the_row(rows_in, words, window):
    engine = dsms.Engine()
    engine.create_function("fragile", Fragile())
    engine.execute(DDL)
    sql = "SELECT k, fragile(v) AS m FROM ev GROUP BY k"
    if window:
        sql = ("SELECT k, fragile(v) AS m FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
               "GROUP BY window_start, window_end, k")
    q = engine.query(sql)
    engine.insert("ev", [(k, v, 1.0, f"2024-01-01 00:00:0{i}") for i, (k, v) in enumerate(rows_in)])
    engine.insert("ev", [("b", 1, 1.0, "2024-01-01 00:00:05")])
    engine.end_input("ev")
    with pytest.raises(dsms.PythonFunctionError, match=r"the Python aggregate function " + words):
        engine.run_until_idle()
    assert q.status == "failed"


def test_a_failing_retract_names_its_row():
    engine = dsms.Engine()
    engine.create_function("fragile", Fragile())
    engine.execute("CREATE TABLE acct (id BIGINT, k STRING, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
                   "WITH (connector = 'memory')")
    engine.query("SELECT k, fragile(v) AS m FROM acct GROUP BY k")
    engine.insert("acct", [(1, "a", 5)])
    engine.run_until_idle()
    engine.insert("acct", [(1, "a", 6)])
    with pytest.raises(dsms.PythonFunctionError, match=r"fragile failed in retract on the row fragile\(5\): KeyError"):
        engine.run_until_idle()


def test_the_spark_route_refuses_it_naming_the_route_that_runs_it(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"k": "a", "v": 1, "price": 1.0, "ts": "2024-01-01 00:00:00"}) + "\n")
    engine = engine_with_median()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="Python aggregate function mid") as e:
        engine.query("SELECT k, mid(v) AS m FROM ev GROUP BY k")
    assert "duckdb" in str(e.value)


def test_a_standing_query_goes_on_from_its_restored_accumulators_after_a_restart(tmp_path):
    (tmp_path / "totals.py").write_text(textwrap.dedent('''
        CALLS = []

        class Total:
            def create_accumulator(self):
                return [0]

            def accumulate(self, acc, v):
                CALLS.append(v)
                acc[0] += v

            def retract(self, acc, v):
                acc[0] -= v

            def merge(self, acc, accs):
                acc[0] += sum(a[0] for a in accs)

            def get_value(self, acc) -> int:
                return acc[0]
    '''))
    state = str(tmp_path / "state")
    window = ("SELECT window_start, k, tot(v) AS t FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
              "GROUP BY window_start, window_end, k")
    hop = ("SELECT window_start, k, tot(v) AS t FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
           "INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k")
    with dsms.Engine(state_dir=state, base_dir=str(tmp_path)) as engine:
        engine.execute("CREATE FUNCTION tot AS 'totals.Total'")
        engine.execute(DDL)
        engine.execute(f"CREATE MATERIALIZED VIEW w AS {window}")
        engine.execute(f"CREATE MATERIALIZED VIEW h AS {hop}")
        engine.execute("CREATE MATERIALIZED VIEW g AS SELECT k, tot(v) AS t FROM ev GROUP BY k")
        engine.insert("ev", [("a", 1, 0.0, "2024-01-01 00:00:01"), ("a", 2, 0.0, "2024-01-01 00:00:02"),
                             ("a", 32, 0.0, "2024-01-01 00:00:06")])
        engine.run_until_idle()
        engine.checkpoint()
    import totals  # the module CREATE FUNCTION imported (from the state directory's record, after the restart)
    totals.CALLS.clear()
    with dsms.Engine(state_dir=state, base_dir=str(tmp_path)) as engine:
        engine.insert("ev", [("a", 4, 0.0, "2024-01-01 00:00:03"), ("a", 8, 0.0, "2024-01-01 00:00:30")])
        engine.run_until_idle()
        t = datetime.datetime(2024, 1, 1)
        assert rows(engine.execute("SELECT * FROM w").table) == [(t, "a", 39)]
        assert rows(engine.execute("SELECT * FROM h").table) == [
            (t - datetime.timedelta(seconds=5), "a", 7), (t, "a", 39), (t + datetime.timedelta(seconds=5), "a", 32)]
        assert rows(engine.execute("SELECT * FROM g").table) == [("a", 47)]
    # Only the new values were accumulated (by each of the three queries): the old ones came back in accumulators.
    assert sorted(totals.CALLS) == [4, 4, 4, 8, 8, 8]


def test_a_window_that_emits_changes_early_ends_with_the_rows_duckdb_computes():
    data = events(300, seed=20)
    engine = engine_with_median()
    engine.execute(DDL)
    q = engine.query(TUMBLE + " EMIT CHANGES")
    collected = []
    for i in range(0, data.num_rows, 7):
        engine.insert("ev", data.slice(i, 7))
        collected += list(q.changes())
    engine.end_input("ev")
    collected += list(q.changes())
    assert {"-U", "+U"} <= ops(collected)
    assert rows(final_table(collected)) == rows(duck(TUMBLE_ORACLE, ev=tumble_on_time(data, 5, 10)))
