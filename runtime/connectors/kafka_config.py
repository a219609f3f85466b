"""Reading the WITH (...) options of the Kafka connectors into what the client layer needs.

Option names are Flink SQL's (see planner/kafka_options.py for the list and
docs/connectors.md for what they mean). ``properties.<key>`` options are
handed to the confluent-kafka client as ``<key>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import SinkError, SourceError


@dataclass(frozen=True)
class KafkaOptions:
    name: str  # the source's or sink's name, for messages
    topics: tuple[str, ...]
    topic_pattern: str | None
    client: dict  # confluent-kafka configuration from properties.*
    value_format: str
    key_format: str | None
    key_fields: tuple[str, ...]
    value_fields_include: str  # 'all' | 'except_key'
    delimiter: str
    startup_mode: str = "group-offsets"
    startup_timestamp_ms: int | None = None
    startup_offsets: dict = field(default_factory=dict)  # partition -> offset
    bounded_mode: str | None = None
    bounded_timestamp_ms: int | None = None
    bounded_offsets: dict = field(default_factory=dict)
    on_error: str = "fail"
    dead_letter: str | None = None
    delivery: str = "exactly-once"

    @property
    def group_id(self) -> str:
        return self.client["group.id"]


def kafka_options(name: str, options: dict, *, sink: bool = False, upsert: bool = False) -> KafkaOptions:
    """The options of a Kafka source or sink, checked.

    Example:
        >>> o = kafka_options("clicks", {"topic": "a;b", "properties.bootstrap.servers": "h:9092",
        ...                              "format": "json", "scan.startup.mode": "earliest-offset"})
        >>> o.topics, o.client["bootstrap.servers"], o.startup_mode
        (('a', 'b'), 'h:9092', 'earliest-offset')
    """
    error = SinkError if sink else (lambda message: SourceError(message, source=name))
    opts = {k.lower(): str(v) for k, v in options.items()}
    client = {k[len("properties."):]: v for k, v in options.items() if k.lower().startswith("properties.")}
    if "bootstrap.servers" not in client:
        raise error("a Kafka connector needs 'properties.bootstrap.servers'")
    client.setdefault("group.id", f"dsms-{name}")
    topics = tuple(t.strip() for t in opts.get("topic", "").split(";") if t.strip())
    pattern = opts.get("topic-pattern")
    if not topics and not pattern:
        raise error("a Kafka connector needs 'topic' (or 'topic-pattern')")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as e:
            raise error(f"'topic-pattern' is not a regular expression: {e}") from None
    value_format = opts.get("value.format", opts.get("format", "json")).lower()
    key_format = opts.get("key.format")
    key_fields = tuple(f.strip() for f in opts.get("key.fields", "").split(";") if f.strip())
    if key_fields and key_format is None:
        raise error("'key.fields' needs a 'key.format'")
    delimiter = opts.get("csv.delimiter", ",")
    delimiter = {"\\t": "\t", "tab": "\t"}.get(delimiter, delimiter)
    mode = opts.get("scan.startup.mode", "earliest-offset" if upsert else "group-offsets").lower()
    bounded = opts.get("scan.bounded.mode")
    return KafkaOptions(
        name=name, topics=topics, topic_pattern=pattern, client=client, value_format=value_format,
        key_format=key_format.lower() if key_format else None, key_fields=key_fields,
        value_fields_include=opts.get("value.fields-include", "all").lower(), delimiter=delimiter,
        startup_mode=mode, startup_timestamp_ms=_int(opts.get("scan.startup.timestamp-millis"), error),
        startup_offsets=parse_specific_offsets(opts.get("scan.startup.specific-offsets", ""), error),
        bounded_mode=bounded.lower() if bounded else None,
        bounded_timestamp_ms=_int(opts.get("scan.bounded.timestamp-millis"), error),
        bounded_offsets=parse_specific_offsets(opts.get("scan.bounded.specific-offsets", ""), error),
        on_error=opts.get("on_error", "fail").lower(), dead_letter=opts.get("dead_letter"),
        delivery=opts.get("sink.delivery-guarantee", "exactly-once").lower())


def parse_specific_offsets(text: str, error) -> dict[int, int]:
    """Flink's ``'partition:0,offset:42;partition:1,offset:300'`` -> {0: 42, 1: 300}.

    Example:
        >>> parse_specific_offsets("partition:0,offset:42;partition:1,offset:300", ValueError)
        {0: 42, 1: 300}
    """
    found = {}
    for part in (p.strip() for p in text.split(";") if p.strip()):
        m = re.fullmatch(r"partition\s*:\s*(\d+)\s*,\s*offset\s*:\s*(\d+)", part)
        if not m:
            raise error(f"cannot read '{part}' of the specific offsets (write 'partition:0,offset:42;partition:1,"
                        "offset:300')")
        found[int(m.group(1))] = int(m.group(2))
    return found


def _int(text: str | None, error) -> int | None:
    if text is None:
        return None
    if not text.strip().isdigit():
        raise error(f"expected milliseconds since the epoch, not '{text}'")
    return int(text)
