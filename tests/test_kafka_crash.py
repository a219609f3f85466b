"""Exactly-once into Kafka across kill -9: a `dsms run --state-dir` process of a Kafka -> Kafka pipeline is
killed at seeded random moments and started again each time; what a consumer reads from the output
topics must equal an uninterrupted run's output (and the DuckDB oracle), every result exactly once.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import random
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

import dsms
from dsms.runtime import checkpoint as ckpt

from changes import final_table
from crash_helpers import newest_checkpoint, wait_past_checkpoint
from kafka_helpers import consume_all, new_topic, produce
from oracle import duck, rows

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
KILLS = 10

SCRIPT = """
SET 'checkpoint.interval' = '300 ms';
CREATE STREAM clicks (ad INT, cost BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH ('connector' = 'kafka', 'topic' = '{src}', 'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset', 'batch.size' = '100');
CREATE SINK per_window WITH ('connector' = 'kafka', 'topic' = '{windows}',
    'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json') AS
  SELECT window_start, ad, COUNT(*) AS n, SUM(cost) AS cost
  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end, ad;
CREATE SINK totals WITH ('connector' = 'kafka', 'topic' = '{totals}',
    'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'changelog-json') AS
  SELECT ad, COUNT(*) AS n, SUM(cost) AS cost FROM clicks GROUP BY ad;
"""


def make_events(n: int, seed: int) -> list[dict]:
    """``n`` clicks 37 ms of event time apart, then one an hour later whose watermark closes every window."""
    rng = random.Random(seed)
    events = [{"ad": rng.randrange(8), "cost": rng.randrange(100), "ts": BASE + dt.timedelta(milliseconds=i * 37)}
              for i in range(n)]
    events.append({"ad": 8, "cost": 0, "ts": events[-1]["ts"] + dt.timedelta(hours=1)})
    return [{**e, "ts": e["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]} for e in events]


def pipeline(tmp_path, bootstrap: str, name: str):
    src = new_topic(bootstrap, f"crash-in-{name}", 1)
    windows, totals = new_topic(bootstrap, f"windows-{name}", 2), new_topic(bootstrap, f"totals-{name}", 1)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "job.sql").write_text(SCRIPT.format(src=src, bootstrap=bootstrap, windows=windows, totals=totals))
    return folder, src, windows, totals


def start(folder):
    return subprocess.Popen([DSMS, "run", str(folder / "job.sql"), "--state-dir", str(folder / "state"), "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def kill(proc) -> None:
    assert proc.poll() is None, f"dsms run ended by itself ({proc.returncode}): {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()


def outputs(bootstrap: str, windows: str, totals: str):
    window_msgs = consume_all(bootstrap, windows)
    total_msgs = consume_all(bootstrap, totals)
    assert all(h.get("dsms.epoch") for *_, h in window_msgs + total_msgs)  # written through the write-ahead log
    window_rows = sorted(tuple(json.loads(v).values()) for _, _, _, v, _ in window_msgs)
    log = [json.loads(v) for _, _, _, v, _ in total_msgs]
    if not log:
        return window_rows, []
    final = final_table([pa.Table.from_pylist([{"op": r.pop("op"), **r} for r in log])])  # strict: no double change
    return window_rows, rows(final)


def settled(bootstrap: str, windows: str, totals: str, want, timeout: float = 120.0):
    """The outputs once they equal ``want`` (or as they are after ``timeout`` s)."""
    deadline = time.monotonic() + timeout
    got = outputs(bootstrap, windows, totals)
    while got != want and time.monotonic() < deadline:
        time.sleep(0.5)
        got = outputs(bootstrap, windows, totals)
    return got


def test_kill_9_at_random_points_gives_each_result_exactly_once(kafka_broker, tmp_path):
    """An unbounded source, fed while the job runs: each of the kills lands on a process that restored the
    last checkpoint and took one of its own, at a random moment after it."""
    events = make_events(9000, seed=7)
    ev = pa.Table.from_pylist([{**e, "ts": dt.datetime.fromisoformat(e["ts"])} for e in events])
    closed = f"time_bucket(INTERVAL '5 seconds', ts) + INTERVAL '5 seconds' <= TIMESTAMP '{max(ev.column('ts').to_pylist())}' " \
             "- INTERVAL '2 seconds'"
    oracle_windows = sorted(
        (r["window_start"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3], r["ad"], r["n"], r["cost"])
        for r in duck("SELECT time_bucket(INTERVAL '5 seconds', ts) AS window_start, ad, COUNT(*) AS n, "
                      f"CAST(SUM(cost) AS BIGINT) AS cost FROM ev WHERE {closed} GROUP BY ALL", ev=ev).to_pylist())
    oracle_totals = rows(duck("SELECT ad, COUNT(*) AS n, CAST(SUM(cost) AS BIGINT) AS cost FROM ev GROUP BY ad", ev=ev))
    want = (oracle_windows, oracle_totals)

    clean, src, clean_windows, clean_totals = pipeline(tmp_path, kafka_broker, "clean")
    proc = start(clean)
    try:
        produce(kafka_broker, src, events)
        uninterrupted = settled(kafka_broker, clean_windows, clean_totals, want)
    finally:
        kill(proc)
    assert uninterrupted == want

    crashed, src, windows, totals = pipeline(tmp_path, kafka_broker, "crashed")
    rng = random.Random(12)
    cuts = sorted(rng.sample(range(1, len(events) - 1), KILLS))
    chunks = [events[a:b] for a, b in zip([0, *cuts], [*cuts, len(events)])]
    for chunk in chunks[:-1]:
        before = newest_checkpoint(crashed / "state")
        proc = start(crashed)
        produce(kafka_broker, src, chunk)  # while it starts and runs
        wait_past_checkpoint(crashed / "state", before, proc)
        time.sleep(rng.uniform(0.0, 1.0))
        kill(proc)
    proc = start(crashed)
    try:
        produce(kafka_broker, src, chunks[-1])
        settled(kafka_broker, windows, totals, want)
        time.sleep(1.0)  # a duplicate produced late would still show
        got = outputs(kafka_broker, windows, totals)
    finally:
        kill(proc)
    assert got == uninterrupted


# -- the same crash, at chosen points, in one process -----------------------------------------------------

def crash_engine(state: str, bootstrap: str, src: str, out: str, delivery: str):
    engine = dsms.Engine(state_dir=state)
    engine.execute("SET 'checkpoint.interval' = '1 h'")  # only the explicit checkpoints of the test
    engine.execute(f"""CREATE STREAM c (ad INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts) WITH ('connector' = 'kafka',
        'topic' = '{src}', 'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json',
        'scan.startup.mode' = 'earliest-offset')""")
    engine.execute(f"""CREATE SINK s WITH ('connector' = 'kafka', 'topic' = '{out}',
        'properties.bootstrap.servers' = '{bootstrap}', 'format' = 'json', 'sink.delivery-guarantee' = '{delivery}')
        AS SELECT window_start, ad, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE c, DESCRIPTOR(ts), INTERVAL '10' SECOND))
        GROUP BY window_start, window_end, ad""")
    return engine


def settle(engine) -> None:
    for _ in range(15):
        engine.run_until_idle()
        time.sleep(0.03)


def second_events(n: int) -> list[dict]:
    return [{"ad": i % 3, "ts": (BASE + dt.timedelta(seconds=i)).strftime("%Y-%m-%d %H:%M:%S")} for i in range(n)]


def window_oracle(events: list[dict]) -> list[tuple]:
    ev = pa.Table.from_pylist([{**e, "ts": dt.datetime.fromisoformat(e["ts"])} for e in events])
    last = max(e["ts"] for e in events)
    return sorted((r["window_start"].strftime("%Y-%m-%d %H:%M:%S.000"), r["ad"], r["n"]) for r in duck(
        "SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, ad, COUNT(*) AS n FROM ev "
        f"WHERE time_bucket(INTERVAL '10 seconds', ts) + INTERVAL '10 seconds' <= TIMESTAMP '{last}' GROUP BY ALL",
        ev=ev).to_pylist())


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_a_crash_after_output_past_the_checkpoint(kafka_broker, tmp_path, delivery):
    """Exactly-once keeps results past the last checkpoint out of the topic; at-least-once writes them twice."""
    src, out = new_topic(kafka_broker, "eo-in", 1), new_topic(kafka_broker, "eo-out", 1)
    events = second_events(600)
    produce(kafka_broker, src, events[:300])
    state = str(tmp_path / "state")
    engine = crash_engine(state, kafka_broker, src, out, delivery)
    settle(engine)
    engine.checkpoint()
    produce(kafka_broker, src, events[300:])
    settle(engine)  # windows past the checkpoint fire
    query = engine.queries.running["s"]
    query.output.writer.producer.flush()  # at-least-once: they are in the topic when the process dies
    del engine, query  # a crash: the engine is gone without close()
    gc.collect()
    engine = dsms.Engine(state_dir=state)
    settle(engine)
    engine.close()
    got = sorted(tuple(json.loads(v).values()) for *_, v, _ in consume_all(kafka_broker, out))
    if delivery == "exactly-once":
        assert got == window_oracle(events)
    else:
        assert sorted(set(got)) == window_oracle(events) and len(got) > len(set(got))


def test_a_crash_while_a_checkpoints_rows_are_produced_writes_the_rest_once(kafka_broker, tmp_path):
    """Killed after the checkpoint is saved, with part of its staged rows in the topic: the restart reads the
    topic back and produces only the rows of that epoch not there yet."""
    src, out = new_topic(kafka_broker, "half-in", 1), new_topic(kafka_broker, "half-out", 1)
    events = second_events(600)
    produce(kafka_broker, src, events)
    state = str(tmp_path / "state")
    engine = crash_engine(state, kafka_broker, src, out, "exactly-once")
    settle(engine)
    query = engine.queries.running["s"]
    output = query.output.writer
    query.checkpoint_seq += 1
    ckpt.save(engine.durable.checkpoint_dir(query.uid), query.checkpoint_seq, query.job.snapshot())
    epoch, staged = output.pending
    assert staged.num_rows > 10
    half = staged.num_rows // 2
    output._produce(staged.slice(0, half), epoch)  # the first half made it before the crash
    output._flush()
    del engine, query, output
    gc.collect()
    assert len(consume_all(kafka_broker, out)) == half
    engine = dsms.Engine(state_dir=state)
    settle(engine)
    engine.close()
    messages = consume_all(kafka_broker, out)
    assert sorted(int(h["dsms.seq"]) for *_, h in messages) == list(range(staged.num_rows))
    assert sorted(tuple(json.loads(v).values()) for *_, v, _ in messages) == window_oracle(events)
