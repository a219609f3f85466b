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
from .bind.expressions import Scope, bind_scalar, infer_type
from .catalog import Catalog, MaterializedViewDef, SinkDef, SourceDef, ViewDef, WatermarkSpec, resolve_path
from .connectors import ConnectorDescriptor, OptionError, connector_names, connectors, find
from .timeutil import interval_micros, node_span
from .types import TIMESTAMP_LTZ, Field, Schema, is_nested, parse_type, sql_name


def check_options(options: dict, role: str, stmt, schema: Schema | None = None) -> ConnectorDescriptor:
    """Check a source's (``role='source'``) or sink's WITH (...) options against its connector's descriptor.

    Returns:
        the connector's descriptor.
    """

    def error(message: str, help: str | None = None) -> SqlError:
        return SqlError(Diagnostic(message, stmt.span, stmt.source, help=help))

    descriptor = _connector_of(options, role, error)
    if role == "table":  # as in Flink, a declared table is read, written (INSERT INTO) or both
        role = "source" if descriptor.source or descriptor.lookup else "sink"
        allowed = descriptor.options_for(role) + (descriptor.options_for("sink") if descriptor.sink else ())
    else:
        allowed = descriptor.options_for(role)
    for key, value in options.items():
        if key != "connector":
            _check_option(descriptor, allowed, role, key, value, error)
    for option in descriptor.options_for(role):
        if option.required and option.name not in options:
            raise error(f"the {descriptor.name} connector needs '{option.name}'",
                        help=f"add '{option.name}' = '...' to WITH (...): {option.help}")
    if descriptor.check is not None:
        try:
            descriptor.check(options, schema, role)
        except OptionError as e:
            raise error(str(e), help=e.help) from None
    return descriptor


def _connector_of(options: dict, role: str, error) -> ConnectorDescriptor:
    """The descriptor ``connector = '...'`` names, if it can play ``role``."""
    what = {"source": "a source", "sink": "a sink", "table": "a stream or table"}[role]
    name = options.get("connector")
    if name is None:
        raise error(f"{what} needs a connector",
                    help=f"add WITH (connector = '{' | '.join(connector_names(None if role == 'table' else role))}', ...)")
    descriptor = find(name)
    if descriptor is None:
        raise error(f"unknown connector '{name}'", help=did_you_mean(name, connector_names()))
    if role != "table" and role not in descriptor.kinds and not (role == "source" and descriptor.lookup):  # a lookup table is declared
        can = [n for d in connectors() if role in d.kinds for n in d.names]
        raise error(f"connector '{descriptor.name}' cannot be {what} (it is a {' and '.join(descriptor.kinds)})",
                    help=f"{role}s: " + ", ".join(f"'{n}'" for n in can))
    return descriptor


def _check_option(descriptor: ConnectorDescriptor, allowed, role: str, key: str, value: str, error) -> None:
    named = [o for o in allowed if o.name == key]  # a table's 'format' may be its source's or its sink's
    option = next((o for o in named if o.check(value) is None), named[0] if named else None) or \
        next((o for o in allowed if o.is_pattern and o.matches(key)), None)
    if option is None:
        if descriptor.option(key) is not None:
            raise error(f"option '{key}' of connector '{descriptor.name}' is for "
                        f"{'sources' if role == 'sink' else 'sinks'} only")
        raise error(f"unknown option '{key}' for connector '{descriptor.name}'",
                    help=did_you_mean(key, [o.name for o in allowed]))
    problem = option.check(value)
    if problem is not None and key == "format":
        reads = "reads" if role == "source" else "writes"
        raise error(f"invalid value '{value}' for option 'format': the {descriptor.name} connector {reads} "
                    + ", ".join(option.values))
    if problem is not None:
        raise error(problem)


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
    fields = _bind_columns(stmt)
    physical = tuple(f.name for f in fields)
    computed = _bind_computed(stmt, fields)
    watermark = None
    if stmt.watermark is not None:
        watermark = _bind_watermark(stmt, fields)
        fields = [Field(f.name, f.type, f.nullable, rowtime=True) if f.name == watermark.column else f for f in fields]
    key = _bind_primary_key(stmt, fields)
    kind = _source_kind(stmt, key)
    if key:
        # As in Flink, primary key columns are NOT NULL.
        fields = [Field(f.name, f.type, False, f.rowtime) if f.name in key else f for f in fields]

    options = dict(stmt.options)
    physical_schema = Schema(tuple(fields[: len(physical)]))
    descriptor = check_options(options, "table", stmt, physical_schema)
    fmt = descriptor.format(options.get("format") or options.get("value.format"))
    if not (descriptor.source or descriptor.lookup):  # a table that is only written (INSERT INTO): no reading rules
        return SourceDef(name=stmt.name.value, kind=kind, schema=Schema(tuple(fields)), physical=physical,
                         computed=tuple(computed), watermark=watermark, primary_key=tuple(key), options=options,
                         base_dir=base_dir, ddl=stmt.text)
    metadata = _bind_metadata(stmt, descriptor)
    if options.get("dead_letter"):  # relative to the script's folder, as the path is
        options["dead_letter"] = resolve_path(options["dead_letter"], base_dir)
    _check_readable(stmt, kind, descriptor, fmt, physical_schema)
    return SourceDef(name=stmt.name.value, kind=kind, schema=Schema(tuple(fields)), physical=physical,
                     computed=tuple(computed), watermark=watermark, primary_key=tuple(key), options=options,
                     base_dir=base_dir, ddl=stmt.text, metadata=metadata)


