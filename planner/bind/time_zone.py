"""The session time zone ('table.local-time-zone') and what depends on it.

A TIMESTAMP_LTZ is an instant (carried as UTC); the session zone decides
how it is shown and cast to or from TIMESTAMP and STRING, and where the
windows over a TIMESTAMP_LTZ rowtime start (Flink aligns them to local
midnight, so a 1-day TUMBLE in 'Asia/Shanghai' runs 16:00 to 16:00 UTC).
"""

from __future__ import annotations

import zoneinfo
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace
from datetime import datetime, timezone
from functools import lru_cache

from sqlglot import exp

from ...grammar.diagnostics import did_you_mean
from ..windows import WindowSpec

ZONE_SETTING = "table.local-time-zone"
DEFAULT_ZONE = "UTC"
_US = 1_000_000


@lru_cache(maxsize=1)
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() | {"UTC"})


def check_zone(name: str) -> str:
    """``name`` if it is an IANA time zone; else a ValueError that suggests one.

    Example:
        >>> check_zone("Asia/Shanghai")
        'Asia/Shanghai'
        >>> check_zone("Europe/Berlinn")
        Traceback (most recent call last):
        ...
        ValueError: unknown time zone 'Europe/Berlinn'; did you mean 'Europe/Berlin' or 'Europe/Dublin' or 'Europe/Tallinn'?
    """
    if name in _zone_names():
        return name
    hint = did_you_mean(name, _zone_names())
    raise ValueError(f"unknown time zone '{name}'" + (f"; {hint[0].lower()}{hint[1:]}" if hint else
                                                      "; use a zone name such as 'UTC' or 'Asia/Shanghai'"))


def is_zone(name: str) -> bool:
    """Whether ``name`` is an IANA time zone (``Asia/Shanghai``, ``UTC``)."""
    return name in _zone_names()


def session_zone(settings: dict[str, str]) -> str:
    return settings.get(ZONE_SETTING, DEFAULT_ZONE)


# The session zone of the query being bound (set by ``bind_query``), so that
# ``bind_scalar``, called from every clause, need not carry it.
_BINDING_ZONE: ContextVar[str] = ContextVar("binding_zone", default=DEFAULT_ZONE)


@contextmanager
def binding_zone(zone: str):
    """Bind with ``zone`` as the session time zone."""
    token = _BINDING_ZONE.set(zone)
    try:
        yield
    finally:
        _BINDING_ZONE.reset(token)


# Calls whose result is read in local time: date and time parts, FLOOR/CEIL TO a unit, and the clock.
_LOCAL_PARTS = (exp.Year, exp.Quarter, exp.Month, exp.WeekOfYear, exp.DayOfMonth, exp.DayOfYear, exp.Hour,
                exp.Minute, exp.Second)
LOCAL_TIME_CALLS = (exp.TimestampTrunc, exp.CurrentDate, exp.Localtimestamp, *_LOCAL_PARTS)
_ZONED = (exp.Cast, *LOCAL_TIME_CALLS)


def attach_zone(tree: exp.Expression) -> exp.Expression:
    """Mark the casts and local-time calls of a bound tree with the session zone, for
    :func:`lower_zoned_cast` and :func:`lower_local_time` (types are known only when it is lowered).
    A computed column, bound without a session, is marked UTC."""
    zone = exp.Literal.string(_BINDING_ZONE.get())
    for node in tree.find_all(*_ZONED):
        node.set("zone", zone.copy())
    return tree


def _in_zone(node: exp.Expression, x: exp.Expression) -> exp.Expression:
    """``timezone(zone, x)``: an instant's local wall clock, or a local wall clock's instant (DuckDB's ICU)."""
    zone = node.args.get("zone") or exp.Literal.string(DEFAULT_ZONE)
    return exp.Anonymous(this="timezone", expressions=[zone.copy(), x])


