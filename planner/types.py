"""SQL types, Arrow types, and the schemas of plan nodes.

The planner's types are Arrow types, because that is what flows at run
time. Every TIMESTAMP is carried as ``timestamp[us]`` without a time zone
(DuckDB's and Spark's native precision); the declared precision only
affects how values are printed (milliseconds, as Flink's TIMESTAMP(3)).

A :class:`Field` also says whether the column is a time attribute: an
event-time attribute (``rowtime``: the source's watermarked column, a
window's ``window_time``) or a processing-time attribute (``proctime``).
Windows, interval joins and OVER aggregates require one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import pyarrow as pa
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from ..grammar import Diagnostic, Span, SqlError
from ..grammar.dialect import Dsms

TIMESTAMP = pa.timestamp("us")
# TIMESTAMP_LTZ: an instant, carried as UTC; shown, and cast to or from
# TIMESTAMP and STRING, in the session time zone ('table.local-time-zone').
TIMESTAMP_LTZ = pa.timestamp("us", tz="UTC")

_FROM_SQL = {
    exp.DataType.Type.BOOLEAN: pa.bool_(),
    exp.DataType.Type.TINYINT: pa.int8(),
    exp.DataType.Type.SMALLINT: pa.int16(),
    exp.DataType.Type.INT: pa.int32(),
    exp.DataType.Type.BIGINT: pa.int64(),
    exp.DataType.Type.INT128: pa.int64(),
    exp.DataType.Type.FLOAT: pa.float32(),
    exp.DataType.Type.DOUBLE: pa.float64(),
    exp.DataType.Type.VARCHAR: pa.string(),
    exp.DataType.Type.CHAR: pa.string(),
    exp.DataType.Type.TEXT: pa.string(),
    exp.DataType.Type.DATE: pa.date32(),
    exp.DataType.Type.TIMESTAMP: TIMESTAMP,
    exp.DataType.Type.TIMESTAMP_MS: TIMESTAMP,
    exp.DataType.Type.TIMESTAMP_S: TIMESTAMP,
    exp.DataType.Type.TIMESTAMPNTZ: TIMESTAMP,
    exp.DataType.Type.DATETIME: TIMESTAMP,
    exp.DataType.Type.TIMESTAMPLTZ: TIMESTAMP_LTZ,
    exp.DataType.Type.TIMESTAMPTZ: TIMESTAMP_LTZ,  # DuckDB's name for an instant, in inferred types
    exp.DataType.Type.VARBINARY: pa.binary(),
    exp.DataType.Type.BINARY: pa.binary(),
    exp.DataType.Type.BLOB: pa.binary(),
}

_SQL_NAMES = {
    pa.bool_(): "BOOLEAN",
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "VARCHAR",
    pa.date32(): "DATE",
    TIMESTAMP: "TIMESTAMP(3)",
    TIMESTAMP_LTZ: "TIMESTAMP_LTZ(3)",
    pa.binary(): "VARBINARY",
    pa.null(): "NULL",
}


class InvalidType(ValueError):
    """A type spelled right but with parameters no column can have (``DECIMAL(0)``)."""


# Type names of more than one word that mean one type; any other extra word
# (``INT ARRAY``, ``INT FOO``) would be dropped by sqlglot and is refused.
_MULTI_WORD = {"DOUBLE PRECISION", "CHARACTER VARYING", "CHAR VARYING"}
_NOT_YET = {"TIMESTAMPTZ"}
_NESTED = ("ARRAY", "MAP", "MULTISET", "ROW")
_SUPPORTED_HELP = ("use BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p, s), VARCHAR, DATE, "
                   "TIMESTAMP(3), TIMESTAMP_LTZ(3), ARRAY<T>, MAP<K, V>, MULTISET<T> or ROW<name T, ...>")


def parse_type(text: str, span: Span | None = None, source: str | None = None) -> pa.DataType:
    """Parse a SQL type name (``BIGINT``, ``TIMESTAMP(3)``, ``DECIMAL(10, 2)``)."""
    alias = {"BYTES": "VARBINARY", "STRING": "VARCHAR"}.get(text.strip().upper(), text)
    words = text.upper().replace("(", " (").replace("<", " < ").replace(",", " , ").split()
    if len(words) > 1 and words[-1] in ("ARRAY", "MULTISET") and words[0] not in _NESTED:
        # Flink's suffix spelling: ``INT ARRAY`` is ``ARRAY<INT>``, ``STRING MULTISET`` is ``MULTISET<STRING>``.
        base = text.strip()[: -len(words[-1])].strip()
        return _parse_nested(f"{words[-1]}<{base}>", span, source)
    if words and words[0] in _NESTED:  # each element type is checked on its own
        return _parse_nested(text, span, source)
    if _local_time_zone(words, text, span, source):  # TIMESTAMP(p) WITH LOCAL TIME ZONE is TIMESTAMP_LTZ(p)
        words = ["TIMESTAMP_LTZ"] + words[1:-4]
        alias = " ".join(words).replace(" (", "(")
    name = " ".join(w for w in words if not w.startswith("(") and w[:1].isalpha() and w not in ("WITHOUT", "TIME", "ZONE"))
    try:
        dtype = exp.DataType.build(alias) if " " not in name or name in _MULTI_WORD else None
    except Exception:
        dtype = None
    try:
        result = from_sql_type(dtype) if dtype is not None else None
    except InvalidType as e:
        raise SqlError(Diagnostic(str(e), span, source, help="DECIMAL(p, s) needs 1 <= p <= 38 and 0 <= s <= p")) from None
    if result is None:
        raise SqlError(Diagnostic(f"unknown or unsupported type '{text}'", span, source, help=_SUPPORTED_HELP))
    return result


def _local_time_zone(words: list[str], text: str, span: Span | None, source: str | None) -> bool:
    """Whether the type ends WITH LOCAL TIME ZONE; any other time zone is refused."""
    local = words[-3:] == ["LOCAL", "TIME", "ZONE"] and words[-4:-3] == ["WITH"]
    if set(words) & _NOT_YET or ("ZONE" in words and "WITHOUT" not in words and not local):
        raise SqlError(Diagnostic(f"type '{text}' is not supported yet", span, source,
                                  help="TIMESTAMP WITH TIME ZONE is not supported (as in Flink, an instant is "
                                       "TIMESTAMP_LTZ); " + _SUPPORTED_HELP))
    return local


def _parse_nested(text: str, span: Span | None, source: str | None) -> pa.DataType:
    """``ARRAY<T>``, ``MAP<K, V>``, ``MULTISET<T>``, ``ROW<a T, ...>`` / ``ROW(a T, ...)``, nested to any depth."""
    dialect = Dsms()
    try:  # (DataType.build ignores what it cannot parse: ARRAY<INT FOO> would be ARRAY<INT>)
        dtype = dialect.parser(error_level=ErrorLevel.RAISE).parse_into(exp.DataType, dialect.tokenize(text), text)[0]
    except Exception:
        dtype = None
    try:
        result = from_sql_type(dtype) if dtype is not None else None
    except InvalidType as e:
        raise SqlError(Diagnostic(str(e), span, source, help="DECIMAL(p, s) needs 1 <= p <= 38 and 0 <= s <= p"
                                  if "DECIMAL" in str(e) else None)) from None
    if result is None:
        raise SqlError(Diagnostic(f"unknown or unsupported type '{text}'", span, source, help=_SUPPORTED_HELP))
    return result


def from_sql_type(dtype: exp.DataType) -> pa.DataType | None:
    """The Arrow type of a sqlglot type, or None if it is not supported."""
    t = dtype.this
    if t in (exp.DataType.Type.ARRAY, exp.DataType.Type.LIST, exp.DataType.Type.MAP, exp.DataType.Type.STRUCT):
        return _nested_from_sql(dtype)
    if t == exp.DataType.Type.DECIMAL:
        try:
            params = [int(p.name) for p in dtype.expressions] or [38, 18]
        except ValueError:
            raise InvalidType(f"invalid type '{dtype.sql()}'") from None
        precision, scale = (params + [0])[:2]
        if not 1 <= precision <= 38 or not 0 <= scale <= precision:
            raise InvalidType(f"invalid type DECIMAL({precision}, {scale}): the precision must be 1 to 38 "
                              "and the scale 0 to the precision")
        return pa.decimal128(precision, scale)
    if t == exp.DataType.Type.NULL:
        return pa.null()
    return _FROM_SQL.get(t)


def _nested_from_sql(dtype: exp.DataType) -> pa.DataType | None:
    """ARRAY, MAP and STRUCT (ROW) types, element by element; None if any part is not supported."""
    t = dtype.this
    if t == exp.DataType.Type.MAP:
        if len(dtype.expressions) != 2:
            return None
        key, value = (from_sql_type(d) for d in dtype.expressions)
        return pa.map_(key, value) if key is not None and value is not None else None
    if t != exp.DataType.Type.STRUCT:
        element = from_sql_type(dtype.expressions[0]) if len(dtype.expressions) == 1 else None
        return pa.list_(element) if element is not None else None
    fields = []
    for f in dtype.expressions:
        kind = f.args.get("kind") if isinstance(f, exp.ColumnDef) else None
        ftype = from_sql_type(kind) if kind is not None else None
        if ftype is None:
            return None
        fields.append(pa.field(f.name, ftype))
    names = [f.name.lower() for f in fields]
    if not fields or len(set(names)) != len(names):
        raise InvalidType(f"invalid type '{sql_name(pa.struct(fields))}': a ROW needs fields with distinct names")
    return pa.struct(fields)


def to_sql_type(dtype: pa.DataType) -> exp.DataType:
    """The sqlglot type of an Arrow type (for casts and type inference): a tree of the caller's own."""
    return _sql_type(dtype).copy()


