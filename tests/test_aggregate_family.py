"""The aggregate family (planner/aggregate_kinds.py) against plain DuckDB batch SQL.

STDDEV_POP/SAMP, VAR_POP/SAMP, BIT_AND/OR/XOR, SUM/AVG/MIN/MAX(DISTINCT ...)
and FILTER (WHERE ...) in group aggregates (append-only and updating
inputs, the changelog applied strictly), window TVF aggregates (TUMBLE,
HOP, CUMULATE) and SESSION windows, fed in many small batches on the
runtime. The batch routes run the same shapes in tests/route_shapes.py.

Integer STDDEV/VAR keep the argument's type and Flink's integer
arithmetic (AggregateReduceFunctionsRule: ``(SUM(x*x) - SUM(x)*SUM(x) /
COUNT(x)) / COUNT(x)``); the oracle writes that formula out, and DuckDB's own
STDDEV/VAR check the DOUBLE ones.
"""

import pyarrow as pa
import pytest

import dsms

from changes import changelog, final_table, ops
from oracle import duck, events, flink_int, islands, rows, run_query

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""
EV = events(900, seed=31, keys=5, span_s=120)  # disorder 4 s < the 5 s bound: no event is late

FAMILY = """STDDEV_POP(price) AS sp, STDDEV_SAMP(price) AS ss, VAR_POP(price) AS vp, VAR_SAMP(price) AS vs,
  STDDEV_POP(v) AS spv, VAR_SAMP(v) AS vsv, BIT_AND(v) AS ba, BIT_OR(v) AS bo, BIT_XOR(v) AS bx,
  SUM(DISTINCT v) AS sdv, AVG(DISTINCT v) AS adv, MAX(DISTINCT price) AS mdp, COUNT(DISTINCT v) AS cdv,
  COUNT(*) FILTER (WHERE price > 5) AS nf, SUM(v) FILTER (WHERE price < 3) AS sf,
  COUNT(DISTINCT v) FILTER (WHERE v > 0) AS dvf, MIN(price) FILTER (WHERE v IS NULL OR v < 0) AS mf"""


ORACLE = f"""STDDEV_POP(price), STDDEV_SAMP(price), VAR_POP(price), VAR_SAMP(price),
  {flink_int('stddev_pop', 'v')}, {flink_int('var_samp', 'v')}, BIT_AND(v), BIT_OR(v), BIT_XOR(v),
  SUM(DISTINCT v), TRUNC(AVG(DISTINCT v))::BIGINT, MAX(DISTINCT price), COUNT(DISTINCT v),
  COUNT(*) FILTER (WHERE price > 5), SUM(v) FILTER (WHERE price < 3),
  COUNT(DISTINCT v) FILTER (WHERE v > 0), MIN(price) FILTER (WHERE v IS NULL OR v < 0)"""


def test_group_aggregate_family_matches_duckdb():
    q, changes = changelog(DDL, f"SELECT k, {FAMILY} FROM ev GROUP BY k", EV, max_batch=30, seed=4)
    want = duck(f"SELECT k, {ORACLE} FROM ev GROUP BY k", ev=EV)
    assert rows(final_table(changes)) == rows(want)
    assert rows(q.snapshot()) == rows(want)


def test_global_aggregate_family_matches_duckdb():
    got = run_query(DDL, f"SELECT {FAMILY} FROM ev", {"ev": EV}, max_batch=25)
    assert rows(got) == rows(duck(f"SELECT {ORACLE} FROM ev", ev=EV))


def test_the_family_over_an_updating_input_retracts():
    # Each batch changes some keys' counts and sums: the outer aggregate gets -U/+U pairs (and keys moving
    # between buckets), which must take the old values out of every aggregate.
    inner = "SELECT k, COUNT(*) AS n, SUM(v) AS sv, MAX(price) AS hi FROM ev GROUP BY k"
    outer = """SELECT n % 3 AS b, COUNT(*) AS c, STDDEV_POP(sv) AS sp, VAR_SAMP(hi) AS vs, STDDEV_SAMP(hi) AS ss,
      BIT_AND(n) AS ba, BIT_OR(sv) AS bo, BIT_XOR(n) AS bx, SUM(DISTINCT n) AS sdn, AVG(DISTINCT sv) AS adv,
      MIN(DISTINCT sv) AS mn, COUNT(*) FILTER (WHERE sv > 100) AS nf, MAX(sv) FILTER (WHERE n > 4) AS mf
      FROM ({inner}) GROUP BY n % 3"""
    oracle = f"""SELECT n % 3, COUNT(*), {flink_int('stddev_pop', 'sv')}, VAR_SAMP(hi), STDDEV_SAMP(hi),
      BIT_AND(n), BIT_OR(sv), BIT_XOR(n), SUM(DISTINCT n), TRUNC(AVG(DISTINCT sv))::BIGINT, MIN(sv),
      COUNT(*) FILTER (WHERE sv > 100), MAX(sv) FILTER (WHERE n > 4) FROM ({inner}) GROUP BY n % 3"""
    ddl = DDL.replace("'5' SECOND", "'1' SECOND")
    data = EV.slice(0, 400)
    q, changes = changelog(ddl, outer.format(inner=inner), data, max_batch=6, seed=5)
    want = duck(oracle, ev=data)
    assert rows(final_table(changes)) == rows(want)
    assert {"-U", "+U"} <= ops(changes)