def lower_local_time(node: exp.Expression) -> exp.Expression | None:
    """A local-time call in the session zone; None when ``node`` needs no rewrite.

    ``HOUR(ltz)``, ``EXTRACT(DAY FROM ltz)`` read the local wall clock;
    ``FLOOR(ltz TO DAY)`` truncates it to local midnight and stays an instant;
    ``LOCALTIMESTAMP`` and ``CURRENT_DATE`` are the clock in the session zone::

        zone 'Asia/Shanghai', x = 2024-01-01 20:00:00 UTC
        HOUR(x) = 4        FLOOR(x TO DAY) = 2024-01-01 16:00:00 UTC (local midnight of 2024-01-02)
    """
    if isinstance(node, exp.CurrentDate):
        return exp.Cast(this=_in_zone(node, exp.CurrentTimestamp()), to=exp.DataType.build("DATE"))
    if isinstance(node, exp.Localtimestamp):
        return _in_zone(node, exp.CurrentTimestamp())
    arg = node.this
    if arg is None or arg.type is None or arg.type.this not in _TZ:
        node.set("zone", None)  # not an instant: no rewrite, and no mark left for the SQL generator to print
        return None
    new = node.copy()
    new.set("zone", None)
    new.set("this", _in_zone(node, arg.copy()))
    if isinstance(node, exp.TimestampTrunc):  # the local truncation, back to an instant
        return _in_zone(node, new)
    return new


_TZ = (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)
_NAIVE = (exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATE, *exp.DataType.TEXT_TYPES)


def lower_zoned_cast(node: exp.Cast, format_local) -> exp.Expression | None:
    """A cast to or from TIMESTAMP_LTZ (sqlglot's TIMESTAMPTZ, once lowered) in the session zone; None for others.

    ``timezone(zone, x)`` turns an instant into its local wall clock and a
    local wall clock into the instant (DuckDB's ICU function). ``format_local``
    formats a local TIMESTAMP as Flink prints it::

        zone 'Asia/Shanghai', x = 2024-01-01 15:00:00 UTC
        CAST(x AS TIMESTAMP)        2024-01-01 23:00:00
        CAST(x AS STRING)           '2024-01-01 23:00:00.000'
        CAST('2024-01-01 23:00:00' AS TIMESTAMP_LTZ(3))   = x
        CAST(x AS BIGINT)           1704121200 (epoch seconds, any zone)
        CAST(1704121200 AS TIMESTAMP_LTZ(3))              = x
    """
    source, target = node.this.type, node.to
    if source is None:
        return None

    def local(x: exp.Expression) -> exp.Expression:
        return _in_zone(node, x)

    if source.this in _TZ and not target.is_type(*_TZ):
        if target.is_type(*exp.DataType.TEXT_TYPES):
            return format_local(local(node.this.copy()))
        if target.is_type(exp.DataType.Type.TIMESTAMP, exp.DataType.Type.DATE):
            return exp.Cast(this=local(node.this.copy()), to=target.copy())
        if target.is_type(*exp.DataType.NUMERIC_TYPES):  # epoch seconds (whole ones truncated, as Flink)
            seconds = exp.Div(this=exp.Cast(this=exp.Anonymous(this="epoch_ms", expressions=[node.this.copy()]),
                                            to=exp.DataType.build("DOUBLE")), expression=exp.Literal.number(1000))
            if target.is_type(*exp.DataType.INTEGER_TYPES):
                seconds = exp.Trunc(this=seconds)
            return exp.Cast(this=seconds, to=target.copy())
        return None
    if target.is_type(*_TZ) and source.is_type(*exp.DataType.NUMERIC_TYPES):  # epoch seconds
        return exp.UnixToTime(this=node.this.copy())
    if target.is_type(*_TZ) and source.is_type(*_NAIVE):
        naive = node.this.copy() if source.is_type(exp.DataType.Type.TIMESTAMP) else \
            exp.Cast(this=node.this.copy(), to=exp.DataType.build("TIMESTAMP"))
        return instant_of_local(node, naive)
    return None


