"""Session windows against an independent oracle: gaps and islands over single
events in DuckDB (LAG per key; a new session where the gap to the previous
event exceeds the session gap), fed out of order in many small batches."""

import datetime as dt
import itertools

import pyarrow as pa
import pytest

import dsms

from changes import restarted
from oracle import BASE, duck, events, feed, islands, rows, run_query

DDL = """
CREATE STREAM ev (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
"""

# About one event per key every 6 s, so an 8 s gap both splits and joins sessions,
# and out-of-order arrival (within the 5 s bound) often bridges two of them.
EV = events(900, seed=17, keys=6, span_s=900, disorder_s=4.5)


def test_session_tvf_all_aggregates_match_gaps_and_islands():
    sql = """
    SELECT window_start, window_end, k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, MIN(v) AS lo, MAX(price) AS hi,
           AVG(price) AS ap, COUNT(DISTINCT v) AS dv
    FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))
    GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck(islands(8, select="""SELECT ws, we, k, COUNT(*), COUNT(v), SUM(v), MIN(v), MAX(price), AVG(price),
                                            COUNT(DISTINCT v) FROM s GROUP BY ws, we, k"""), ev=EV)
    assert rows(got) == rows(want)
    assert 50 < got.num_rows < 600  # sessions both split and merge
    lengths = {r[1] - r[0] for r in rows(got)}
    assert dt.timedelta(seconds=8) in lengths and max(lengths) > dt.timedelta(seconds=30)


@pytest.mark.parametrize("max_batch", [1, 13, 100_000])
def test_sessions_do_not_depend_on_batching(max_batch):
    sql = """SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))
    GROUP BY window_start, window_end, k"""
    data = EV.slice(0, 250)
    got = run_query(DDL, sql, {"ev": data}, max_batch=max_batch, seed=max_batch)
    want = duck(islands(8, select="SELECT ws, we, k, COUNT(*), SUM(v) FROM s GROUP BY ws, we, k"), ev=data)
    assert rows(got) == rows(want)


def test_group_window_session_with_helpers():
    sql = """
    SELECT k, SESSION_START(ts, INTERVAL '8' SECOND) AS ws, SESSION_END(ts, INTERVAL '8' SECOND) AS we,
           SESSION_ROWTIME(ts, INTERVAL '8' SECOND) AS wt, COUNT(*) AS n
    FROM ev GROUP BY SESSION(ts, INTERVAL '8' SECOND), k"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck(islands(8, select="""SELECT k, ws, we, we - INTERVAL '1 millisecond', COUNT(*)
                                     FROM s GROUP BY ws, we, k"""), ev=EV)
    assert rows(got) == rows(want)


def test_global_sessions_and_keys_inside_a_session():
    # No PARTITION BY: sessions over all events; the aggregate is then per key inside each session.
    data = EV.filter(duck("SELECT (EXTRACT(epoch FROM ts)::BIGINT % 40) < 12 AS keep FROM ev", ev=EV).column("keep"))
    sql = """SELECT window_start, window_end, k, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE ev, DESCRIPTOR(ts), INTERVAL '3' SECOND)) GROUP BY window_start, window_end, k"""
    got = run_query(DDL, sql, {"ev": data})
    want = duck(islands(3, keys="", select="SELECT ws, we, k, COUNT(*) FROM s GROUP BY ws, we, k"), ev=data)
    assert rows(got) == rows(want)
    assert len({r[0] for r in rows(got)}) > 10


def test_partition_keys_with_more_grouping_keys():
    sql = """SELECT window_start, window_end, k, big, COUNT(*) AS n
    FROM TABLE(SESSION(TABLE (SELECT k, ts, price > 5 AS big FROM ev) PARTITION BY k, DESCRIPTOR(ts),
                       INTERVAL '8' SECOND))
    GROUP BY window_start, window_end, k, big"""
    got = run_query(DDL, sql, {"ev": EV})
    want = duck(islands(8, select="SELECT ws, we, k, price > 5, COUNT(*) FROM s GROUP BY ALL"), ev=EV)
    assert rows(got) == rows(want)
    assert session_spec(sql).sql.direct is None  # a computed column: the rows come from a DuckDB statement


def test_session_table_function_without_aggregation():
    data = EV.slice(0, 300)
    sql = """SELECT k, v, ts, window_start, window_end
    FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))"""
    got = run_query(DDL, sql, {"ev": data})
    want = duck(islands(8, select="SELECT k, v, ts, ws, we FROM s"), ev=data)
    assert rows(got) == rows(want)
    assert got.num_rows == data.num_rows


CHAT_DDL = """CREATE STREAM chat (u VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' HOUR)
  WITH (connector = 'memory');"""


@pytest.mark.parametrize("order", list(itertools.permutations(range(3))))
def test_the_chat_example_in_every_arrival_order(order):
    # 13:02, 13:14 and 13:57 with a 30-minute gap: [13:02, 13:44) with two events and [13:57, 14:27).
    times = [dt.datetime(2024, 1, 1, 13, 2), dt.datetime(2024, 1, 1, 13, 14), dt.datetime(2024, 1, 1, 13, 57)]
    engine = dsms.Engine()
    engine.execute(CHAT_DDL)
    q = engine.query("""SELECT u, window_start, window_end, COUNT(*) AS n
        FROM TABLE(SESSION(TABLE chat PARTITION BY u, DESCRIPTOR(ts), INTERVAL '30' MINUTE))
        GROUP BY window_start, window_end, u""")
    for i in order:
        engine.insert("chat", [("ann", times[i])])
        engine.run_until_idle()
    engine.end_input()
    engine.run_until_idle()
    got = [(r["window_start"].strftime("%H:%M"), r["window_end"].strftime("%H:%M"), r["n"])
           for r in q.snapshot().to_pylist()]
    assert sorted(got) == [("13:02", "13:44", 2), ("13:57", "14:27", 1)]


def test_a_session_closes_only_once_the_watermark_is_past_its_end():
    # Sessions that touch merge (as Flink's TimeWindow.intersects): an event at exactly the end
    # of a session extends it, so the session cannot be emitted while the watermark is at its end.
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("""SELECT window_start, window_end, COUNT(*) AS n
        FROM TABLE(SESSION(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end""")

    def at(seconds):
        return {"k": "a", "v": 1, "price": 1.0, "ts": BASE + dt.timedelta(seconds=seconds)}

    engine.insert("ev", [at(0), at(15)])  # session [0, 10), watermark 10
    engine.run_until_idle()
    assert q.poll().num_rows == 0
    engine.insert("ev", [at(10)])  # not late; joins [0, 10) and [15, 25) into [0, 25)
    engine.run_until_idle()
    engine.insert("ev", [at(40)])  # watermark 35: the session [0, 25) closes
    engine.run_until_idle()
    assert [(r["window_end"] - r["window_start"], r["n"]) for r in q.poll().to_pylist()] == \
        [(dt.timedelta(seconds=25), 3)]


def session_spec(sql: str, ddl: str = DDL):
    engine = dsms.Engine()
    engine.execute(ddl)
    return next(op for op in engine.query(sql).job.plan.ops if type(op).__name__ == "SessionSpec")


def test_session_partition_keys_must_be_grouped():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError, match="partitioned by k, which must also be in GROUP BY"):
        engine.query("""SELECT window_start, COUNT(*) FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts),
            INTERVAL '8' SECOND)) GROUP BY window_start, window_end""")
    with pytest.raises(dsms.SqlError, match="must be columns"):
        engine.query("SELECT COUNT(*) FROM ev GROUP BY SESSION(ts, INTERVAL '8' SECOND), UPPER(k)")


def test_tumble_over_session_results():
    # window_time of a session is its end - 1 ms; a cascading window must see every session.
    ddl = DDL + """CREATE VIEW sessions AS SELECT window_time AS rowtime, k, COUNT(*) AS n
      FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), INTERVAL '8' SECOND))
      GROUP BY window_start, window_end, window_time, k;"""
    sql = """SELECT window_start, COUNT(*) AS sessions, SUM(n) AS events
      FROM TABLE(TUMBLE(TABLE sessions, DESCRIPTOR(rowtime), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end"""
    got = run_query(ddl, sql, {"ev": EV})
    want = duck(islands(8, select="""SELECT time_bucket(INTERVAL '1 minute', we - INTERVAL '1 millisecond',
        TIMESTAMP '1970-01-01') AS b, COUNT(DISTINCT (k, ws)), COUNT(*) FROM s GROUP BY b"""), ev=EV)
    assert rows(got) == rows(want)


INT_DDL = """CREATE STREAM ev (u BIGINT, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'memory');"""


@pytest.mark.parametrize("max_batch, nulls, spread", [(3, False, 7919), (400, False, 7919), (100_000, False, 7919),
                                                      (400, True, 7919), (400, False, 1), (400, False, 2**55)])
def test_sessions_per_integer_key(max_batch, nulls, spread):
    # Integer keys without NULLs are sorted with numpy; NULL keys take the general path (a DuckDB sort).
    # Both agree with the oracle, in batches of every size. Keys close together are looked up in a
    # table, others in a Bloom filter; keys too far apart for one combined sort key are sorted in two.
    data = events(300 if max_batch < 10 else 1200, seed=29, keys=40, span_s=300, disorder_s=4.5)
    users = pa.array([(None if nulls else 0) if k is None else int(k[1:]) * spread - 100_000
                      for k in data.column("k").to_pylist()], pa.int64())
    data = pa.table({"u": users, "v": data.column("v"), "ts": data.column("ts")})
    sql = """SELECT window_start, window_end, u, COUNT(*) AS n, SUM(v) AS sv, MAX(v) AS hi
    FROM TABLE(SESSION(TABLE ev PARTITION BY u, DESCRIPTOR(ts), INTERVAL '20' SECOND))
    GROUP BY window_start, window_end, u"""
    engine = dsms.Engine()
    engine.execute(INT_DDL)
    q = engine.query(sql)
    feed(engine, "ev", data, max_batch=max_batch)
    paths = next(lg for lg in q.job.logics.values() if hasattr(lg, "batches")).batches
    assert session_spec(sql, INT_DDL).sql.direct is not None  # the rows are taken from the batch's columns
    assert (paths["general"] > 0) == nulls and (nulls or paths["numpy"] > 0)
    engine.end_input()
    engine.run_until_idle()
    want = duck(islands(20, keys="u", select="SELECT ws, we, u, COUNT(*), SUM(v), MAX(v) FROM s GROUP BY ws, we, u"),
                ev=data)
    assert rows(q.snapshot()) == rows(want)


@pytest.mark.parametrize("high, step", [(2**40, 1), (2**42, 1000), (2**52, 1), (2**62, 1)])
def test_sort_order_of_packed_keys(high, step):
    # Keys and row numbers packed in one int64 and sorted; keys too wide lose low bits and are checked.
    import numpy as np

    from dsms.runtime.operators.session_merge import sort_order

    key = np.random.default_rng(high % 97).integers(0, high, 5000) * step
    key[:50] = key[50:100]  # equal keys
    key[100:150] = key[150:200] + step  # a larger key before a smaller one, as close as times can be
    order, ordered = sort_order(key)
    assert sorted(order.tolist()) == list(range(len(key)))
    assert np.array_equal(key[order], ordered) and np.array_equal(ordered, np.sort(key))


@pytest.mark.parametrize("ddl, key", [(INT_DDL, "u"), (DDL, "k")])
def test_restore_mid_run_continues_the_sessions(ddl, key):
    # The open sessions live in the state store: a snapshot restored into a fresh engine (with the
    # source's position) continues to the uninterrupted answer, on the numpy and the general path.
    data = events(600, seed=31, keys=30, span_s=300, disorder_s=4.5, null_rate=0)
    if key == "u":
        data = pa.table({"u": pa.array([int(k[1:]) for k in data.column("k").to_pylist()], pa.int64()),
                         "v": data.column("v"), "ts": data.column("ts")})
    sql = f"""SELECT window_start, window_end, {key}, COUNT(*) AS n, SUM(v) AS sv
    FROM TABLE(SESSION(TABLE ev PARTITION BY {key}, DESCRIPTOR(ts), INTERVAL '20' SECOND))
    GROUP BY window_start, window_end, {key}"""
    pieces = [data.slice(i, 25) for i in range(0, data.num_rows, 25)]

    def run(cut):
        engine = dsms.Engine()
        engine.execute(ddl)
        q = engine.query(sql)
        out = []
        for i, piece in enumerate(pieces):
            engine.insert("ev", piece)
            engine.run_until_idle()
            out.append(q.poll())
            if i == cut:
                engine, q, snapshot = restarted(ddl, sql, q, [("ev", before) for before in pieces[: i + 1]])
                held = [data for name, (kind, data) in snapshot.items() if name.endswith("/sessions")]
                assert held and held[0].num_rows > 10  # the open sessions are in the snapshot
        engine.end_input()
        engine.run_until_idle()
        out.append(q.poll())
        return pa.concat_tables([t for t in out if t.num_rows])

    whole, resumed = run(None), run(len(pieces) // 2)
    want = duck(islands(20, keys=key, select=f"SELECT ws, we, {key}, COUNT(*), SUM(v) FROM s GROUP BY ws, we, {key}"),
                ev=data)
    columns = ["window_start", "window_end", key, "n", "sv"]
    assert rows(resumed, columns) == rows(whole, columns) == rows(want)

