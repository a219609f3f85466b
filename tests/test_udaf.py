"""Python aggregate functions (create_accumulator / accumulate / get_value) in group and window aggregates.

The oracle is DuckDB's own ``median`` over the same events (the Python
function computes a median with ``statistics.median``), which the runtime
gets in many small batches and the DuckDB route reads from a file; an
updating table gets random upserts and deletes, and its final result is
compared with DuckDB's over the rows that remain.
"""

from __future__ import annotations

import datetime
import json
import random
import statistics
import textwrap

import pyarrow as pa
import pytest

import dsms
from dsms.grammar import SqlError

from changes import final_table, ops
from oracle import duck, events, feed, rows, tumble_on_time


class Median:
    """A Python aggregate function in PyFlink's shape (retract and merge are not needed by dsms)."""

    def create_accumulator(self):
        return []

    def accumulate(self, acc, v):
        acc.append(v)

    def get_value(self, acc) -> float:
        return float(statistics.median(acc)) if acc else None


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


def test_a_group_aggregate_over_a_stream_matches_duckdb_over_small_batches():
    data = events(500, seed=11)
    engine = engine_with_median()
    engine.execute(DDL)
    q = engine.query("SELECT k, mid(v) AS m, COUNT(v) AS n FROM ev GROUP BY k")
    feed(engine, "ev", data, max_batch=19)
    assert rows(q.snapshot()) == rows(duck("SELECT k, median(v) AS m, COUNT(v) AS n FROM ev GROUP BY k", ev=data))


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


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_windows_and_a_group_aggregate_over_a_file_on_both_routes(tmp_path, route):
    data = events(400, seed=14, disorder_s=0)
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n" for r in data.to_pylist()))
    engine = engine_with_median()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json', "
                                                       "'batch.size' = '29'"))
    engine.execute(f"SET 'engine' = '{route}'")
    assert engine.explain(TUMBLE).startswith(f"route: {route}")
    q, hop = engine.query(TUMBLE), engine.query(HOP)
    grouped = engine.query("SELECT k, mid(v) FILTER (WHERE price > 20) AS m FROM ev GROUP BY k")
    engine.run_until_idle()
    assert rows(q.snapshot()) == rows(duck(TUMBLE_ORACLE, ev=data))
    assert rows(hop.snapshot()) == rows(duck(HOP_ORACLE, ev=data))
    assert rows(grouped.snapshot()) == rows(duck("SELECT k, median(v) FILTER (WHERE price > 20) AS m FROM ev "
                                                 "GROUP BY k", ev=data))


def test_an_updating_input_retracts_values_and_recomputes_the_result():
    rng = random.Random(15)
    engine = engine_with_median()
    engine.execute("CREATE TABLE acct (id BIGINT, k STRING, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
                   "WITH (connector = 'memory')")
    q = engine.query("SELECT k, mid(v) AS m, COUNT(*) AS n FROM acct GROUP BY k")
    state: dict[int, dict] = {}
    collected = []
    for _ in range(60):  # upserts and deletes in small batches
        batch = [{"id": rng.randrange(25), "k": rng.choice(["a", "b", "c"]), "v": rng.choice([None, *range(-9, 30)])}
                 for _ in range(rng.randint(1, 6))]
        engine.insert("acct", batch)
        state.update({r["id"]: r for r in batch})
        gone = [i for i in list(state) if rng.random() < 0.05]
        if gone:
            engine.delete("acct", [(i,) for i in gone])
            for i in gone:
                del state[i]
        collected += list(q.changes())
    assert {"-U", "+U"} <= ops(collected)
    current = pa.Table.from_pylist(list(state.values()), schema=pa.schema([("id", pa.int64()), ("k", pa.string()),
                                                                           ("v", pa.int64())]))
    expected = duck("SELECT k, median(v) AS m, COUNT(*) AS n FROM acct GROUP BY k", acct=current)
    assert rows(final_table(collected)) == rows(expected)


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


@pytest.mark.parametrize("sql, words", [
    ("SELECT k, mid(v) FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end, k", "not supported in a SESSION window yet"),
    ("SELECT k, mid(v) OVER (PARTITION BY k ORDER BY ts) FROM ev", "mid is not supported over a window"),
    ("SELECT k, mid(DISTINCT v) FROM ev GROUP BY k", "mid(DISTINCT ...) is not supported"),
    ("SELECT k, mid(v, price) FROM ev GROUP BY k", "the aggregate function mid takes one argument"),
])
def test_what_it_cannot_do_is_refused_with_a_reason(sql, words):
    engine = engine_with_median()
    engine.execute(DDL)
    with pytest.raises(SqlError, match=words.replace("(", r"\(").replace(")", r"\)")):
        engine.query(sql)


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


def test_a_failure_names_the_function_and_its_values():
    class Fragile(Median):
        def accumulate(self, acc, v):
            if v == 13:
                raise ValueError("unlucky")
            acc.append(v)

    engine = dsms.Engine()
    engine.create_function("fragile", Fragile())
    engine.execute(DDL)
    q = engine.query("SELECT k, fragile(v) AS m FROM ev GROUP BY k")
    engine.insert("ev", [("a", 1, 1.0, "2024-01-01 00:00:00"), ("a", 13, 1.0, "2024-01-01 00:00:01")])
    with pytest.raises(dsms.PythonFunctionError, match=r"the Python function fragile failed on the row "
                                                        r"fragile\(\[.*13.*\]\): ValueError: unlucky"):
        engine.run_until_idle()
    assert q.status == "failed"


def test_the_spark_route_refuses_it_naming_the_route_that_runs_it(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"k": "a", "v": 1, "price": 1.0, "ts": "2024-01-01 00:00:00"}) + "\n")
    engine = engine_with_median()
    engine.execute(DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'json'"))
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="Python aggregate function mid") as e:
        engine.query("SELECT k, mid(v) AS m FROM ev GROUP BY k")
    assert "duckdb" in str(e.value)


def test_a_standing_query_goes_on_from_its_checkpoint_after_a_restart(tmp_path):
    (tmp_path / "totals.py").write_text(textwrap.dedent('''
        class Total:
            def create_accumulator(self):
                return [0]

            def accumulate(self, acc, v):
                acc[0] += v

            def get_value(self, acc) -> int:
                return acc[0]
    '''))
    state = str(tmp_path / "state")
    window = ("SELECT window_start, k, tot(v) AS t FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
              "GROUP BY window_start, window_end, k")
    with dsms.Engine(state_dir=state, base_dir=str(tmp_path)) as engine:
        engine.execute("CREATE FUNCTION tot AS 'totals.Total'")
        engine.execute(DDL)
        engine.execute(f"CREATE MATERIALIZED VIEW w AS {window}")
        engine.execute("CREATE MATERIALIZED VIEW g AS SELECT k, tot(v) AS t FROM ev GROUP BY k")
        engine.insert("ev", [("a", 1, 0.0, "2024-01-01 00:00:01"), ("a", 2, 0.0, "2024-01-01 00:00:02")])
        engine.run_until_idle()
        engine.checkpoint()
    with dsms.Engine(state_dir=state, base_dir=str(tmp_path)) as engine:  # the function is imported again
        engine.insert("ev", [("a", 4, 0.0, "2024-01-01 00:00:03"), ("a", 8, 0.0, "2024-01-01 00:00:30")])
        engine.run_until_idle()
        assert rows(engine.execute("SELECT * FROM w").table) == [(datetime.datetime(2024, 1, 1), "a", 7)]
        assert rows(engine.execute("SELECT * FROM g").table) == [("a", 15)]