def _fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def instant_of_local(node: exp.Expression, local: exp.Expression) -> exp.Expression:
    """The instant of a local wall-clock time in the session zone, chosen as Flink (``java.time``) chooses.

    In the spring gap the time moves forward by the gap (02:30 in New York on
    2024-03-10 is 03:30 EDT), as ICU does too. In the autumn overlap Flink takes
    the earlier instant (01:30 on 2024-11-03 is 01:30 EDT, 05:30 UTC) where
    ICU takes the later (EST): so the instant read with the offset in force six
    hours before is taken when it shows the same wall clock and is earlier::

        a = timezone(zone, local)                               (ICU)
        e = local - offset(a - 6 h)                             (the earlier offset)
        e if wall(e) = local and e < a else a
    """
    def us(x: exp.Expression) -> exp.Expression:
        return _fn("epoch_us", x)

    local = exp.Cast(this=local.copy(), to=exp.DataType.build("TIMESTAMP"))  # microseconds (not TIMESTAMP(3))
    later = _in_zone(node, local.copy())
    before = exp.Sub(this=later.copy(), expression=exp.Interval(this=exp.Literal.string("6"), unit=exp.Var(this="HOUR")))
    offset_before = exp.Sub(this=us(_in_zone(node, before)), expression=us(before.copy()))
    earlier = _fn("make_timestamptz", exp.Sub(this=us(local.copy()), expression=exp.Paren(this=offset_before)))
    same_wall = exp.EQ(this=us(_in_zone(node, earlier.copy())), expression=us(local.copy()))
    is_earlier = exp.LT(this=earlier.copy(), expression=later.copy())
    return exp.Case().when(exp.and_(same_wall, is_earlier), earlier, copy=False).else_(later, copy=False)


def fixed_offset_us(zone: str) -> int | None:
    """The zone's offset from UTC in microseconds if it did not change in 1992-2037, else None (DST).

    Example:
        >>> fixed_offset_us("Asia/Shanghai") // 3_600_000_000
        8
        >>> fixed_offset_us("Europe/Berlin") is None
        True
    """
    tz = zoneinfo.ZoneInfo(zone)
    offsets = {datetime(y, m, 1, tzinfo=timezone.utc).astimezone(tz).utcoffset()
               for y in range(1992, 2038) for m in (1, 4, 7, 10)}
    if len(offsets) != 1:
        return None
    return int(offsets.pop().total_seconds()) * _US


def in_session_zone(spec: WindowSpec, settings: dict[str, str], error) -> WindowSpec:
    """A window over a TIMESTAMP_LTZ attribute, aligned to local time in the session zone.

    For a zone of fixed offset ``o`` a local window start ``floor(t + o - offset)
    + offset`` is the instant ``floor(t - (offset - o)) + (offset - o)``: the
    window is assigned on the instants with its offset moved by ``-o``, and
    window_start/window_end are shown ``o`` later (local). ``error(message,
    help)`` builds the refusal for zones with daylight saving time::

        1-day TUMBLE, 'Asia/Shanghai' (+08:00), t = 2024-01-01 20:00 UTC
        local 2024-01-02 04:00 -> window [2024-01-02 00:00, 2024-01-03 00:00) local
        = [2024-01-01 16:00, 2024-01-02 16:00) UTC
    """
    zone = session_zone(settings)
    shift = fixed_offset_us(zone)
    if shift is None:
        raise error(f"windows over a TIMESTAMP_LTZ column need a session time zone without daylight saving "
                    f"time, and '{zone}' has it",
                    f"SET '{ZONE_SETTING}' to a zone with a fixed offset, e.g. 'UTC' or 'Asia/Shanghai'")
    if spec.type.merging:  # sessions are not aligned: only their bounds are shown in local time
        return replace(spec, zone=zone, local_shift=shift)
    return replace(spec, offset=spec.offset - shift, zone=zone, local_shift=shift)
