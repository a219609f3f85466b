"""The continuous Spark route: queries over watched files run as Spark Structured Streaming queries.

Each shape runs over watched directories on Spark (local mode, real
PySpark, ``Trigger.AvailableNow`` runs driven by the engine) and on the
runtime, and both must give the shape's oracle: plain DuckDB SQL over the
generated events. The events are out of order by less than the watermark
delay, so no event is late on either route (which events are late is where
the routes differ: Spark judges them per micro-batch), and each directory
ends with a file holding one event far ahead in time, which moves the
watermark past every window. Shapes Structured Streaming cannot run are
refused when the query is planned, with the operator and the routes that
can run it.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

import dsms

from oracle import duck, events, late_mask, rows
from route_shapes import hop_starts, islands, tumble

FAR = "2030-01-01 00:00:00"  # the sentinel events' time: every window of the data closes before it
DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/s', format = 'json', watch = 'true');
CREATE STREAM s2 (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/s2', format = 'json', watch = 'true');
CREATE TABLE t (k VARCHAR, rate BIGINT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/t.jsonl', format = 'json');
"""

SHAPES = {
    "tumble_aggregates": (
        "SELECT window_start, window_end, k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(v) AS av, "
        "MIN(price) AS lo, MAX(price) AS hi FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
        "GROUP BY window_start, window_end, k",
        f"SELECT {tumble(10)} AS ws, ws + INTERVAL '10 seconds', k, COUNT(*), COUNT(v), SUM(v), "
        "TRUNC(AVG(v))::BIGINT, MIN(price), MAX(price) FROM s GROUP BY ALL"),
    "hop_having": (
        "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), "
        "INTERVAL '5' SECOND, INTERVAL '15' SECOND)) GROUP BY window_start, window_end, k HAVING COUNT(*) > 1",
        f"SELECT ws, ws + INTERVAL '15 seconds', k, COUNT(*) FROM (SELECT *, {hop_starts(5, 15)} AS ws FROM s) "
        "GROUP BY ws, k HAVING COUNT(*) > 1"),
    "cumulate": (
        "SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), "
        "INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end",
        f"SELECT {tumble(20)} AS ws, we, COUNT(*), SUM(v) FROM (SELECT *, unnest(range({tumble(5)} + "
        f"INTERVAL '5 seconds', {tumble(20)} + INTERVAL '21 seconds', INTERVAL '5 seconds')) AS we FROM s) "
        "GROUP BY ALL"),
    "session_aggregate": (
        "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(SESSION(TABLE s PARTITION BY k, "
        "DESCRIPTOR(ts), INTERVAL '1' SECOND)) GROUP BY window_start, window_end, k",
        f"SELECT ws, we, k, COUNT(*), SUM(v) FROM {islands(1)} GROUP BY ALL"),
    "hop_rows_filter_functions": (
        "SELECT UPPER(k) AS uk, v * 2 AS v2, window_start, window_end FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), "
        "INTERVAL '5' SECOND, INTERVAL '10' SECOND)) WHERE v > 0",
        f"SELECT upper(k), v * 2, ws, ws + INTERVAL '10 seconds' FROM (SELECT *, {hop_starts(5, 10)} AS ws FROM s) "
        "WHERE v > 0"),
    "interval_join_full": (
        "SELECT a.v, b.v AS bv FROM s a FULL JOIN s2 b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
        "a.ts + INTERVAL '1' SECOND",
        "SELECT a.v, b.v AS bv FROM s a FULL JOIN s2 b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
        "a.ts + INTERVAL 1 SECOND"),
    "temporal_join_static_table": (
        "SELECT s.k, s.v, s.ts, t.rate FROM s LEFT JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.k = t.k "
        "WHERE s.ts < TIMESTAMP '2029-01-01 00:00:00'",
        "SELECT s.k, s.v, s.ts, (SELECT max_by(rate, t.ts) FROM t WHERE t.k = s.k AND t.ts <= s.ts) FROM s"),
    "union_then_window": (
        "SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (SELECT k, ts FROM s UNION ALL "
        "SELECT k, ts FROM s2), DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k",
        f"SELECT {tumble(10)}, k, COUNT(*) FROM (SELECT k, ts FROM s UNION ALL SELECT k, ts FROM s2) GROUP BY ALL"),
    "interval_join_then_window": (
        "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (SELECT a.k, a.ts FROM s a JOIN s2 b "
        "ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND), "
        "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        f"SELECT {tumble(10)}, COUNT(*) FROM (SELECT a.k, a.ts FROM s a JOIN s2 b ON a.k = b.k AND b.ts BETWEEN "
        "a.ts - INTERVAL 1 SECOND AND a.ts + INTERVAL 1 SECOND) GROUP BY ALL"),
}


def stamp(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def write_jsonl(path, records) -> None:
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    with open(tmp, "w") as f:  # written under a hidden name and renamed: a file is whole when it appears
        for r in records:
            f.write(json.dumps({**r, "ts": stamp(r["ts"]) if isinstance(r["ts"], dt.datetime) else r["ts"]}) + "\n")
    os.rename(tmp, path)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("stream-data"))
    tables = {"s": events(240, seed=21, keys=3, span_s=60, disorder_s=1.5),
              "s2": events(160, seed=22, keys=3, span_s=60, disorder_s=1.5)}
    for name, table in list(tables.items()):
        tables[name] = table.append_column("seq", pa.array(range(table.num_rows), pa.int64()))  # source order
        assert not any(late_mask(table.column("ts").to_pylist(), 2)), "the data must have no late events"
        os.makedirs(f"{root}/{name}")
        half = table.num_rows // 2
        write_jsonl(f"{root}/{name}/part-0.jsonl", table.slice(0, half).to_pylist())
        write_jsonl(f"{root}/{name}/part-1.jsonl", table.slice(half).to_pylist())
        write_jsonl(f"{root}/{name}/part-9.jsonl", [{"k": f"zz-{name}", "v": 0, "price": 0.0, "ts": FAR}])
    versions = [{"k": k, "rate": r, "ts": ts} for r, ts in ((1, "2024-03-01 11:00:00"), (10, "2024-03-01 12:00:30"))
                for k in ("k0", "k1", "k2")]  # in time order: no version is late
    write_jsonl(f"{root}/t.jsonl", versions)
    tables["t"] = pa.Table.from_pylist([{**v, "ts": dt.datetime.fromisoformat(v["ts"])} for v in versions])
    return root, tables


def final_rows(root: str, query: str, route: str) -> list[tuple]:
    engine = dsms.Engine()
    try:
        engine.execute(DDL.format(root=root))
        engine.execute(f"SET 'engine' = '{route}'")
        handle = engine.query(query)
        engine.run_until_idle()
        assert getattr(handle.job, "streaming", False) == (route == "spark")
        assert handle.job.status == "running"  # watched sources never end
        return rows(handle.snapshot())
    finally:
        engine.close()


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_continuous_spark_route_gives_the_oracle_rows(name, data, spark_session):
    root, tables = data
    query, oracle = SHAPES[name]
    want = rows(duck(oracle, **tables))
    assert len(want) >= 5
    for route in ("spark", "runtime"):
        got = final_rows(root, query, route)
        assert got == want, f"{name} on {route}: {len(got)} rows vs the oracle's {len(want)}"


W_DDL = """CREATE STREAM w (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json', watch = 'true');"""
COUNTS = """SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE w, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end"""


def at(second: int) -> str:
    return f"2024-01-01 00:00:{second:02d}"


def ev(*seconds: int) -> list[dict]:
    return [{"k": "a", "v": s, "ts": at(s)} for s in seconds]


def counts(table: pa.Table) -> dict[int, int]:
    return {r["window_start"].second: r["n"] for r in table.to_pylist()}


def test_spark_judges_late_events_per_micro_batch_and_the_runtime_per_event(tmp_path, spark_session):
    """Windows of 10 s, watermark 2 s behind. After a.jsonl (1, 5, 12) both routes have closed [0, 10).
    b.jsonl holds 3 (behind the watermark of 10 on both routes), 25, then 14 and 16: the runtime judges
    them against 25 - 2 = 23 (late), Spark against the watermark its previous micro-batch ended with, 10."""
    results = {}
    for route in ("runtime", "spark"):
        folder = tmp_path / route
        os.makedirs(folder)
        engine = dsms.Engine()
        engine.execute(W_DDL.format(path=folder))
        engine.execute(f"SET 'engine' = '{route}'")
        handle = engine.query(COUNTS)
        write_jsonl(str(folder / "a.jsonl"), ev(1, 5, 12))
        engine.run_until_idle()
        assert counts(handle.snapshot()) == {0: 2}, route
        write_jsonl(str(folder / "b.jsonl"), ev(3, 25, 14, 16))
        engine.run_until_idle()
        write_jsonl(str(folder / "c.jsonl"), [{"k": "a", "v": 0, "ts": FAR}])
        engine.run_until_idle()
        results[route] = (counts(handle.snapshot()), sum(handle.job.late.values()))
        engine.close()
    assert results["runtime"] == ({0: 2, 10: 1, 20: 1}, 3)
    assert results["spark"] == ({0: 2, 10: 3, 20: 1}, 1)


REFUSED = [
    ("SELECT k, COUNT(*) AS n FROM w GROUP BY k", "run the group aggregate Aggregate"),
    ("SELECT * FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM w) WHERE rn <= 2",
     "run TopN(partition by k"),
    ("SELECT k, SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS sv FROM w",
     "run OverAggregate"),
    (COUNTS + " EMIT CHANGES", "its result is updating"),
    ("SELECT window_start, COUNT(DISTINCT v) AS n FROM TABLE(TUMBLE(TABLE w, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end", "Structured Streaming has no distinct aggregates"),
    ("SELECT window_start, SUM(n) AS n FROM TABLE(TUMBLE(TABLE (SELECT window_time AS wt, COUNT(*) AS n FROM "
     "TABLE(TUMBLE(TABLE w, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, window_time), "
     "DESCRIPTOR(wt), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end", "'wt' is not a source's watermarked"),
    ("SELECT k, v, window_start FROM TABLE(SESSION(TABLE w PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' SECOND))",
     "without an aggregate"),
    ("SELECT a.k, b.v FROM w a JOIN w b ON a.k = b.k", "run the regular join"),
    ("SELECT w.k, b.v FROM b LEFT JOIN w ON w.k = b.k AND w.ts BETWEEN b.ts AND b.ts + INTERVAL '1' SECOND",
     "can pad only the bounded side"),
    ("SELECT k, ts FROM w UNION ALL SELECT k, ts FROM b", "a stream and bounded input"),
    ("SELECT k, v FROM LATE(w)", "Spark drops late events"),
    ("ISTREAM(SELECT k, COUNT(*) AS n FROM w [RANGE 10 SECONDS SLIDE 5 SECONDS] GROUP BY k)", "CQL"),
    ("SELECT k FROM one", "follow the single watched file"),
    ("SELECT k, rate FROM tw", "read the table 'tw' as changes"),
]


@pytest.mark.parametrize("query, message", REFUSED, ids=[m.split("(")[0][:40] for _, m in REFUSED])
def test_what_structured_streaming_cannot_run_is_refused_when_planned(tmp_path, query, message):
    os.makedirs(tmp_path / "w")
    write_jsonl(str(tmp_path / "one.jsonl"), ev(1))
    engine = dsms.Engine()
    engine.execute(W_DDL.format(path=tmp_path / "w") + f"""
      CREATE STREAM b (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
        WITH (connector = 'file', path = '{tmp_path / "one.jsonl"}', format = 'json');
      CREATE STREAM one (k VARCHAR, ts TIMESTAMP(3)) WITH (connector = 'file', path = '{tmp_path / "one.jsonl"}',
        format = 'json', watch = 'true');
      CREATE TABLE tw (k VARCHAR, rate BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH (connector = 'file',
        path = '{tmp_path / "w"}', format = 'json', watch = 'true');""")
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.UnsupportedPlan) as info:
        engine.query(query)  # refused before anything runs
    text = str(info.value)
    assert text.startswith("the spark route cannot") and message in text and "the runtime can" in text, text
    assert not engine.scheduler.jobs
    engine.execute("SET 'engine' = 'auto'")  # unbounded input: auto runs it on the runtime
    explained = engine.execute("EXPLAIN " + query).message.splitlines()
    assert next(line for line in explained if line.startswith("route:")).startswith("route: runtime"), explained


