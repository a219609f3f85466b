"""Top-N and deduplication against DuckDB's ROW_NUMBER over the same events.

Ties in the ORDER BY are broken by the other columns, ascending with NULLs
first (what dsms documents), so the oracle orders the same way; equal
times in deduplication go to the first arrival (keep first) or the last
(keep last), which the oracle sees through an arrival number."""

import random

import numpy as np
import pyarrow as pa
import pytest

import dsms

from changes import changelog, final_table, ops
from oracle import BASE, duck, events, rows, run_query

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
EV = events(1000, seed=41, keys=7)
ORACLE_EV = EV.append_column("seq", pa.array(np.arange(EV.num_rows)))

PER_WINDOW = """SELECT window_start, window_end, k, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k"""


def test_window_top_n_after_a_window_aggregate_is_append_only():
    sql = f"""SELECT window_start, k, n, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
        FROM ({PER_WINDOW})) WHERE rn <= 3"""
    engine = dsms.Engine()
    engine.execute(DDL)
    assert engine.plan(sql).changelog == "append-only"
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""SELECT ws, k, n, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY n DESC, k ASC NULLS FIRST) AS rn FROM (
          SELECT time_bucket(INTERVAL '20 seconds', ts, TIMESTAMP '1970-01-01') AS ws, k, COUNT(*) AS n
          FROM ev GROUP BY ALL)) WHERE rn <= 3""", ev=EV)
    assert rows(got) == rows(want)
    assert got.num_rows == 3 * len({r[0] for r in rows(got)})


def test_window_top_n_directly_over_a_window_table_function():
    sql = """SELECT window_start, k, price FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '30' SECOND))) WHERE rn < 3"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck("""SELECT ws, k, price FROM (
        SELECT *, time_bucket(INTERVAL '30 seconds', ts, TIMESTAMP '1970-01-01') AS ws,
               ROW_NUMBER() OVER (PARTITION BY ws ORDER BY price DESC, k ASC NULLS FIRST, v ASC NULLS FIRST,
                                  ts ASC NULLS FIRST) AS rn
        FROM ev) WHERE rn <= 2""", ev=EV)
    assert rows(got) == rows(want)


def _words(n: int, seed: int) -> pa.Table:
    """A stream of words with Zipf-like frequencies, in time order with a little disorder."""
    rng = random.Random(seed)
    vocab = [f"w{i:02d}" for i in range(40)]
    weights = [1 / (i + 1) ** 1.1 for i in range(40)]
    times = sorted(rng.uniform(0, 600) for _ in range(n))
    times = [t + rng.uniform(0, 2) for t in times]
    return pa.table({"word": rng.choices(vocab, weights, k=n),
                     "ts": pa.array([int((BASE.timestamp() + t) * 1e6) for t in times], pa.timestamp("us"))})


WORDS_DDL = """CREATE STREAM words (word VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '3' SECOND)
  WITH (connector = 'memory');"""


def test_top_k_words_per_window():
    # The streaming top-K words example: word counts per minute, the 3 most frequent in each.
    words = _words(3000, seed=4)
    sql = """SELECT window_start, word, cnt, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY cnt DESC) AS rn
        FROM (SELECT window_start, window_end, word, COUNT(*) AS cnt
              FROM TABLE(TUMBLE(TABLE words, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
              GROUP BY window_start, window_end, word))
      WHERE rn <= 3"""
    got = run_query(WORDS_DDL, sql, {"words": words})
    want = duck("""SELECT ws, word, cnt, rn FROM (
        SELECT *, ROW_NUMBER() OVER (PARTITION BY ws ORDER BY cnt DESC, word) AS rn FROM (
          SELECT time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01') AS ws, word, COUNT(*) AS cnt
          FROM words GROUP BY ALL)) WHERE rn <= 3""", words=words)
    assert rows(got) == rows(want)
    assert {r[1] for r in rows(got) if r[3] == 1} == {"w00"}  # the most frequent word wins every minute


def test_global_top_k_words_is_updating():
    words = _words(1500, seed=9)
    sql = """SELECT word, cnt, rn FROM (
        SELECT *, ROW_NUMBER() OVER (ORDER BY cnt DESC) AS rn FROM (SELECT word, COUNT(*) AS cnt FROM words
        GROUP BY word)) WHERE rn <= 5"""
    ddl = WORDS_DDL.replace("words (", "ev (").replace("CREATE STREAM ev", "CREATE STREAM ev")
    q, changes = changelog(ddl, sql.replace("FROM words", "FROM ev"), words.rename_columns(["word", "ts"]),
                           max_batch=40)
    assert q.changelog == "updating"
    want = duck("""SELECT word, cnt, rn FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY cnt DESC, word) AS rn FROM (
        SELECT word, COUNT(*) AS cnt FROM words GROUP BY word)) WHERE rn <= 5""", words=words)
    assert rows(final_table(changes)) == rows(want)
    assert {"-U", "+U"} <= ops(changes)


def test_global_top_n_per_key_over_a_stream():
    data = EV.slice(0, 500)
    sql = "SELECT k, v, ts, rn FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn " \
          "FROM ev) WHERE rn <= 3"
    q, changes = changelog(DDL, sql, data, max_batch=20)
    want = duck("""SELECT k, v, ts, rn FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY
        v DESC NULLS LAST, price ASC NULLS FIRST, ts ASC NULLS FIRST) AS rn FROM ev) WHERE rn <= 3""", ev=data)
    assert rows(final_table(changes)) == rows(want)
    # Without the row number the result changes only when a row enters or leaves the top.
    sql = "SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM ev) WHERE rn <= 3"
    q, changes = changelog(DDL, sql, data, max_batch=20)
    want = duck("""SELECT k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST,
        price ASC NULLS FIRST, ts ASC NULLS FIRST) AS rn FROM ev) WHERE rn <= 3""", ev=data)
    assert rows(final_table(changes)) == rows(want)
    assert ops(changes) == {"+I", "-D"}


@pytest.mark.parametrize("max_batch", [1, 30])
def test_deduplicate_keep_first_is_append_only(max_batch):
    sql = "SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev) WHERE rn = 1"
    engine = dsms.Engine()
    engine.execute(DDL)
    assert engine.plan(sql).changelog == "append-only"
    data = EV.slice(0, 300)
    got = run_query(DDL, sql, {"ev": data}, max_batch=max_batch)
    want = duck("""SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts, seq) AS rn
                   FROM ev) WHERE rn = 1""", ev=ORACLE_EV.slice(0, 300))
    assert rows(got) == rows(want)


def test_deduplicate_keep_last_is_updating():
    sql = """SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS rn FROM ev)
             WHERE rn = 1"""
    q, changes = changelog(DDL, sql, EV, max_batch=15)
    assert q.changelog == "updating"
    want = duck("""SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC, seq DESC)
                   AS rn FROM ev) WHERE rn = 1""", ev=ORACLE_EV)
    assert rows(final_table(changes)) == rows(want)
    assert {"+I", "-U", "+U"} == ops(changes)


@pytest.mark.parametrize("sql, message", [
    ("SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) AS rn FROM ev", "needs a filter"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) AS rn FROM ev) WHERE rn = 2",
     "rn <= N"),
    ("SELECT * FROM (SELECT k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v) FROM ev)", "give ROW_NUMBER"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k) AS rn FROM ev) WHERE rn <= 2", "needs ORDER BY"),
])
def test_top_n_refusals(sql, message):
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match=message):
        engine.plan(sql)


def test_window_top_n_over_an_updating_window_aggregate_is_a_global_top_n():
    engine = dsms.Engine()
    engine.execute(DDL)
    plan = engine.plan(f"""SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end
        ORDER BY n DESC) AS rn FROM ({PER_WINDOW} EMIT CHANGES)) WHERE rn <= 3""")
    assert plan.changelog == "updating"
    assert "TopN(partition by window_start, window_end" in plan.explain()
