"""The data of the Flink conformance run (conformance.py), and the schemas both engines declare it with.

Small generated event files (JSON lines, out of order by up to 4 s, a few
events that are very late), hand-made files for the late-event rules of
windows, sessions and OVER, nested JSON orders and profiles (MAP columns), and a table of Debezium
JSON changes (creates, updates, deletes and re-creates by key). The same
seeds give the same files on every run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(os.path.dirname(HERE), "data", "conformance")

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
COLUMNS = ("id BIGINT, k STRING, v INT, price DOUBLE, amount DECIMAL(10, 2), url STRING, ts TIMESTAMP(3), "
           "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND")
SOURCES = ("ev", "ev2", "ev3", "edge", "ooo", "lsess", "lover", "lija", "lijb", "ltjo")
# Instants (TIMESTAMP_LTZ), written as Flink's JSON format writes them (UTC with a Z), over three days.
LTZ_SOURCES = {"evz": COLUMNS.replace("ts TIMESTAMP(3)", "ts TIMESTAMP_LTZ(3)")}
# Tables read as Debezium JSON: the changes of rows by primary key.
TABLES = {"rates": "k STRING, rate INT, label STRING, PRIMARY KEY (k) NOT ENFORCED",
          # A versioned table (event time and a watermark), for the temporal join's late rule.
          "ltjrates": "k STRING, rate INT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED, "
                      "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND"}
# Streams of nested JSON (ROW, ARRAY and MAP columns).
NESTED = {"orders": "id BIGINT, customer ROW<name STRING, tags ARRAY<STRING>>, items ARRAY<ROW<sku STRING, qty INT>>, "
                    "ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND",
          "profiles": "id BIGINT, attrs MAP<STRING, INT>, labels MAP<STRING, ARRAY<STRING>>, "
                      "info ROW<name STRING, extra MAP<STRING, DOUBLE>>, ts TIMESTAMP(3), "
                      "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND"}


def timestamp_text(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S.") + f"{t.microsecond // 1000:03d}"


def events(n: int, seed: int, span_s: float, late: int = 0, keys=("k0", "k1", "k2", "K3", "k4")) -> list[dict]:
    """Events in arrival order over ``span_s`` seconds from BASE, out of order by less than 4 s.

    Some sit exactly on whole seconds (window edges), some share a timestamp;
    k, v, amount and url are sometimes NULL; v is sometimes negative. ``late``
    events are inserted between 70 and 120 s behind the largest time so far:
    behind the watermark (largest - 5 s) and behind the end of every window
    of the cases below, so both engines drop them from window aggregates.
    """
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        t = i * span_s / n
        if rows and rng.random() < 0.08:
            ts = rows[-1]["_ts"]
        else:
            ts = BASE + dt.timedelta(milliseconds=round(t) * 1000 if rng.random() < 0.2 else round(t * 1000))
        item = rng.randrange(1000)
        url = rng.choice([f"https://shop{item % 3}.example.com/books/item?id={item}&ref=mail",
                          f"https://shop{item % 3}.example.com/music/item?id={item}",
                          "https://example.org/", None])
        rows.append({"id": 0, "k": None if rng.random() < 0.05 else rng.choice(keys),
                     "v": None if rng.random() < 0.05 else rng.randrange(-50, 100),
                     "price": round(rng.uniform(0, 10), 2),
                     "amount": None if rng.random() < 0.03 else round(rng.uniform(0, 500), 2),
                     "url": url, "_ts": ts})
    jitter = [r["_ts"] + dt.timedelta(seconds=rng.uniform(0, 3.6)) for r in rows]
    rows = [rows[i] for i in sorted(range(n), key=lambda i: jitter[i])]
    top = None
    for i in sorted(rng.sample(range(n // 4, n), late)):
        top = max(r["_ts"] for r in rows[:i])
        late_row = dict(rows[i], _ts=top - dt.timedelta(seconds=rng.uniform(70, 120)))
        rows.insert(i, late_row)
    for i, r in enumerate(rows):
        r["id"] = seed * 100_000 + i
        r["ts"] = timestamp_text(r.pop("_ts"))
    return rows


def edge_events() -> list[dict]:
    """Hand-made: the window [12:00:00, 12:00:10) and an event exactly at the watermark."""
    rows = [(1, "12:00:01.000"), (2, "12:00:14.999"),  # watermark 12:00:09.999 = the window's last millisecond
            (3, "12:00:09.999"),  # at the watermark, in [00, 10): not late for dsms; Flink has fired the window
            (4, "12:00:09.000"),  # below the watermark: late for both
            (5, "12:00:30.000"), (6, "12:00:16.000"), (7, "12:00:02.000")]
    return [{"id": i, "k": "a", "v": i, "price": 1.0, "amount": 1, "url": None, "ts": "2024-03-01 " + t}
            for i, t in rows]


def debezium_changes(n: int, seed: int, keys=("k0", "k1", "k2", "K3", "k4", "k9")) -> list[dict]:
    """Envelopes of a table keyed by k: creates, updates (with their before image, as Flink's debezium-json
    needs), deletes, and creates again of deleted keys; k9 is a key no event has."""
    rng = random.Random(seed)
    current: dict[str, dict] = {}
    out = []
    for i in range(n):
        k = rng.choice(keys)
        old = current.get(k)
        if old is not None and rng.random() < 0.25:
            out.append({"op": "d", "before": old, "after": None})
            del current[k]
            continue
        row = {"k": k, "rate": rng.randrange(-20, 100), "label": f"{k}-{i}"}
        out.append({"op": "u", "before": old, "after": row} if old else {"op": "c", "before": None, "after": row})
        current[k] = row
    return out


def out_of_order_events() -> list[dict]:
    """Hand-made, for the late-event rule: events behind the watermark whose windows are still open count;
    those whose windows had fired do not (seconds after 12:00:00; watermark = largest so far - 5 s)."""
    seconds = [10, 30, 20,  # :20 arrives at watermark :25: [0, 60) is open, it counts (Flink counts 3)
               70, 40,  # :40 at watermark :65: [0, 60) fired; HOP [30, 90) and CUMULATE [0, 60) still open
               130, 65,  # :65 at watermark :125: every 1-minute window of it fired; HOP [60, 120) too
               200, 178, 196, 150]  # :178 and :196 behind the watermark :195 in open windows; :150 not
    return [{"id": i, "k": "ab"[i % 2], "v": i, "price": 1.0, "amount": 1, "url": None,
             "ts": timestamp_text(BASE + dt.timedelta(seconds=t))} for i, t in enumerate(seconds)]


def nested_orders(n: int, seed: int) -> list[dict]:
    """Orders with a customer object (some NULL, some without tags) and an array of item objects (some empty)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        tags = None if rng.random() < 0.1 else [rng.choice(["a", "b", "c", "b", None]) for _ in range(rng.randrange(4))]
        customer = None if rng.random() < 0.1 else {"name": rng.choice(["ann", "bob", None]), "tags": tags}
        items = [{"sku": f"s{rng.randrange(4)}", "qty": rng.choice([1, 2, 5, None])} for _ in range(rng.randrange(4))]
        rows.append({"id": i, "customer": customer, "items": None if rng.random() < 0.05 else items,
                     "ts": timestamp_text(BASE + dt.timedelta(seconds=i * 0.5))})
    return rows