def _check_readable(stmt: CreateSource, kind: str, descriptor, fmt, physical_schema: Schema) -> None:
    """What a source's kind (STREAM or TABLE), connector and format must agree on for it to be read."""
    src = stmt.source
    options = dict(stmt.options)
    _check_nested_format(physical_schema, fmt, "source", stmt.span, src)
    if kind == "stream" and fmt is not None and fmt.changelog and fmt.source:
        raise SqlError(Diagnostic(f"format '{fmt.name}' is a changelog (inserts, updates and deletes), "
                                  "so it needs a TABLE with a PRIMARY KEY", stmt.span, src,
                                  help="CREATE TABLE name (..., PRIMARY KEY (id) NOT ENFORCED) WITH (...)"))
    if str(options.get("format", "")).lower() == "raw" and (
            len(physical_schema) != 1 or not pa.types.is_string(physical_schema.fields[0].type)):
        raise SqlError(Diagnostic("format 'raw' reads each line into one STRING column", stmt.span, src,
                                  help="declare one column, e.g. (line STRING), and take it apart with "
                                       "JSON_VALUE(line, '$.field')"))
    if kind == "stream" and not descriptor.streams:
        raise SqlError(Diagnostic(f"connector '{descriptor.name}' reads a table by its PRIMARY KEY, so it needs a "
                                  "TABLE with that key", stmt.span, src,
                                  help="CREATE TABLE name (..., PRIMARY KEY (id) NOT ENFORCED) WITH (...)"))
    if kind == "table" and not descriptor.tables:
        raise SqlError(Diagnostic(f"connector '{descriptor.name}' reads append-only streams, not tables with a "
                                  "PRIMARY KEY", stmt.span, src, help="declare it as a STREAM without a key"))


