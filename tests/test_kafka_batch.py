"""A bounded Kafka read (``scan.bounded.mode``) on the DuckDB batch route, against a real broker (Tansu).

The batch route reads the topic with the Kafka connector's own reader and
runs the lowered statement over it; its rows must equal the runtime's and
a DuckDB oracle's over the produced events (late events left out by hand).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys

import pyarrow as pa
import pytest

import dsms

from kafka_helpers import new_topic, produce
from oracle import duck, rows

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)

TUMBLE = """SELECT window_start, ad, COUNT(*) AS n, SUM(cost) AS cost
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad"""
ORACLE = """SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, ad, COUNT(*) AS n, SUM(cost) AS cost
    FROM ev GROUP BY ALL"""


def stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def declare(engine: dsms.Engine, bootstrap: str, topic: str, bounded: bool = True) -> None:
    mode = ", 'scan.bounded.mode' = 'latest-offset'" if bounded else ""
    engine.execute(f"""CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3),
        part INT METADATA FROM 'partition' VIRTUAL, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
        WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{bootstrap}',
              'format' = 'json', 'scan.startup.mode' = 'earliest-offset'{mode})""")


def result(bootstrap: str, topic: str, engine_name: str, query: str = TUMBLE) -> list[tuple]:
    engine = dsms.Engine()
    declare(engine, bootstrap, topic)
    engine.execute(f"SET 'engine' = '{engine_name}'")
    q = engine.query(query)
    for _ in range(2000):
        engine.run_until_idle()
        if q.job.done:
            break
    assert q.job.done, "the bounded read did not end"
    assert q.job.stats().route == engine_name
    got = rows(q.snapshot())
    engine.close()
    return got


def as_events(records: list[dict]) -> pa.Table:
    return pa.Table.from_pylist([{**r, "ts": dt.datetime.fromisoformat(r["ts"])} for r in records])


def test_a_bounded_topic_with_lagging_partitions_on_duckdb_equals_the_runtime_and_the_oracle(kafka_broker):
    topic = new_topic(kafka_broker, "batch-clicks", 3)
    rng = random.Random(3)
    records, parts = [], []
    for i in range(400):  # partitions 0 and 1, the second 30 s behind, each out of order by < 2 s; 2 is empty
        for p, lag in ((0, 0), (1, 30)):
            t = BASE + dt.timedelta(milliseconds=i * 500 - lag * 1000 + rng.randrange(1500))
            records.append({"ad": rng.randrange(5), "cost": rng.randrange(100), "ts": stamp(t)})
            parts.append(p)
    produce(kafka_broker, topic, records, partition_of=lambda i, r: parts[i])
    want = rows(duck(ORACLE, ev=as_events(records)))
    assert len(want) > 100
    assert result(kafka_broker, topic, "duckdb") == want
    assert result(kafka_broker, topic, "runtime") == want
    by_part = "SELECT part, COUNT(*) AS n FROM clicks GROUP BY part"  # metadata columns read on the batch route
    assert result(kafka_broker, topic, "duckdb", by_part) == [(0, 400), (1, 400)]


def test_late_events_of_a_bounded_topic_are_judged_per_window_on_duckdb_as_on_the_runtime(kafka_broker):
    topic = new_topic(kafka_broker, "batch-late", 1)
    records = [{"ad": i % 3, "cost": i, "ts": stamp(BASE + dt.timedelta(seconds=i))} for i in range(60)]
    late = [{"ad": 1, "cost": 1000, "ts": stamp(BASE + dt.timedelta(seconds=s))} for s in (3, 41, 58)]
    records = records[:50] + late[:2] + records[50:] + late[2:]
    produce(kafka_broker, topic, records)
    # After 49 the watermark is 47: [0, 10) has fired, so 3 is dropped; [40, 50) has not, so 41 counts.
    # 58 after 59 (watermark 57) counts in [50, 60).
    on_time = [r for r in records if r is not late[0]]
    want = rows(duck(ORACLE, ev=as_events(on_time)))
    assert result(kafka_broker, topic, "duckdb") == want
    assert result(kafka_broker, topic, "runtime") == want


def test_kafka_without_a_bounded_mode_is_refused_by_the_batch_routes_and_auto_keeps_the_runtime(kafka_broker):
    topic = new_topic(kafka_broker, "batch-refused", 1)
    engine = dsms.Engine()
    declare(engine, kafka_broker, topic, bounded=False)
    for route in ("duckdb", "spark"):
        engine.execute(f"SET 'engine' = '{route}'")
        with pytest.raises(dsms.DsmsError, match=r"cannot read 'clicks' \(connector 'kafka'\): the batch routes read "
                                                 r"it only with scan.bounded.mode.*SET 'engine' = 'runtime'"):
            engine.query("SELECT ad FROM clicks")
    engine.execute("DROP STREAM clicks")
    declare(engine, kafka_broker, topic)
    engine.execute("SET 'engine' = 'auto'")
    explained = engine.execute("EXPLAIN SELECT ad FROM clicks")
    assert "route: runtime ('clicks' is read through its connector ('kafka'), not sized as files" in explained.message
    engine.close()


def test_a_bounded_topic_on_the_spark_batch_route_equals_the_oracle(kafka_broker, spark_session):
    topic = new_topic(kafka_broker, "batch-spark", 1)  # one partition: whether an event is late is certain
    records = [{"ad": i % 4, "cost": i, "ts": stamp(BASE + dt.timedelta(milliseconds=i * 700))} for i in range(300)]
    late = {"ad": 1, "cost": 1000, "ts": stamp(BASE)}  # 209 s behind the events before it
    produce(kafka_broker, topic, records + [late])
    want = rows(duck(ORACLE, ev=as_events(records)))
    assert result(kafka_broker, topic, "spark") == want


def test_explain_says_the_batch_route_reads_the_topic_with_the_kafka_reader():
    engine = dsms.Engine()
    declare(engine, "127.0.0.1:1", "t")  # planning only: nothing connects
    engine.execute("SET 'engine' = 'duckdb'")
    explained = engine.execute(f"EXPLAIN {TUMBLE}").message
    assert "-- __scan0: clicks (connector 'kafka', a bounded read), read by its connector's reader" in explained
    assert "(per partition: the minimum over its partitions); __wm = __mx - 2000000 us, the watermark when the row " \
           "arrived: a window counts the row when its last millisecond is above it" in explained
    engine.close()


def test_dsms_run_on_duckdb_reads_a_bounded_topic_and_exits(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "batch-cli", 2)
    records = [{"ad": i % 3, "cost": i, "ts": stamp(BASE + dt.timedelta(milliseconds=i * 300))} for i in range(500)]
    produce(kafka_broker, topic, records, partition_of=lambda i, r: i % 2)
    script = tmp_path / "batch.sql"
    script.write_text(f"""CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH ('connector' = 'kafka', 'topic' = '{topic}', 'properties.bootstrap.servers' = '{kafka_broker}',
        'format' = 'json', 'scan.startup.mode' = 'earliest-offset', 'scan.bounded.mode' = 'latest-offset');
CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS {TUMBLE};
""")
    dsms_bin = os.path.join(os.path.dirname(sys.executable), "dsms")
    run = subprocess.run([dsms_bin, "run", "--engine", "duckdb", str(script)], capture_output=True, text=True,
                         cwd=str(tmp_path), timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "(duckdb)" in run.stdout + run.stderr
    got = pa.Table.from_pylist([{**r, "window_start": dt.datetime.fromisoformat(r["window_start"])}
                                for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())])
    assert rows(got.select(["window_start", "ad", "n", "cost"])) == rows(duck(ORACLE, ev=as_events(records)))