def nested_profiles(n: int, seed: int) -> list[dict]:
    """Profiles with JSON objects read as MAPs: some NULL, some empty, one in a ROW, one holding arrays (empty
    too); no NULL inside a map or an array (PyFlink cannot collect those)."""
    rng = random.Random(seed)

    def some(keys, value):
        return {k: value() for k in rng.sample(keys, rng.randrange(len(keys) + 1))}

    rows = []
    for i in range(n):
        attrs = None if rng.random() < 0.1 else some(["a", "b", "c", "d"], lambda: rng.randrange(-5, 50))
        labels = None if rng.random() < 0.1 else some(["x", "y"], lambda: [rng.choice("pqr") for _ in range(
            rng.randrange(3))])
        info = None if rng.random() < 0.1 else {"name": rng.choice(["ann", "bob"])}
        if info is not None and rng.random() < 0.8:
            info["extra"] = some(["p", "q"], lambda: round(rng.uniform(0, 10), 2))
        rows.append({"id": i, "attrs": attrs, "labels": labels, "info": info,
                     "ts": timestamp_text(BASE + dt.timedelta(seconds=i * 0.5))})
    return rows


def _hand_made(rows: list[tuple[str, float]]) -> list[dict]:
    return [{"id": i, "k": k, "v": i, "price": 1.0, "amount": 1, "url": None,
             "ts": timestamp_text(BASE + dt.timedelta(seconds=t))} for i, (k, t) in enumerate(rows)]


