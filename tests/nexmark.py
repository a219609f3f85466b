"""Nexmark-like test data: people who open auctions, and bids on those auctions.

Small and seeded. Event times advance about 0.1 s per event and arrive up to ``disorder_s``
out of order; some sellers are unknown persons; bids fall inside or after their auction's
lifetime. The DDL declares each stream with a watermark bound that covers the disorder, so
no event is late.
"""

from __future__ import annotations

import random

import pyarrow as pa

BASE_US = 1_700_000_000_000_000  # a multiple of 10 s: windows line up with the generated seconds

DDL = """
CREATE STREAM person (id BIGINT, name VARCHAR, city VARCHAR, state VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH (connector = 'memory');
CREATE STREAM auction (id BIGINT, seller BIGINT, category BIGINT, initial_bid BIGINT, ts TIMESTAMP(3),
  expires TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH (connector = 'memory');
CREATE STREAM bid (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '4' SECOND) WITH (connector = 'memory');
"""

STATES = ["OR", "ID", "CA", "WA", "NY"]


def _ts(us: int):
    return pa.scalar(BASE_US + us, pa.timestamp("us")).as_py()


def _disorder(rows: list[dict], rng: random.Random, disorder_s: float) -> list[dict]:
    keyed = sorted(rows, key=lambda r: r["ts"].timestamp() + rng.uniform(0, disorder_s * 0.9))
    return keyed


def generate(persons: int = 120, auctions: int = 200, bids: int = 900, seed: int = 0,
             disorder_s: float = 3.0) -> dict[str, pa.Table]:
    rng = random.Random(seed)
    span_us = 120_000_000  # two minutes of event time
    people = [{"id": 1000 + i, "name": f"p{i}", "city": rng.choice(["Boise", "Salem", "LA", "Reno"]),
               "state": rng.choice(STATES), "ts": _ts(int(i * span_us / persons))} for i in range(persons)]
    lots = []
    for i in range(auctions):
        t = int(i * span_us / auctions)
        lots.append({"id": 5000 + i, "seller": 1000 + rng.randrange(persons + 10),  # some sellers unknown
                     "category": 10 + rng.randrange(4), "initial_bid": rng.randrange(1, 50), "ts": _ts(t),
                     "expires": _ts(t + rng.randrange(5, 30) * 1_000_000)})
    offers = []
    for i in range(bids):
        t = int(i * span_us / bids)
        open_lots = [a for a in lots if a["ts"] <= _ts(t)] or lots[:1]
        a = rng.choice(open_lots[-15:])
        offers.append({"auction": a["id"], "bidder": 1000 + rng.randrange(persons), "price": rng.randrange(1, 500),
                       "ts": _ts(t)})
    return {"person": pa.Table.from_pylist(_disorder(people, rng, disorder_s)),
            "auction": pa.Table.from_pylist(_disorder(lots, rng, disorder_s)),
            "bid": pa.Table.from_pylist(_disorder(offers, rng, disorder_s))}
