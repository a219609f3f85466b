"""What the join operators share: state tables in the job's DuckDB connection and running statements."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..duck import conform
from .base import MAX_WATERMARK, DuckStateLogic


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


def min_time(batch: pa.Table, column: str) -> int:
    """The smallest time (microseconds) in a timestamp column; +infinity when it has none."""
    value = pc.min(batch.column(column))
    return value.value if value.is_valid else MAX_WATERMARK


def lowered(watermark: int, lateness: int) -> int:
    """The watermark minus the allowed lateness (the end of input stays the end)."""
    return watermark if watermark >= MAX_WATERMARK else watermark - lateness