def late_session_events() -> list[dict]:
    """Hand-made, for sessions (gap 10 s): :12 arrives at watermark :35 and merges with no open session (late);
    :28 does (its session ends at :38, above :35) and :33 bridges it to :40; b's :30 arrives at :45 (late)."""
    return _hand_made([("a", 0), ("a", 5), ("a", 40), ("a", 12), ("a", 28), ("a", 33), ("b", 50), ("b", 30)])


def late_over_events() -> list[dict]:
    """Hand-made, for OVER: rows behind the watermark that come after (or not) the last time released for
    their partition, one at the watermark, and a partition idle long enough for a RANGE frame to forget it."""
    return _hand_made([("a", 10), ("a", 30), ("b", 26), ("a", 20), ("a", 8), ("b", 25), ("a", 25), ("a", 60),
                       ("a", 55), ("a", 30), ("b", 90), ("a", 56)])


def late_interval_join_events() -> tuple[list[dict], list[dict]]:
    """Hand-made, for the interval join's late rule (a.ts within 10 s of b.ts; bound 5 s): b on time, a with
    rows behind its watermark :35 that still meet a held b (:25, :33: b :30 is held until :40) and one that
    comes after its only partner's reach (:14: b :10 reaches :20)."""
    return (_hand_made([("x", 40), ("x", 25), ("x", 14), ("x", 33), ("y", 70), ("y", 52)]),
            _hand_made([("x", 10), ("x", 30), ("y", 60), ("x", 90)]))


def late_temporal_join_events() -> tuple[list[dict], list[dict]]:
    """Hand-made, for the temporal join's late rule: versions of x at :10, :20, :50 (bound 5 s); orders behind
    their watermark whose version was cleaned up (:15 at :25, :22 at :55) or is still kept (:52 at :55)."""
    orders = _hand_made([("x", 12), ("x", 30), ("x", 15), ("x", 60), ("x", 22), ("x", 52)])
    changes, before = [], None
    for rate, t in ((1, 10), (2, 20), (3, 50)):
        after = {"k": "x", "rate": rate, "ts": timestamp_text(BASE + dt.timedelta(seconds=t))}
        changes.append({"op": "u" if before else "c", "before": before, "after": after})
        before = after
    return orders, changes


def write_data() -> dict[str, str]:
    os.makedirs(DATA, exist_ok=True)
    data = {"ev": events(3000, seed=1, span_s=300, late=8),
            "ev2": events(1500, seed=2, span_s=300), "ev3": events(1500, seed=3, span_s=240),
            "edge": edge_events(), "ooo": out_of_order_events(), "lsess": late_session_events(),
            "lover": late_over_events(), "lija": late_interval_join_events()[0],
            "lijb": late_interval_join_events()[1], "ltjo": late_temporal_join_events()[0],
            "evz": [{**r, "ts": r["ts"] + "Z"} for r in events(1500, seed=4, span_s=3 * 86400)]}
    paths = {}
    for name, rows in data.items():
        paths[name] = os.path.join(DATA, f"{name}.jsonl")
        with open(paths[name], "w") as f:
            for r in rows:
                f.write(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n")
    paths["orders"] = os.path.join(DATA, "orders.jsonl")
    with open(paths["orders"], "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in nested_orders(400, seed=11))
    paths["ltjrates"] = os.path.join(DATA, "ltjrates.jsonl")
    with open(paths["ltjrates"], "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in late_temporal_join_events()[1])
    paths["profiles"] = os.path.join(DATA, "profiles.jsonl")
    with open(paths["profiles"], "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in nested_profiles(300, seed=12))
    paths["rates"] = os.path.join(DATA, "rates.jsonl")
    with open(paths["rates"], "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in debezium_changes(60, seed=7))
    return paths
