"""Where a file sink may write: never onto what a source of the catalog reads.

A sink that truncated its own query's input would destroy the data it is
computing from (and the data of every other query reading it). Whether an
existing file may be replaced or extended is the sink's ``'sink.mode'``,
checked when it opens (``runtime/connectors``).

Example:
    >>> from dsms.planner import declare
    >>> from dsms.planner.catalog import SinkDef
    >>> catalog = declare("CREATE STREAM s (x INT) WITH (connector = 'file', path = '/data/s.jsonl', format = 'json')")
    >>> sink = SinkDef(name="out", options={"connector": "file", "path": "/data/s.jsonl"}, query=None,
    ...                schema=None, base_dir="/", ddl="")
    >>> source_reading(sink.path, catalog).name
    's'
"""

from __future__ import annotations

import os

from ...grammar import Diagnostic, SqlError
from ..catalog import Catalog, SinkDef, SourceDef


def source_reading(path: str | None, catalog: Catalog) -> SourceDef | None:
    """The source of ``catalog`` that reads ``path`` (its file, or a file in its directory), if any."""
    if not path:
        return None
    target = os.path.realpath(path.rstrip(os.sep) or path)
    for obj in catalog.of_kind("stream", "table"):
        if not isinstance(obj, SourceDef) or obj.connector != "file" or not obj.path:
            continue
        read = os.path.realpath(obj.path.rstrip(os.sep) or obj.path)
        if target == read or target.startswith(read + os.sep) or read.startswith(target + os.sep):
            return obj
    return None


def check_sink_target(sink: SinkDef, catalog: Catalog, stmt) -> None:
    """Refuse a file sink whose path a source reads."""
    if sink.options.get("connector", "memory").lower() != "file":
        return
    source = source_reading(sink.path, catalog)
    if source is not None:
        raise SqlError(Diagnostic(
            f"sink '{sink.name}' would write to {sink.path}, which {source.kind} '{source.name}' reads",
            stmt.name.span, stmt.source, help="write the sink to another path"))
