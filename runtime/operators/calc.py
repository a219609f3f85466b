"""Calc: filter, project and assign windows with one SQL statement per batch.

Input delta -> output delta: each row maps to zero or more rows
(a filter drops rows; a HOP or CUMULATE assignment repeats a row once per
window). Stateless, so watermarks pass through.
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.physical.specs import OP, CalcSpec
from ...planner.vocabulary import ChangeOp
from ..duck import conform
from .base import Env, Logic


class CalcLogic(Logic):
    def __init__(self, spec: CalcSpec, env: Env):
        self.spec = spec
        self.duck = env.duck

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        picks = self.spec.picks
        if picks is not None and all(source in batch.column_names for _, source in picks):  # no statement to run
            out = pa.table([batch.column(source) for _, source in picks], names=[name for name, _ in picks])
        else:
            out = self.duck.run(self.spec.sql, batch)
        return [conform(out, self.spec.schema)] if out.num_rows else []


class UnionLogic(Logic):
    """UNION ALL: every input batch goes out as it is (under the union's column names)."""

    def __init__(self, spec, env: Env):
        self.schema = spec.schema
        self.columns = spec.input_columns

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.columns:
            batch = batch.select(list(self.columns[port]))
        if batch.num_columns < len(self.schema):  # an append-only input of an updating union: its rows insert
            batch = batch.append_column(OP, pa.repeat(pa.scalar(int(ChangeOp.INSERT), pa.int8()), batch.num_rows))
        return [conform(batch.rename_columns(self.schema.names), self.schema)]
