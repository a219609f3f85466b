"""Kafka connector benchmarks on a local Tansu broker (devtools/kafka_broker.py).

1. Throughput: N JSON ad impressions in a topic of 3 partitions, read to
   the end (``scan.bounded.mode = 'latest-offset'``) into the 10-second
   TUMBLE COUNT/SUM per ad, against consuming the same topic with the bare
   confluent-kafka client (every message's value touched); printed as
   events/s and as a ratio; then the same bounded read on the DuckDB batch
   route, and the same impressions as Avro (``format = 'avro'``).
2. Latency: a producer process writes impressions stamped with the wall
   clock at a fixed rate (10 k and 100 k events/s); ``dsms run`` reads
   them, computes 200 ms tumbling windows (watermark = event time) and
   writes each window to a Kafka topic (no state directory, so results go
   out as soon as they are computed); this process consumes the results.
   A window's result can only be computed once an event at or after its
   end has arrived, which the producer writes at that wall-clock moment,
   so latency = arrival of the result - the window's end, p50/p99 over
   windows. The rate the producer really reached is printed with it.

    python benchmarks/connectors.py [--events N] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "devtools"))

from kafka_broker import KafkaBroker, create_topic  # noqa: E402

TUMBLE = """SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, SUM(cost) AS spend
FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, ad_id"""
BASE_MS = 1_700_000_000_000


AVRO = {"type": "record", "name": "record", "fields": [  # the columns of `impressions`, as Flink derives them
    {"name": n, "type": ["null", t], "default": None} for n, t in (
        ("ad_id", "long"), ("user_id", "long"), ("cost", "double"),
        ("ts", {"type": "long", "logicalType": "timestamp-millis"}))]}


def fill(bootstrap: str, topic: str, events: int, rate: int = 10_000, fmt: str = "json") -> None:
    """``events`` impressions as JSON (or Avro), ``rate`` per second of event time, round-robin over the
    partitions."""
    import io

    import fastavro
    import numpy as np
    from confluent_kafka import Producer

    rng = np.random.default_rng(7)
    ads, costs = rng.integers(0, 1000, events), rng.random(events).round(4)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    avro = fastavro.parse_schema(AVRO)
    for i in range(events):
        ts = BASE_MS + i * 1000 // rate
        if fmt == "avro":
            buffer = io.BytesIO()
            fastavro.schemaless_writer(buffer, avro, {"ad_id": int(ads[i]), "user_id": i % 100000,
                                                      "cost": float(costs[i]), "ts": ts})
            value = buffer.getvalue()
        else:
            value = f'{{"ad_id":{ads[i]},"user_id":{i % 100000},"cost":{costs[i]},"ts":{ts}}}'.encode()
        while True:
            try:
                p.produce(topic, value=value, partition=i % 3)
                break
            except BufferError:
                p.poll(0.05)
    p.flush(120)


def bare_client(bootstrap: str, topic: str, events: int) -> float:
    """Seconds for the bare confluent-kafka consumer to read every message's value."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bare-{time.monotonic_ns()}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(3)])
    seen, size = 0, 0
    began = time.perf_counter()
    while seen < events:
        for m in c.consume(65536, 1.0):
            if m.error() is None:
                size += len(m.value())
                seen += 1
    elapsed = time.perf_counter() - began
    c.close()
    return elapsed


def dsms_tumble(bootstrap: str, topic: str, route: str = "runtime", fmt: str = "json") -> dict:
    import dsms

    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM impressions (ad_id BIGINT, user_id BIGINT, cost DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH ('connector' = 'kafka', 'topic' = '{topic}',
        'properties.bootstrap.servers' = '{bootstrap}', 'format' = '{fmt}', 'scan.startup.mode' = 'earliest-offset',
        'scan.bounded.mode' = 'latest-offset')""")
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(TUMBLE)
    began = time.perf_counter()
    job = q.job
    while not job.done:  # run_until_idle returns while the client is still fetching
        engine.run_until_idle()
    elapsed = time.perf_counter() - began
    result = {"seconds": elapsed, "events": job.stats().rows_in, "rows_out": q.snapshot().num_rows}
    engine.close()
    return result


PRODUCER = r"""
import sys, time
from confluent_kafka import Producer
bootstrap, topic, rate, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "queue.buffering.max.messages": 1_000_000})
began, sent = time.time(), 0
while True:
    now = time.time()
    if now - began >= seconds:
        break
    due = int((now - began) * rate)
    ms = int(now * 1000)
    while sent < due:
        v = '{"ad_id":%d,"cost":1.5,"ts":%d}' % (sent % 100, ms)
        try:
            p.produce(topic, value=v.encode())
        except BufferError:
            p.poll(0.01)
            continue
        sent += 1
    p.poll(0)
    time.sleep(0.001)
p.flush(30)
print(sent / (time.time() - began))
"""

LATENCY_SQL = """
CREATE STREAM impressions (ad_id BIGINT, cost DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'kafka', 'topic' = '{src}', 'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset');
CREATE SINK per_second WITH ('connector' = 'kafka', 'topic' = '{out}', 'properties.bootstrap.servers' = '{bootstrap}',
    'format' = 'json') AS
  SELECT window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '200' MILLISECOND))
  GROUP BY window_start, window_end;
