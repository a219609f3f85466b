"""Flink's date and time functions: EXTRACT and its shorthands, FLOOR/CEIL TO,
TIMESTAMPDIFF/ADD, and the Java-pattern functions (DATE_FORMAT,
TO_TIMESTAMP, TO_DATE, FROM_UNIXTIME, UNIX_TIMESTAMP).

All timestamps are naive (UTC wall clock). Java patterns are translated
when a query is planned, into expressions that DuckDB and Spark both
evaluate the same way; see ``docs/functions.md``.
"""

from __future__ import annotations

import re

from sqlglot import exp, parser

from .sqlbuild import (
    DT,
    InvalidCall,
    _add,
    _arity,
    _c,
    _case,
    _cast,
    _concat,
    _div,
    _eq,
    _floor_mod,
    _int_literal,
    _is_null,
    _le,
    _lt,
    _mul,
    _num,
    _p,
    _refuse,
    _str,
    _str_literal,
    _sub,
)

# -- date and time -------------------------------------------------------------------

def _bigint(e: exp.Expression) -> exp.Expression:
    return _cast(e, "BIGINT")


def _days_since_epoch(ts: exp.Expression) -> exp.Expression:
    return exp.DateDiff(this=_cast(_c(ts), "DATE"), expression=_cast(_str("1970-01-01"), "DATE"), unit=exp.var("DAY"))


def _dow(ts: exp.Expression) -> exp.Expression:
    # 1970-01-01 was a Thursday (Flink: 5). sqlglot's DayOfWeek is 0- or 1-based depending on the engine.
    return _add(_floor_mod(_add(_days_since_epoch(ts), _num(4)), 7), _num(1))


