"""The Kafka connector (``connector = 'kafka'``): topics as streams, query results as messages.

Options are Flink SQL's (docs/connectors.md describes them); the runtime
half is ``runtime/connectors/kafka.py``. ``upsert_kafka.py`` shares the
options below for ``connector = 'upsert-kafka'``.
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Format, Option, OptionError

STARTUP_MODES = ("earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets")
BOUNDED_MODES = ("latest-offset", "group-offsets", "timestamp", "specific-offsets")
KEY_FORMATS = ("json", "csv", "raw", "avro")
OFFSETS_EXAMPLE = "'partition:0,offset:42;partition:1,offset:300'"

# Options both Kafka connectors take.
COMMON = (
    Option("topic", help="the topic (sources: names separated by ';')"),
    Option("properties.bootstrap.servers", required=True, help="the brokers, host:port[,host:port...]"),
    Option("properties.group.id", help="the consumer group whose offsets are read and committed "
                                       "(default dsms-<source>)", scope="source"),
    Option("properties.*", help="any librdkafka client setting, passed on without the 'properties.' prefix"),
    Option("key.format", "enum", values=KEY_FORMATS, help="the format of the message key"),
    Option("key.fields", help="the columns in the message key, separated by ';'"),
    Option("value.fields-include", "enum", "all", values=("all", "except_key"),
           help="whether the value holds the key's columns too"),
    Option("csv.delimiter", default=",", help="the field separator of the csv format"),
    Option("on_error", "enum", "fail", values=("fail", "skip"),
           help="what a message that cannot be read does: stop the source, or go to the dead letter",
           scope="source"),
    Option("dead_letter", help="where skipped messages go (default <source>.dead_letter.jsonl)", scope="source"),
    Option("batch.size", "int", help="most messages per batch (default: the engine's batch size)", scope="source"),
    Option("sink.delivery-guarantee", "enum", "exactly-once", values=("exactly-once", "at-least-once", "none"),
           help="exactly-once: results reach the topic at checkpoints, once each (with a state directory)",
           scope="sink"),
)

METADATA = (("topic", "STRING"), ("partition", "INT"), ("offset", "BIGINT"), ("timestamp", "TIMESTAMP(3)"))


def value_format(options) -> str | None:
    return options.get("value.format") or options.get("format")


def check_kafka(options, schema, role: str) -> None:
    """What the options cannot say alone: a topic, a format, the options a mode needs, key columns that exist."""
    if "topic" not in options and (role == "sink" or "topic-pattern" not in options):
        raise OptionError(f"the {options.get('connector', 'kafka').lower()} connector needs 'topic'"
                          + (" or 'topic-pattern'" if role == "source" else ""), help="add 'topic' = 'name'")
    if value_format(options) is None:
        raise OptionError("a Kafka connector needs 'format' (or Flink's 'value.format')", help="add 'format' = 'json'")
    if "format" in options and "value.format" in options and options["format"] != options["value.format"]:
        raise OptionError("'format' and 'value.format' name the same thing: give one")
    for mode_key, prefix in (("scan.startup.mode", "scan.startup"), ("scan.bounded.mode", "scan.bounded")):
        _check_mode(options, mode_key, prefix)
    _check_key_fields(options, schema, role)


def _check_mode(options, mode_key: str, prefix: str) -> None:
    """A startup or bounded mode has the option it reads its position from."""
    mode = options.get(mode_key, "").lower()
    if mode == "timestamp" and f"{prefix}.timestamp-millis" not in options:
        raise OptionError(f"'{mode_key}' = 'timestamp' needs '{prefix}.timestamp-millis'",
                          help=f"add '{prefix}.timestamp-millis' = '1700000000000'")
    if mode == "specific-offsets" and f"{prefix}.specific-offsets" not in options:
        raise OptionError(f"'{mode_key}' = 'specific-offsets' needs '{prefix}.specific-offsets'",
                          help=f"add '{prefix}.specific-offsets' = {OFFSETS_EXAMPLE}")


def _check_key_fields(options, schema, role: str) -> None:
    """'key.fields' comes with a 'key.format' and names columns that exist."""
    fields = [f.strip() for f in options.get("key.fields", "").split(";") if f.strip()]
    if fields and "key.format" not in options:
        raise OptionError("'key.fields' needs a 'key.format'", help="add 'key.format' = 'json'")
    if schema is not None:
        names = {f.name for f in schema}
        missing = [f for f in fields if f not in names]
        if missing:
            raise OptionError(f"'key.fields' names column(s) {', '.join(missing)}, which the "
                              f"{'source declares' if role == 'source' else 'result has'} not")


DESCRIPTOR = ConnectorDescriptor(
    name="kafka",
    help="Kafka topics: a stream per topic (or topics), results as messages, exactly once",
    module="dsms.runtime.connectors.kafka",
    source=True, sink=True, tables=True,
    formats=(Format("json"), Format("csv"), Format("raw"), Format("avro"), Format("debezium-json", changelog=True),
             Format("changelog-json", source=False, changelog=True)),
    format_required=False,  # 'value.format' may name it instead (check_kafka)
    options=COMMON + (
        Option("value.format", "enum", values=("json", "csv", "raw", "avro", "debezium-json", "changelog-json"),
               help="Flink's other name for 'format'"),
        Option("topic-pattern", help="a regular expression: every topic whose name matches", scope="source"),
        Option("scan.startup.mode", "enum", "group-offsets", values=STARTUP_MODES,
               help="where reading starts", scope="source"),
        Option("scan.startup.timestamp-millis", "int", help="for 'timestamp': epoch milliseconds", scope="source"),
        Option("scan.startup.specific-offsets", help=f"for 'specific-offsets': {OFFSETS_EXAMPLE}", scope="source"),
        Option("scan.bounded.mode", "enum", values=BOUNDED_MODES,
               help="a bounded read: where each partition stops", scope="source"),
        Option("scan.bounded.timestamp-millis", "int", help="for 'timestamp': epoch milliseconds", scope="source"),
        Option("scan.bounded.specific-offsets", help=f"for 'specific-offsets': {OFFSETS_EXAMPLE}", scope="source"),
    ),
    bounded=lambda options: "scan.bounded.mode" in options, bounded_note="with scan.bounded.mode",
    # A bounded read is read whole by the batch routes, through this connector's own reader.
    batch_readable=lambda options: "scan.bounded.mode" in options, batch_reader="source",
    batch_note="with scan.bounded.mode", partitioned=True,
    accepts_changes=False,
    check=check_kafka,
    metadata=METADATA,
)
