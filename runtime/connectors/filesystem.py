"""The runtime half of the file connector (``planner/connectors/filesystem.py``)."""

from __future__ import annotations

from . import open_file_sink, open_file_source
from .base import ReadRequest, SinkWriter, SourceContext, SourceReader, WriteRequest


def open_source(req: ReadRequest, ctx: SourceContext) -> SourceReader:
    return open_file_source(req)


def open_sink(req: WriteRequest) -> SinkWriter:
    return open_file_sink(req.options, req.path, req.schema, req.updating, position=req.position)
