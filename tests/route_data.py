"""The data of the route matrix (tests/test_routes.py, tests/route_shapes.py) and its oracle tables.

Holds no tests. Generated streams with NULLs, repeated times and events
out of order by more than their watermark bound (so some are late),
written as files (JSON lines in two files, Parquet, CSV), an upsert table
and a Debezium table; :func:`generate` writes them and returns, besides
the DDL that declares them, the tables the oracles read: ``s`` and ``s2``
are a stream's on-time rows (late ones removed with ``oracle.late_mask``,
per event), ``s_all`` / ``s2_all`` all of them, with ``seq``, their place
in the source; ``s_arr`` / ``s2_arr`` all of them with ``wm``, the
watermark when each arrived; ``t_changes`` / ``d_changes`` a table's
changes in order.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from oracle import BASE, arrival_watermarks, duck, events, late_mask

KEYS = ["k0", "k1", "k2", "k3"]


def _on_time(table: pa.Table, bound_s: float, keep_late: bool = False) -> pa.Table:
    late = late_mask(table.column("ts").to_pylist(), bound_s)
    return table.filter(pa.array([x == keep_late for x in late]))


def _arrived(table: pa.Table, bound_s: float, shift_s: float = 0) -> pa.Table:
    """``table`` with ``wm``: the watermark when each event arrived (its event time is ``ts`` + ``shift_s``).
    A window operator drops an event from a window only when the window's end is at or below it."""
    shift = dt.timedelta(seconds=shift_s)
    wms = arrival_watermarks([t + shift for t in table.column("ts").to_pylist()], bound_s)
    return _with_seq(table.append_column("wm", pa.array(wms, pa.timestamp("us"))))


def _with_seq(table: pa.Table) -> pa.Table:
    return table.append_column("seq", pa.array(range(table.num_rows), pa.int64()))


def _table_changes(seed: int, n: int) -> list[dict]:
    """Upserts and deletes of rates per key, out of order by up to 1.5 s (some repeat a time)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        t = round(i * 100 / n - rng.uniform(0, 1.5), 1)
        key = rng.choice(KEYS + ["k9"])
        deleted = rng.random() < 0.12
        out.append({"k": key, "rate": None if deleted else rng.randrange(1, 100),
                    "ts": BASE + dt.timedelta(seconds=t), "deleted": deleted})
    return out


def _changes_late(changes: list[dict], bound_s: float) -> list[bool]:
    """Which table changes are late: retractions (-U, -D) never are, and do not move the watermark
    (per event, on purpose)."""
    out, top = [], None
    for c in changes:
        if c["op"] in ("-U", "-D"):
            out.append(False)
            continue
        out.append(top is not None and c["ts"] < top - dt.timedelta(seconds=bound_s))
        top = c["ts"] if top is None or c["ts"] > top else top
    return out


def _stamp(ts: dt.datetime, i: int):
    """Times as text, and every seventh as epoch milliseconds (both forms are read)."""
    if i % 7 == 3:
        return int((ts - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
    return ts.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@dataclass
class Data:
    root: str
    tables: dict = field(default_factory=dict)  # oracle tables by name

    def ddl(self) -> str:
        return DDL.format(root=self.root)


DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), v10 AS v * 10,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/s', format = 'json');
CREATE STREAM sc (k VARCHAR, v BIGINT, ts TIMESTAMP(3), et AS ts + INTERVAL '1' SECOND,
  WATERMARK FOR et AS et - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/s', format = 'json');
CREATE STREAM s2 (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/s2', format = 'parquet');
CREATE STREAM c (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/c.csv', format = 'csv');
CREATE TABLE t (k VARCHAR, rate BIGINT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/t.jsonl', format = 'json');
CREATE TABLE d (k VARCHAR, label VARCHAR, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/d.jsonl', format = 'debezium-json');
"""


def generate(root: str) -> Data:
    data = Data(root)
    s = events(420, seed=11, keys=4, span_s=100, disorder_s=5)
    os.makedirs(f"{root}/s", exist_ok=True)
    # The second file starts with an event that only the first file's events make late.
    late = late_mask(s.column("ts").to_pylist(), 2)
    cut = next(i for i in range(150, len(late)) if late[i])
    for part, rows in enumerate((s.slice(0, cut), s.slice(cut))):
        with open(f"{root}/s/part-{part}.jsonl", "w") as f:
            for i, r in enumerate(rows.to_pylist()):
                f.write(json.dumps({**r, "ts": _stamp(r["ts"], i)}) + "\n")
    s2 = events(260, seed=12, keys=4, span_s=100, disorder_s=3)
    os.makedirs(f"{root}/s2", exist_ok=True)
    pq.write_table(s2.slice(0, 130), f"{root}/s2/a.parquet", row_group_size=50)
    pq.write_table(s2.slice(130), f"{root}/s2/b.parquet", row_group_size=50)
    c = duck("SELECT COALESCE(k, 'none') AS k, v, ts FROM s", s=s)
    duck(f"COPY (SELECT * FROM c) TO '{root}/c.csv' (HEADER)", c=c)

    t = _table_changes(13, 160)
    with open(f"{root}/t.jsonl", "w") as f:
        for i, r in enumerate(t):
            line = {"k": r["k"], "ts": _stamp(r["ts"], i)}
            f.write(json.dumps({**line, "__deleted": True} if r["deleted"] else {**line, "rate": r["rate"]}) + "\n")
    d = _table_changes(14, 120)
    current: dict = {}
    d_changes = []  # as the reader hands them on: +I, -U (before) and +U (after), -D (before)
    with open(f"{root}/d.jsonl", "w") as f:
        for i, r in enumerate(d):
            row = {"k": r["k"], "label": f"L{r['rate']}", "ts": _stamp(r["ts"], i)}
            old = current.get(r["k"])
            if r["deleted"]:
                if old is None:
                    continue
                f.write(json.dumps({"op": "d", "before": old[0], "after": None}) + "\n")
                d_changes.append({**old[1], "op": "-D"})
                current.pop(r["k"])
                continue
            f.write(json.dumps({"op": "u" if old else "c", "before": old[0] if old else None, "after": row}) + "\n")
            change = {"k": r["k"], "label": row["label"], "ts": r["ts"]}
            if old:
                d_changes.append({**old[1], "op": "-U"})
            d_changes.append({**change, "op": "+U" if old else "+I"})
            current[r["k"]] = (row, change)
    t_changes = [{"k": r["k"], "rate": r["rate"], "ts": r["ts"], "op": "-D" if r["deleted"] else "+I"} for r in t]
    data.tables = {
        "s_all": _with_seq(s), "s": _with_seq(_on_time(s, 2)), "s_late": _on_time(s, 2, keep_late=True),
        "s5": _on_time(s, 5), "s5_arr": _arrived(s, 5), "s_arr": _arrived(s, 2), "s_arr_seq": _arrived(_with_seq(s), 2), "sc_arr": _arrived(s, 2, shift_s=1),
        "s2_arr": _arrived(s2, 1), "s2_all": _with_seq(s2), "s2": _with_seq(_on_time(s2, 1)), "c_all": c,
        "t_changes": _changes_table(t_changes, 1), "d_changes": _changes_table(d_changes, 1)}
    return data


def _changes_table(changes: list[dict], bound_s: float) -> pa.Table:
    late = _changes_late(changes, bound_s)
    return pa.Table.from_pylist([{"seq": i, **c, "deleted": c["op"] == "-D", "late": lt}
                                 for i, (c, lt) in enumerate(zip(changes, late))])
