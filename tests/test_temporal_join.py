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


# -- an updating left side (a table's changes), as Flink 2.3 joins it --------------------------------

CDC_DDL = """
CREATE TABLE orders (id BIGINT, k STRING, ts TIMESTAMP(3), WATERMARK FOR ts AS ts, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'file', path = '{dir}/orders.json', format = 'debezium-json');
CREATE TABLE rates (k STRING, rate INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts, PRIMARY KEY (k) NOT ENFORCED)
  WITH (connector = 'file', path = '{dir}/rates.json', format = 'debezium-json');
"""
CDC_JOIN = "SELECT o.id, o.k, r.rate FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k"


def _debezium(path, changes: list[tuple]) -> None:
    """(op, before, after) per line, as Debezium JSON."""
    import json

    path.write_text("".join(json.dumps({"before": b, "after": a, "op": op}) + "\n" for op, b, a in changes))


def _cdc_files(tmp_path, orders_changes: list[tuple], rates_changes: list[tuple]) -> str:
    _debezium(tmp_path / "orders.json", orders_changes)
    _debezium(tmp_path / "rates.json", rates_changes)
    return CDC_DDL.format(dir=tmp_path)


def test_an_updating_left_side_is_joined_change_by_change(tmp_path):
    """Flink 2.3 on these two files gives +I (1, a, 7), +I (2, a, 7), -U (1, a, 7), +U (1, b, 9): the
    update's before image, at its own time, takes back what order 1 was joined with."""
    def order(i, k, s):
        return {"id": i, "k": k, "ts": f"2024-01-01 00:00:{s:02d}"}

    ddl = _cdc_files(tmp_path, [("c", None, order(1, "a", 10)), ("c", None, order(2, "a", 20)),
                                ("u", order(1, "a", 10), order(1, "b", 30))],
                     [("c", None, {"k": "a", "rate": 7, "ts": "2024-01-01 00:00:00"}),
                      ("c", None, {"k": "b", "rate": 9, "ts": "2024-01-01 00:00:00"})])
    engine = dsms.Engine()
    engine.execute(ddl)
    q = engine.query(CDC_JOIN)
    engine.run_until_idle()
    got = [tuple(r.values()) for r in q.poll().to_pylist()]
    assert got == [("+I", 1, "a", 7), ("+I", 2, "a", 7), ("-U", 1, "a", 7), ("+U", 1, "b", 9)]
    assert "updating" in engine.explain(CDC_JOIN).splitlines()[0]
    # A batch route gives the final table of that changelog.
    engine.execute("SET 'engine' = 'duckdb'")
    q = engine.query(CDC_JOIN)
    engine.run_until_idle()
    assert q.job.route == "duckdb" and rows(q.snapshot()) == [(1, "b", 9), (2, "a", 7)]


@pytest.mark.parametrize("seed", [1, 2])
def test_an_updating_left_side_ends_at_the_join_of_its_final_rows(tmp_path, seed):
    """Random creates, updates (new key, later time) and deletes of orders against rate versions: the
    changelog applied to an empty table is each final order joined with the version valid at its time,
    and every retraction takes back a row that was emitted (final_table is strict)."""
    rng = random.Random(seed)
    rates_changes, current_rate = [], {}
    for s in range(0, 120, 3):
        k = rng.choice("abc")
        after = {"k": k, "rate": rng.randrange(100), "ts": f"2024-01-01 00:{s // 60:02d}:{s % 60:02d}"}
        rates_changes.append(("u" if k in current_rate else "c", current_rate.get(k), after))
        current_rate[k] = after
    orders_changes, current = [], {}
    for s in range(1, 120, 2):
        i = rng.randrange(12)
        after = {"id": i, "k": rng.choice("abcd"), "ts": f"2024-01-01 00:{s // 60:02d}:{s % 60:02d}"}
        if i in current and rng.random() < 0.25:
            orders_changes.append(("d", current.pop(i), None))
        else:
            orders_changes.append(("u" if i in current else "c", current.get(i), after))
            current[i] = after
    recorder = Recorder(_cdc_files(tmp_path, orders_changes, rates_changes))
    recorder.query("j", CDC_JOIN)
    recorder.end()
    versions = sorted((r["ts"], r["k"], r["rate"]) for _, _, r in rates_changes)
    want = []
    for o in current.values():
        valid = [rate for ts, k, rate in versions if k == o["k"] and ts <= o["ts"]]
        if valid:
            want.append((o["id"], o["k"], valid[-1]))
    assert len(want) > 3 and rows(recorder.final("j")) == sorted(want)
    assert {"-U", "+U", "-D"} <= recorder.ops("j")