"""


def latency(bootstrap: str, rate: int, seconds: float) -> dict:
    """p50/p99 of (arrival of a window's result - the window's end), in ms, with the rate really produced."""
    import datetime as dt

    import numpy as np
    from confluent_kafka import Consumer, TopicPartition

    tag = f"{rate}-{time.monotonic_ns()}"
    src, out = f"lat-in-{tag}", f"lat-out-{tag}"
    create_topic(bootstrap, src, 1)
    create_topic(bootstrap, out, 1)
    folder = tempfile.mkdtemp()
    script = os.path.join(folder, "latency.sql")
    with open(script, "w") as f:
        f.write(LATENCY_SQL.format(src=src, out=out, bootstrap=bootstrap))
    dsms_bin = os.path.join(os.path.dirname(sys.executable), "dsms")
    run = subprocess.Popen([dsms_bin, "run", script, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lat-{tag}", "enable.auto.commit": False})
    c.assign([TopicPartition(out, 0, 0)])
    time.sleep(3)  # dsms starts and assigns its partitions
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, bootstrap, src, str(rate), str(seconds)],
                                stdout=subprocess.PIPE, text=True)
    delays, last_end = [], 0.0
    began = time.time()
    while producer.poll() is None or (last_end < began + seconds - 1 and time.time() < began + seconds + 60):
        for m in c.consume(1000, 0.05):  # until the windows of the whole run are in (or a minute more)
            if m.error() is None:
                got = time.time()
                end = dt.datetime.fromisoformat(json.loads(m.value())["window_end"]).replace(tzinfo=dt.timezone.utc)
                last_end = max(last_end, end.timestamp())
                delays.append((got - end.timestamp()) * 1000)
    produced = float(producer.communicate()[0].strip() or 0)
    run.terminate()
    run.wait(30)
    c.close()
    steady = np.array(delays[5:])  # the first windows include the consumer's start
    return {"rate": produced, "windows": len(steady), "p50_ms": float(np.percentile(steady, 50)),
            "p99_ms": float(np.percentile(steady, 99))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--seconds", type=float, default=15.0, help="how long each latency run produces")
    args = parser.parse_args()
    with KafkaBroker() as broker:
        topic = f"impressions-{os.getpid()}"
        create_topic(broker.bootstrap, topic, 3)
        began = time.perf_counter()
        fill(broker.bootstrap, topic, args.events)
        print(f"produced {args.events:,} JSON impressions to 3 partitions in {time.perf_counter() - began:.1f} s")
        bare = min(bare_client(broker.bootstrap, topic, args.events) for _ in range(2))
        run = min((dsms_tumble(broker.bootstrap, topic) for _ in range(2)), key=lambda r: r["seconds"])
        assert run["events"] == args.events, run
        bare_rate, dsms_rate = args.events / bare, args.events / run["seconds"]
        print(f"{'reader':<44} {'seconds':>8} {'events/s':>12} {'ratio':>7}")
        print(f"{'bare confluent-kafka consumer (values only)':<44} {bare:>8.2f} {bare_rate:>12,.0f} {1:>6.2f}x")
        print(f"{'dsms kafka source -> 10 s tumble per ad':<44} {run['seconds']:>8.2f} {dsms_rate:>12,.0f} "
              f"{dsms_rate / bare_rate:>6.2f}x   ({run['rows_out']:,} rows out)")
        duck = min((dsms_tumble(broker.bootstrap, topic, "duckdb") for _ in range(2)), key=lambda r: r["seconds"])
        assert duck["rows_out"] == run["rows_out"], (duck, run)
        duck_rate = args.events / duck["seconds"]
        print(f"{'the same bounded read on the duckdb route':<44} {duck['seconds']:>8.2f} {duck_rate:>12,.0f} "
              f"{duck_rate / bare_rate:>6.2f}x")
        avro_topic = f"impressions-avro-{os.getpid()}"
        create_topic(broker.bootstrap, avro_topic, 3)
        fill(broker.bootstrap, avro_topic, args.events, fmt="avro")
        avro = min((dsms_tumble(broker.bootstrap, avro_topic, fmt="avro") for _ in range(2)), key=lambda r: r["seconds"])
        assert avro["rows_out"] == run["rows_out"], (avro, run)
        avro_rate = args.events / avro["seconds"]
        print(f"{'dsms, the same impressions as avro':<44} {avro['seconds']:>8.2f} {avro_rate:>12,.0f} "
              f"{avro_rate / bare_rate:>6.2f}x   (fastavro: a datum per message)")
        print("\nend-to-end latency, produce -> dsms (200 ms tumble) -> Kafka sink -> consumer")
        for rate in (10_000, 100_000):
            r = latency(broker.bootstrap, rate, args.seconds)
            print(f"  target {rate:>7,}/s  produced {r['rate']:>9,.0f}/s  windows {r['windows']:>4}  "
                  f"p50 {r['p50_ms']:>7.0f} ms  p99 {r['p99_ms']:>7.0f} ms")


if __name__ == "__main__":
    main()
