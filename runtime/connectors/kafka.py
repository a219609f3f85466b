"""The runtime half of the ``kafka`` and ``upsert-kafka`` connectors (``planner/connectors/kafka.py``,
``upsert_kafka.py``): opening their sources and sinks.

The client layer is ``kafka_client.py``, options ``kafka_config.py``,
decoding ``kafka_decode.py``, the reader ``kafka_source.py`` and the
exactly-once sink ``kafka_sink.py``; docs/connectors.md describes them
for users.
"""

from __future__ import annotations

import os

import pyarrow as pa

from .base import ReadRequest, SinkError, SinkWriter, SourceContext, SourceError, SourceReader, WriteRequest
from .changelog_source import DebeziumCodec, DebeziumReader, flat_schema
from .kafka_config import kafka_options
from .kafka_decode import MessageDecoder
from .kafka_sink import KafkaSink
from .kafka_source import KafkaSource, default_dead_letter


def open_source(req: ReadRequest, ctx: SourceContext) -> SourceReader:
    """A reader of the source's topic(s) giving the columns of ``req.schema``.

    Raises:
        SourceError: an option is wrong, or the cluster or topic cannot be reached.
    """
    src = ctx.source
    upsert = src.connector == "upsert-kafka"
    opts = kafka_options(req.name, req.options, upsert=upsert)
    metadata = {c: k for c, k in src.metadata if c in req.schema.names}
    if upsert:
        key_columns = src.primary_key
    elif opts.key_fields and opts.value_fields_include == "except_key":
        key_columns = opts.key_fields
    else:
        key_columns = ()
    declared = tuple(c for c in src.physical if c not in dict(src.metadata))
    value_columns = declared if opts.value_fields_include == "all" else \
        tuple(c for c in declared if c not in key_columns)
    dead_letter = default_dead_letter(req.name, src.base_dir) if opts.dead_letter is None else \
        _resolve(opts.dead_letter, src.base_dir)
    if opts.value_format == "debezium-json":
        if metadata or key_columns:
            raise SourceError("format 'debezium-json' reads everything from the message value: no METADATA or key "
                              "columns", source=req.name)
        decoder = MessageDecoder(req.name, flat_schema(req.schema), value_format="json", key_format=None,
                                 key_columns=(), metadata={})
        decoder.value.codec = DebeziumCodec(req.schema, req.not_null)
        reader = KafkaSource(opts, decoder, req.batch_rows, dead_letter_path=dead_letter)
        return DebeziumReader(reader, req.schema)
    schema = req.schema
    if not upsert:  # a stream's NOT NULL columns stay NOT NULL, as the plan has them (the decoder refuses NULLs)
        schema = pa.schema([f.with_nullable(src.schema.find(f.name).nullable) for f in schema])
    try:
        decoder = MessageDecoder(req.name, schema, value_format=opts.value_format, key_format=opts.key_format,
                                 key_columns=key_columns, metadata=metadata, not_null=req.not_null,
                                 delimiter=opts.delimiter, value_columns=value_columns,
                                 declared=pa.schema([pa.field(c, src.schema.find(c).type, src.schema.find(c).nullable)
                                                     for c in declared]))
    except ValueError as e:
        raise SourceError(str(e), source=req.name) from None
    return KafkaSource(opts, decoder, req.batch_rows, upsert=upsert, dead_letter_path=dead_letter)


def open_sink(req: WriteRequest) -> SinkWriter:
    """A writer into the sink's topic; write-ahead (exactly-once) with a state directory, unless told otherwise.

    Raises:
        SinkError: an option is wrong, the topic does not exist, or the format cannot hold the result.
    """
    upsert = req.options.get("connector", "").lower() == "upsert-kafka"
    opts = kafka_options(req.name, req.options, sink=True, upsert=upsert)
    if not opts.topics:
        raise SinkError(f"sink '{req.name}' needs a 'topic'")
    return KafkaSink(req.name, opts, req.schema, req.updating, upsert=upsert,
                     write_ahead=req.durable and opts.delivery == "exactly-once",
                     position=req.position, staged=req.contents)


def _resolve(path: str, base_dir: str | None) -> str:
    return path if os.path.isabs(path) or not base_dir else os.path.join(base_dir, path)
