"""RANK() and DENSE_RANK() Top-N against DuckDB's RANK and DENSE_RANK over the same events.

Rows tied on the ORDER BY share a rank, so a Top-N keeps them (or drops
them) together and can hold more than N rows per partition; with
ROW_NUMBER the same data would keep exactly N. The values are few (v mod
4) so that ties are common, and the input is fed in batches of varied
sizes: the final rows must not depend on how it was cut.
"""

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dsms

from changes import changelog, final_table
from oracle import duck, events, rows, run_query

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""
_EV = events(300, seed=23, keys=4)
EV = _EV.set_column(1, "v", pc.divide(_EV.column("v"), 25))  # -2 .. 3 and NULL: many ties


def _most_per_partition(table: pa.Table, key: str) -> int:
    counts = duck(f"SELECT COUNT(*) AS n FROM t GROUP BY {key} ORDER BY n DESC LIMIT 1", t=table)
    return counts.column("n")[0].as_py()


@pytest.mark.parametrize("function", ["RANK", "DENSE_RANK"])
@pytest.mark.parametrize("max_batch", [2, 9, 200])
def test_global_rank_top_n_keeps_the_rows_tied_within_the_top(function, max_batch):
    sql = f"""SELECT k, v, ts, rn FROM (
        SELECT k, v, ts, {function}() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM ev) WHERE rn <= 2"""
    q, changes = changelog(DDL, sql, EV, max_batch=max_batch)
    assert q.changelog == "updating"
    want = duck(f"""SELECT k, v, ts, rn FROM (SELECT k, v, ts,
        {function}() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST) AS rn FROM ev) WHERE rn <= 2""", ev=EV)
    got = final_table(changes)
    assert rows(got) == rows(want)
    assert _most_per_partition(want, "k") > 2  # ties kept: more rows than ROW_NUMBER would keep


@pytest.mark.parametrize("max_batch", [1, 40])
def test_dense_rank_top_n_without_the_rank_column(max_batch):
    sql = """SELECT k, v FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY k ORDER BY v) AS r FROM ev) WHERE r <= 2"""
    q, changes = changelog(DDL, sql, EV, max_batch=max_batch)
    want = duck("""SELECT k, v FROM (SELECT *, DENSE_RANK() OVER (PARTITION BY k ORDER BY v NULLS FIRST) AS r
        FROM ev) WHERE r <= 2""", ev=EV)
    assert rows(final_table(changes)) == rows(want)
    assert len({r for r in rows(want)}) < len(rows(want))  # equal rows are kept as often as they occur


@pytest.mark.parametrize("function", ["RANK", "DENSE_RANK"])
@pytest.mark.parametrize("max_batch", [3, 25])
def test_window_rank_top_n_is_append_only_and_keeps_ties(function, max_batch):
    sql = f"""SELECT window_start, k, n, rn FROM (
        SELECT *, {function}() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
        FROM (SELECT window_start, window_end, k, COUNT(*) AS n
              FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '20' SECOND))
              GROUP BY window_start, window_end, k)) WHERE rn <= 2"""
    engine = dsms.Engine()
    engine.execute(DDL)
    assert engine.plan(sql).changelog == "append-only"
    # Only events on time count (the data's late events fall in windows that had fired).
    got = run_query(DDL, sql, {"ev": EV}, max_batch=max_batch)
    on_time = duck("""SELECT * FROM (SELECT *, max(ts) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        - INTERVAL 5 SECOND AS wm, time_bucket(INTERVAL '20 seconds', ts, TIMESTAMP '1970-01-01') AS ws FROM ev)
        WHERE wm IS NULL OR ws + INTERVAL 20 SECOND - INTERVAL 1 MILLISECOND > wm""", ev=EV)
    want = duck(f"""SELECT ws, k, n, rn FROM (
        SELECT *, {function}() OVER (PARTITION BY ws ORDER BY n DESC) AS rn FROM (
          SELECT ws, k, COUNT(*) AS n FROM t GROUP BY ALL)) WHERE rn <= 2""", t=on_time)
    assert rows(got) == rows(want)
    assert _most_per_partition(want, "ws") > 2


def test_rank_one_by_time_is_a_top_n_not_a_deduplication():
    # rn = 1 by time with ROW_NUMBER keeps one row per key; with RANK every row at the earliest time.
    sql = "SELECT k, v, ts FROM (SELECT *, RANK() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev) WHERE rn = 1"
    engine = dsms.Engine()
    engine.execute(DDL)
    assert "TopN(partition by k, order by ts, n=1, rank)" in engine.explain(sql)
    data = EV.slice(0, 200)
    q, changes = changelog(DDL, sql, data, max_batch=7)
    want = duck("""SELECT k, v, ts FROM (SELECT *, RANK() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev)
        WHERE rn = 1""", ev=data)
    assert rows(final_table(changes)) == rows(want)


def test_rank_on_the_duckdb_route_matches_the_runtime(tmp_path):
    path = tmp_path / "ev.parquet"
    import pyarrow.parquet as pq
    pq.write_table(EV, path)
    ddl = DDL.replace("connector = 'memory'", f"connector = 'file', path = '{path}', format = 'parquet'")
    sql = """SELECT k, v, ts, rn FROM (SELECT k, v, ts, RANK() OVER (PARTITION BY k ORDER BY v DESC) AS rn
        FROM ev) WHERE rn <= 2"""
    want = duck("""SELECT k, v, ts, rn FROM (SELECT k, v, ts,
        RANK() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST) AS rn FROM ev) WHERE rn <= 2""", ev=EV)
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute("SET 'engine' = 'duckdb'")
    handle = engine.query(sql)
    engine.run_until_idle()
    got = handle.snapshot()
    got = got.drop_columns([c for c in got.column_names if c == "__op"])
    assert rows(got) == rows(want)


def test_a_rank_without_a_filter_is_refused_by_its_name():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.DsmsError, match=r"DENSE_RANK\(\) OVER \(\.\.\.\) needs a filter"):
        engine.plan("SELECT k, DENSE_RANK() OVER (PARTITION BY k ORDER BY v) AS r FROM ev")
