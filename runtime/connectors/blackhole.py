"""The runtime half of the blackhole sink (``planner/connectors/blackhole.py``): counts rows, keeps none."""

from __future__ import annotations

import pyarrow as pa

from .base import SinkWriter, WriteRequest


class BlackholeSink:
    """A SinkWriter that discards every batch; its position is the number of rows it took."""

    def __init__(self, rows: int = 0):
        self.rows = rows

    def write(self, table: pa.Table) -> None:
        self.rows += table.num_rows

    def flush(self) -> None:
        pass  # nothing is kept, so nothing to make durable

    @property
    def position(self) -> dict:
        return {"rows": self.rows}

    def truncate(self, position: dict) -> None:
        self.rows = int(position.get("rows", 0))

    def close(self) -> None:
        pass  # holds no resources


def open_sink(req: WriteRequest) -> SinkWriter:
    return BlackholeSink(int((req.position or {}).get("rows", 0)))
