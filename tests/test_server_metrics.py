"""/metrics of a `dsms server`, parsed by prometheus-client's parser: late events dropped per operator,
the watermark and its lag behind wall-clock time, and Kafka consumer lag per source.

Oracles: hand-computed counts (which event is late, how many messages were produced while the query
was paused) and the wall clock of the test.
"""

from __future__ import annotations

import time
import urllib.request

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from kafka_helpers import new_topic, produce
from server_helpers import DsmsServer


def _samples(server: DsmsServer) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _wait_for(server: DsmsServer, key: tuple, value: float, timeout: float = 60.0) -> dict:
    deadline = time.time() + timeout
    while True:
        samples = _samples(server)
        if samples.get(key) == value or time.time() > deadline:
            assert samples.get(key) == value, (key, samples.get(key))
            return samples
        time.sleep(0.2)


def test_late_events_per_operator_and_watermark_lag(tmp_path):
    with DsmsServer(str(tmp_path)) as server, psycopg.connect(server.url(), autocommit=True) as c:
        c.execute("CREATE STREAM taps (k BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
                  "WITH (connector = 'memory')")
        c.execute("CREATE MATERIALIZED VIEW per_10s AS SELECT window_start, COUNT(*) AS n "
                  "FROM TUMBLE(taps, ts, INTERVAL '10' SECOND) GROUP BY window_start, window_end")
        # [00:00, 00:10) fires when the watermark passes 00:10 (event 00:19 - 1 s); then 00:03 is too late
        # for it, and 00:15 is out of order but its window [00:10, 00:20) is still open.
        c.execute("INSERT INTO taps VALUES (1, TIMESTAMP '2024-01-01 00:00:01'), (2, TIMESTAMP '2024-01-01 00:00:19')")
        c.execute("FLUSH")
        c.execute("INSERT INTO taps VALUES (3, TIMESTAMP '2024-01-01 00:00:03'), (4, TIMESTAMP '2024-01-01 00:00:15')")
        c.execute("FLUSH")
        before = time.time()
        samples = _samples(server)
    late = {labels: v for (name, labels), v in samples.items() if name == "dsms_operator_late_events_dropped_total"}
    assert list(late.values()) == [1], late
    (labels,) = late
    assert dict(labels)["query"] == "per_10s" and "Window" in dict(labels)["operator"]
    watermark = samples[("dsms_query_watermark_seconds", (("query", "per_10s"),))]
    assert watermark == 1704067218.0  # 2024-01-01 00:00:19 minus the 1 s bound, in Unix seconds
    lag = samples[("dsms_query_watermark_lag_seconds", (("query", "per_10s"),))]
    assert before - watermark - 60 <= lag <= time.time() - watermark + 60


def test_kafka_consumer_lag_per_source(tmp_path, kafka_broker):
    topic = new_topic(kafka_broker, "lag")
    produce(kafka_broker, topic, [{"k": i} for i in range(20)])
    with DsmsServer(str(tmp_path)) as server, psycopg.connect(server.url(), autocommit=True) as c:
        c.execute(f"CREATE STREAM events (k BIGINT) WITH (connector = 'kafka', topic = '{topic}', "
                  f"'properties.bootstrap.servers' = '{kafka_broker}', format = 'json', "
                  "'scan.startup.mode' = 'earliest-offset')")
        c.execute("CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n FROM events")
        key = ("dsms_source_lag", (("query", "total"), ("source", "events"), ("unit", "messages")))
        _wait_for(server, key, 0)
        c.execute("PAUSE QUERY total")
        produce(kafka_broker, topic, [{"k": i} for i in range(30)])
        _wait_for(server, key, 30)  # the 30 produced while it was paused
        c.execute("RESUME QUERY total")
        _wait_for(server, key, 0)
        assert c.execute("SELECT n FROM total").fetchall() == [(50,)]
