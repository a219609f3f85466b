"""MATCH_RECOGNIZE against hand-computed matches.

Each case lists its rows, marks which DEFINE conditions hold on each, and
works out the matches by hand in its comment. Rows arrive shuffled within
the watermark's bound and in batches of every size: the matches must not
change, since rows are matched in event-time order once the watermark
passes them.
"""

import datetime as dt
import random

import pyarrow as pa
import pytest

import dsms

from changes import restarted
from oracle import feed

DDL = """
CREATE STREAM s (k VARCHAR, c VARCHAR, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
T0 = dt.datetime(2024, 1, 1, 10, 0, 0)


def stream(parts: dict[str, list], chars: str | None = None, seed: int = 0) -> pa.Table:
    """Rows one second apart per partition (partitions interleaved), shuffled by at most 3 s in arrival."""
    rows = []
    for p, (key, prices) in enumerate(parts.items()):
        for i, price in enumerate(prices):
            c = chars[i] if chars else None
            rows.append({"k": key, "c": c, "price": price, "ts": T0 + dt.timedelta(seconds=i, milliseconds=p)})
    rng = random.Random(seed)
    rows.sort(key=lambda r: r["ts"] + dt.timedelta(seconds=rng.uniform(0, 3)))  # out of order, within the bound
    return pa.Table.from_pylist(rows, schema=pa.schema([("k", pa.string()), ("c", pa.string()),
                                                        ("price", pa.int64()), ("ts", pa.timestamp("ms"))]))


def run(sql: str, data: pa.Table, max_batch: int) -> list[tuple]:
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    feed(engine, "s", data, max_batch=max_batch, seed=max_batch)
    engine.end_input()
    engine.run_until_idle()
    return sorted(tuple(r.values()) for r in q.snapshot().to_pylist())


# prices 7 9 10 5 10 7 14 3 (rows r1..r8); B: price > PREV(price) on r2 r3 r5 r7; C: price < PREV on r4 r6 r8.
# Runs of (A B+ C), by first row: r1 -> r1..r4, r2 -> r2..r4, r4 -> r4..r6, r6 -> r6..r8 (r3 r5 r7 r8 fail).
PRICES = [7, 9, 10, 5, 10, 7, 14, 3]
RISE_FALL = """SELECT * FROM s MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES FIRST(price) AS first_price, LAST(price) AS last_price, COUNT(*) AS n
  ONE ROW PER MATCH AFTER MATCH SKIP {skip}
  PATTERN (A B+ C) {within}
  DEFINE B AS B.price > PREV(B.price), C AS C.price < PREV(price)) AS m"""
SKIPS = {
    # r1..r4 is emitted first; it consumed r2..r4, so r2..r4 and r4..r6 are gone.
    "PAST LAST ROW": [(7, 5, 4), (7, 3, 3)],
    # Only runs that began at a match's first row end.
    "TO NEXT ROW": [(7, 5, 4), (9, 5, 3), (5, 7, 3), (7, 3, 3)],
    # Resume at r3 (last B of r1..r4): the r2 run is cut; r4..r6 resumes at r5, r6..r8 stays.
    "TO LAST B": [(7, 5, 4), (5, 7, 3), (7, 3, 3)],
    # Resume at r2 (first B of r1..r4): r2..r4 survives.
    "TO FIRST B": [(7, 5, 4), (9, 5, 3), (5, 7, 3), (7, 3, 3)],
}


@pytest.mark.parametrize("max_batch", [1, 4, 1000])
@pytest.mark.parametrize("skip", sorted(SKIPS))
def test_after_match_skip_strategies(skip, max_batch):
    data = stream({"x": PRICES, "y": PRICES}, seed=max_batch)
    got = run(RISE_FALL.format(skip=skip, within=""), data, max_batch)
    assert got == sorted([("x",) + m for m in SKIPS[skip]] + [("y",) + m for m in SKIPS[skip]])


@pytest.mark.parametrize("max_batch", [1, 1000])
def test_within_drops_partial_matches_that_span_it(max_batch):
    # r1..r4 spans 3 s, which WITHIN 3 s excludes (Flink: end - start < WITHIN), so r2..r4 (2 s) is found at r4.
    data = stream({"x": PRICES}, seed=3)
    got = run(RISE_FALL.format(skip="PAST LAST ROW", within="WITHIN INTERVAL '3' SECOND"), data, max_batch)
    assert got == [("x", 7, 3, 3), ("x", 9, 5, 3)]


QUANT = """SELECT * FROM s MATCH_RECOGNIZE (
  ORDER BY ts
  MEASURES FIRST(A.ts) AS start_ts, COUNT(B.c) AS nb, COUNT(C.c) AS nc, LAST(D.price) AS dp
  PATTERN (A B{{2,3}}{lazy} C? D)
  DEFINE A AS c = 'a', B AS c = 'b', C AS c = 'c', D AS c = 'd')"""


@pytest.mark.parametrize("lazy", ["", "?"])
@pytest.mark.parametrize("max_batch", [1, 1000])
def test_counted_and_optional_quantifiers(lazy, max_batch):
    chars = "abbbbcd" + "abbcd" + "abbd" + "abcd" + "abbbd"
    # abbbbcd: B takes at most 3 b, the 4th b is neither C nor D: no match (greedy or not).
    # abbcd (rows 7..11): 2 B, 1 C.  abbd (12..15): 2 B, no C.  abcd: one b is too few.
    # abbbd (20..24): 3 B.
    data = stream({"x": list(range(len(chars)))}, chars=chars, seed=max_batch)
    got = run(QUANT.format(lazy=lazy), data, max_batch)
    at = [T0 + dt.timedelta(seconds=i) for i in (7, 12, 20)]
    assert got == [(at[0], 2, 1, 11), (at[1], 2, 0, 15), (at[2], 3, 0, 24)]


GREEDY = """SELECT * FROM s MATCH_RECOGNIZE (
  PARTITION BY k ORDER BY ts
  MEASURES C.price AS last_price, MATCH_ROWTIME() AS mt, AVG(B.price) AS avg_b
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B{q} C)
  DEFINE A AS A.price > 10, B AS B.price < 15, C AS C.price > 12)"""


@pytest.mark.parametrize("max_batch", [1, 1000])
def test_greedy_and_reluctant_as_in_flinks_docs(max_batch):
    # Flink's documentation: prices 10 11 12 13 14 16; B* swallows 12 13 14, B*? stops at 13.
    data = stream({"XYZ": [10, 11, 12, 13, 14, 16]})
    t = [T0 + dt.timedelta(seconds=i) for i in range(6)]
    assert run(GREEDY.format(q="*"), data, max_batch) == [("XYZ", 16, t[5], 13)]
    assert run(GREEDY.format(q="*?"), data, max_batch) == [("XYZ", 13, t[3], 12), ("XYZ", 16, t[5], None)]


@pytest.mark.parametrize("max_batch", [1, 1000])
def test_an_optional_variable_tries_the_row_both_ways(max_batch):
    # r2 (60) holds for B and for C: B? tries both taking it and leaving it to C, as Flink's CEP does, so the
    # match A C ends at r2 and (past last row) r3 starts afresh (no A there). Greedy would give A B C.
    sql = """SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n, LAST(price) AS last_price,
             COUNT(B.price) AS nb PATTERN (A B? C) DEFINE A AS price = 0, B AS price > 50, C AS price > 10)"""
    assert run(sql, stream({"x": [0, 60, 20]}), max_batch) == [(2, 60, 0)]


def test_restore_in_the_middle_of_a_partial_match():
    sql = RISE_FALL.format(skip="TO NEXT ROW", within="")
    data = stream({"x": PRICES * 3, "y": PRICES * 3}, seed=5)
    whole = run(sql, data, 1000)
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    first, rest = data.slice(0, 11), data.slice(11)  # x's r1..r5 are in: r1..r4 done, r4.. is partial
    engine.insert("s", first)
    engine.run_until_idle()
    before = q.snapshot().to_pylist()
    assert q.job.env.state.rows() > 0
    engine, q, _ = restarted(DDL, sql, q, [("s", first)])
    engine.insert("s", rest)
    engine.end_input()
    engine.run_until_idle()
    after = q.snapshot().to_pylist()
    assert sorted(tuple(r.values()) for r in before + after) == whole
    assert len(whole) == 2 * 4 * 3 + 2 * 2  # 4 per run of prices, plus the matches across the seams (14 3 7 9)


def test_a_checkpoint_on_disk_holds_the_partial_matches(tmp_path):
    from dsms.runtime.checkpoint import latest, save

    from changes import as_log

    sql = RISE_FALL.format(skip="TO LAST B", within="WITHIN INTERVAL '6' SECOND")
    data = stream({"x": PRICES * 3, "y": PRICES * 3}, seed=6)
    whole = run(sql, data, 1000)
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    first, rest = data.slice(0, 19), data.slice(19)
    engine.insert("s", first)
    engine.run_until_idle()
    before = q.snapshot().to_pylist()
    save(str(tmp_path), 1, q.job.snapshot())
    assert any(k.endswith("/runs") and v[1] is not None for k, v in q.job.env.state.snapshot().items())
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    engine.scheduler.memory_log(engine.catalog.get("s")).append(as_log(engine, "s", first))
    q.job.restore(latest(str(tmp_path))[1])
    engine.insert("s", rest)
    engine.end_input()
    engine.run_until_idle()
    assert sorted(tuple(r.values()) for r in before + q.snapshot().to_pylist()) == whole
    assert len(whole) > 8


@pytest.mark.parametrize("within, bounded", [("WITHIN INTERVAL '5' SECOND", True), ("", False)])
def test_within_bounds_the_state(within, bounded):
    # B holds on every row and C never does: every run stays open. With WITHIN 5 s a run (and the rows it
    # took) is dropped once the watermark is 5 s past its first row; without, all of them stay.
    sql = f"""SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n AFTER MATCH SKIP TO NEXT ROW
              PATTERN (A B+? C) {within} DEFINE B AS price >= 0, C AS price < 0)"""
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(sql)
    sizes = []
    for part in range(6):
        engine.insert("s", stream({"x": [1] * 50}).sort_by("ts").set_column(
            3, "ts", pa.array([T0 + dt.timedelta(seconds=part * 50 + i) for i in range(50)], pa.timestamp("ms"))))
        engine.run_until_idle()
        sizes.append(q.job.env.state.rows())
    assert q.snapshot().num_rows == 0
    if bounded:  # 5 s of runs (5 rows, 5 runs of at most 5 rows) plus the 5 s the watermark trails
        assert max(sizes) < 40 and sizes[-1] == sizes[2]
    else:
        assert sizes == sorted(sizes) and sizes[-1] > 5 * sizes[0]


def test_late_rows_are_dropped_and_counted():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query(RISE_FALL.format(skip="PAST LAST ROW", within=""))
    rows = stream({"x": PRICES})
    engine.insert("s", rows.sort_by("ts"))
    engine.insert("s", pa.Table.from_pylist([{"k": "x", "c": None, "price": 1, "ts": T0}], schema=rows.schema))
    engine.end_input()
    engine.run_until_idle()
    assert sorted(tuple(r.values()) for r in q.snapshot().to_pylist()) == [("x", 7, 3, 3), ("x", 7, 5, 4)]
    assert sum(q.job.stats().late.values()) == 1


def test_match_rowtime_is_an_event_time_attribute_for_windows_above():
    # ad 0 (even seconds) matches A B where B is a second with s % 3 == 2: at 2 8 14 20 26 32 38; ad 1 (odd
    # seconds) at 5 11 17 23 29 35. Per 10 s window: 3, 3, 4, 3 matches.
    engine = dsms.Engine()
    engine.execute("""CREATE STREAM imp (ad_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
      CREATE VIEW m AS SELECT * FROM imp MATCH_RECOGNIZE (PARTITION BY ad_id ORDER BY ts
        MEASURES MATCH_ROWTIME() AS mt PATTERN (A B) DEFINE B AS cost > 1)""")
    q = engine.query("""SELECT window_start, COUNT(*) AS matches FROM TABLE(TUMBLE(TABLE m, DESCRIPTOR(mt),
        INTERVAL '10' SECOND)) GROUP BY window_start, window_end""")
    engine.insert("imp", [{"ad_id": i % 2, "cost": float(i % 3), "ts": T0 + dt.timedelta(seconds=i)}
                          for i in range(40)])
    engine.end_input()
    engine.run_until_idle()
    got = sorted((r["window_start"], r["matches"]) for r in q.snapshot().to_pylist())
    assert got == [(T0 + dt.timedelta(seconds=s), n) for s, n in ((0, 3), (10, 3), (20, 4), (30, 3))]


def test_a_nan_partition_keeps_its_partial_matches_across_batches():
    # Partitions 1.0 and NaN each get rows 0 1 2 3 (v); A B C with B: v = 1 and C: v = 2 -> one match each,
    # with every row in its own batch (NaN is not equal to itself, yet it is one partition).
    engine = dsms.Engine()
    engine.execute("""CREATE STREAM f (p DOUBLE, v BIGINT, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '0' SECOND) WITH (connector = 'memory')""")
    q = engine.query("""SELECT * FROM f MATCH_RECOGNIZE (PARTITION BY p ORDER BY ts MEASURES COUNT(*) AS n
        PATTERN (A B C) DEFINE B AS v = 1, C AS v = 2)""")
    for i in range(4):
        for p in (1.0, float("nan")):
            engine.insert("f", [{"p": p, "v": i, "ts": T0 + dt.timedelta(seconds=i)}])
            engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    got = q.snapshot().to_pylist()
    assert sorted(r["n"] for r in got) == [3, 3] and sum(r["p"] != r["p"] for r in got) == 1


@pytest.mark.parametrize("sql, message", [
    ("PATTERN (A B*) DEFINE B AS price > 1", "greedy quantifier on the last variable"),
    ("PATTERN (A* B?) DEFINE B AS price > 1", "can match no rows"),
    ("PATTERN (A (B C)+) DEFINE B AS price > 1", "pattern groups"),
    ("PATTERN (A | B) DEFINE B AS price > 1", "alternation"),
    ("PATTERN (A B) DEFINE B AS B.price > A.price", "another pattern variable"),
    ("PATTERN (A B) DEFINE B AS SUM(B.price) > 3", "SUM in DEFINE"),
    ("PATTERN (A B) DEFINE X AS price > 1", "not a variable of the PATTERN"),
    ("PATTERN (A B??) DEFINE B AS price > 1", "reluctant optional"),
    ("PATTERN (A B A) DEFINE B AS price > 1", "appears twice"),
])
def test_unsupported_patterns_are_refused_with_a_reason(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.DsmsError, match=message):
        engine.query(f"SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES A.price AS p {sql})")


def test_skipping_to_a_variable_without_rows_stops_the_query():
    # A C with no B between them: AFTER MATCH SKIP TO LAST B has nowhere to resume (Flink fails the same way).
    sql = """SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES COUNT(*) AS n AFTER MATCH SKIP TO LAST B
             PATTERN (A B* C) DEFINE A AS price = 0, B AS price = 1, C AS price = 2)"""
    with pytest.raises(dsms.errors.MatchError, match="TO LAST B: no row is mapped to it"):
        run(sql, stream({"x": [0, 2]}), 1000)


def test_the_batch_routes_refuse_and_name_the_runtime():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.execute("SET 'engine' = 'duckdb'")
    with pytest.raises(dsms.DsmsError, match="cannot run MATCH_RECOGNIZE.*runtime"):
        engine.query("SELECT * FROM s MATCH_RECOGNIZE (ORDER BY ts MEASURES A.price AS p PATTERN (A B) "
                     "DEFINE B AS price > PREV(price))")
