"""Test helpers for running queries over memory streams: feed the rows in random batches, collect the
changes, apply them strictly, and move a running query to a fresh engine mid-run.

A changelog applied to an empty table with ``strict=True`` fails if a
retraction removes a row that was never emitted (or was already removed).
"""

from __future__ import annotations

import random

import pyarrow as pa

import dsms
from dsms.runtime.changelog import apply_changes

OPS = {"+I": 0, "-U": 1, "+U": 2, "-D": 3}


def as_internal(change: pa.Table) -> pa.Table:
    """A public change batch (leading ``op`` strings) as an internal one (``__op`` int8)."""
    ops = pa.array([OPS[o] for o in change.column("op").to_pylist()], pa.int8())
    return change.drop_columns(["op"]).append_column("__op", ops)


def final_table(changes: list[pa.Table]) -> pa.Table:
    """Apply every change in order to an empty table; fails on an invalid retraction."""
    internal = [as_internal(c) for c in changes if c.num_rows]
    if not internal:
        return pa.table({})
    return apply_changes(None, internal, strict=True)


def ops(changes: list[pa.Table]) -> set[str]:
    """The kinds of change (``+I``, ``-U``, ``+U``, ``-D``) among ``changes``."""
    return {o for c in changes for o in c.column("op").to_pylist()}


def changelog(ddl: str, sql: str, data: pa.Table, *, stream: str = "ev", max_batch: int = 25, seed: int = 3,
              engine=None):
    """Run ``sql``, feeding ``data`` into ``stream`` in small random batches, then end the input.

    Returns:
        The query's handle, and its non-empty change batches (one poll after each batch, one at the end).
    """
    engine = engine or dsms.Engine()
    engine.execute(ddl)
    q = engine.query(sql)
    rng = random.Random(seed)
    changes, i = [], 0
    while i < data.num_rows:
        n = rng.randint(1, max_batch)
        engine.insert(stream, data.slice(i, n))
        engine.run_until_idle()
        changes.append(q.poll())
        i += n
    engine.end_input()
    engine.run_until_idle()
    changes.append(q.poll())
    return q, [c for c in changes if c.num_rows]


class Recorder:
    """Runs queries on one engine and keeps every change batch each produced, in order."""

    def __init__(self, ddl: str):
        self.engine = dsms.Engine()
        self.engine.execute(ddl)
        self.queries: dict[str, dsms.QueryHandle] = {}
        self.changes: dict[str, list[pa.Table]] = {}

    def query(self, name: str, sql: str) -> dsms.QueryHandle:
        self.queries[name] = self.engine.query(sql)
        self.changes[name] = []
        return self.queries[name]

    def step(self) -> None:
        self.engine.run_until_idle()
        for name, q in self.queries.items():
            self.changes[name].append(q.poll())

    def final(self, name: str) -> pa.Table:
        return final_table(self.changes[name])

    def ops(self, name: str) -> set[str]:
        return ops(self.changes[name])

    def end(self) -> None:
        self.engine.end_input()
        self.step()


def pieces(n: int, seed: int, max_batch: int) -> list[tuple[int, int]]:
    """Random consecutive (start, length) slices covering range(n)."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < n:
        k = rng.randint(1, max_batch)
        out.append((i, min(k, n - i)))
        i += k
    return out


def interleave(tables: dict[str, pa.Table], seed: int) -> list[tuple[str, pa.Table]]:
    """Rows of several streams merged into one arrival order (each stream keeps its own order):
    at each step the next row comes from a stream picked at random, weighted by what it has left."""
    rng = random.Random(seed)
    left = {name: t.num_rows for name, t in tables.items()}
    pos = {name: 0 for name in tables}
    order: list[tuple[str, pa.Table]] = []
    while any(left.values()):
        names = [n for n in tables if left[n]]
        name = rng.choices(names, weights=[left[n] for n in names])[0]
        k = min(left[name], rng.randint(1, 8))
        order.append((name, tables[name].slice(pos[name], k)))
        pos[name] += k
        left[name] -= k
    return order


def feed_interleaved(rec: "Recorder", tables: dict[str, pa.Table], seed: int, max_batch: int) -> None:
    """Insert the streams' rows in an interleaved arrival order, stepping after random-sized groups."""
    _feed(rec, tables, seed, max_batch, rec.engine.insert)


