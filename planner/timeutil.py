"""Durations: SQL intervals and option strings, as integer microseconds.

Event time, watermarks and window bounds are all integer microseconds since
the epoch at run time, so durations are too.

Example:
    >>> parse_duration("5 s"), parse_duration("1 min"), parse_duration("250ms")
    (5000000, 60000000, 250000)
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..grammar import Diagnostic, Span, SqlError

MICROS = {
    "MICROSECOND": 1,
    "MILLISECOND": 1_000,
    "SECOND": 1_000_000,
    "MINUTE": 60_000_000,
    "HOUR": 3_600_000_000,
    "DAY": 86_400_000_000,
    "WEEK": 7 * 86_400_000_000,
}

_ALIASES = {
    "us": "MICROSECOND", "micro": "MICROSECOND", "micros": "MICROSECOND",
    "ms": "MILLISECOND", "milli": "MILLISECOND", "millis": "MILLISECOND",
    "s": "SECOND", "sec": "SECOND", "secs": "SECOND",
    "m": "MINUTE", "min": "MINUTE", "mins": "MINUTE",
    "h": "HOUR", "hr": "HOUR", "hrs": "HOUR",
    "d": "DAY",
    "w": "WEEK",
}


def unit_micros(unit: str) -> int | None:
    u = unit.strip()
    key = _ALIASES.get(u.lower()) or u.upper().rstrip("S")
    return MICROS.get(key)


def interval_micros(node: exp.Expression, source: str | None = None) -> int:
    """The length of ``INTERVAL 'n' UNIT`` in microseconds.

    Raises a SqlError pointing at the interval when it is not a fixed-length
    interval (months and years vary in length, so windows cannot use them).
    """
    if isinstance(node, exp.Paren):
        return interval_micros(node.this, source)
    if isinstance(node, exp.Interval):
        unit = node.args.get("unit")
        unit_name = unit.name if unit is not None else "SECOND"
        value = node.this.name if node.this is not None else ""
        factor = unit_micros(unit_name)
        if factor is None:
            raise _interval_error(node, source, f"unsupported interval unit '{unit_name}'")
        try:
            amount = float(value)
        except ValueError:
            raise _interval_error(node, source, f"invalid interval value '{value}'") from None
        return int(round(amount * factor))
    raise _interval_error(node, source, "expected an interval such as INTERVAL '10' SECOND")


def _interval_error(node: exp.Expression, source: str | None, message: str) -> SqlError:
    return SqlError(Diagnostic(message, node_span(node), source,
                               help="use a fixed-length unit: MILLISECOND, SECOND, MINUTE, HOUR or DAY"))


def node_span(node: exp.Expression) -> Span | None:
    """The span of a sqlglot node in its script, from the token offsets it keeps."""
    starts, ends = [], []
    for n in node.walk():
        meta = getattr(n, "_meta", None)
        if meta and "start" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"] + 1)
    if not starts:
        return None
    return Span(min(starts), max(ends))


_DURATION = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_duration(text: str) -> int:
    """Parse an option duration such as ``'5 s'``, ``'500 ms'``, ``'1 min'`` (default unit: ms)."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"invalid duration '{text}': expected e.g. '5 s', '500 ms', '1 min'")
    amount, unit = float(m.group(1)), m.group(2) or "ms"
    factor = unit_micros(unit)
    if factor is None:
        raise ValueError(f"invalid duration unit '{unit}' in '{text}'")
    return int(round(amount * factor))


def format_duration(micros: int) -> str:
    """A short human form: ``5s``, ``1min``, ``250ms``."""
    for name, factor in (("d", MICROS["DAY"]), ("h", MICROS["HOUR"]), ("min", MICROS["MINUTE"]),
                         ("s", MICROS["SECOND"]), ("ms", MICROS["MILLISECOND"])):
        if micros and micros % factor == 0:
            return f"{micros // factor}{name}"
    return f"{micros}us"


def state_ttl(value: str | None) -> int | None:
    """``SET 'state.ttl'`` in microseconds; None when it is unset or zero (no time-to-live, as Flink's '0 ms').

    >>> state_ttl("1 h"), state_ttl("0 ms"), state_ttl("")
    (3600000000, None, None)
    """
    if not value:
        return None
    micros = parse_duration(value)
    return micros if micros > 0 else None
