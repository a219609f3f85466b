"""The options of the ``kafka`` and ``upsert-kafka`` connectors, as Flink SQL spells them.

``check_options`` (planner/ddl.py) checks a WITH (...) clause against these
tables: option -> allowed values (None: any value; ``'properties.*'``: any
key under that prefix is handed to the Kafka client). What each option does
is in docs/connectors.md; ``runtime/connectors/kafka_config.py`` reads them.
"""

from __future__ import annotations

STARTUP_MODES = ("earliest-offset", "latest-offset", "group-offsets", "timestamp", "specific-offsets")
BOUNDED_MODES = ("latest-offset", "group-offsets", "timestamp", "specific-offsets")
VALUE_FORMATS = ("json", "csv", "raw", "debezium-json")
KEY_FORMATS = ("json", "csv", "raw")
SINK_VALUE_FORMATS = ("json", "csv", "raw", "changelog-json", "debezium-json")
# Metadata a Kafka source can fill (``col TYPE METADATA FROM 'key'``), and the SQL types it has.
METADATA_KEYS = {"topic": "STRING", "partition": "INT", "offset": "BIGINT", "timestamp": "TIMESTAMP(3)"}

_COMMON = {"connector": None, "topic": None, "properties.bootstrap.servers": None, "properties.*": None,
           "key.format": KEY_FORMATS, "key.fields": None, "value.format": VALUE_FORMATS,
           "format": VALUE_FORMATS, "value.fields-include": ("all", "except_key"),
           "csv.delimiter": None}

KAFKA_SOURCE = {**_COMMON, "topic-pattern": None, "properties.group.id": None,
                "scan.startup.mode": STARTUP_MODES, "scan.startup.timestamp-millis": "int",
                "scan.startup.specific-offsets": None, "scan.bounded.mode": BOUNDED_MODES,
                "scan.bounded.timestamp-millis": "int", "scan.bounded.specific-offsets": None,
                "on_error": ("fail", "skip"), "dead_letter": None, "idle_timeout": "duration",
                "allowed_lateness": "duration", "batch.size": "int", "scan.poll.timeout": "duration"}
UPSERT_KAFKA_SOURCE = {**_COMMON, "properties.group.id": None, "on_error": ("fail", "skip"), "dead_letter": None,
                       "idle_timeout": "duration", "allowed_lateness": "duration", "batch.size": "int",
                       "scan.poll.timeout": "duration"}
KAFKA_SINK = {**_COMMON, "format": SINK_VALUE_FORMATS, "value.format": SINK_VALUE_FORMATS,
              "sink.delivery-guarantee": ("exactly-once", "at-least-once", "none")}
UPSERT_KAFKA_SINK = {**_COMMON, "sink.delivery-guarantee": ("exactly-once", "at-least-once", "none")}


def kafka_required(connector: str, options: dict, is_sink: bool) -> list[tuple[str, str]]:
    """The options a Kafka DDL lacks: (what is missing, how to add it)."""
    missing = []
    if "properties.bootstrap.servers" not in options:
        missing.append(("'properties.bootstrap.servers'", "'properties.bootstrap.servers' = 'host:9092'"))
    if "topic" not in options and (is_sink or "topic-pattern" not in options):
        missing.append(("'topic'" if is_sink or connector == "upsert-kafka" else "'topic' or 'topic-pattern'",
                        "topic = 'name'"))
    if "format" not in options and "value.format" not in options:
        missing.append(("a 'format' (or 'value.format')", "format = 'json'"))
    if connector == "upsert-kafka" and "key.format" not in options:
        missing.append(("'key.format' (the message key holds the primary key)", "'key.format' = 'json'"))
    mode = options.get("scan.startup.mode", "").lower()
    if mode == "timestamp" and "scan.startup.timestamp-millis" not in options:
        missing.append(("'scan.startup.timestamp-millis'", "'scan.startup.timestamp-millis' = '1700000000000'"))
    if mode == "specific-offsets" and "scan.startup.specific-offsets" not in options:
        missing.append(("'scan.startup.specific-offsets'",
                        "'scan.startup.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300'"))
    bounded = options.get("scan.bounded.mode", "").lower()
    if bounded == "timestamp" and "scan.bounded.timestamp-millis" not in options:
        missing.append(("'scan.bounded.timestamp-millis'", "'scan.bounded.timestamp-millis' = '1700000000000'"))
    if bounded == "specific-offsets" and "scan.bounded.specific-offsets" not in options:
        missing.append(("'scan.bounded.specific-offsets'",
                        "'scan.bounded.specific-offsets' = 'partition:0,offset:42;partition:1,offset:300'"))
    return missing