def _has_map(dtype) -> bool:
    if pa.types.is_map(dtype):
        return True
    if pa.types.is_struct(dtype):
        return any(_has_map(f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _has_map(dtype.value_type)
    return False


def _non_string_key(dtype) -> pa.DataType | None:
    """The key type of a MAP in ``dtype`` (at any depth) whose keys are not strings, if any."""
    if pa.types.is_map(dtype):
        if not (pa.types.is_string(dtype.key_type) or pa.types.is_large_string(dtype.key_type)):
            return dtype.key_type
        return _non_string_key(dtype.item_type)
    if pa.types.is_struct(dtype):
        return next((k for k in (_non_string_key(f.type) for f in dtype) if k is not None), None)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return _non_string_key(dtype.value_type)
    return None


def _check_nested_format(schema: Schema, fmt, role: str, span, source) -> None:
    """CSV and raw cannot hold nested values (nor, in dsms, Avro); JSON sources read ROW, ARRAY and MAP<STRING, V>
    (the change formats not MAP)."""
    name = fmt.name if fmt is not None else None
    for f in schema:
        if not is_nested(f.type):
            continue
        if name in ("csv", "raw", "avro"):
            why = "dsms does not map nested values to Avro yet" if name == "avro" else "it has no nested values"
            raise SqlError(Diagnostic(
                f"format '{name}' cannot hold column '{f.name}' of type {sql_name(f.type)}: {why}",
                span, source, help="use format = 'json' (or 'parquet' for files), or flatten the column: "
                                   "SELECT r.a AS r_a, arr[1] AS first ..."))
        if role == "source" and name in ("debezium-json", "changelog-json") and _has_map(f.type):
            raise SqlError(Diagnostic(
                f"column '{f.name}' of type {sql_name(f.type)}: a {name} source cannot read MAP or MULTISET values",
                span, source, help="declare the object as ROW<key1 T, key2 T, ...> with its keys, "
                                   "or read the changes with format = 'json'"))
        bad_key = _non_string_key(f.type)
        if role == "source" and name == "json" and bad_key is not None:
            raise SqlError(Diagnostic(
                f"column '{f.name}' of type {sql_name(f.type)}: a JSON object's keys are strings, so a json source "
                f"reads MAP<STRING, V> (and MULTISET<STRING>), not a {sql_name(bad_key)} key (nor does Flink)",
                span, source, help="declare MAP<STRING, ...> and CAST the keys in the query"))


def _bind_columns(stmt: CreateSource) -> list[Field]:
    """The declared (physical and METADATA) columns, each named once."""
    fields: list[Field] = []
    for c in stmt.columns:
        if any(f.name.lower() == c.name.value.lower() for f in fields):
            raise SqlError(Diagnostic(f"column '{c.name.value}' is declared twice", c.name.span, stmt.source))
        fields.append(Field(c.name.value, parse_type(c.type_text, c.type_span or c.span, stmt.source),
                            nullable=not c.not_null))
    if not fields:
        raise SqlError(Diagnostic("a source needs at least one column", stmt.span, stmt.source))
    return fields


def _bind_computed(stmt: CreateSource, fields: list[Field]) -> list[tuple[str, exp.Expression]]:
    """The computed columns (``name AS expr``), bound over the declared columns; appends their fields to ``fields``."""
    src = stmt.source
    base = Schema(tuple(fields))
    computed = []
    for c in stmt.computed:
        if any(f.name.lower() == c.name.value.lower() for f in fields):
            raise SqlError(Diagnostic(f"column '{c.name.value}' is declared twice", c.name.span, src))
        if isinstance(c.expr, exp.Anonymous) and c.expr.name.upper() == "PROCTIME" and not c.expr.expressions:
            # A processing-time attribute: filled with the time each event arrives.
            fields.append(Field(c.name.value, TIMESTAMP_LTZ, nullable=False, proctime=True))  # as Flink
            computed.append((c.name.value, c.expr))
            continue
        try:
            bound = bind_scalar(c.expr, Scope.of(base, None), src, clause="a computed column")
            fields.append(Field(c.name.value, infer_type(bound, base, src)))
        except SqlError as e:
            if e.diagnostic.span is not None:
                raise
            # A bare expression such as () keeps no position: point at the column it computes.
            raise SqlError(Diagnostic(f"computed column '{c.name.value}': {e.diagnostic.message}", c.name.span,
                                      src, help=e.diagnostic.help)) from None
        computed.append((c.name.value, bound))
    return computed


def _bind_primary_key(stmt: CreateSource, fields: list[Field]) -> list[str]:
    key = []
    for k in stmt.primary_key:
        f = next((f for f in fields if f.name.lower() == k.value.lower()), None)
        if f is None:
            raise SqlError(Diagnostic(f"unknown column '{k.value}' in PRIMARY KEY", k.span, stmt.source,
                                      help=did_you_mean(k.value, [f.name for f in fields])))
        key.append(f.name)
    return key


def _source_kind(stmt: CreateSource, key: list[str]) -> str:
    """``stream`` or ``table``: as in Flink, a table without a key is an append-only stream."""
    if stmt.kind == "stream" and key:
        raise SqlError(Diagnostic("a STREAM is append-only and cannot have a PRIMARY KEY", stmt.span, stmt.source,
                                  help="declare it as a TABLE to read it as an updating relation"))
    return "table" if key else "stream"


def _bind_metadata(stmt: CreateSource, descriptor: ConnectorDescriptor) -> tuple[tuple[str, str], ...]:
    """The (column, key) pairs of the METADATA columns, checked against what the connector can fill."""
    found = []
    for c in stmt.columns:
        if c.metadata is None:
            continue
        keys = dict(descriptor.metadata)
        if not keys:
            raise SqlError(Diagnostic(f"connector '{descriptor.name}' has no metadata to fill column '{c.name.value}'",
                                      c.span, stmt.source, help="METADATA columns are read from what a connector "
                                      "knows of each record, e.g. a Kafka message's partition and offset"))
        key = c.metadata.lower()
        if key not in keys:
            raise SqlError(Diagnostic(f"unknown {descriptor.name} metadata '{c.metadata}'", c.span, stmt.source,
                                      help=did_you_mean(c.metadata, keys) or "one of: " + ", ".join(keys)))
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


def bind_create_sink(stmt: CreateSink, schema: Schema, changelog: str, base_dir: str | None = None) -> SinkDef:
    """Check a CREATE SINK against the result it will receive."""
    options = {k: v for k, v in stmt.options.items()}
    options.setdefault("connector", "memory")
    descriptor = check_options(options, "sink", stmt, schema)
    fmt = descriptor.format(options.get("format") or options.get("value.format"))  # Flink's two names
    _check_nested_format(schema, fmt, "sink", stmt.query.span, stmt.source)
    if changelog == "updating" and (not fmt.changelog if fmt is not None else not descriptor.accepts_changes):
        changes = [f"'{f.name}'" for f in descriptor.formats if f.sink and f.changelog]
        what = f"format '{fmt.name}'" if fmt is not None else f"connector '{descriptor.name}'"
        raise SqlError(Diagnostic(
            f"sink '{stmt.name.value}' uses {what}, which can only hold an append-only result, "
            "but this query's result is updating (rows are retracted and replaced)", stmt.query.span, stmt.source,
            help=(f"use format = {' or '.join(changes)}, or make" if changes else "make")
            + " the query append-only (e.g. a window aggregate that emits when the window closes, or a lookup "
              "join of a stream and a table: JOIN t FOR SYSTEM_TIME AS OF PROCTIME())"))
    return SinkDef(name=stmt.name.value, options=options, query=stmt.query.tree, schema=schema,
                   base_dir=base_dir, ddl=stmt.text)


def bind_create_mv(stmt: CreateMaterializedView, schema: Schema) -> MaterializedViewDef:
    return MaterializedViewDef(name=stmt.name.value, options=dict(stmt.options), query=stmt.query.tree,
                               schema=schema, ddl=stmt.text)