@functools.lru_cache(maxsize=1024)
def _sql_type(dtype: pa.DataType) -> exp.DataType:
    # Built once per type: DataType.build parses its text, which a VALUES list would do for every cell.
    if pa.types.is_decimal(dtype):
        return exp.DataType.build(f"DECIMAL({dtype.precision}, {dtype.scale})")
    if pa.types.is_timestamp(dtype):
        return exp.DataType.build("TIMESTAMPTZ" if dtype.tz else "TIMESTAMP")
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[to_sql_type(dtype.value_type)], nested=True)
    if pa.types.is_map(dtype):
        return exp.DataType(this=exp.DataType.Type.MAP, nested=True,
                            expressions=[to_sql_type(dtype.key_type), to_sql_type(dtype.item_type)])
    if pa.types.is_struct(dtype):
        return exp.DataType(this=exp.DataType.Type.STRUCT, nested=True, expressions=[
            exp.ColumnDef(this=exp.to_identifier(f.name, quoted=True), kind=to_sql_type(f.type)) for f in dtype])
    name = _SQL_NAMES.get(dtype)
    if name is None or dtype == pa.null():
        return exp.DataType.build("UNKNOWN") if name is None else exp.DataType.build("NULL")
    return exp.DataType.build(name)


def sql_name(dtype: pa.DataType) -> str:
    """How a type is shown to users (DESCRIBE, EXPLAIN)."""
    if pa.types.is_decimal(dtype):
        return f"DECIMAL({dtype.precision}, {dtype.scale})"
    if pa.types.is_timestamp(dtype):
        return "TIMESTAMP_LTZ(3)" if dtype.tz else "TIMESTAMP(3)"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return f"ARRAY<{sql_name(dtype.value_type)}>"
    if pa.types.is_map(dtype):
        return f"MAP<{sql_name(dtype.key_type)}, {sql_name(dtype.item_type)}>"
    if pa.types.is_struct(dtype):
        return "ROW<" + ", ".join(f"{_field_name(f.name)} {sql_name(f.type)}" for f in dtype) + ">"
    return _SQL_NAMES.get(dtype, str(dtype).upper())


