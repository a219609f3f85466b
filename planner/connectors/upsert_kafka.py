"""The upsert-kafka connector: a key-compacted topic as an updating TABLE, and an updating result as one.

The message key is the primary key; a message without a value (a
tombstone) deletes its key. Options are the Kafka connector's (``kafka.py``);
the runtime half is ``runtime/connectors/kafka.py`` too.
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Format, Option, OptionError
from .kafka import COMMON, check_kafka


def check_upsert(options, schema, role: str) -> None:
    check_kafka(options, schema, role)
    if "key.format" not in options:
        raise OptionError("the upsert-kafka connector needs 'key.format' (the message key holds the primary key)",
                          help="add 'key.format' = 'json'")
    if role == "sink" and not options.get("key.fields"):
        raise OptionError("an upsert-kafka sink needs 'key.fields': the result's columns that make the message key "
                          "(CREATE SINK ... AS SELECT declares no PRIMARY KEY)", help="add 'key.fields' = 'id'")


DESCRIPTOR = ConnectorDescriptor(
    name="upsert-kafka",
    help="a key-compacted Kafka topic as an updating table (key = primary key, no value = delete)",
    module="dsms.runtime.connectors.kafka",
    source=True, sink=True, tables=True,
    # Every format is read as changes by key (a TABLE with a PRIMARY KEY) and takes an updating result.
    formats=(Format("json", changelog=True), Format("csv", changelog=True), Format("raw", changelog=True),
             Format("avro", changelog=True)),
    format_required=False,
    options=COMMON + (Option("value.format", "enum", values=("json", "csv", "raw", "avro"), help="Flink's other name for "
                                                                                       "'format'"),),
    check=check_upsert,
)
