"""The Kafka connectors' ``avro`` format against a real broker (Tansu).

Messages are written and read back in the test with fastavro and a
record schema written out by hand (Flink's derivation from the columns),
independently of dsms's own schema derivation; the rows are checked
against a DuckDB oracle over the same events.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json

import fastavro
import pyarrow as pa
import pytest

import dsms

from kafka_helpers import consume_all, new_topic, produce
from oracle import duck, rows

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)

CLICK = fastavro.parse_schema({"type": "record", "name": "record", "fields": [
    {"name": "ad", "type": "int"},  # declared NOT NULL
    {"name": "cost", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}],
     "default": None},
    {"name": "who", "type": ["null", "string"], "default": None},
    {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
]})
PER_AD = fastavro.parse_schema({"type": "record", "name": "record", "fields": [  # the result's NOT NULL columns
    {"name": "window_start", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "ad", "type": "int"},
    {"name": "n", "type": ["null", "long"], "default": None},
    {"name": "cost", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 2}],
     "default": None},
]})


def datum(schema, record: dict) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, schema, record)
    return buffer.getvalue()


def clicks(n: int) -> list[dict]:
    return [{"ad": i % 4, "cost": decimal.Decimal(f"{i % 17}.{i % 100:02d}"), "who": None if i % 5 == 0 else f"u{i % 3}",
             "ts": BASE + dt.timedelta(milliseconds=i * 900)} for i in range(n)]


def options(bootstrap: str, topic: str, **extra) -> str:
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "avro",
            **extra}
    return ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())


def test_avro_messages_in_and_out_through_a_tumble_window(kafka_broker, tmp_path):
    src, out = new_topic(kafka_broker, "avro-clicks", 2), new_topic(kafka_broker, "avro-per-ad", 1)
    events = clicks(200)
    produce(kafka_broker, src, [datum(CLICK, e) for e in events] + [b"\x00not avro at all"],
            partition_of=lambda i, r: i % 2)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(f"""CREATE STREAM clicks (ad INT NOT NULL, cost DECIMAL(10, 2), who STRING, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH ({options(kafka_broker, src, **{
        'scan.startup.mode': 'earliest-offset', 'scan.bounded.mode': 'latest-offset', 'on_error': 'skip',
        'dead_letter': 'bad.jsonl'})})""")
    q = engine.query("SELECT ad, cost, who, ts FROM clicks")
    query = """SELECT window_start, ad, COUNT(*) AS n, SUM(cost) AS cost
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad"""
    engine.execute(f"CREATE SINK per_ad WITH ({options(kafka_broker, out)}) AS {query}")
    for _ in range(600):  # both bounded queries run to their end
        engine.run_until_idle()
        if all(status.stats.status != "running" for status in engine.statuses()):
            break
    ev = pa.Table.from_pylist(events, schema=pa.schema([("ad", pa.int32()), ("cost", pa.decimal128(10, 2)),
                                                         ("who", pa.string()), ("ts", pa.timestamp("us"))]))
    assert rows(q.snapshot()) == rows(ev)
    dead = [json.loads(line) for line in (tmp_path / "bad.jsonl").read_text().splitlines()]
    # The one bad message (the 201st: partition 0, offset 100), dead-lettered by each query reading the source.
    assert {(d["topic"], d["partition"], d["offset"]) for d in dead} == {(src, 0, 100)} and len(dead) == 2
    assert all("not an Avro datum" in d["error"] for d in dead)

    want = duck("""SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, ad, COUNT(*) AS n,
                          SUM(cost) AS cost FROM ev GROUP BY ALL""", ev=ev)
    messages = consume_all(kafka_broker, out, expect=want.num_rows)
    engine.close()
    got = [fastavro.schemaless_reader(io.BytesIO(value), PER_AD, None) for _, _, _, value, _ in messages]
    got = pa.Table.from_pylist([{**r, "window_start": r["window_start"].replace(tzinfo=None)} for r in got])
    assert rows(got) == rows(want.cast(got.schema))


def test_an_updating_result_into_avro_is_refused_and_upsert_kafka_takes_avro(kafka_broker):
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k INT, v INT) WITH (connector = 'memory')")
    with pytest.raises(dsms.DsmsError, match="append-only"):
        engine.execute(f"CREATE SINK o WITH ({options(kafka_broker, 'anything')}) AS "
                       "SELECT k, COUNT(*) AS n FROM s GROUP BY k")
    topic = new_topic(kafka_broker, "avro-upsert", 1)
    engine.execute(f"""CREATE SINK totals WITH ('connector' = 'upsert-kafka', 'topic' = '{topic}',
        'properties.bootstrap.servers' = '{kafka_broker}', 'key.format' = 'avro', 'key.fields' = 'k',
        'value.format' = 'avro') AS SELECT k, COUNT(*) AS n FROM s GROUP BY k""")
    engine.execute("INSERT INTO s VALUES (1, 10), (2, 20), (1, 30)")
    engine.run_until_idle()
    key = fastavro.parse_schema({"type": "record", "name": "record",
                                 "fields": [{"name": "k", "type": ["null", "int"], "default": None}]})
    value = fastavro.parse_schema({"type": "record", "name": "record", "fields": [
        {"name": "k", "type": ["null", "int"], "default": None}, {"name": "n", "type": ["null", "long"], "default": None}]})
    messages = consume_all(kafka_broker, topic)  # until none comes for a while
    engine.close()
    latest = {}
    for _, _, k, v, _ in messages:
        latest[fastavro.schemaless_reader(io.BytesIO(k), key, None)["k"]] = \
            fastavro.schemaless_reader(io.BytesIO(v), value, None)["n"]
    assert latest == {1: 2, 2: 1}
