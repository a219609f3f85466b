"""Flink SQL scalar functions, parsed into sqlglot expressions with Flink's meaning.

sqlglot already knows most scalar functions, but not always with Flink's
argument order or semantics, and its DuckDB and Spark renderings of one
expression sometimes disagree with each other (``DAYOFWEEK`` is 0-based in
DuckDB, ``REGEXP_EXTRACT`` returns ``''`` on no match, ...). Each builder
here turns a Flink call into standard sqlglot expressions whose DuckDB *and*
Spark renderings both give Flink's result, so nothing downstream needs to
know about Flink. Where Flink's implementation contradicts its own
documentation (``EXTRACT`` on timestamps before 1970, ``CEIL(ts TO MONTH)``
ignoring the time of day), the documented behaviour is built; see
``docs/functions.md``.

Three tables are exported for the dsms dialect:

- ``FLINK_FUNCTIONS``: name -> builder(args) for the parser's ``FUNCTIONS``;
- ``FLINK_FUNCTION_PARSERS``: wrappers of sqlglot's own parsers for calls
  with special syntax (``EXTRACT(unit FROM x)``, ``FLOOR(ts TO unit)``,
  ``SUBSTRING(s FROM i FOR n)``), for the parser's ``FUNCTION_PARSERS``;
- ``FLINK_TYPES``: Flink result types of sqlglot expressions, for the
  dialect's ``EXPRESSION_METADATA``.

A call dsms cannot evaluate becomes :class:`InvalidCall`, which the planner
reports with its reason.

Example:
    >>> from dsms.grammar.dialect import parse_expression
    >>> parse_expression("LOG(x)").sql("duckdb")  # one argument: the natural logarithm, as Flink
    'LN(x)'
    >>> parse_expression("LEFT(s, n)").sql("spark")  # a negative length gives ''
    'LEFT(s, CASE WHEN n < 0 THEN 0 ELSE n END)'
"""

from __future__ import annotations

from sqlglot import exp, parser

from .ltz_functions import to_timestamp_ltz
from .sqlbuild import (
    DT,
    _add,
    _arity,
    _c,
    _case,
    _div,
    _eq,
    _int_literal,
    _is_null,
    _le,
    _lt,
    _num,
    _or,
    _refuse,
    _str,
    _str_literal,
    _sub,
)
from .time_functions import (
    _date_format,
    _extract_fn,
    _from_unixtime,
    _parse_ceil,
    _parse_extract,
    _parse_floor,
    _timestampadd,
    _timestampdiff,
    _to_date,
    _to_timestamp,
    _unix_timestamp,
)

# -- numbers -----------------------------------------------------------------------

def _greatest_least(cls):
    def build(args):
        if not args:
            return _refuse(f"{cls.__name__.upper()} takes one or more arguments")
        # Flink: NULL if any argument is NULL (DuckDB and Spark skip NULLs).
        return _case((_or(*[_is_null(a) for a in args]), exp.Null()),
                     default=cls(this=_c(args[0]), expressions=[_c(a) for a in args[1:]], ignore_nulls=True))
    return build


@_arity("LOG", 1, 2, "(x) or (base, x)")
def _log(a, b=None):
    # Flink: LOG(x) is the natural logarithm (sqlglot's default reads it as LOG10).
    return exp.Ln(this=a) if b is None else exp.Log(this=a, expression=b)


@_arity("TRUNCATE", 1, 2, "(number[, integer literal])")
def _truncate(x, n=None):
    if n is not None and _int_literal(n) is None:
        return _refuse("TRUNCATE needs an integer literal as its second argument", [x, n])
    return exp.Trunc(this=x, decimals=n or _num(0))


@_arity("ROUND", 1, 2, "(number[, integer])")
def _round(x, n=None):
    return exp.Round(this=x, decimals=n) if n is not None else exp.Round(this=x)


# -- strings -----------------------------------------------------------------------

def _substring(s, pos, length=None):
    """Flink SUBSTRING: 1-based; 0 means 1; negative counts from the end; length < 0 is NULL."""
    p, n = _int_literal(pos), _int_literal(length) if length is not None else None
    if p is not None and p >= 0 and (length is None or (n is not None and n >= 0)):
        return exp.Substring(this=s, start=pos if p > 0 else _num(1), length=length)
    size = exp.Length(this=_c(s))
    if p is not None:
        start = _add(size, _num(p)) if p < 0 else _num(max(p - 1, 0))
    else:
        start = _case((_lt(_num(0), pos), _sub(pos, _num(1))), (_lt(pos, _num(0)), _add(size, pos)), default=_num(0))
    whens = [] if length is None else [(_lt(length, _num(0)), exp.Null())]
    whens += [(_or(_lt(start, _num(0)), _le(size, start)), _str(""))]
    return _case(*whens, default=exp.Substring(this=_c(s), start=_add(start, _num(1)), length=_c(length) if length is not None else None))


@_arity("SUBSTR", 2, 3, "(string, start[, length])")
def _substr(s, pos, length=None):
    return _substring(s, pos, length)


