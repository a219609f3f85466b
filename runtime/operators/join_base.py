"""What the join operators share: state tables in the job's DuckDB connection and running statements."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, DuckStateLogic, Env
from .source import ARRIVAL


class JoinLogic(DuckStateLogic):
    """Runs the join's statements over a batch and its state tables."""

    def run(self, statements: tuple[str, ...], batch: pa.Table | None = None, params: list | None = None
            ) -> list[pa.Table]:
        """Run ``statements`` in order (the batch visible as ``__input``); the last one's rows are output."""
        out = self.duck.run_all(statements, batch, params)
        if out is None or out.num_rows == 0:
            return []
        return [conform(out, self.spec.schema)]

    def apply(self, statements: tuple[str, ...], batch: pa.Table) -> None:
        """Run ``statements`` (which return nothing) with the batch visible as ``__input``."""
        self.duck.execute_all(statements, batch)

    def execute(self, statement: str, params: list | None = None) -> None:
        # Fetch the row count a statement with parameters returns, or the connection stays busy.
        self.con.execute(statement, params).fetchall() if params else self.con.execute(statement)

    def fire(self, statements: tuple[str, ...], watermark: int) -> list[pa.Table]:
        """Run ``statements`` with ``watermark`` as their parameter: the first one's rows are output, the
        others delete from the state what is done with."""
        first, *rest = statements
        out = self.run((first,), params=[watermark])
        for stmt in rest:
            self.execute(stmt, [watermark])
        return out

    def earliest(self, statement: str) -> int:
        """The smallest time ``statement`` finds in the state (MAX_WATERMARK when there is none)."""
        value = self.con.execute(statement).fetchall()[0][0]
        return MAX_WATERMARK if value is None else int(value)


class PortWatermarks:
    """A join that judges late rows against each input's own watermark (docs/time.md): it keeps every
    port's watermark, checkpointed, as its sources advance it before each event behind it (source.py)."""

    def track_ports(self, env: Env, op_id: int) -> None:
        self.port_wm = env.state.value(op_id, "port_watermarks", [MIN_WATERMARK, MIN_WATERMARK])

    def input_watermark(self, ports: list[int]) -> int:
        # A port's watermark only rises (a job restored from a checkpoint starts its ports from nothing); an
        # idle or finished input reads as +infinity here and sends no rows until it is back, so is not taken.
        self.port_wm.value = [old if new >= MAX_WATERMARK else max(old, new)
                              for old, new in zip(self.port_wm.value, ports)]
        return min(ports)

    def arrival_watermark(self, port: int, judged: bool) -> int:
        """The watermark a row arriving on ``port`` now is judged against (the smallest: not judged here)."""
        return self.port_wm.value[port] if judged else MIN_WATERMARK


def with_watermark(batch: pa.Table, watermark: int) -> pa.Table:
    """The batch with its rows' arrival watermark, ``__w``: as its source gave it (each event's), or else
    ``watermark`` (the port's, which its source advanced before each event behind it)."""
    if ARRIVAL in batch.column_names:
        return batch
    return batch.append_column(ARRIVAL, pa.array(np.full(batch.num_rows, watermark, dtype=np.int64)))


def arrival_marks(batch: pa.Table) -> pa.ChunkedArray:
    return batch.column(ARRIVAL)


def min_time(batch: pa.Table, column: str) -> int:
    """The smallest time (microseconds) in a timestamp column; +infinity when it has none."""
    value = pc.min(batch.column(column))
    return value.value if value.is_valid else MAX_WATERMARK


def lowered(watermark: int, lateness: int) -> int:
    """The watermark minus the allowed lateness (the end of input stays the end)."""
    return watermark if watermark >= MAX_WATERMARK else watermark - lateness