def _sub_second(ts: exp.Expression, per_second: int) -> exp.Expression:
    """The fraction of the second in units of 1/per_second, truncated (Flink: .987654 has millisecond 987).

    Computed from microseconds: DuckDB's ``epoch_ms`` rounds to the nearest millisecond.
    """
    micros = _floor_mod(exp.UnixMicros(this=_c(ts)), 1_000_000)
    return micros if per_second == 1_000_000 else _div(micros, _num(1_000_000 // per_second))


def _floor_div(a: exp.Expression, n: int) -> exp.Expression:
    """``a`` divided by ``n``, rounded down (also below zero, before 1970)."""
    return _div(_sub(a, _floor_mod(a, n)), _num(n))


def _year_of(x: exp.Expression) -> exp.Expression:
    return exp.Year(this=_c(x))


def _isoyear(x: exp.Expression) -> exp.Expression:
    # The ISO 8601 week-numbering year: the year of the Thursday of the date's ISO week.
    isodow = _add(_floor_mod(_add(_days_since_epoch(x), _num(3)), 7), _num(1))
    thursday = exp.DateAdd(this=_cast(_c(x), "DATE"), expression=_cast(_sub(_num(4), isodow), "INT"), unit=exp.var("DAY"))
    return exp.Year(this=thursday)


def _signed_ceil_div(year: exp.Expression, n: int) -> exp.Expression:
    # Calcite's CENTURY and MILLENNIUM: year 2000 is in the 20th century, year 2001 starts the 21st.
    return _case((_lt(_num(0), year), _div(_add(year, _num(n - 1)), _num(n))),
                 default=_div(_sub(year, _num(n - 1)), _num(n)))


_EXTRACT = {
    "YEAR": lambda x: exp.Year(this=x),
    "QUARTER": lambda x: exp.Quarter(this=x),
    "MONTH": lambda x: exp.Month(this=x),
    "WEEK": lambda x: exp.WeekOfYear(this=x),  # ISO 8601, as Flink
    "DAY": lambda x: exp.DayOfMonth(this=x),
    "DAYOFMONTH": lambda x: exp.DayOfMonth(this=x),
    "DOY": lambda x: exp.DayOfYear(this=x),
    "DAYOFYEAR": lambda x: exp.DayOfYear(this=x),
    "DOW": _dow,
    "DAYOFWEEK": _dow,
    "ISODOW": lambda x: _add(_floor_mod(_add(_days_since_epoch(x), _num(3)), 7), _num(1)),
    "HOUR": lambda x: exp.Hour(this=x),
    "MINUTE": lambda x: exp.Minute(this=x),
    "SECOND": lambda x: exp.Second(this=x),
    "MILLISECOND": lambda x: _sub_second(x, 1000),
    "MICROSECOND": lambda x: _sub_second(x, 1_000_000),
    # Seconds since 1970-01-01 00:00:00 (a DATE: its midnight), rounded down.
    "EPOCH": lambda x: _floor_div(exp.UnixMicros(this=_cast(_c(x), "TIMESTAMP")), 1_000_000),
    "DECADE": lambda x: _floor_div(_year_of(x), 10),
    "CENTURY": lambda x: _signed_ceil_div(_year_of(x), 100),
    "MILLENNIUM": lambda x: _signed_ceil_div(_year_of(x), 1000),
    "ISOYEAR": _isoyear,
}


def _extract(unit: str, x: exp.Expression) -> exp.Expression:
    build = _EXTRACT.get(unit.upper())
    if build is None:
        return _refuse(f"EXTRACT({unit} FROM ...) is not supported; use one of {', '.join(sorted(_EXTRACT))}", [x])
    return _bigint(build(x))


def _parse_extract(self):
    node = parser.Parser.FUNCTION_PARSERS["EXTRACT"](self)
    if not isinstance(node, exp.Extract):
        return node
    return _extract(node.this.name, node.expression)


def _extract_fn(unit: str):
    return _arity(unit, 1, 1, "(date or timestamp)")(lambda x: _extract(unit, x))


_TRUNC_UNITS = ("MILLISECOND", "SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


def _unit(e: exp.Expression | str) -> str:
    name = e if isinstance(e, str) else e.name
    name = name.upper()
    return {"SQL_TSI_" + u: u for u in _TRUNC_UNITS}.get(name, name.rstrip("S") if name.endswith("S") else name)


def _floor_to(ts: exp.Expression, unit: str) -> exp.Expression:
    if unit == "WEEK":
        # Flink weeks start on Sunday; DuckDB's and Spark's on Monday.
        shifted = exp.TimestampAdd(this=_c(ts), expression=_num(1), unit=exp.var("DAY"))
        return exp.TimestampAdd(this=exp.TimestampTrunc(this=shifted, unit=exp.var("WEEK")),
                                expression=_num(-1), unit=exp.var("DAY"))
    return exp.TimestampTrunc(this=_c(ts), unit=exp.var(unit))


def _add_units(ts: exp.Expression, n: exp.Expression, unit: str) -> exp.Expression:
    factor = {"WEEK": ("DAY", 7), "QUARTER": ("MONTH", 3)}.get(unit)
    if factor is not None:
        unit, k = factor
        n = _mul(n, _num(k)) if _int_literal(n) is None else _num(_int_literal(n) * k)
    return exp.TimestampAdd(this=_c(ts), expression=_c(n), unit=exp.var(unit))


def _floor_ceil(node: exp.Expression, ceil: bool) -> exp.Expression:
    to = node.args.get("to")
    if to is None:
        return node
    unit = _unit(to)
    if unit not in _TRUNC_UNITS:
        return _refuse(f"{'CEIL' if ceil else 'FLOOR'}(... TO {to.name}) is not supported; use one of {', '.join(_TRUNC_UNITS)}",
                       [node.this])
    floor = _floor_to(node.this, unit)
    result = floor if not ceil else _case((_eq(floor, node.this), _c(node.this)),
                                           default=_add_units(floor, _num(1), unit))
    # Of a DATE, Flink's FLOOR/CEIL TO return a DATE: the planner casts back once it knows the type.
    result.meta[FLOOR_CEIL_TO] = True
    return result


FLOOR_CEIL_TO = "floor_ceil_to"  # meta key of the expression FLOOR/CEIL(x TO unit) became


def floor_ceil_operand(node: exp.Expression) -> exp.Expression:
    """The ``x`` of the expression ``FLOOR/CEIL(x TO unit)`` became (marked with ``FLOOR_CEIL_TO``)."""
    if isinstance(node, exp.Case):  # CEIL: CASE WHEN floor = x THEN x ELSE floor + 1 unit END
        return node.args["ifs"][0].args["true"]
    while not isinstance(node, exp.TimestampTrunc):  # FLOOR TO WEEK: shifted by a day around the trunc
        node = node.this
    inner = node.this
    return inner.this if isinstance(inner, exp.TimestampAdd) else inner


def _parse_floor(self):
    return _floor_ceil(parser.Parser.FUNCTION_PARSERS["FLOOR"](self), ceil=False)


def _parse_ceil(self):
    return _floor_ceil(parser.Parser.FUNCTION_PARSERS["CEIL"](self), ceil=True)


_DIFF_MICROS = {"MICROSECOND": 1, "MILLISECOND": 1000, "SECOND": 10**6, "MINUTE": 60 * 10**6,
                "HOUR": 3600 * 10**6, "DAY": 86400 * 10**6, "WEEK": 7 * 86400 * 10**6}
_DIFF_MONTHS = {"MONTH": 1, "QUARTER": 3, "YEAR": 12}


def _flink_months(t1: exp.Expression, t2: exp.Expression) -> exp.Expression:
    """Flink's (Calcite's) month difference from ``t1`` to ``t2``: whole months between the dates
    (``addMonths`` clamps to the month's end), minus one if that lands on ``t2``'s date at a later
    time of day. It rounds toward -infinity, also when ``t2`` is before ``t1``."""
    d1, d2 = _cast(t1, "DATE"), _cast(t2, "DATE")

    def month_no(d):
        return _add(_mul(exp.Year(this=_c(d)), _num(12)), exp.Month(this=_c(d)))

    def months(p, q):  # p <= q: the largest m with addMonths(p, m) <= q
        short = exp.and_(exp.GT(this=exp.DayOfMonth(this=_c(p)), expression=exp.DayOfMonth(this=_c(q))),
                         exp.NEQ(this=_c(q), expression=exp.LastDay(this=_c(q))), copy=False)
        return _sub(_sub(month_no(q), month_no(p)), _case((short, _num(1)), default=_num(0)))

    x = _case((_le(d1, d2), months(d1, d2)), default=exp.Neg(this=_p(months(d2, d1))))
    same_day = _eq(exp.TimestampAdd(this=_c(d1), expression=_c(x), unit=exp.var("MONTH")), d2)
    earlier = _lt(_time_of_day(t2), _time_of_day(t1))
    return _sub(x, _case((exp.and_(same_day, earlier, copy=False), _num(1)), default=_num(0)))


def _time_of_day(t: exp.Expression) -> exp.Expression:
    return _floor_mod(exp.UnixMicros(this=_c(t)), 86400 * 10**6)


@_arity("TIMESTAMPDIFF", 3, 3, "(unit, timepoint1, timepoint2)")
def _timestampdiff(unit, t1, t2):
    u = _unit(unit)
    if u in _DIFF_MICROS:  # Flink: whole units of the exact difference, truncated toward zero
        diff = _div(_sub(exp.UnixMicros(this=t2), exp.UnixMicros(this=t1)), _num(_DIFF_MICROS[u]))
    elif u in _DIFF_MONTHS:
        months = _flink_months(t1, t2)
        diff = months if u == "MONTH" else _div(months, _num(_DIFF_MONTHS[u]))
    else:
        return _refuse(f"TIMESTAMPDIFF({unit.name}, ...) is not supported; use one of "
                       f"{', '.join(list(_DIFF_MICROS) + list(_DIFF_MONTHS))}", [t1, t2])
    return _cast(diff, "INT")


@_arity("TIMESTAMPADD", 3, 3, "(unit, integer, timepoint)")
def _timestampadd(unit, n, ts):
    u = _unit(unit)
    if u not in ("MICROSECOND", "MILLISECOND") + _TRUNC_UNITS:
        return _refuse(f"TIMESTAMPADD({unit.name}, ...) is not supported", [n, ts])
    return _add_units(ts, n, u)


# Java (SimpleDateFormat / DateTimeFormatter) patterns <-> sqlglot's strftime-like format.
_JAVA_TOKENS = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|[^A-Za-z']+")
_FORMAT_FIELDS = {
    "yyyy": "%Y", "y": "%Y", "yy": "%y", "MM": "%m", "M": "%-m", "MMM": "%b", "MMMM": "%B",
    "dd": "%d", "d": "%-d", "HH": "%H", "H": "%-H", "hh": "%I", "h": "%-I", "mm": "%M", "m": "%-M",
    "ss": "%S", "s": "%-S", "a": "%p", "E": "%a", "EE": "%a", "EEE": "%a", "EEEE": "%A",
    "D": "%-j", "DDD": "%j",
}


def _java_tokens(pattern: str) -> list[tuple[str, str]]:
    """Split a Java date pattern into ('field', letters) and ('text', literal) tokens."""
    out = []
    for m in _JAVA_TOKENS.finditer(pattern):
        tok = m.group(0)
        if tok.startswith("'"):
            out.append(("text", tok[1:-1].replace("''", "'") if tok != "''" else "'"))
        elif tok[0].isalpha():
            out.append(("field", tok))
        else:
            out.append(("text", tok))
    return out


def format_timestamp(ts: exp.Expression, pattern: str) -> exp.Expression:
    """``ts`` printed with a Java pattern, as concatenated pieces both engines print alike."""
    pieces: list[exp.Expression] = []
    run = ""  # strftime text for consecutive supported fields and punctuation

    def flush():
        nonlocal run
        if run:
            pieces.append(exp.TimeToStr(this=_c(ts), format=_str(run)))
            run = ""

    for kind, tok in _java_tokens(pattern):
        if kind == "text":
            if re.search(r"[A-Za-z%'\[\]#{}]", tok):
                flush()
                pieces.append(_str(tok))
            else:
                run += tok
        elif tok in _FORMAT_FIELDS:
            run += _FORMAT_FIELDS[tok]
        elif set(tok) == {"S"} and len(tok) <= 6:
            flush()
            unit = 1000 if len(tok) <= 3 else 10**6
            frac = exp.Pad(this=_cast(_sub_second(ts, unit), "VARCHAR"), expression=_num(len(str(unit)) - 1),
                           fill_pattern=_str("0"), is_left=True)
            pieces.append(exp.Left(this=frac, expression=_num(len(tok))) if len(tok) not in (3, 6) else frac)
        else:
            raise ValueError(tok)
    flush()
    if not pieces:
        return _str("")
    return pieces[0] if len(pieces) == 1 else exp.DPipe(this=_concat(*pieces[:-1]), expression=pieces[-1], safe=True)


def _re_literal(text: str) -> str:
    return re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", text)


_PARSE_FIELDS = {"y": "year", "M": "month", "d": "day", "H": "hour", "m": "minute", "s": "second", "S": "fraction"}


def _parse_timestamp(s: exp.Expression, pattern: str, *, lenient: bool, tail: str = "$") -> exp.Expression:
    """A string parsed with a Java pattern of numeric fields, as TRY_CAST of a canonical timestamp string.

    Fields default to 1970-01-01 00:00:00 (as Flink). ``lenient`` (SimpleDateFormat) lets a field
    that is not glued to another number have any number of digits.
    """
    regex, groups = _pattern_regex(_java_tokens(pattern), lenient)
    regex += tail
    text = _canonical_timestamp_text(s, regex, groups)
    return _case((exp.RegexpLike(this=_c(s), expression=_str(regex)), exp.TryCast(this=text, to=DT.build("TIMESTAMP"), safe=True)))


def _pattern_regex(tokens: list[tuple[str, str]], lenient: bool) -> tuple[str, dict[str, int]]:
    """The regex (anchored at the start) a pattern's text must match, and the capture group of each field.

    A pattern letter that is not a numeric field, repeats a field or is longer than the field allows
    raises ValueError(letters), which the caller turns into a refusal naming them.
    """
    regex, groups = "^", {}
    for i, (kind, tok) in enumerate(tokens):
        if kind == "text":
            regex += _re_literal(tok)
            continue
        field = _PARSE_FIELDS.get(tok[0])
        longest = {"y": 4, "S": 9}.get(tok[0], 2)
        if field is None or field in groups or len(tok) > longest or tok in ("yy", "yyy"):
            raise ValueError(tok)
        glued = any(0 <= j < len(tokens) and tokens[j][0] == "field" for j in (i - 1, i + 1))
        regex += f"([0-9]{_field_digits(tok, glued, lenient)})"
        groups[field] = len(groups) + 1
    return regex, groups


def _field_digits(tok: str, glued: bool, lenient: bool) -> str:
    """The regex repetition of a field's digits: as many as its letters, but any number where lenient
    parsing allows it (a field glued to another number must keep its width to tell them apart)."""
    width = "+" if lenient and not glued else ("{1,2}" if len(tok) == 1 and not glued else "{%d}" % len(tok))
    if tok[0] == "y" and not (lenient and not glued):
        width = "{4}" if len(tok) <= 4 else "{%d}" % len(tok)
    if tok[0] == "S":
        width = "{%d}" % len(tok) if glued or not lenient else "+"
    return width


def _canonical_timestamp_text(s: exp.Expression, regex: str, groups: dict[str, int]) -> exp.Expression:
    """``yyyy-MM-dd HH:mm:ss[.SSS]`` built from the fields ``regex`` captures out of ``s``; a field the
    pattern lacks takes its 1970-01-01 00:00:00 default, so both engines cast the same text."""

    def part(field: str, default: str, width: int = 0) -> exp.Expression:
        if field not in groups:
            return _str(default)
        g = exp.RegexpExtract(this=_c(s), expression=_str(regex), group=_num(groups[field]))
        return exp.Pad(this=g, expression=_num(width), fill_pattern=_str("0"), is_left=True) if width else g

    # Flink keeps milliseconds (TO_TIMESTAMP returns TIMESTAMP(3)).
    frac = _concat(_str("."), exp.Left(this=part("fraction", "0"), expression=_num(3))) if "fraction" in groups else _str("")
    return _concat(part("year", "1970", 4), _str("-"), part("month", "01", 2), _str("-"), part("day", "01", 2), _str(" "),
                   part("hour", "00", 2), _str(":"), part("minute", "00", 2), _str(":"), part("second", "00", 2), frac)


_DEFAULT_PATTERN = "yyyy-MM-dd HH:mm:ss"


def _pattern(fmt: exp.Expression | None, name: str) -> str | InvalidCall:
    if fmt is None:
        return _DEFAULT_PATTERN
    text = _str_literal(fmt)
    if text is None:
        return _refuse(f"{name} needs its format as a string literal, e.g. '{_DEFAULT_PATTERN}'", [fmt])
    return text


def _with_pattern(name: str, fmt, build):
    pattern = _pattern(fmt, name)
    if isinstance(pattern, InvalidCall):
        return pattern
    try:
        return build(pattern)
    except ValueError as e:
        return _refuse(f"{name} does not support the pattern letters '{e}' in '{pattern}'")


@_arity("DATE_FORMAT", 2, 2, "(timestamp or string, format)")
def _date_format(x, fmt):
    return _with_pattern("DATE_FORMAT", fmt, lambda p: format_timestamp(exp.TryCast(this=x, to=DT.build("TIMESTAMP"), safe=True), p))


@_arity("FROM_UNIXTIME", 1, 2, "(seconds[, format])")
def _from_unixtime(n, fmt=None):
    ts = exp.UnixToTime(this=_mul(_cast(n, "BIGINT"), _num(1000)), scale=exp.UnixToTime.MILLIS)
    return _with_pattern("FROM_UNIXTIME", fmt, lambda p: format_timestamp(ts, p))


# Flink's TO_TIMESTAMP without a format: yyyy-[M]M-[d]d[ [H]H:[m]m:[s]s[.fraction]].
_DEFAULT_TIMESTAMP = r"^([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})( ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})(\.[0-9]{0,9})?)?$"


def _default_timestamp(s: exp.Expression) -> exp.Expression:
    def g(i, width, default=None):
        e = exp.Pad(this=exp.RegexpExtract(this=_c(s), expression=_str(_DEFAULT_TIMESTAMP), group=_num(i)),
                    expression=_num(width), fill_pattern=_str("0"), is_left=True)
        return e if default is None else _case((_eq(exp.RegexpExtract(this=_c(s), expression=_str(_DEFAULT_TIMESTAMP), group=_num(4)), _str("")),
                                                _str(default)), default=e)
    frac = exp.Left(this=exp.RegexpExtract(this=_c(s), expression=_str(_DEFAULT_TIMESTAMP), group=_num(8)), expression=_num(4))
    text = _concat(g(1, 4), _str("-"), g(2, 2), _str("-"), g(3, 2), _str(" "), g(5, 2, "00"), _str(":"), g(6, 2, "00"),
                   _str(":"), g(7, 2, "00"), frac)
    return _case((exp.RegexpLike(this=_c(s), expression=_str(_DEFAULT_TIMESTAMP)), exp.TryCast(this=text, to=DT.build("TIMESTAMP"), safe=True)))


@_arity("TO_TIMESTAMP", 1, 2, "(string[, format])")
def _to_timestamp(s, fmt=None):
    if fmt is None:
        return _default_timestamp(s)
    # Flink falls back to the default layout when the pattern does not match.
    return _with_pattern("TO_TIMESTAMP", fmt, lambda p: exp.Coalesce(this=_parse_timestamp(s, p, lenient=False),
                                                                       expressions=[_default_timestamp(s)]))


@_arity("TO_DATE", 1, 2, "(string[, format])")
def _to_date(s, fmt=None):
    if fmt is None:
        # Flink: yyyy-[M]M-[d]d, anything after a space ignored.
        return _cast(_parse_timestamp(s, "yyyy-M-d", lenient=True, tail="( |$)"), "DATE")
    return _with_pattern("TO_DATE", fmt, lambda p: _cast(_parse_timestamp(s, p, lenient=True, tail=""), "DATE"))


def _unix_timestamp(args):
    if not args:
        return _refuse("UNIX_TIMESTAMP() reads the wall clock, so results would depend on when a query runs; "
                       "use UNIX_TIMESTAMP(string[, format]) on a column")
    if len(args) > 2:
        return _refuse("UNIX_TIMESTAMP takes (string[, format])", args)
    s, fmt = args[0], (args[1] if len(args) > 1 else None)

    def build(p):
        # Flink (SimpleDateFormat): trailing text is ignored; an unparseable string gives Long.MIN_VALUE.
        ts = _parse_timestamp(s, p, lenient=True, tail="")
        seconds = _div(exp.UnixMillis(this=ts), _num(1000))
        return _case((_is_null(s), exp.Null()), default=exp.Coalesce(this=seconds, expressions=[_cast(_num(-(2**63)), "BIGINT")]))
    return _with_pattern("UNIX_TIMESTAMP", fmt, build)