def _parse_substring(self):
    node = parser.Parser.FUNCTION_PARSERS["SUBSTRING"](self)
    if not isinstance(node, exp.Substring) or node.args.get("start") is None:
        return node
    return _substring(node.this, node.args["start"], node.args.get("length"))


@_arity("CONCAT", 1, 254, "(string, ...)")
def _concat_fn(*args):
    # Flink: NULL if any argument is NULL.
    return exp.Concat(expressions=list(args), safe=True, coalesce=False)


@_arity("CONCAT_WS", 2, 254, "(separator, string, ...)")
def _concat_ws(*args):
    # Flink: NULL separator gives NULL; NULL arguments after it are skipped.
    return exp.ConcatWs(expressions=list(args), safe=True, coalesce=True)


def _pad(is_left: bool):
    @_arity("LPAD" if is_left else "RPAD", 3, 3, "(string, length, pad)")
    def build(s, n, pad):
        # Flink: NULL for a negative length or an empty pad (DuckDB errors on an empty pad).
        return _case((_or(_lt(n, _num(0)), _eq(pad, _str(""))), exp.Null()),
                     default=exp.Pad(this=s, expression=n, fill_pattern=pad, is_left=is_left))
    return build


def _left_right(cls):
    @_arity(cls.__name__.upper(), 2, 2, "(string, integer)")
    def build(s, n):
        # Flink: a negative length gives '' (DuckDB would count from the other end).
        return cls(this=s, expression=_case((_lt(n, _num(0)), _num(0)), default=_c(n)))
    return build


@_arity("LOCATE", 2, 3, "(needle, haystack[, start])")
def _locate(needle, haystack, start=None):
    return exp.StrPosition(this=haystack, substr=needle, position=start)


@_arity("REPLACE", 3, 3, "(string, search, replacement)")
def _replace(s, search, replacement):
    return exp.Replace(this=s, expression=search, replacement=replacement)


@_arity("REGEXP_EXTRACT", 2, 3, "(string, regex[, group index])")
def _regexp_extract(s, regex, index=None):
    # Flink: group 0 (the whole match) by default; NULL when nothing matches (DuckDB and Spark give '').
    group = index if index is not None else _num(0)
    return _case((exp.RegexpLike(this=_c(s), expression=_c(regex)),
                  exp.RegexpExtract(this=s, expression=regex, group=group)))


_DOLLAR = "\ue000"  # stands for '$' inside a replacement (a private-use character)


@_arity("REGEXP_REPLACE", 3, 3, "(string, regex, replacement)")
def _regexp_replace(s, regex, replacement):
    """Flink inserts the replacement as plain text. DuckDB and Spark both read a backslash as an
    escape (so it is doubled); Spark also reads '$' as a group reference while DuckDB rejects '\\$',
    so a '$' is replaced by a placeholder character and put back afterwards."""
    text = _str_literal(replacement)
    if text is not None:
        if "\\" not in text and "$" not in text:
            return exp.RegexpReplace(this=s, expression=regex, replacement=replacement)
        r: exp.Expression = _str(text.replace("\\", "\\\\").replace("$", _DOLLAR))
    else:
        r = exp.Replace(this=exp.Replace(this=replacement, expression=_str("\\"), replacement=_str("\\\\")),
                        expression=_str("$"), replacement=_str(_DOLLAR))
    replaced = exp.RegexpReplace(this=s, expression=regex, replacement=r)
    if text is not None and "$" not in text:
        return replaced
    return exp.Replace(this=replaced, expression=_str(_DOLLAR), replacement=_str("$"))


@_arity("SPLIT_INDEX", 3, 3, "(string, separator, index)")
def _split_index(s, sep, index):
    """Flink: the index-th (0-based) piece; NULL if out of range, if ``s`` is '' or the separator is ''."""
    pieces = _div(_sub(exp.Length(this=_c(s)), exp.Length(this=exp.Replace(this=_c(s), expression=_c(sep), replacement=_str("")))),
                  exp.Nullif(this=exp.Length(this=_c(sep)), expression=_num(0)))
    return _case((_or(_lt(index, _num(0)), _eq(s, _str("")), _eq(sep, _str(""))), exp.Null()),
                 (_le(index, pieces), exp.SplitPart(this=_c(s), delimiter=_c(sep), part_index=_add(index, _num(1)))))


def _parse_initcap(self):
    node = parser.Parser.FUNCTION_PARSERS["INITCAP"](self)
    if not isinstance(node, exp.Initcap) or node.expression is not None and node.expression.name != \
            self.dialect.INITCAP_DEFAULT_DELIMITER_CHARS:
        return _refuse("INITCAP takes (string)")
    return _initcap(node.this)


