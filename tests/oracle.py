"""Test helpers: generated event streams, feeding them to the engine in pieces,
and answering the same question with plain DuckDB batch SQL (the oracle)."""

from __future__ import annotations

import datetime as dt
import random

import duckdb
import pyarrow as pa

import dsms

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)


def events(n: int, *, seed: int = 0, keys: int = 5, span_s: float = 300, disorder_s: float = 4,
           null_rate: float = 0.05, dup_rate: float = 0.1) -> pa.Table:
    """Events in arrival order: event times trend upward, shuffled within ``disorder_s``.

    Columns: k (VARCHAR, some NULL), v (BIGINT, some NULL), price (DOUBLE), ts (TIMESTAMP).
    Some events share a timestamp exactly; some sit exactly on window edges.
    """
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        t = i * span_s / n
        if rng.random() < dup_rate and rows:
            ts = rows[-1]["ts"]
        else:
            # Snap some events to whole seconds so window edges are hit exactly.
            t = round(t) if rng.random() < 0.2 else round(t, 3)
            ts = BASE + dt.timedelta(seconds=t)
        rows.append({
            "k": None if rng.random() < null_rate else f"k{rng.randrange(keys)}",
            "v": None if rng.random() < null_rate else rng.randrange(-50, 100),
            "price": round(rng.uniform(0, 10), 2),
            "ts": ts,
        })
    # Disorder: sort by a jittered key, so each event moves by less than disorder_s.
    jitter = [r["ts"] + dt.timedelta(seconds=rng.uniform(0, disorder_s * 0.9)) for r in rows]
    order = sorted(range(n), key=lambda i: jitter[i])
    rows = [rows[i] for i in order]
    return pa.Table.from_pylist(rows, schema=pa.schema([("k", pa.string()), ("v", pa.int64()),
                                                        ("price", pa.float64()), ("ts", pa.timestamp("us"))]))


def late_mask(ts: list[dt.datetime], bound_s: float) -> list[bool]:
    """Which events are late: below (max seen before them - bound). Written per event, on purpose."""
    out, top = [], None
    for t in ts:
        out.append(top is not None and t < top - dt.timedelta(seconds=bound_s))
        top = t if top is None or t > top else top
    return out


def arrival_watermarks(ts: list[dt.datetime], bound_s: float) -> list[dt.datetime | None]:
    """The watermark as it stood when each event arrived: the largest time before it - bound (None: first)."""
    out, top = [], None
    for t in ts:
        out.append(None if top is None else top - dt.timedelta(seconds=bound_s))
        top = t if top is None or t > top else top
    return out


def tumble_on_time(table: pa.Table, bound_s: float, size_s: float) -> pa.Table:
    """The rows of ``table`` that a TUMBLE of ``size_s`` (from the epoch) counts, as Flink judges them:
    a row is dropped only when its window had fired when it arrived: the watermark then at or past the
    window's last millisecond (end - 1 ms)."""
    epoch = dt.datetime(1970, 1, 1)
    keep = []
    for t, wm in zip(table.column("ts").to_pylist(), arrival_watermarks(table.column("ts").to_pylist(), bound_s)):
        start = (t - epoch) // dt.timedelta(seconds=size_s) * dt.timedelta(seconds=size_s) + epoch
        keep.append(wm is None or start + dt.timedelta(seconds=size_s) - dt.timedelta(milliseconds=1) > wm)
    return table.filter(pa.array(keep))


def on_time(table: pa.Table, bound_s: float) -> pa.Table:
    """The rows of ``table`` (in arrival order) that are not late under a watermark ``bound_s`` behind."""
    return table.filter(pa.array([not x for x in late_mask(table.column("ts").to_pylist(), bound_s)]))


def feed(engine: dsms.Engine, stream: str, table: pa.Table, *, seed: int = 1, max_batch: int = 40) -> None:
    """Insert ``table`` in arrival order in many small random-sized batches, processing after each."""
    rng = random.Random(seed)
    i = 0
    while i < table.num_rows:
        n = rng.randint(1, max_batch)
        engine.insert(stream, table.slice(i, n))
        engine.run_until_idle()
        i += n


def run_query(ddl: str, sql: str, inputs: dict[str, pa.Table], *, max_batch: int = 40, seed: int = 1) -> pa.Table:
    """Run ``sql`` continuously over memory streams fed in small batches; the final result."""
    engine = dsms.Engine()
    engine.execute(ddl)
    q = engine.query(sql)
    for i, (name, table) in enumerate(inputs.items()):
        feed(engine, name, table, seed=seed + i, max_batch=max_batch)
    engine.end_input()
    engine.run_until_idle()
    assert q.done
    return q.snapshot()


def duck(sql: str, **tables: pa.Table) -> pa.Table:
    con = duckdb.connect()
    for name, t in tables.items():
        con.register(name, t)
    return con.sql(sql).to_arrow_table()


def islands(gap_s: float, keys: str = "k", select: str = "", where: str = "TRUE") -> str:
    """Sessions per ``keys`` in plain DuckDB: an event starts a session when its gap to the last one exceeds ``gap_s``."""
    part = f"PARTITION BY {keys}" if keys else ""
    return f"""
    WITH o AS (SELECT *, LAG(ts) OVER ({part} ORDER BY ts) AS prev FROM ev WHERE {where}),
         i AS (SELECT *, SUM(CASE WHEN prev IS NULL OR ts - prev > INTERVAL '{gap_s} seconds' THEN 1 ELSE 0 END)
                         OVER ({part} ORDER BY ts ROWS UNBOUNDED PRECEDING) AS isl FROM o),
         s AS (SELECT *, MIN(ts) OVER (PARTITION BY {keys + ', ' if keys else ''}isl) AS ws,
                         MAX(ts) OVER (PARTITION BY {keys + ', ' if keys else ''}isl) + INTERVAL '{gap_s} seconds' AS we
               FROM i)
    {select}"""


def flink_int(stat: str, x: str) -> str:
    """Flink's STDDEV/VAR of an integer column ``x`` (``stddev_pop``, ``var_samp`` ...), written out as DuckDB SQL.

    Flink rewrites ``VAR_POP(x)`` to ``(SUM(x*x) - SUM(x)*SUM(x) / COUNT(x)) / COUNT(x)`` (the samples over
    ``COUNT(x) - 1``), computed as DOUBLE, and gives the argument's type: the value truncated toward zero.
    """
    n = f"(COUNT({x}) - 1)" if stat.endswith("samp") else f"COUNT({x})"
    var = f"((SUM({x} * {x}) - SUM({x}) * SUM({x}) / COUNT({x})) / {n})"
    value = f"SQRT(GREATEST({var}, 0))" if stat.startswith("stddev") else var
    return f"CASE WHEN {n} > 0 THEN CAST(TRUNC({value}) AS BIGINT) END"


def rows(table: pa.Table, columns: list[str] | None = None) -> list[tuple]:
    """Rows as sorted tuples (floats rounded), for order-insensitive comparison."""
    if columns is not None:
        table = table.select(columns)
    out = []
    for r in table.to_pylist():
        out.append(tuple(round(v, 6) if isinstance(v, float) else v for v in r.values()))
    return sorted(out, key=lambda t: tuple((v is None, str(type(v)), v if v is not None else 0) for v in t))
