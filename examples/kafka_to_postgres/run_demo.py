"""Kafka -> dsms -> PostgreSQL: per-minute click-through rate of ad events.

Starts a Kafka broker (devtools/kafka_broker.py) and a throwaway PostgreSQL
(devtools/postgres_server.py) on free 127.0.0.1 ports, unless their
addresses are given; creates the two topics and the target table; produces
a bounded set of impressions and clicks; runs ``dsms run`` on ctr.sql with
the addresses filled in; prints the table; stops what it started, also on
failure.

    python examples/kafka_to_postgres/run_demo.py            (make demo-kafka)
    python examples/kafka_to_postgres/run_demo.py --bootstrap 127.0.0.1:9092 \\
        --database-url postgresql://dsms:dsms@127.0.0.1:5432/dsms --suffix _try2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import random
import string
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "devtools"))

from postgres_server import PostgresServer, PostgresUnavailable  # noqa: E402

from kafka_broker import BrokerUnavailable, KafkaBroker, create_topic  # noqa: E402

START = dt.datetime(2024, 5, 1, 9, 0, 0)
TABLE_DDL = """CREATE TABLE {table} (
  window_start timestamp NOT NULL, window_end timestamp NOT NULL, ad_id bigint NOT NULL,
  impressions bigint NOT NULL, clicks bigint NOT NULL, ctr double precision,
  PRIMARY KEY (window_start, ad_id))"""


def generate_events(seed: int = 42, seconds: int = 300) -> tuple[list[dict], list[dict]]:
    """Impressions and clicks of five ads, in arrival order (up to 3 s out of event-time order).

    Each ad has its own click-through rate; a click follows its impression by 1 to 20 seconds.
    """
    rng = random.Random(seed)
    rate = {ad: rng.uniform(0.02, 0.15) for ad in range(1, 6)}
    impressions, clicks = [], []
    t = 0.0
    while t < seconds:
        t += rng.expovariate(8.0)  # about 8 impressions a second
        ad = rng.choice(list(rate))
        ts = START + dt.timedelta(seconds=round(t, 3))
        impression = {"impression_id": f"i{len(impressions) + 1}", "ad_id": ad, "ts": ts}
        impressions.append(impression)
        if rng.random() < rate[ad]:
            clicks.append({**impression, "ts": ts + dt.timedelta(seconds=round(rng.uniform(1, 20), 3))})

    def arrival(rows):
        jitter = [r["ts"] + dt.timedelta(seconds=rng.uniform(0, 3)) for r in rows]
        order = sorted(range(len(rows)), key=lambda i: jitter[i])
        return [{**rows[i], "ts": rows[i]["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]} for i in order]

    return arrival(impressions), arrival(clicks)


def produce(bootstrap: str, topic: str, rows: list[dict]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for row in rows:
        producer.produce(topic, value=json.dumps(row).encode())
    if producer.flush(30) != 0:
        raise RuntimeError(f"not every message reached topic {topic}")


def fill_script(bootstrap: str, database_url: str, suffix: str) -> str:
    """ctr.sql with the broker, the topics and the PostgreSQL table filled in."""
    url = urlsplit(database_url)
    with open(os.path.join(HERE, "ctr.sql")) as f:
        return string.Template(f.read()).substitute(
            bootstrap=bootstrap, impressions_topic=f"ad_impressions{suffix}", clicks_topic=f"ad_clicks{suffix}",
            jdbc_url=f"jdbc:postgresql://{url.hostname}:{url.port or 5432}{url.path}",
            table=f"ad_ctr_per_minute{suffix}", username=url.username or "", password=url.password or "")


def run_pipeline(bootstrap: str, database_url: str, suffix: str = "", seed: int = 42) -> None:
    """Topics, table, events, ``dsms run``, and the table printed."""
    import psycopg

    table = f"ad_ctr_per_minute{suffix}"
    impressions, clicks = generate_events(seed)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(TABLE_DDL.format(table=table))
    create_topic(bootstrap, f"ad_impressions{suffix}", exist_ok=True)
    create_topic(bootstrap, f"ad_clicks{suffix}", exist_ok=True)
    produce(bootstrap, f"ad_impressions{suffix}", impressions)
    produce(bootstrap, f"ad_clicks{suffix}", clicks)
    print(f"produced {len(impressions)} impressions and {len(clicks)} clicks", flush=True)

    with tempfile.TemporaryDirectory(prefix="dsms-demo-kafka-") as folder:
        script = os.path.join(folder, "ctr.sql")
        with open(script, "w") as f:
            f.write(fill_script(bootstrap, database_url, suffix))
        dsms = os.path.join(os.path.dirname(sys.executable), "dsms")
        subprocess.run([dsms, "run", "--quiet", script], check=True)

    with psycopg.connect(database_url) as conn:
        cur = conn.execute(f"SELECT window_start, ad_id, impressions, clicks, round(ctr::numeric, 3) AS ctr "
                           f"FROM {table} ORDER BY window_start, ad_id")
        names = [c.name for c in cur.description]
        rows = [["NULL" if v is None else str(v) for v in row] for row in cur.fetchall()]
    widths = [max(len(x) for x in column) for column in zip(names, *rows)]
    print(f"\nPostgreSQL table {table}:")
    for line in [names, ["-" * w for w in widths], *rows]:
        print("  ".join(v.rjust(w) for v, w in zip(line, widths)))
    print(f"({len(rows)} rows)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="a running Kafka broker, host:port (default: start one)")
    parser.add_argument("--database-url", help="a running PostgreSQL, postgresql://user:password@host:port/db "
                                               "(default: start one)")
    parser.add_argument("--suffix", default="", help="appended to the topic and table names")
    parser.add_argument("--seed", type=int, default=42, help="seed of the generated events")
    args = parser.parse_args(argv)
    began = time.monotonic()
    with contextlib.ExitStack() as servers:  # stops what was started here, also on failure
        try:
            if args.bootstrap is None:
                args.bootstrap = servers.enter_context(KafkaBroker()).bootstrap
                print(f"Kafka broker (Tansu) on {args.bootstrap}", flush=True)
            if args.database_url is None:
                args.database_url = servers.enter_context(PostgresServer()).url
                print(f"PostgreSQL on {args.database_url}", flush=True)
        except (BrokerUnavailable, PostgresUnavailable) as e:
            print(f"run_demo: {e}", file=sys.stderr)
            return 1
        try:
            run_pipeline(args.bootstrap, args.database_url, args.suffix, args.seed)
        except subprocess.CalledProcessError as e:
            print(f"run_demo: dsms run failed with exit code {e.returncode}", file=sys.stderr)
            return 1
    print(f"demo finished in {time.monotonic() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
