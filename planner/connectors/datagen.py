"""The datagen source (Flink's ``datagen``): random or sequential rows, bounded or at a rate.

Options as Flink's: ``rows-per-second``, ``number-of-rows`` (bounded when
set), ``fields.<f>.kind`` = ``random | sequence``, ``fields.<f>.min`` /
``max`` (random numbers), ``fields.<f>.length`` (random strings),
``fields.<f>.start`` / ``end`` (sequences: the source ends after ``end``),
``fields.<f>.max-past`` (random timestamps: up to this long before now).
dsms adds ``seed`` (the same seed gives the same rows) and sequences of
timestamps (``start`` a timestamp, ``fields.<f>.step`` a duration), so a
generated stream can carry an event time for a WATERMARK.

:func:`plan_fields` turns the options into one :class:`FieldGen` per
column; the planner calls it to check a DDL, the runtime half
(``runtime/connectors/datagen.py``) to generate.

Example:
    >>> import pyarrow as pa
    >>> gens = plan_fields({"fields.id.kind": "sequence", "fields.id.start": "1", "fields.id.end": "5"},
    ...                    pa.schema([("id", pa.int64()), ("name", pa.string())]))
    >>> gens["id"].kind, gens["id"].start, gens["id"].end, gens["name"].length
    ('sequence', 1, 5, 100)
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from ...grammar.diagnostics import did_you_mean
from ..timeutil import parse_duration
from ..types import sql_name
from .descriptor import ConnectorDescriptor, Option, OptionError

KINDS = ("random", "sequence")
DEFAULT_ROWS_PER_SECOND = 10000
DEFAULT_LENGTH = 100
FIELD_KEYS = ("kind", "min", "max", "length", "start", "end", "step", "max-past")


@dataclass(frozen=True)
class FieldGen:
    """How one column is generated. Numbers and timestamps (as epoch microseconds) are Python ints or floats."""

    name: str
    type: pa.DataType
    kind: str = "random"
    min: float | int | None = None
    max: float | int | None = None
    length: int = DEFAULT_LENGTH
    start: int | None = None
    end: int | None = None  # inclusive; None: a timestamp sequence without end
    step: int = 1
    max_past_us: int = 0

    @property
    def count(self) -> int | None:
        """How many values a sequence has (None: no end)."""
        if self.kind != "sequence" or self.end is None:
            return None
        return (self.end - self.start) // self.step + 1


def _bounded(options) -> bool:
    if "number-of-rows" in options:
        return True
    return any(k.startswith("fields.") and k.endswith(".kind") and v.lower() == "sequence"
               and options.get(k[: -len("kind")] + "end") is not None for k, v in options.items())


def _int_range(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    return (0, 2**bits - 1) if pa.types.is_unsigned_integer(t) else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _timestamp_us(text: str, key: str) -> int:
    try:
        value = dt.datetime.fromisoformat(text.strip().replace("Z", ""))
    except ValueError:
        raise OptionError(f"option '{key}' needs a timestamp such as '2024-01-01 10:00:00', not '{text}'") from None
    return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def _number(text: str, key: str, t: pa.DataType):
    try:
        return int(text) if pa.types.is_integer(t) else float(text)
    except ValueError:
        what = "a whole number" if pa.types.is_integer(t) else "a number"
        raise OptionError(f"option '{key}' needs {what}, not '{text}'") from None


def plan_fields(options: dict, schema: pa.Schema) -> dict[str, FieldGen]:
    """One generator per column of ``schema`` from the ``fields.<f>.*`` options.

    Raises:
        OptionError: an option names no column, does not fit its column's type, or a sequence lacks an end.
    """
    per_field: dict[str, dict[str, str]] = {}
    names = {n.lower(): n for n in schema.names}
    for key, value in options.items():
        if not key.startswith("fields."):
            continue
        column, _, what = key[len("fields."):].rpartition(".")
        if column.lower() not in names:
            raise OptionError(f"option '{key}' names no column of this source", did_you_mean(column, schema.names))
        if what not in FIELD_KEYS:
            raise OptionError(f"unknown option '{key}'", did_you_mean(what, FIELD_KEYS))
        per_field.setdefault(names[column.lower()], {})[what] = value
    return {f.name: _plan_field(f, per_field.get(f.name, {})) for f in schema}


# The fields.<f>.* options each kind of column takes, by (family, kind).
APPLIES = {
    ("timestamp", "random"): {"kind", "max-past"},
    ("timestamp", "sequence"): {"kind", "start", "end", "step"},
    ("integer", "sequence"): {"kind", "start", "end"},
    ("string", "sequence"): {"kind", "start", "end"},
    ("string", "random"): {"kind", "length"},
    ("boolean", "random"): {"kind"},
    ("integer", "random"): {"kind", "min", "max"},
    ("number", "random"): {"kind", "min", "max"},
}


def _family(t: pa.DataType) -> str | None:
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return "integer"
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "number"
    return None


def _plan_field(f: pa.Field, opts: dict[str, str]) -> FieldGen:
    t, key = f.type, f"fields.{f.name}."
    family = _family(t)
    if family is None:
        raise OptionError(f"datagen cannot generate column '{f.name}' of type {sql_name(t)}",
                          "it generates numbers, BOOLEAN, VARCHAR and TIMESTAMP columns")
    kind = opts.get("kind", "random").lower()
    if kind not in KINDS:
        raise OptionError(f"invalid value '{opts['kind']}' for option '{key}kind' (expected random or sequence)")
    allowed = APPLIES.get((family, kind))
    if allowed is None:
        raise OptionError(f"a sequence of {sql_name(t)} is not generated",
                          "sequences are of integers, strings and timestamps")
    extra = sorted(set(opts) - allowed)
    if extra:
        raise OptionError(f"option '{key}{extra[0]}' does not apply to a {kind} {sql_name(t)} column",
                          "it takes " + ", ".join(f"'{key}{a}'" for a in sorted(allowed)))
    if family == "timestamp":
        return _timestamp_field(f, kind, opts, key)
    if kind == "sequence":
        return _sequence_field(f, opts, key)
    return _random_field(f, family, opts, key)


def _timestamp_field(f: pa.Field, kind: str, opts: dict[str, str], key: str) -> FieldGen:
    if kind == "random":
        return FieldGen(f.name, f.type, kind, max_past_us=parse_duration(opts.get("max-past", "0 s")))
    if "start" not in opts:
        raise OptionError(f"a timestamp sequence needs '{key}start'", f"add '{key}start' = '2024-01-01 00:00:00'")
    start = _timestamp_us(opts["start"], key + "start")
    end = _timestamp_us(opts["end"], key + "end") if "end" in opts else None
    step = parse_duration(opts.get("step", "1 s"))
    if step <= 0:
        raise OptionError(f"option '{key}step' must be a positive duration")
    if end is not None and end < start:
        raise OptionError(f"the sequence of '{f.name}' ends before it starts")
    return FieldGen(f.name, f.type, kind, start=start, end=end, step=step)


def _sequence_field(f: pa.Field, opts: dict[str, str], key: str) -> FieldGen:
    missing = [w for w in ("start", "end") if w not in opts]
    if missing:
        raise OptionError(f"the sequence of '{f.name}' needs '{key}{missing[0]}'",
                          f"add '{key}start' = '1', '{key}end' = '1000'")
    start, end = (_number(opts[w], key + w, pa.int64()) for w in ("start", "end"))
    if end < start:
        raise OptionError(f"the sequence of '{f.name}' ends before it starts")
    if pa.types.is_integer(f.type):
        lo, hi = _int_range(f.type)
        if start < lo or end > hi:
            raise OptionError(f"the sequence of '{f.name}' does not fit {sql_name(f.type)}")
    return FieldGen(f.name, f.type, "sequence", start=start, end=end)


def _random_field(f: pa.Field, family: str, opts: dict[str, str], key: str) -> FieldGen:
    t = f.type
    if family in ("string", "boolean"):
        length = int(opts.get("length", DEFAULT_LENGTH))
        if length < 0:
            raise OptionError(f"option '{key}length' cannot be negative")
        return FieldGen(f.name, t, "random", length=length)
    if pa.types.is_integer(t):
        lo, hi = _int_range(t)
    elif pa.types.is_decimal(t):
        hi = 10 ** (t.precision - t.scale) - 10 ** -t.scale
        lo = -hi
    else:
        lo, hi = -1.7976931348623157e308 / 2, 1.7976931348623157e308 / 2  # a span that does not overflow
    low = _number(opts["min"], key + "min", t) if "min" in opts else lo
    high = _number(opts["max"], key + "max", t) if "max" in opts else hi
    if pa.types.is_integer(t) and not (lo <= low <= hi and lo <= high <= hi):
        raise OptionError(f"the range of '{f.name}' does not fit {sql_name(t)}")
    if high < low:
        raise OptionError(f"option '{key}min' is larger than '{key}max'")
    return FieldGen(f.name, t, "random", min=low, max=high)


def _check(options: dict, schema, role: str) -> None:
    plan_fields(options, pa.schema([pa.field(f.name, f.type) for f in schema]))
    for key in ("rows-per-second", "number-of-rows"):
        if key in options and int(options[key]) < (1 if key == "rows-per-second" else 0):
            raise OptionError(f"option '{key}' must be {'positive' if key == 'rows-per-second' else 'at least 0'}")


DESCRIPTOR = ConnectorDescriptor(
    name="datagen",
    help="generated rows: random or sequences, at a rate; bounded with number-of-rows",
    module="dsms.runtime.connectors.datagen",
    source=True,
    options=(
        Option("rows-per-second", "int", str(DEFAULT_ROWS_PER_SECOND), help="rows generated per second"),
        Option("number-of-rows", "int", help="how many rows in all (the source is bounded when set)"),
        Option("seed", "int", help="random values from this seed: the same seed, the same rows"),
        Option("fields.*.kind", "enum", "random", values=KINDS, help="random values, or a sequence start..end"),
        Option("fields.*.min", help="the smallest random number"),
        Option("fields.*.max", help="the largest random number"),
        Option("fields.*.length", "int", str(DEFAULT_LENGTH), help="the length of random strings"),
        Option("fields.*.start", help="the first value of a sequence (a number; a timestamp for TIMESTAMP)"),
        Option("fields.*.end", help="the last value of a sequence (after it the source ends)"),
        Option("fields.*.step", "duration", "1 s", help="the step of a timestamp sequence"),
        Option("fields.*.max-past", "duration", "0 s", help="a random timestamp is up to this long before now"),
    ),
    bounded=_bounded, bounded_note="when number-of-rows is set or a sequence has an end",
    check=_check,
)