@pytest.mark.parametrize("window, oracle_window", [
    ("TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
     "SELECT *, time_bucket(INTERVAL '10 seconds', ts) AS ws, ws + INTERVAL '10 seconds' AS we FROM ev"),
    ("HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND)",
     "SELECT *, s AS ws, s + INTERVAL '15 seconds' AS we FROM (SELECT *, unnest(range("
     "time_bucket(INTERVAL '5 seconds', ts) - INTERVAL '10 seconds', ts + INTERVAL '1 microsecond', "
     "INTERVAL '5 seconds')) AS s FROM ev)"),
    ("CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)",
     "SELECT *, time_bucket(INTERVAL '20 seconds', ts) AS ws, e AS we FROM (SELECT *, unnest(range("
     "time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds', time_bucket(INTERVAL '20 seconds', ts) + "
     "INTERVAL '20 seconds' + INTERVAL '1 microsecond', INTERVAL '5 seconds')) AS e FROM ev)"),
], ids=["tumble", "hop", "cumulate"])
def test_window_aggregate_family_matches_duckdb(window, oracle_window):
    sql = f"SELECT window_start, window_end, k, {FAMILY} FROM TABLE({window}) GROUP BY window_start, window_end, k"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=6)
    want = duck(f"SELECT ws, we, k, {ORACLE} FROM ({oracle_window}) GROUP BY ws, we, k", ev=EV)
    assert got.num_rows > 20
    assert rows(got) == rows(want)


def test_distinct_strings_in_a_window_aggregate_match_duckdb():
    # COUNT(DISTINCT k) of a VARCHAR: its panes are folded over the distinct strings, not their numbers.
    sql = """SELECT window_start, window_end, COUNT(DISTINCT k) AS dk, COUNT(DISTINCT k) FILTER (WHERE v > 0) AS dkp
      FROM TABLE(CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND))
      GROUP BY window_start, window_end"""
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=8)
    want = duck("""SELECT ws, we, COUNT(DISTINCT k), COUNT(DISTINCT k) FILTER (WHERE v > 0) FROM (SELECT *,
      time_bucket(INTERVAL '20 seconds', ts) AS ws, e AS we FROM (SELECT *, unnest(range(time_bucket(INTERVAL
      '5 seconds', ts) + INTERVAL '5 seconds', time_bucket(INTERVAL '20 seconds', ts) + INTERVAL '20 seconds'
      + INTERVAL '1 microsecond', INTERVAL '5 seconds')) AS e FROM ev)) GROUP BY ws, we""", ev=EV)
    assert got.num_rows > 20
    assert rows(got) == rows(want)


def test_session_window_family_matches_duckdb():
    family = ("STDDEV_POP(price) AS sp, VAR_SAMP(v) AS vsv, BIT_OR(v) AS bo, BIT_XOR(v) AS bx, "
              "COUNT(*) FILTER (WHERE price > 5) AS nf, COUNT(DISTINCT v) AS cdv")
    sql = (f"SELECT k, SESSION_START(ts, INTERVAL '2' SECOND) AS ws, {family} FROM ev "
           "GROUP BY SESSION(ts, INTERVAL '2' SECOND), k")
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=7)
    want = duck(islands(2, select=f"""SELECT k, ws, STDDEV_POP(price), {flink_int('var_samp', 'v')}, BIT_OR(v),
        BIT_XOR(v), COUNT(*) FILTER (WHERE price > 5), COUNT(DISTINCT v) FROM s GROUP BY k, ws"""), ev=EV)
    assert got.num_rows > 20
    assert rows(got) == rows(want)


