"""Opening the ``kafka`` and ``upsert-kafka`` connectors (sources and sinks).

The client layer is ``kafka_client.py``, options ``kafka_config.py``,
decoding ``kafka_decode.py``, the reader ``kafka_source.py`` and the
exactly-once sink ``kafka_sink.py``; docs/connectors.md describes them
for users.
"""

from __future__ import annotations

import pyarrow as pa

from ...planner.catalog import SinkDef, SourceDef
from .base import SinkError, SourceError, SourceReader
from .changelog_source import DebeziumCodec, DebeziumReader, flat_schema
from .kafka_config import kafka_options
from .kafka_decode import MessageDecoder
from .kafka_sink import KafkaSinkOutput
from .kafka_source import KafkaSource, default_dead_letter

KAFKA_CONNECTORS = ("kafka", "upsert-kafka")


def open_kafka_source(src: SourceDef, schema: pa.Schema, not_null: tuple[str, ...], batch_rows: int) -> SourceReader:
    """A reader of ``src``'s topic(s) giving the columns of ``schema``.

    Raises:
        SourceError: an option is wrong, or the cluster or topic cannot be reached.
    """
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise SourceError("the Kafka connector needs the confluent-kafka package (pip install confluent-kafka)",
                          source=src.name) from None
    upsert = src.connector == "upsert-kafka"
    opts = kafka_options(src.name, src.options, upsert=upsert)
    metadata = {c: k for c, k in src.metadata if c in schema.names}
    if upsert:
        key_columns = src.primary_key
    elif opts.key_fields and opts.value_fields_include == "except_key":
        key_columns = opts.key_fields
    else:
        key_columns = ()
    declared = tuple(c for c in src.physical if c not in dict(src.metadata))
    value_columns = declared if upsert or opts.value_fields_include == "all" else \
        tuple(c for c in declared if c not in key_columns)
    if upsert and opts.value_fields_include == "except_key":
        value_columns = tuple(c for c in declared if c not in key_columns)
    dead_letter = default_dead_letter(src.name, src.base_dir) if opts.dead_letter is None else \
        _resolve(opts.dead_letter, src.base_dir)
    if opts.value_format == "debezium-json":
        if metadata or key_columns:
            raise SourceError("format 'debezium-json' reads everything from the message value: no METADATA or key "
                              "columns", source=src.name)
        codec = DebeziumCodec(schema, not_null)
        decoder = MessageDecoder(src.name, flat_schema(schema), value_format="json", key_format=None,
                                 key_columns=(), metadata={})
        decoder.value.codec = codec
        reader = KafkaSource(opts, decoder, batch_rows, dead_letter_path=dead_letter)
        return DebeziumReader(reader, schema)
    try:
        decoder = MessageDecoder(src.name, schema, value_format=opts.value_format, key_format=opts.key_format,
                                 key_columns=key_columns, metadata=metadata, not_null=not_null,
                                 delimiter=opts.delimiter, value_columns=value_columns)
    except ValueError as e:
        raise SourceError(str(e), source=src.name) from None
    return KafkaSource(opts, decoder, batch_rows, upsert=upsert, dead_letter_path=dead_letter)


def open_kafka_sink(sink: SinkDef, schema: pa.Schema, updating: bool, *, durable: bool,
                    saved: dict | None = None, staged: pa.Table | None = None) -> KafkaSinkOutput:
    """The output of a query into a Kafka topic; restored (its last epoch completed) when ``saved`` is given."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        raise SinkError("the Kafka connector needs the confluent-kafka package (pip install confluent-kafka)") from None
    upsert = sink.options.get("connector", "").lower() == "upsert-kafka"
    opts = kafka_options(sink.name, sink.options, sink=True, upsert=upsert)
    output = KafkaSinkOutput(sink.name, opts, schema, updating, upsert=upsert, durable=durable)
    if saved is not None:
        output.restore(saved, staged)
    return output


def _resolve(path: str, base_dir: str | None) -> str:
    import os

    return path if os.path.isabs(path) or not base_dir else os.path.join(base_dir, path)
