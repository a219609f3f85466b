"""Opening a declared source or sink through its connector's runtime module.

A descriptor (``planner/connectors/``) names its runtime module by dotted
path; this module imports it on first use and calls its
``open_source(req: ReadRequest, ctx: SourceContext) -> SourceReader`` or
``open_sink(req: WriteRequest) -> SinkWriter``. Nothing here knows a
connector by name.
"""

from __future__ import annotations

import importlib

import pyarrow as pa

from ...planner.catalog import SinkDef, SourceDef
from ...planner.connectors import ConnectorDescriptor
from ..errors import SinkError, SourceError
from .base import ReadRequest, SinkWriter, SourceContext, SourceReader, WriteRequest


def runtime_module(descriptor: ConnectorDescriptor, function: str, name: str):
    """The function ``function`` of the descriptor's runtime module (``name``: the source or sink, for messages)."""
    def error(message: str):
        return SinkError(message) if function == "open_sink" else SourceError(message, source=name)

    try:
        module = importlib.import_module(descriptor.module)
    except ImportError as e:
        raise error(f"the runtime module {descriptor.module} of connector '{descriptor.name}' cannot be "
                    f"imported: {e}") from None
    fn = getattr(module, function, None)
    if fn is None:
        raise error(f"connector '{descriptor.name}' has no {function} in {descriptor.module}")
    return fn


def read_request(src: SourceDef, columns, time_column: str | None, batch_rows: int) -> ReadRequest:
    """What to ask of ``src``'s connector for ``columns`` (physical columns, in order)."""
    schema = pa.schema([pa.field(c, src.schema.find(c).type) for c in columns])
    # A table's deletes carry only the key (and the time of a versioned table): other columns may be NULL.
    not_null = tuple(c for c in columns if c == time_column or (
        not src.schema.find(c).nullable and (src.kind != "table" or c in src.primary_key)))
    rows = int(src.options.get("batch.size", batch_rows))
    fmt = src.descriptor.format(src.options.get("format"))
    changelog = "append" if src.kind != "table" else "debezium" if fmt is not None and fmt.changelog else "upsert"
    return ReadRequest(src.name, src.options, src.path, schema, not_null, rows, changelog)


def open_source(src: SourceDef, req: ReadRequest, ctx: SourceContext) -> SourceReader:
    """A reader of ``src`` through its connector."""
    if not src.descriptor.source:
        raise SourceError(f"connector '{src.connector}' is not a source", source=src.name)
    return runtime_module(src.descriptor, "open_source", src.name)(req, ctx)


def open_sink(sink: SinkDef, schema: pa.Schema, updating: bool, position: dict | None = None, *,
              contents: pa.Table | None = None, durable: bool = False) -> SinkWriter:
    """A writer for ``sink``'s results through its connector (not for connectors that ``collect``).

    ``contents``: the rows a write-ahead sink's checkpoint kept; ``durable``: checkpoints are taken.
    """
    descriptor = sink.descriptor
    if not descriptor.sink or descriptor.collects:
        raise SinkError(f"connector '{descriptor.name}' does not write sinks through a writer")
    opener = runtime_module(descriptor, "open_sink", sink.name)
    return opener(WriteRequest(sink.name, {k.lower(): v for k, v in sink.options.items()}, sink.path, schema,
                               updating, position, contents, durable))