def test_result_types_follow_flink():
    engine = dsms.Engine()
    engine.execute(DDL.replace("v BIGINT", "v INT, d DECIMAL(10, 2)"))
    plan = engine.plan("SELECT STDDEV_POP(v) AS a, VAR_SAMP(price) AS b, STDDEV_SAMP(d) AS c, BIT_AND(v) AS e, "
                       "SUM(DISTINCT v) AS f, AVG(DISTINCT v) AS g FROM ev")
    types = {f.name: f.type for f in plan.schema}
    assert types == {"a": pa.int32(), "b": pa.float64(), "c": pa.decimal128(38, 6), "e": pa.int32(),
                     "f": pa.int64(), "g": pa.int32()}


@pytest.mark.parametrize("sql, message", [
    ("SELECT BIT_AND(price) FROM ev", "BIT_AND needs an integer argument"),
    ("SELECT STDDEV_POP(k) FROM ev", "STDDEV_POP needs a numeric argument"),
    ("SELECT STDDEV_POP(DISTINCT price) FROM ev", "STDDEV_POP(DISTINCT ...) is not supported"),
    ("SELECT MEDIAN(price) FROM ev", "aggregate MEDIAN is not supported"),
    ("SELECT k, JSON_OBJECTAGG(k VALUE v) FROM ev GROUP BY k", "aggregate JSON_OBJECTAGG is not supported yet"),
    ("SELECT k, JSON_ARRAYAGG(v) FROM ev GROUP BY k", "aggregate JSON_ARRAYAGG is not supported yet"),
    ("SELECT k, VAR_POP(price) OVER (PARTITION BY k ORDER BY ts) FROM ev", "VAR_POP is not supported over a window"),
])
def test_refusals_say_why(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message.replace("(", r"\(").replace(")", r"\)")):
        engine.plan(sql)


ORDERED = ("FIRST_VALUE(v) AS fv, LAST_VALUE(price) AS lp, LISTAGG(CAST(v AS STRING)) AS lv, "
           "LISTAGG(k, '|') FILTER (WHERE price > 5) AS lk")


def _ordered_oracle(seq: str = "i") -> str:
    return (f"arg_min(v, CASE WHEN v IS NOT NULL THEN {seq} END), arg_max(price, {seq}), "
            f"string_agg(CAST(v AS VARCHAR), ',' ORDER BY {seq}), "
            f"string_agg(k, '|' ORDER BY {seq}) FILTER (WHERE price > 5)")


NUMBERED = EV.append_column("i", pa.array(range(EV.num_rows)))  # the arrival order


def test_first_last_value_and_listagg_in_arrival_order():
    q, changes = changelog(DDL, f"SELECT k, {ORDERED} FROM ev GROUP BY k", EV, max_batch=30, seed=11)
    want = duck(f"SELECT k, {_ordered_oracle()} FROM ev GROUP BY k", ev=NUMBERED)
    assert rows(final_table(changes)) == rows(want)


@pytest.mark.parametrize("window, start", [
    ("TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)", "time_bucket(INTERVAL '10 seconds', ts)"),
    ("CUMULATE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND, INTERVAL '10' SECOND)",
     "time_bucket(INTERVAL '10 seconds', ts)"),
], ids=["tumble", "cumulate_one_step"])
def test_ordered_aggregates_in_windows(window, start):
    sql = f"SELECT window_start, k, {ORDERED} FROM TABLE({window}) GROUP BY window_start, window_end, k"
    got = run_query(DDL, sql, {"ev": EV}, max_batch=30, seed=12)
    want = duck(f"SELECT {start} AS ws, k, {_ordered_oracle()} FROM ev GROUP BY ws, k", ev=NUMBERED)
    assert got.num_rows > 20
    assert rows(got) == rows(want)