def test_explain_names_the_continuous_route_and_prints_the_streaming_statement(tmp_path):
    os.makedirs(tmp_path / "w")
    engine = dsms.Engine()
    engine.execute(W_DDL.format(path=tmp_path / "w"))
    engine.execute("SET 'engine' = 'spark'")
    assert engine.execute("EXPLAIN " + COUNTS).message.splitlines()[0] == \
        "route: spark continuous (SET 'engine' = 'spark'; 'w' watched: Spark Structured Streaming)"
    lowered = engine.execute("EXPLAIN LOWERED " + COUNTS).message
    assert "a Spark Structured Streaming query in append mode" in lowered
    assert "WINDOW(`ts`, '10000000 microseconds', '10000000 microseconds', '0 microseconds') AS `__w`" in lowered
    assert "GROUP BY\n    `__w`" in lowered and "ORDER BY" not in lowered


def sink_lines(path) -> list[tuple]:
    with open(path) as f:
        return sorted((r["window_start"], r["n"]) for r in map(json.loads, f))


def crash(engine: dsms.Engine) -> None:
    """The process dies: no last checkpoint, no failure recorded; the state directory's lock goes."""
    for job in engine.scheduler.jobs.values():
        job.close()
    engine.durable.close()


def dies_at_next_rows(engine: dsms.Engine, after_checkpoint: bool):
    """Make the sink's job die at the next micro-batch that writes rows: once they are in the file, and
    before or after the query's checkpoint that takes them in."""
    job = engine.scheduler.jobs["out"]
    assert job.streaming and job.committed >= 0  # restored on its route
    checkpoint, written = job.on_commit, job.metrics.rows_out

    def dies():
        if after_checkpoint or job.metrics.rows_out == written:
            checkpoint()
        if job.metrics.rows_out > written:
            job.output.writer.flush()
            raise RuntimeError("the process dies here")

    job.on_commit = dies
    engine.scheduler.step()  # the turn fails midway (the engine's bookkeeping never sees it)
    assert job.error is not None
    crash(engine)


