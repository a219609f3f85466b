"""Test helpers for updating results: collect a query's changes, apply them strictly.

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
        return {o for c in self.changes[name] for o in c.column("op").to_pylist()}

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
