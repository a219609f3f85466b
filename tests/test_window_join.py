"""Window joins: two inputs windowed the same way, joined per window when it closes.

Streams arrive interleaved and out of order; the oracle assigns windows with DuckDB's
time_bucket (or a generated series for HOP) and joins per window and key. A row counts
unless its window had fired (end - 1 ms at or below its own source's watermark) when it
arrived, as Flink's window operators judge late rows (docs/time.md)."""

import pyarrow as pa
import pytest

import dsms

from changes import Recorder, feed_interleaved
from oracle import arrival_watermarks, duck, events, rows, tumble_on_time

DDL = """
CREATE STREAM a (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
CREATE STREAM b (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
"""
A = events(500, seed=41, keys=7, span_s=200, disorder_s=4)
B = events(400, seed=42, keys=7, span_s=200, disorder_s=3)
A_OK, B_OK = tumble_on_time(A, 3, 10), tumble_on_time(B, 2, 10)  # the rows a 10 s window join keeps


def with_arrival_watermark(table: pa.Table, bound_s: float) -> pa.Table:
    """``table`` with ``wm``: its source's watermark when each row arrived (NULL for the first)."""
    return table.append_column("wm", pa.array(arrival_watermarks(table.column("ts").to_pylist(), bound_s),
                                              pa.timestamp("us")))


@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL OUTER"])
def test_tumble_window_join(kind):
    rec = Recorder(DDL)
    q = rec.query("j", f"""
      SELECT l.window_start AS ws, r.window_end AS we, l.k, l.v, r.v AS rv
      FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS l
      {kind} JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS r
      ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k AND l.v < r.v + 30""")
    assert q.changelog == "append-only"
    assert any("WindowJoin(" in op.label for op in q.job.plan.ops)
    feed_interleaved(rec, {"a": A, "b": B}, seed=len(kind), max_batch=8)
    rec.end()
    assert rec.ops("j") == {"+I"}
    want = duck(f"""
      WITH l AS (SELECT *, time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws FROM a),
           r AS (SELECT *, time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01') AS ws FROM b)
      SELECT l.ws, r.ws + INTERVAL '10 seconds' AS we, l.k, l.v, r.v AS rv FROM l {kind} JOIN r
      ON l.ws = r.ws AND l.k = r.k AND l.v < r.v + 30""", a=A_OK, b=B_OK)
    assert rows(rec.final("j")) == rows(want)
    assert want.num_rows > 300


def test_hop_window_join_of_window_aggregates():
    """Per-window counts of both sides, joined: windows of aggregates carry their bounds through. Each
    aggregate counts an event in the windows that had not fired when it arrived."""
    rec = Recorder(DDL)
    rec.query("j", """
      SELECT x.ws, x.k, x.n, y.n AS m FROM
        (SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS n
         FROM TABLE(HOP(TABLE a, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
         GROUP BY window_start, window_end, k) AS x
      JOIN
        (SELECT window_start, window_end, k, COUNT(*) AS n
         FROM TABLE(HOP(TABLE b, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))
         GROUP BY window_start, window_end, k) AS y
      ON x.ws = y.window_start AND x.we = y.window_end AND x.k = y.k""")
    feed_interleaved(rec, {"a": A, "b": B}, seed=3, max_batch=10)
    rec.end()
    want = duck("""
      WITH w AS (SELECT unnest(generate_series(TIMESTAMP '2024-03-01 11:59:40', TIMESTAMP '2024-03-01 12:04:00',
                                                INTERVAL '5 seconds')) AS ws),
           x AS (SELECT ws, k, COUNT(*) AS n FROM a JOIN w ON a.ts >= ws AND a.ts < ws + INTERVAL '15 seconds'
                 AND (a.wm IS NULL OR ws + INTERVAL '14.999 seconds' > a.wm) GROUP BY ALL),
           y AS (SELECT ws, k, COUNT(*) AS n FROM b JOIN w ON b.ts >= ws AND b.ts < ws + INTERVAL '15 seconds'
                 AND (b.wm IS NULL OR ws + INTERVAL '14.999 seconds' > b.wm) GROUP BY ALL)
      SELECT x.ws, x.k, x.n, y.n AS m FROM x JOIN y ON x.ws = y.ws AND x.k = y.k
      """, a=with_arrival_watermark(A, 3), b=with_arrival_watermark(B, 2))
    assert rows(rec.final("j")) == rows(want)


def test_window_join_needs_the_same_windows():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match="same windows on both sides"):
        engine.query("""SELECT * FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) AS l
          JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '5' SECOND)) AS r
          ON l.window_start = r.window_start AND l.window_end = r.window_end""")


def test_each_side_is_planned_from_its_own_input():
    """Regression: narrowed join inputs made while planning must stay distinct operators (a discarded
    node's id, reused by the next one, once made a join read the same input on both sides)."""
    engine = dsms.Engine()
    engine.execute(DDL)
    sql = """SELECT l.k, r.v FROM TABLE(TUMBLE(TABLE a, DESCRIPTOR(ts), INTERVAL '10' SECOND)) l
      LEFT JOIN TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '10' SECOND)) r
      ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k"""
    for _ in range(150):
        plan = engine.plan(sql).physical
        join = next(op for op in plan.ops if "WindowJoin" in op.label)
        sources = [plan.op(plan.op(i).inputs[0]).label for i in join.inputs]
        assert sources == ["Source(a, memory)", "Source(b, memory)"]