def _field_name(name: str) -> str:
    return name if name.isidentifier() else "`" + name.replace("`", "``") + "`"


def is_nested(dtype: pa.DataType) -> bool:
    """ROW, ARRAY, MAP or MULTISET."""
    return pa.types.is_nested(dtype)


def sum_type(dtype: pa.DataType) -> pa.DataType:
    """The type of SUM over ``dtype``: BIGINT for integers, DECIMAL(38, s), else DOUBLE."""
    if pa.types.is_integer(dtype):
        return pa.int64()
    if pa.types.is_decimal(dtype):
        return pa.decimal128(38, dtype.scale)
    return pa.float64()


def is_numeric(dtype: pa.DataType) -> bool:
    return pa.types.is_integer(dtype) or pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


@dataclass(frozen=True)
class Field:
    """A column of a plan node's output."""

    name: str
    type: pa.DataType
    nullable: bool = True
    rowtime: bool = False  # an event-time attribute that carries the watermark
    proctime: bool = False  # a processing-time attribute

    def plain(self) -> "Field":
        """The same column without time-attribute status (after computing on it)."""
        return replace(self, rowtime=False, proctime=False)

    def renamed(self, name: str) -> "Field":
        return replace(self, name=name)

    def describe_type(self) -> str:
        base = sql_name(self.type)
        if self.rowtime:
            return f"{base} *ROWTIME*"
        if self.proctime:
            return f"{base} *PROCTIME*"
        return base


@dataclass(frozen=True)
class Schema:
    """The ordered, uniquely named columns of a plan node's output."""

    fields: tuple[Field, ...]

    def __post_init__(self):
        seen: set[str] = set()
        for f in self.fields:
            key = f.name.lower()
            if key in seen:
                raise ValueError(f"duplicate column name {f.name!r} in schema")
            seen.add(key)

    def __iter__(self):
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def find(self, name: str) -> Field | None:
        key = name.lower()
        return next((f for f in self.fields if f.name.lower() == key), None)

    def index(self, name: str) -> int:
        key = name.lower()
        return next(i for i, f in enumerate(self.fields) if f.name.lower() == key)

    @property
    def rowtime(self) -> Field | None:
        """The first event-time attribute, if any."""
        return next((f for f in self.fields if f.rowtime), None)

    def to_arrow(self) -> pa.Schema:
        return pa.schema([pa.field(f.name, f.type, nullable=f.nullable) for f in self.fields])

    def to_type_dict(self) -> dict[str, str]:
        """Column -> SQL type text, for sqlglot's type annotation."""
        return {f.name: to_sql_type(f.type).sql() for f in self.fields}


def unique_name(name: str, taken) -> str:
    """``name``, or ``name0``, ``name1`` ... if it is taken (case-insensitively)."""
    lowered = {t.lower() for t in taken}
    if name.lower() not in lowered:
        return name
    i = 0
    while f"{name}{i}".lower() in lowered:
        i += 1
    return f"{name}{i}"