def test_a_sink_on_the_continuous_route_survives_restarts_and_crashes_exactly_once(tmp_path, spark_session):
    """A sink with a state directory, restarted after a clean close, after a crash while a micro-batch's rows
    were in the file but not in the query's checkpoint (they are cut off and written again), and after a
    crash once they were (Spark runs the micro-batch again, not having logged it, and the job skips it)."""
    folder, out, state = tmp_path / "w", tmp_path / "out.jsonl", str(tmp_path / "state")
    os.makedirs(folder)
    engine = dsms.Engine(state_dir=state)
    engine.execute(W_DDL.format(path=folder) + "SET 'engine' = 'spark';")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {COUNTS}")
    write_jsonl(str(folder / "a.jsonl"), ev(1, 2, 12, 13))
    engine.run_until_idle()
    engine.close()
    assert sink_lines(out) == [("2024-01-01 00:00:00.000", 2)]

    write_jsonl(str(folder / "b.jsonl"), ev(14, 22, 23))  # closes [10, 20)
    dies_at_next_rows(dsms.Engine(state_dir=state), after_checkpoint=False)
    assert sink_lines(out)[-1] == ("2024-01-01 00:00:10.000", 3)  # in the file, not in the checkpoint

    write_jsonl(str(folder / "c.jsonl"), ev(24, 33))  # closes [20, 30)
    dies_at_next_rows(dsms.Engine(state_dir=state), after_checkpoint=True)

    write_jsonl(str(folder / "d.jsonl"), [{"k": "a", "v": 0, "ts": FAR}])
    engine = dsms.Engine(state_dir=state)
    engine.run_until_idle()
    engine.close()
    assert sink_lines(out) == [("2024-01-01 00:00:00.000", 2), ("2024-01-01 00:00:10.000", 3),
                               ("2024-01-01 00:00:20.000", 3), ("2024-01-01 00:00:30.000", 1)]


def test_a_directory_sink_on_the_continuous_route_gets_parts_per_micro_batch(tmp_path, spark_session):
    folder, out = tmp_path / "w", tmp_path / "out"
    os.makedirs(folder)
    engine = dsms.Engine()
    engine.execute(W_DDL.format(path=folder) + "SET 'engine' = 'spark';")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}/', format = 'json') AS {COUNTS}")
    write_jsonl(str(folder / "a.jsonl"), ev(1, 2, 12))
    engine.run_until_idle()
    write_jsonl(str(folder / "b.jsonl"), ev(13, 25, 3))
    engine.run_until_idle()
    engine.close()
    names = sorted(os.listdir(out))
    batches = {n.split("-")[1] for n in names}
    assert len(batches) == 2 and all(n.startswith("part-") for n in names), names  # written by two micro-batches
    lines = [json.loads(line) for n in names for line in open(out / n)]
    assert [(r["window_start"], r["n"]) for r in lines] == [("2024-01-01 00:00:00.000", 2),
                                                            ("2024-01-01 00:00:10.000", 2)]
