"""Group aggregation without a window: an updating result.

Input delta -> output delta::

    +I / +U rows   add to their key's aggregates
    -U / -D rows   subtract from them
    per batch      -U old, +U new for each key whose result changed;
                   +I for a new key; -D when a key's rows are all retracted

State lives in DuckDB tables in the job's connection (see
planner/lower/sqlgen_group.py); MIN, MAX and COUNT(DISTINCT) keep multisets so
they stay exact under retraction. With ``SET 'state.ttl'`` a key not
written for that long is forgotten (``ttl.py``): its next row is ``+I``
of a new count.
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical.specs import GroupAggSpec
from ..duck import conform
from .base import DuckStateLogic, Env
from .partial_merge import numbered
from .ttl import StateTtl

# Merge the multiset logs after this many batches.
COMPACT_EVERY = 64


class GroupAggLogic(DuckStateLogic):
    def __init__(self, spec: GroupAggSpec, env: Env):
        super().__init__(spec, env)
        self.batches = 0
        self.ttl = StateTtl(spec, self.con, env.clock) if spec.ttl_us else None
        self.seq = env.state.value(spec.id, "seq", 0) if spec.numbered else None

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.ttl is not None:
            self.ttl.before_batch()
        if self.seq is not None:
            batch = numbered(batch, self.seq)
        out = self.duck.run_all(self.spec.per_batch, batch)
        self.batches += 1
        if self.spec.compact and self.batches % COMPACT_EVERY == 0:
            for stmt in self.spec.compact:
                self.con.execute(stmt)
        return [conform(out, self.spec.schema)] if out.num_rows else []

    def on_tick(self, now_us: int) -> list[pa.Table]:
        if self.ttl is not None:
            self.ttl.expire()
        return []

    @property
    def state_rows(self) -> int:
        """The keys (the first table; the others hold the multisets of MIN, MAX and COUNT(DISTINCT))."""
        return self.con.execute(f"SELECT COUNT(*) FROM {self.spec.state_tables[0]}").fetchall()[0][0]
