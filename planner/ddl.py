"""Binding DDL: CREATE STREAM / TABLE / VIEW / SINK statements -> catalog objects.

Connector options are checked here, when a source or sink is declared, so
a misspelt option is an error that points at the statement instead of a
surprise at run time.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ..grammar import CreateMaterializedView, CreateSink, CreateSource, CreateView, Diagnostic, SqlError, parse_script
from ..grammar.diagnostics import did_you_mean
from .catalog import Catalog, MaterializedViewDef, SinkDef, SourceDef, ViewDef, WatermarkSpec
from .expressions import Scope, bind_scalar, infer_type
from .kafka_options import (
    KAFKA_SINK,
    KAFKA_SOURCE,
    METADATA_KEYS,
    UPSERT_KAFKA_SINK,
    UPSERT_KAFKA_SOURCE,
    kafka_required,
)
from .timeutil import interval_micros, node_span, parse_duration
from .types import TIMESTAMP, Field, Schema, parse_type

# What each connector accepts: option -> allowed values (None: any value).
SOURCE_OPTIONS = {
    "file": {"connector": None, "path": None, "format": ("json", "csv", "parquet", "debezium-json"),
             "on_error": ("fail", "skip"), "dead_letter": None, "watch": ("true", "false"),
             "idle_timeout": "duration", "allowed_lateness": "duration", "batch.size": "int",
             "csv.delimiter": None},
    "memory": {"connector": None, "idle_timeout": "duration", "allowed_lateness": "duration",
               "scan.startup.mode": ("earliest-offset", "latest-offset")},
    "kafka": KAFKA_SOURCE,
    "upsert-kafka": UPSERT_KAFKA_SOURCE,
}
SINK_OPTIONS = {
    "file": {"connector": None, "path": None, "format": ("json", "changelog-json", "debezium-json", "csv", "parquet")},
    "memory": {"connector": None},
    "kafka": KAFKA_SINK,
    "upsert-kafka": UPSERT_KAFKA_SINK,
}


def check_options(options: dict, allowed_by_connector: dict, what: str, stmt, required=("connector",)) -> None:
    span = stmt.span
    connector = options.get("connector")
    if connector is None:
        raise SqlError(Diagnostic(f"{what} needs a connector", span, stmt.source,
                                  help=f"add WITH (connector = '{' | '.join(allowed_by_connector)}', ...)"))
    allowed = allowed_by_connector.get(connector.lower())
    if allowed is None:
        raise SqlError(Diagnostic(f"unknown connector '{connector}'", span, stmt.source,
                                  help=did_you_mean(connector, allowed_by_connector)))
    for key, value in options.items():
        if key not in allowed and not (key.startswith("properties.") and "properties.*" in allowed):
            raise SqlError(Diagnostic(f"unknown option '{key}' for connector '{connector}'", span, stmt.source,
                                      help=did_you_mean(key, allowed)))
        rule = allowed.get(key)
        if isinstance(rule, tuple) and value.lower() not in rule:
            raise SqlError(Diagnostic(f"invalid value '{value}' for option '{key}'", span, stmt.source,
                                      help="expected one of: " + ", ".join(rule)))
        if rule == "duration":
            try:
                parse_duration(value)
            except ValueError as e:
                raise SqlError(Diagnostic(str(e), span, stmt.source)) from None
        if rule == "int" and not value.isdigit():
            raise SqlError(Diagnostic(f"option '{key}' needs a whole number, not '{value}'", span, stmt.source))
    if connector.lower() in ("kafka", "upsert-kafka"):
        for lacking, example in kafka_required(connector.lower(), options, what == "a sink"):
            raise SqlError(Diagnostic(f"the {connector.lower()} connector needs {lacking}", span, stmt.source,
                                      help=f"add {example} to WITH (...)"))
    if connector.lower() == "file":
        for key in ("path", "format"):
            if key not in options:
                raise SqlError(Diagnostic(f"the file connector needs '{key}'", span, stmt.source,
                                          help=f"add {key} = '...' to WITH (...)"))


def declare(sql: str, catalog: Catalog | None = None, base_dir: str | None = None) -> Catalog:
    """A catalog with the streams and tables ``sql`` declares: for planning without an engine.

    Example:
        >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3)) WITH (connector = 'memory')")
        >>> [f.name for f in catalog.get("s").schema]
        ['k', 'ts']
    """
    catalog = catalog if catalog is not None else Catalog()
    for stmt in parse_script(sql):
        if not isinstance(stmt, CreateSource):
            raise SqlError(Diagnostic("declare() takes CREATE STREAM and CREATE TABLE statements only",
                                      stmt.span, stmt.source))
        catalog.add(bind_create_source(stmt, base_dir), replace=stmt.or_replace, name=stmt.name, source=stmt.source)
    return catalog


def bind_create_source(stmt: CreateSource, base_dir: str | None = None) -> SourceDef:
    """Check a CREATE STREAM / TABLE and turn it into a SourceDef."""
    src = stmt.source
    fields: list[Field] = []
    for c in stmt.columns:
        if any(f.name.lower() == c.name.value.lower() for f in fields):
            raise SqlError(Diagnostic(f"column '{c.name.value}' is declared twice", c.name.span, src))
        fields.append(Field(c.name.value, parse_type(c.type_text, c.type_span or c.span, src), nullable=not c.not_null))
    if not fields:
        raise SqlError(Diagnostic("a source needs at least one column", stmt.span, src))
    physical = tuple(f.name for f in fields)

    computed = []
    for c in stmt.computed:
        if any(f.name.lower() == c.name.value.lower() for f in fields):
            raise SqlError(Diagnostic(f"column '{c.name.value}' is declared twice", c.name.span, src))
        if isinstance(c.expr, exp.Anonymous) and c.expr.name.upper() == "PROCTIME" and not c.expr.expressions:
            # A processing-time attribute: filled with the time each event arrives.
            fields.append(Field(c.name.value, TIMESTAMP, nullable=False, proctime=True))
            computed.append((c.name.value, c.expr))
            continue
        base = Schema(tuple(fields[: len(physical)]))
        bound = bind_scalar(c.expr, Scope.of(base, None), src, clause="a computed column")
        fields.append(Field(c.name.value, infer_type(bound, base, src)))
        computed.append((c.name.value, bound))

    watermark = None
    if stmt.watermark is not None:
        watermark = _bind_watermark(stmt, fields)
        fields = [Field(f.name, f.type, f.nullable, rowtime=True) if f.name == watermark.column else f for f in fields]

    key = []
    for k in stmt.primary_key:
        f = next((f for f in fields if f.name.lower() == k.value.lower()), None)
        if f is None:
            raise SqlError(Diagnostic(f"unknown column '{k.value}' in PRIMARY KEY", k.span, src,
                                      help=did_you_mean(k.value, [f.name for f in fields])))
        key.append(f.name)

    kind = stmt.kind
    if kind == "stream" and key:
        raise SqlError(Diagnostic("a STREAM is append-only and cannot have a PRIMARY KEY", stmt.span, src,
                                  help="declare it as a TABLE to read it as an updating relation"))
    if kind == "table" and not key:
        kind = "stream"  # As in Flink: a table without a key is an append-only stream.
    if key:
        # As in Flink, primary key columns are NOT NULL.
        fields = [Field(f.name, f.type, False, f.rowtime) if f.name in key else f for f in fields]

    options = dict(stmt.options)
    check_options(options, SOURCE_OPTIONS, "a source", stmt)
    metadata = _bind_metadata(stmt, options)
    if options["connector"].lower() == "upsert-kafka":
        if not key:
            raise SqlError(Diagnostic("an upsert-kafka source is a TABLE with a PRIMARY KEY (the message key)",
                                      stmt.span, src, help="CREATE TABLE name (..., PRIMARY KEY (id) NOT ENFORCED) "
                                                           "WITH (connector = 'upsert-kafka', ...)"))
        kind = "table"
    if kind == "stream" and options.get("format", "").lower() == "debezium-json":
        raise SqlError(Diagnostic("format 'debezium-json' is a changelog (inserts, updates and deletes), "
                                  "so it needs a TABLE with a PRIMARY KEY", stmt.span, src,
                                  help="CREATE TABLE name (..., PRIMARY KEY (id) NOT ENFORCED) WITH (...)"))
    return SourceDef(name=stmt.name.value, kind=kind, schema=Schema(tuple(fields)), physical=physical,
                     computed=tuple(computed), watermark=watermark, primary_key=tuple(key), options=options,
                     base_dir=base_dir, ddl=stmt.text, metadata=metadata)


def _bind_metadata(stmt: CreateSource, options: dict) -> tuple[tuple[str, str], ...]:
    """The (column, key) pairs of the METADATA columns; only Kafka sources have metadata."""
    found = []
    for c in stmt.columns:
        if c.metadata is None:
            continue
        connector = options["connector"].lower()
        if connector != "kafka":
            raise SqlError(Diagnostic(f"connector '{connector}' has no metadata to fill column '{c.name.value}'",
                                      c.span, stmt.source, help="METADATA columns are read from Kafka messages "
                                                                "(connector = 'kafka')"))
        key = c.metadata.lower()
        if key not in METADATA_KEYS:
            raise SqlError(Diagnostic(f"unknown Kafka metadata '{c.metadata}'", c.span, stmt.source,
                                      help=did_you_mean(c.metadata, METADATA_KEYS) or
                                      "one of: " + ", ".join(METADATA_KEYS)))
        found.append((c.name.value, key))
    return tuple(found)


def _bind_watermark(stmt: CreateSource, fields: list[Field]) -> WatermarkSpec:
    wm = stmt.watermark
    src = stmt.source
    f = next((f for f in fields if f.name.lower() == wm.column.value.lower()), None)
    if f is None:
        raise SqlError(Diagnostic(f"unknown column '{wm.column.value}' in WATERMARK", wm.column.span, src,
                                  help=did_you_mean(wm.column.value, [f.name for f in fields])))
    if not pa.types.is_timestamp(f.type):
        raise SqlError(Diagnostic(f"the watermark column '{f.name}' must be a TIMESTAMP, not {f.type}",
                                  wm.column.span, src, help="convert it in a computed column: ts AS TO_TIMESTAMP(...)"))
    e = wm.expr
    delay = 0
    if isinstance(e, exp.Sub) and isinstance(e.this, exp.Column):
        delay = interval_micros(e.expression, src)
        e = e.this
    if not (isinstance(e, exp.Column) and e.name.lower() == f.name.lower()):
        raise SqlError(Diagnostic("a watermark must be the column itself or the column minus an interval",
                                  node_span(wm.expr) or wm.span, src,
                                  help=f"WATERMARK FOR {f.name} AS {f.name} - INTERVAL '5' SECOND"))
    if delay < 0:
        raise SqlError(Diagnostic("the watermark delay cannot be negative", wm.span, src))
    return WatermarkSpec(f.name, delay)


def bind_create_view(stmt: CreateView, schema: Schema) -> ViewDef:
    return ViewDef(name=stmt.name.value, query=stmt.query.tree, schema=schema, ddl=stmt.text)


# Sink formats that can only represent an append-only result.
APPEND_ONLY_FORMATS = ("json", "csv", "parquet")


def bind_create_sink(stmt: CreateSink, schema: Schema, changelog: str, base_dir: str | None = None) -> SinkDef:
    """Check a CREATE SINK against the result it will receive."""
    options = {k: v for k, v in stmt.options.items()}
    options.setdefault("connector", "memory")
    check_options(options, SINK_OPTIONS, "a sink", stmt)
    fmt = options.get("value.format", options.get("format", "json")).lower()
    if options["connector"].lower() in ("file", "kafka") and changelog == "updating" and fmt in APPEND_ONLY_FORMATS + ("raw",):
        raise SqlError(Diagnostic(
            f"sink '{stmt.name.value}' uses format '{fmt}', which can only hold an append-only result, "
            "but this query's result is updating (rows are retracted and replaced)", stmt.query.span, stmt.source,
            help="use format = 'changelog-json' or 'debezium-json' (or connector 'upsert-kafka' for Kafka), "
                 "or make the query append-only "
                 "(e.g. a window aggregate that emits when the window closes)"))
    return SinkDef(name=stmt.name.value, options=options, query=stmt.query.tree, schema=schema,
                   base_dir=base_dir, ddl=stmt.text)


def bind_create_mv(stmt: CreateMaterializedView, schema: Schema) -> MaterializedViewDef:
    return MaterializedViewDef(name=stmt.name.value, options=dict(stmt.options), query=stmt.query.tree,
                               schema=schema, ddl=stmt.text)
