"""Regular join: every current row of both inputs kept; an updating result.

Input delta -> output delta (a batch on one side, with signs: +I/+U add a
row, -U/-D remove one)::

    matches of the batch with the other side's rows   -> +/- joined rows
    outer side: batch rows with no match              -> +/- rows padded with NULLs
    outer other side: rows whose match count goes     -> -D their padded row
      from 0 to more (or from more to 0)                 (or +I it)

The changes of a batch are netted per output row before they are emitted,
retractions first, so the changelog never retracts a row it did not emit.
Both sides are multisets in DuckDB tables (row, count). Two append-only
streams joined this way keep every row forever (the planner warns),
unless ``SET 'state.ttl'`` drops the join keys not touched for that long
(``ttl.py``; both sides' rows of a key go together, nothing is emitted).

    L: (1, a)              R: -                   out: -
    +I R (1, x)        ->  out: +I (1, a, 1, x)
    -U R (1, x), +U R (1, y)  ->  out: -U (1, a, 1, x), +U (1, a, 1, y)
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical.join_specs import RegularJoinSpec
from .base import Env
from .join_base import JoinLogic
from .ttl import StateTtl


class RegularJoinLogic(JoinLogic):
    def __init__(self, spec: RegularJoinSpec, env: Env):
        super().__init__(spec, env)
        self.ttl = StateTtl(spec, self.con, env.clock) if spec.ttl_us else None

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.ttl is not None:
            self.ttl.before_batch()
        return self.run(self.spec.on_batch[port], batch)

    def on_tick(self, now_us: int) -> list[pa.Table]:
        if self.ttl is not None:
            self.ttl.expire()
        return []
