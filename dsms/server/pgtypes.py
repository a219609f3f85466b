"""Arrow columns as PostgreSQL values: type OIDs, text and binary encodings, bound parameters.

A result column goes out column-wise: one Arrow cast per column gives every
value's text (doubles in shortest round-trip form, so at full precision),
and the per-row work left is joining bytes into DataRow messages. Binary
encodings (asyncpg asks for them) follow PostgreSQL's send functions:
big-endian integers and floats, timestamps as microseconds since
2000-01-01, NUMERIC as base-10000 digits.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BOOL, BYTEA, INT8, INT2, INT4, TEXT, JSON, FLOAT4, FLOAT8 = 16, 17, 20, 21, 23, 25, 114, 700, 701
VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, NUMERIC, UNKNOWN, NAME, OID = \
    1043, 1082, 1083, 1114, 1184, 1186, 1700, 705, 19, 26
TYPE_NAMES = {BOOL: "boolean", BYTEA: "bytea", INT8: "bigint", INT2: "smallint", INT4: "integer", TEXT: "text",
              JSON: "json", FLOAT4: "real", FLOAT8: "double precision", VARCHAR: "character varying",
              DATE: "date", TIME: "time without time zone", TIMESTAMP: "timestamp without time zone",
              TIMESTAMPTZ: "timestamp with time zone", INTERVAL: "interval", NUMERIC: "numeric", NAME: "name",
              OID: "oid"}
TYPE_SIZES = {BOOL: 1, INT8: 8, INT2: 2, INT4: 4, FLOAT4: 4, FLOAT8: 8, DATE: 4, TIME: 8, TIMESTAMP: 8,
              TIMESTAMPTZ: 8, INTERVAL: 16, NAME: 64, OID: 4}
PG_EPOCH_US = 946684800 * 1_000_000  # 2000-01-01 in Unix microseconds
PG_EPOCH_DAYS = 10957


# (test, PostgreSQL type), first match wins: the narrow integer widths before any integer.
_TYPE_TESTS = (
    (pa.types.is_boolean, BOOL),
    (lambda t: pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_uint8(t), INT2),
    (lambda t: pa.types.is_int32(t) or pa.types.is_uint16(t), INT4),
    (pa.types.is_integer, INT8),
    (lambda t: pa.types.is_float16(t) or pa.types.is_float32(t), FLOAT4),
    (pa.types.is_float64, FLOAT8),
    (pa.types.is_decimal, NUMERIC),
    (pa.types.is_date, DATE),
    (pa.types.is_time, TIME),
    (lambda t: pa.types.is_duration(t) or pa.types.is_interval(t), INTERVAL),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), BYTEA),
    (pa.types.is_nested, JSON),
)


def type_oid(t: pa.DataType) -> int:
    """The PostgreSQL type of an Arrow type (nested values go out as JSON text)."""
    if pa.types.is_timestamp(t):
        return TIMESTAMPTZ if t.tz else TIMESTAMP
    return next((oid for test, oid in _TYPE_TESTS if test(t)), TEXT)


def _interval_text(us: int) -> str:
    sign = "-" if us < 0 else ""
    days, rest = divmod(abs(us), 86_400_000_000)
    secs, frac = divmod(rest, 1_000_000)
    clock = f"{sign}{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d}" + (f".{frac:06d}" if frac else "")
    return (f"{sign}{days} day{'s' if days != 1 else ''} " if days else "") + clock


def _durations_us(col: pa.ChunkedArray) -> list:
    return pc.cast(col, pa.duration("us")).cast(pa.int64()).to_pylist()


def _calendar_text(months: int, days: int, us: int) -> str:
    """A month_day_nano interval (DuckDB's INTERVAL) as PostgreSQL prints it: 1 year 2 mons 3 days 04:05:06."""
    years, mons = divmod(abs(months), 12)
    sign = "-" if months < 0 else ""
    parts = [f"{sign}{n} {unit}{'s' if n != 1 else ''}" for n, unit in ((years, "year"), (mons, "mon")) if n]
    if days:
        parts.append(f"{days} day{'s' if abs(days) != 1 else ''}")
    if us or not parts:
        parts.append(_interval_text(us))
    return " ".join(parts)


def _interval_values(col: pa.ChunkedArray, text: bool) -> list:
    """Durations (dsms INTERVAL) and month_day_nano intervals (from DuckDB), text or binary (us, days, months)."""
    if pa.types.is_interval(col.type):
        parts = [None if v is None else (v.months, v.days, v.nanoseconds // 1000) for v in col.to_pylist()]
        if text:
            return [None if v is None else _calendar_text(*v).encode() for v in parts]
        return [None if v is None else struct.pack("!qii", v[2], v[1], v[0]) for v in parts]
    if text:
        return _interval_values(col, text=True)
    return [None if v is None else struct.pack("!qii", v, 0, 0) for v in _durations_us(col)]


def text_column(col: pa.ChunkedArray) -> list:
    """Every value of a column in PostgreSQL's text output format, as bytes (None for NULL)."""
    t = col.type
    oid = type_oid(t)
    if oid == BOOL:
        out = pc.if_else(col, "t", "f")
    elif oid in (FLOAT4, FLOAT8):
        out = pc.cast(col, pa.string())
        out = pc.replace_substring(pc.replace_substring(out, "inf", "Infinity"), "nan", "NaN")
    elif oid in (TIMESTAMP, TIMESTAMPTZ):
        out = pc.cast(col, pa.string())  # PostgreSQL prints no trailing zeros in the fraction
        out = pc.replace_substring_regex(out, r"(\.\d*[1-9])0+($|Z|[+-]\d{4})", r"\1\2")
        out = pc.replace_substring_regex(out, r"\.0+($|Z|[+-]\d{4})", r"\1")
        if oid == TIMESTAMPTZ:  # in the session zone: +08, -03:30 (as PostgreSQL prints them)
            out = pc.replace_substring_regex(out, "Z$", "+00")
            out = pc.replace_substring_regex(out, r"([+-]\d\d)00$", r"\1")
            out = pc.replace_substring_regex(out, r"([+-]\d\d)(\d\d)$", r"\1:\2")
    elif oid == INTERVAL:
        return _interval_values(col, text=True)
    elif oid == BYTEA:
        return [None if v is None else b"\\x" + v.hex().encode() for v in col.to_pylist()]
    elif oid == JSON:
        return [None if v is None else json.dumps(v, default=str).encode() for v in col.to_pylist()]
    else:
        out = pc.cast(col, pa.string())
    return pc.cast(out, pa.binary()).to_pylist()


def _fixed(col: pa.ChunkedArray, values: np.ndarray, width: int) -> list:
    raw = values.tobytes()
    valid = pc.is_valid(col).to_numpy(zero_copy_only=False)
    return [raw[i * width:(i + 1) * width] if ok else None for i, ok in enumerate(valid)]


def binary_column(col: pa.ChunkedArray) -> list:
    """Every value of a column in PostgreSQL's binary format (asyncpg's choice), as bytes."""
    oid = type_oid(col.type)
    if oid == BOOL:
        return [None if v is None else (b"\x01" if v else b"\x00") for v in col.to_pylist()]
    if oid in (INT2, INT4, INT8, FLOAT4, FLOAT8):
        dtype = {INT2: ">i2", INT4: ">i4", INT8: ">i8", FLOAT4: ">f4", FLOAT8: ">f8"}[oid]
        filled = pc.fill_null(col, 0).to_numpy() if col.null_count else col.to_numpy()
        return _fixed(col, filled.astype(dtype), int(dtype[-1]))
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        us = pc.cast(pc.cast(col, pa.timestamp("us", col.type.tz)), pa.int64())
        return _fixed(col, (pc.fill_null(us, 0).to_numpy() - PG_EPOCH_US).astype(">i8"), 8)
    if oid == DATE:
        days = pc.cast(pc.cast(col, pa.date32()), pa.int32())
        return _fixed(col, (pc.fill_null(days, 0).to_numpy() - PG_EPOCH_DAYS).astype(">i4"), 4)
    if oid == TIME:
        us = pc.cast(pc.cast(col, pa.time64("us")), pa.int64())
        return _fixed(col, pc.fill_null(us, 0).to_numpy().astype(">i8"), 8)
    if oid == INTERVAL:
        return _interval_values(col, text=False)
    if oid == NUMERIC:
        return [None if v is None else numeric_binary(v) for v in col.to_pylist()]
    if oid == BYTEA:
        return col.to_pylist()
    return text_column(col)


def numeric_binary(value: decimal.Decimal) -> bytes:
    """PostgreSQL's numeric_send: ndigits, weight, sign, dscale, then base-10000 digits."""
    sign, digits, exponent = value.as_tuple()
    dscale = max(0, -exponent)
    text = "".join(map(str, digits))
    if exponent > 0:
        text, exponent = text + "0" * exponent, 0
    int_part = text[:len(text) + exponent] if len(text) + exponent > 0 else ""
    frac_part = text[len(text) + exponent:] if exponent < 0 else ""
    frac_part = ("0" * (-exponent - len(frac_part))) + frac_part if -exponent > len(frac_part) else frac_part
    int_part = int_part.lstrip("0")
    int_part = "0" * (-len(int_part) % 4) + int_part
    frac_part = frac_part + "0" * (-len(frac_part) % 4)
    groups = [int(int_part[i:i + 4]) for i in range(0, len(int_part), 4)] + \
        [int(frac_part[i:i + 4]) for i in range(0, len(frac_part), 4)]
    weight = len(int_part) // 4 - 1
    while groups and groups[0] == 0:  # leading zero groups move the weight
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        weight = 0
    return struct.pack("!hhHH", len(groups), weight, 0x4000 if sign else 0, dscale) + \
        b"".join(struct.pack("!H", g) for g in groups)


def _numeric_from_binary(data: bytes) -> decimal.Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHH", data)
    if sign == 0xC000:
        return decimal.Decimal("NaN")
    digits = struct.unpack_from(f"!{ndigits}H", data, 8)
    value = sum(decimal.Decimal(d) * decimal.Decimal(10000) ** (weight - i) for i, d in enumerate(digits))
    value = value.quantize(decimal.Decimal(1).scaleb(-dscale)) if ndigits else decimal.Decimal(0)
    return -value if sign == 0x4000 else value


# -- bound parameters ---------------------------------------------------------------------------

_NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
NUMERIC_OIDS = (INT2, INT4, INT8, FLOAT4, FLOAT8, NUMERIC, OID)


class ParameterError(ValueError):
    """A bound parameter that cannot be read as its declared type."""


def decode_parameter(data: bytes | None, oid: int, binary: bool):
    """A Bind parameter as a Python value (text-format values stay strings, read by their type later)."""
    if data is None:
        return None
    if not binary:
        return data.decode()
    if oid in (INT2, INT4, INT8, OID):
        return int.from_bytes(data, "big", signed=oid != OID)
    if oid == FLOAT4:
        return struct.unpack("!f", data)[0]
    if oid == FLOAT8:
        return struct.unpack("!d", data)[0]
    if oid == BOOL:
        return data != b"\x00"
    if oid == NUMERIC:
        return _numeric_from_binary(data)
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        us = struct.unpack("!q", data)[0] + PG_EPOCH_US
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)
    if oid == DATE:
        return dt.date(2000, 1, 1) + dt.timedelta(days=struct.unpack("!i", data)[0])
    if oid in (TEXT, VARCHAR, UNKNOWN, NAME, JSON, 0):
        return data.decode()
    raise ParameterError(f"binary parameters of type {TYPE_NAMES.get(oid, oid)} are not supported; send it as text")


def sql_literal(value, oid: int) -> str:
    """A parameter as a SQL literal, so that no value can change the statement around it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
        return str(value) if value == value else "CAST('NaN' AS DOUBLE)"
    if isinstance(value, float):
        return repr(value) if np.isfinite(value) else f"CAST('{value}' AS DOUBLE)"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    text = str(value)
    if oid in NUMERIC_OIDS:
        if not _NUMBER.match(text):
            raise ParameterError(f"'{text}' is not a valid {TYPE_NAMES[oid]}")
        return text.strip()
    if oid == BOOL:
        return "TRUE" if text.strip().lower() in ("t", "true", "1", "yes", "on") else "FALSE"
    if oid in (TIMESTAMP, TIMESTAMPTZ):
        return "TIMESTAMP " + quote(text)
    if oid == DATE:
        return "DATE " + quote(text)
    if "\0" in text:
        raise ParameterError("a text parameter cannot hold a NUL character")
    return quote(text)


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
