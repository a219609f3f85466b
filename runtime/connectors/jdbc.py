"""The runtime half of the jdbc connector (``planner/connectors/jdbc.py``): the sink and the lookup."""

from __future__ import annotations

import pyarrow as pa

from .base import SinkWriter, WriteRequest
from .jdbc_lookup import JdbcLookup
from .jdbc_sink import open_jdbc_sink


def open_sink(req: WriteRequest) -> SinkWriter:
    return open_jdbc_sink(req.name, req.options, req.schema, req.updating, position=req.position,
                          pending=req.contents, durable=req.durable)


def open_lookup(options: dict, columns: list[tuple[str, pa.DataType]], keys: tuple[str, ...]) -> JdbcLookup:
    """Rows of the table fetched by ``keys`` (see ``jdbc_lookup.py``)."""
    return JdbcLookup(options, columns, keys)