def _initcap(s):
    """Flink (Calcite): words are runs of [A-Za-z0-9]; first letter upper, the rest lower."""
    t = exp.to_identifier("__w")
    word = _case((exp.RegexpLike(this=t.copy(), expression=_str("^[A-Za-z0-9]")),
                  exp.DPipe(this=exp.Upper(this=exp.Left(this=t.copy(), expression=_num(1))),
                            expression=exp.Lower(this=exp.Substring(this=t.copy(), start=_num(2))), safe=True)),
                 default=t.copy())
    tokens = exp.RegexpExtractAll(this=s, expression=_str("[A-Za-z0-9]+|[^A-Za-z0-9]+"), group=_num(0))
    return exp.ArrayToString(this=exp.Transform(this=tokens, expression=exp.Lambda(this=word, expressions=[t])),
                             expression=_str(""))


def _refused(name: str, why: str):
    return lambda args: _refuse(f"{name} is not supported: {why}", args)


_NONDETERMINISTIC = "it gives different results on every run and on replay"

FLINK_FUNCTIONS: dict = {
    # numbers
    "LOG": _log,
    "LN": _arity("LN", 1, 1, "(number)")(lambda x: exp.Ln(this=x)),
    "ROUND": _round,
    "TRUNCATE": _truncate,
    "GREATEST": _greatest_least(exp.Greatest),
    "LEAST": _greatest_least(exp.Least),
    "RAND_INTEGER": _refused("RAND_INTEGER", _NONDETERMINISTIC),
    # strings
    "CHARACTER_LENGTH": _arity("CHARACTER_LENGTH", 1, 1, "(string)")(lambda s: exp.Length(this=s)),
    "CHAR_LENGTH": _arity("CHAR_LENGTH", 1, 1, "(string)")(lambda s: exp.Length(this=s)),
    "SUBSTR": _substr,
    "CONCAT": _concat_fn,
    "CONCAT_WS": _concat_ws,
    "LPAD": _pad(True),
    "RPAD": _pad(False),
    "LEFT": _left_right(exp.Left),
    "RIGHT": _left_right(exp.Right),
    "LOCATE": _locate,
    "REPLACE": _replace,
    "REGEXP_EXTRACT": _regexp_extract,
    "REGEXP_REPLACE": _regexp_replace,
    "SPLIT_INDEX": _split_index,
    "IFNULL": _arity("IFNULL", 2, 2, "(value, replacement)")(lambda a, b: exp.Coalesce(this=a, expressions=[b])),
    # date and time
    **{name: _extract_fn(name) for name in ("YEAR", "QUARTER", "MONTH", "WEEK", "DAYOFYEAR", "DAYOFMONTH",
                                            "DAYOFWEEK", "HOUR", "MINUTE", "SECOND")},
    "TIMESTAMPDIFF": _timestampdiff,
    "TIMESTAMPADD": _timestampadd,
    "DATE_FORMAT": _date_format,
    "FROM_UNIXTIME": _from_unixtime,
    "TO_TIMESTAMP": _to_timestamp,
    "TO_TIMESTAMP_LTZ": to_timestamp_ltz,
    "NOW": _arity("NOW", 0, 0, "()")(lambda: exp.CurrentTimestamp()),  # Flink: CURRENT_TIMESTAMP
    "TO_DATE": _to_date,
    "UNIX_TIMESTAMP": _unix_timestamp,
}

FLINK_FUNCTION_PARSERS: dict = {
    "EXTRACT": _parse_extract,
    "FLOOR": _parse_floor,
    "CEIL": _parse_ceil,
    "SUBSTRING": _parse_substring,
    "INITCAP": _parse_initcap,
}


def _same_as(*keys: str):
    return {"annotator": lambda self, e: self._annotate_by_args(e, *keys)}


_INT_WIDTH = [DT.Type.TINYINT, DT.Type.SMALLINT, DT.Type.INT, DT.Type.BIGINT]


def _annotate_div(self, e: exp.Div) -> exp.Div:
    # Flink: INT / INT is an INT (sqlglot says BIGINT): the wider of the two integer types.
    self._annotate_div(e)
    left, right = e.this.type, e.expression.type
    if left is not None and right is not None and left.this in _INT_WIDTH and right.this in _INT_WIDTH:
        self._set_type(e, max(left.this, right.this, key=_INT_WIDTH.index))
    return e


# Flink's result types where sqlglot's differ or are unknown.
FLINK_TYPES: dict = {
    exp.Div: {"annotator": _annotate_div},
    **{cls: _same_as("this") for cls in (exp.Round, exp.Trunc, exp.Sign)},
    **{cls: {"returns": DT.Type.VARCHAR} for cls in (exp.Pad, exp.Left, exp.Right, exp.Replace, exp.Reverse,
                                                      exp.RegexpExtract, exp.RegexpReplace, exp.SplitPart)},
    **{cls: {"returns": DT.Type.BIGINT} for cls in (exp.DateDiff, exp.IntDiv)},
    exp.TimestampTrunc: _same_as("this"),
    exp.StrPosition: {"returns": DT.Type.INT},
    # Flink: CURRENT_TIMESTAMP and NOW() are TIMESTAMP_LTZ(3) (an instant), LOCALTIMESTAMP a TIMESTAMP(3).
    exp.CurrentTimestamp: {"returns": DT.Type.TIMESTAMPTZ},
    exp.Localtimestamp: {"returns": DT.Type.TIMESTAMP},
}