def apply_piece(engine, name: str, piece: pa.Table) -> None:
    """Rows of a change log (an ``op`` column: 'u' upsert, 'd' delete, anything else: a stream row;
    other bookkeeping columns start with 'seq') as runs of insert() and delete() calls."""
    data_cols = [c for c in piece.column_names if c != "op" and not c.startswith("seq")]
    if "op" not in piece.column_names:
        engine.insert(name, piece.select(data_cols))
        return
    kinds = piece.column("op").to_pylist()
    start = 0
    for i in range(1, len(kinds) + 1):
        if i == len(kinds) or kinds[i] != kinds[start]:
            part = piece.slice(start, i - start).select(data_cols)
            (engine.delete if kinds[start] == "d" else engine.insert)(name, part)
            start = i


def feed_mixed(rec: "Recorder", tables: dict[str, pa.Table], seed: int, max_batch: int) -> None:
    """Streams and change logs of tables, interleaved, stepping after random-sized groups."""
    _feed(rec, tables, seed, max_batch, lambda name, part: apply_piece(rec.engine, name, part))


def _feed(rec: "Recorder", tables: dict[str, pa.Table], seed: int, max_batch: int, put) -> None:
    """``put(name, rows)`` the rows of ``tables`` in an interleaved arrival order, stepping after random-sized
    groups of them."""
    order = interleave(tables, seed)
    rng = random.Random(seed + 1)
    i = 0
    while i < len(order):
        k = rng.randint(1, max_batch)
        for name, part in order[i:i + k]:
            put(name, part)
        rec.step()
        i += k


def restarted(ddl: str, sql: str, q: dsms.QueryHandle, fed: list[tuple[str, pa.Table]]):
    """``q`` moved to a fresh engine, as a restore would: a snapshot of its state and its sources' positions,
    restored into a new query ``sql`` over ``ddl`` whose memory logs hold the rows ``fed`` so far
    ((stream or table, rows) in arrival order).

    Returns:
        The new engine, its query, and the snapshot it was restored from.
    """
    snapshot = q.job.env.state.snapshot()
    positions = {op_id: s.reader.position for op_id, s in q.job.sources}
    engine = dsms.Engine()
    engine.execute(ddl)
    q = engine.query(sql)
    for name, part in fed:
        engine.scheduler.memory_log(engine.catalog.get(name)).append(as_log(engine, name, part))
    q.job.env.state.restore(snapshot)
    for op_id, s in q.job.sources:
        s.reader.seek(positions[op_id])
    return engine, q, snapshot


def as_log(engine: dsms.Engine, name: str, part: pa.Table) -> pa.Table:
    """A slice of a stream or table as its memory log holds it (tables carry the change kind)."""
    from dsms.runtime.convert import to_table
    from dsms.runtime.memory import data_schema, keyed_changes

    source = engine.catalog.get(name)
    log = engine.scheduler.memory_log(source)
    table = to_table(part, data_schema(log))
    return keyed_changes(table, source.primary_key, 0, name) if source.kind == "table" else table


ACCT_DDL = ("CREATE TABLE acct (id BIGINT, k STRING, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
            "WITH (connector = 'memory')")
ACCT_SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64())])


def churn_acct(engine: dsms.Engine, q: dsms.QueryHandle, rng: random.Random, keys, values,
               rounds: int = 60) -> tuple[list[pa.Table], pa.Table]:
    """Random upserts and deletes into ``acct`` (ACCT_DDL) in small batches; the changes ``q`` emitted,
    and the rows that remain (what an oracle aggregates)."""
    state: dict[int, dict] = {}
    collected = []
    for _ in range(rounds):
        batch = [{"id": rng.randrange(25), "k": rng.choice(keys), "v": rng.choice(values)}
                 for _ in range(rng.randint(1, 6))]
        engine.insert("acct", batch)
        state.update({r["id"]: r for r in batch})
        gone = [i for i in list(state) if rng.random() < 0.05]
        if gone:
            engine.delete("acct", [(i,) for i in gone])
            for i in gone:
                del state[i]
        collected += list(q.changes())
    return collected, pa.Table.from_pylist(list(state.values()), schema=ACCT_SCHEMA)