def test_first_last_value_and_listagg_retract_the_earliest_occurrence():
    # The outer aggregate sees each key's count change: -U takes away the old count's earliest occurrence
    # (Flink's *WithRetractAggFunction), +U appends the new one at the end.
    inner = "SELECT k, COUNT(*) AS n FROM ev GROUP BY k"
    sql = (f"SELECT n % 2 AS p, FIRST_VALUE(k) AS fk, LAST_VALUE(n) AS ln, LISTAGG(k) AS lk, COUNT(*) AS c "
           f"FROM ({inner}) GROUP BY n % 2")
    data = EV.slice(0, 120)
    # One event per batch: the inner changes of a batch are one key's, so the order the outer aggregate sees
    # them in is the order a second run emits them in (the rows of one batch come in no set order).
    _, changes = changelog(DDL, sql, data, max_batch=1, seed=13)
    # The oracle replays the inner changelog by hand: a list per group, retractions remove the first match.
    inner_changes = changelog(DDL, inner, data, max_batch=1, seed=13)[1]
    groups: dict = {}
    for batch in inner_changes:
        for r in batch.to_pylist():
            p = r["n"] % 2
            if r["op"] in ("+I", "+U"):
                groups.setdefault(p, []).append((r["k"], r["n"]))
            else:
                groups[p].remove((r["k"], r["n"]))
    want = [(p, items[0][0] if items[0][0] is not None else next((k for k, _ in items if k is not None), None),
             items[-1][1], ",".join(k for k, _ in items if k is not None) or None, len(items))
            for p, items in groups.items() if items]
    assert rows(final_table(changes)) == sorted(want, key=lambda t: t[0])


def test_ordered_aggregates_are_refused_in_sessions():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match="LISTAGG is not supported in a SESSION window"):
        engine.plan("SELECT k, LISTAGG(k) FROM ev GROUP BY SESSION(ts, INTERVAL '1' SECOND), k")
    with pytest.raises(dsms.SqlError, match="LISTAGG needs a string argument"):
        engine.plan("SELECT LISTAGG(v) FROM ev")


@pytest.mark.parametrize("sql, message", [
    ("SELECT SUM(v) FILTER (WHERE k) FROM ev", "the condition must be BOOLEAN, not VARCHAR"),
    ("SELECT UPPER(k) FILTER (WHERE v > 1) FROM ev", "FILTER \\(WHERE ...\\) applies to aggregate functions only"),
    ("SELECT SUM(v) FILTER (WHERE SUM(v) > 1) FROM ev", "aggregate functions cannot be nested"),
    ("SELECT COUNT(*) FILTER (WHERE v > 0) OVER (PARTITION BY k ORDER BY ts) FROM ev",
     "FILTER \\(WHERE ...\\) is not supported over a window"),
    ("SELECT LISTAGG(k, v) FROM ev", "the separator a string literal"),
    ("SELECT GROUPING(k) FROM ev", "GROUPING\\(...\\) needs a GROUP BY"),
    ("SELECT k, COUNT(*) FROM ev GROUP BY CUBE (k, v, price, ts, k, v, price)", "at most 64 are supported"),
])
def test_filter_and_grouping_mistakes_are_refused_with_a_position(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message) as e:
        engine.plan(sql)
    assert e.value.diagnostic.span is not None


@pytest.mark.parametrize("window", ["TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)",
                                    "HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)"])
@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_window_avg_of_a_decimal_rounds_half_up_to_scale_6(window, route, tmp_path):
    """AVG(DECIMAL(10, 2)) is DECIMAL(38, 6) as in Flink, rounded half up; the oracle is Python's decimal."""
    import datetime as dt
    import decimal
    import json
    import random

    rng = random.Random(7)
    base = dt.datetime(2024, 1, 1)
    data = [(rng.randrange(3), decimal.Decimal(rng.randrange(-99999, 99999)) / 100, base + dt.timedelta(seconds=i))
            for i in range(60)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps({"k": k, "amount": str(a), "ts": t.isoformat(sep=" ")}) + "\n"
                            for k, a, t in data))
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM s (k INT, amount DECIMAL(10, 2), ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
      WITH (connector = 'file', path = '{path}', format = 'json'); SET 'engine' = '{route}';""")
    q = engine.query(f"SELECT window_start, k, AVG(amount) AS a FROM TABLE({window}) GROUP BY window_start, window_end, k")
    engine.run_until_idle()
    got = q.snapshot()
    assert got.schema.field("a").type == pa.decimal128(38, 6)
    size, slide = (10, 10) if window.startswith("TUMBLE") else (10, 5)
    groups: dict = {}
    for k, a, t in data:
        s = int((t - base).total_seconds())
        for start in range(s - s % slide - size + slide, s + 1, slide):
            groups.setdefault((base + dt.timedelta(seconds=start), k), []).append(a)
    want = {key: (sum(v) / len(v)).quantize(decimal.Decimal("0.000001"), rounding=decimal.ROUND_HALF_UP)
            for key, v in groups.items()}
    assert {(r["window_start"], r["k"]): r["a"] for r in got.to_pylist()} == want
