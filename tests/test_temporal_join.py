"""Event-time temporal joins: each order with the version of its currency's rate valid at the order's time.

Orders and rate changes (updates, deletes, repeated times, out of order within their watermark
bounds) arrive interleaved. The oracle, in DuckDB: drop what each source finds late, keep the
last change per (currency, time), and for each order take the latest version at or before its
time; a delete there means no rate."""

import random

import numpy as np
import pyarrow as pa
import pytest

import dsms

from changes import Recorder, feed_mixed
from oracle import duck, on_time, rows

DDL = """
CREATE STREAM orders (id BIGINT, cur VARCHAR, amount BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '3' SECOND) WITH (connector = 'memory');
CREATE TABLE rates (cur VARCHAR, rate BIGINT, ts TIMESTAMP(3), PRIMARY KEY (cur) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory');
"""
BASE_US = 1_700_000_000_000_000


def _ts(us: int):
    return pa.scalar(BASE_US + us, pa.timestamp("us")).as_py()


def rate_changes(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    out = []
    for seq in range(n):
        t = int(seq * 400_000 - rng.uniform(0, 1.5e6))  # every 0.4 s, up to 1.5 s out of order
        t -= t % 1_000_000 if rng.random() < 0.4 else 0  # some on whole seconds: several changes at one time
        op = "d" if rng.random() < 0.12 else "u"
        out.append({"seq": seq, "cur": rng.choice(["EUR", "GBP", "JPY", "CHF"]),
                    "rate": None if op == "d" else rng.randrange(1, 200), "ts": _ts(t), "op": op})
    return pa.Table.from_pylist(out)


def orders(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)
    return pa.Table.from_pylist([{"id": i, "cur": rng.choice(["EUR", "GBP", "JPY", "CHF", "USD", None]),
                                  "amount": rng.randrange(1, 50),
                                  "ts": _ts(int(i * 300_000 - rng.uniform(0, 2.5e6)))} for i in range(n)])


RATES, ORDERS = rate_changes(260, seed=1), orders(330, seed=2)


def oracle(kind: str, extra: str = "") -> pa.Table:
    """The version of each order's rate at its time, written with MAX instead of an ASOF join."""
    return duck(f"""
      WITH versions AS (SELECT * FROM rates QUALIFY row_number() OVER (PARTITION BY cur, ts ORDER BY seq DESC) = 1),
           latest AS (SELECT o.id, MAX(v.ts) AS vts FROM orders o JOIN versions v ON v.cur = o.cur AND v.ts <= o.ts
                      GROUP BY o.id),
           chosen AS (SELECT l.id, v.rate, v.ts AS rts FROM latest l JOIN versions v ON v.cur = (
                        SELECT cur FROM orders WHERE orders.id = l.id) AND v.ts = l.vts WHERE v.op = 'u' {extra})
      SELECT o.id, o.cur, o.amount, o.ts, c.rate, c.rts FROM orders o {kind} JOIN chosen c ON c.id = o.id""",
                orders=on_time(ORDERS, 3), rates=on_time(RATES, 2))


@pytest.mark.parametrize("kind", ["INNER", "LEFT"])
@pytest.mark.parametrize("max_batch", [3, 25])
def test_temporal_join_matches_duckdb(kind, max_batch):
    rec = Recorder(DDL)
    q = rec.query("j", f"""SELECT o.id, o.cur, o.amount, o.ts, r.rate, r.ts AS rts FROM orders AS o
                           {kind} JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur""")
    assert q.changelog == "append-only"
    feed_mixed(rec, {"orders": ORDERS, "rates": RATES}, seed=max_batch, max_batch=max_batch)
    rec.end()
    assert rec.ops("j") == {"+I"}
    want = oracle(kind)
    assert rows(rec.final("j")) == rows(want)
    assert want.filter(pa.array([r is not None for r in want.column("rate").to_pylist()])).num_rows > 100


def test_the_condition_applies_to_the_chosen_version():
    """As in Flink, a non-key condition filters the version valid at the event's time; it does not look
    for an older version that passes it."""
    rec = Recorder(DDL)
    rec.query("j", """SELECT o.id, o.cur, o.amount, o.ts, r.rate, r.ts AS rts FROM orders AS o
                      LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur AND r.rate > 100""")
    feed_mixed(rec, {"orders": ORDERS, "rates": RATES}, seed=5, max_batch=20)
    rec.end()
    assert rows(rec.final("j")) == rows(oracle("LEFT", extra="AND v.rate > 100"))


def test_events_wait_for_the_table_watermark():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT o.id, r.rate FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts r ON o.cur = r.cur")
    engine.insert("rates", [("EUR", 10, _ts(0))])
    engine.insert("orders", [(1, "EUR", 5, _ts(5_000_000)), (2, "EUR", 5, _ts(20_000_000))])
    engine.run_until_idle()
    assert q.poll().num_rows == 0  # the rates' watermark (-2 s) has not passed the order at 5 s
    engine.insert("rates", [("EUR", 11, _ts(4_000_000)), ("EUR", 12, _ts(8_000_000))])  # rates' watermark: 6 s
    engine.run_until_idle()
    assert q.poll().to_pylist() == [{"op": "+I", "id": 1, "rate": 11}]
    engine.delete("rates", [("EUR", None, _ts(15_000_000))])  # no EUR rate from 15 s on
    engine.insert("rates", [("GBP", 1, _ts(30_000_000))])
    engine.run_until_idle()
    assert q.poll().num_rows == 0  # order 2 (20 s) found the delete: no match
    with pytest.raises(dsms.DsmsError, match="needs its time in 'ts'"):
        engine.delete("rates", [("EUR",)])


def test_versions_are_pruned_by_the_watermark():
    """20,000 rate changes of 10 currencies: the state keeps about one version per currency plus the
    versions and orders not yet below the watermark."""
    n = 20_000
    rng = np.random.default_rng(1)
    t = np.arange(n, dtype=np.int64) * 100_000
    rates = pa.table({"cur": pa.array(rng.integers(0, 10, n).astype(str)), "rate": rng.integers(0, 100, n),
                      "ts": pa.array(BASE_US + t, pa.timestamp("us"))})
    orders = pa.table({"id": np.arange(n), "cur": pa.array(rng.integers(0, 12, n).astype(str)),
                       "amount": rng.integers(0, 9, n), "ts": pa.array(BASE_US + t + 50_000, pa.timestamp("us"))})
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT o.id, r.rate FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.ts r ON o.cur = r.cur")
    peak, out = 0, 0
    for i in range(0, n, 1000):
        engine.insert("rates", rates.slice(i, 1000))
        engine.insert("orders", orders.slice(i, 1000))
        engine.run_until_idle()
        peak = max(peak, q.job.state_rows)
        out += q.poll().num_rows
    engine.end_input()
    engine.run_until_idle()
    out += q.poll().num_rows
    assert peak < 5_000  # a batch of orders and a few of versions; without pruning: up to 40,000
    want = duck("""SELECT COUNT(*) FROM orders o WHERE EXISTS (SELECT 1 FROM rates r WHERE r.cur = o.cur
                   AND r.ts <= o.ts)""", orders=orders, rates=rates).column(0)[0].as_py()
    assert out == want
