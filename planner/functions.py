"""Which functions a query may call, and their last type-dependent lowering.

Scalar functions are the ones the dsms dialect parses into typed sqlglot
expressions with Flink's meaning (see ``grammar/functions.py``). A name
sqlglot does not know parses as ``exp.Anonymous`` and is refused here with
the closest known names; a call the grammar refused (wrong arguments, an
unsupported unit or pattern) is an ``InvalidCall`` with its reason; and
functions without a stable meaning in a continuous query (``RAND``,
``UUID``) are refused by class.

:func:`lower_functions` runs on a bound expression after type annotation,
just before it is rendered for DuckDB or Spark, and rewrites the few calls
whose Flink meaning depends on argument types (``ROUND`` of a ``DOUBLE``,
``TRUNCATE``, ``CAST`` of a timestamp or boolean to a string).

Example:
    >>> from sqlglot import exp
    >>> try:
    ...     check_function(exp.Anonymous(this="UPPPER", expressions=[]), "UPPPER(s)")
    ... except SqlError as e:
    ...     print(e)
    error: unknown function 'UPPPER'
      = help: did you mean 'UPPER'?
"""

from __future__ import annotations

from sqlglot import exp

from ..grammar import Diagnostic, SqlError
from ..grammar.diagnostics import did_you_mean
from ..grammar.nested import struct_fields
from ..grammar.sqlbuild import InvalidCall
from ..grammar.time_functions import FLOOR_CEIL_TO, floor_ceil_operand, format_timestamp
from .aggregate_kinds import NAMES as AGGREGATE_NAMES
from .aggregate_kinds import NOT_YET, NOT_YET_HELP
from .bind.time_zone import LOCAL_TIME_CALLS, lower_local_time, lower_zoned_cast
from .timeutil import node_span

AGGREGATES = set(AGGREGATE_NAMES)  # the aggregate kinds (aggregate_kinds.py), for suggestions and completion

# Every scalar function that works end to end (tests/test_functions.py), for suggestions and SHOW FUNCTIONS.
SCALAR_FUNCTIONS = sorted({
    # numbers
    "ABS", "CEIL", "CEILING", "FLOOR", "ROUND", "TRUNCATE", "MOD", "POWER", "POW", "SQRT", "EXP", "LN", "LOG",
    "LOG10", "LOG2", "SIGN", "GREATEST", "LEAST",
    # conditions and conversions
    "COALESCE", "NULLIF", "IFNULL", "IF", "CAST", "TRY_CAST",
    # strings
    "UPPER", "LOWER", "TRIM", "LTRIM", "RTRIM", "CHAR_LENGTH", "CHARACTER_LENGTH", "SUBSTRING", "SUBSTR",
    "CONCAT", "CONCAT_WS", "REPLACE", "POSITION", "LOCATE", "LPAD", "RPAD", "REPEAT", "REVERSE", "INITCAP",
    "LEFT", "RIGHT", "REGEXP_EXTRACT", "REGEXP_REPLACE", "SPLIT_INDEX", "MD5",
    # date and time
    "EXTRACT", "YEAR", "QUARTER", "MONTH", "WEEK", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE",
    "SECOND", "DATE_FORMAT", "TO_TIMESTAMP", "TO_TIMESTAMP_LTZ", "NOW", "TO_DATE", "FROM_UNIXTIME", "UNIX_TIMESTAMP", "TIMESTAMPADD",
    "TIMESTAMPDIFF",
    # nested values (grammar/nested.py)
    "CARDINALITY", "ELEMENT", "ARRAY_CONTAINS", "ARRAY_DISTINCT", "ARRAY_POSITION", "ARRAY_REMOVE", "ARRAY_REVERSE",
    "ARRAY_SLICE", "ARRAY_CONCAT", "ARRAY_JOIN", "MAP_KEYS", "MAP_VALUES", "MAP_ENTRIES",
    # JSON (tests/test_json_functions.py; runtime and DuckDB routes)
    "JSON_VALUE", "JSON_QUERY", "JSON_EXISTS", "JSON_OBJECT", "JSON_ARRAY", "JSON_STRING", "JSON",
})

_NONDETERMINISTIC = "it gives different results on every run and on replay, so results would not be reproducible"

# sqlglot functions that have no stable meaning in a continuous query.
_REFUSED = {
    exp.Rand: _NONDETERMINISTIC,
    exp.Uuid: _NONDETERMINISTIC,
}


def check_function(node: exp.Func, source: str | None) -> None:
    """Raise a SqlError if ``node`` is not a function dsms can evaluate."""
    if isinstance(node, InvalidCall):
        raise SqlError(Diagnostic(node.this.name, node_span(node), source))
    if isinstance(node, exp.Anonymous):
        name = node.name.upper()
        if name == "PROCTIME":
            raise SqlError(Diagnostic("PROCTIME() is not supported here", node_span(node), source,
                                      help="use it in the SELECT list, in OVER (ORDER BY PROCTIME()), in ORDER BY "
                                           "or in FOR SYSTEM_TIME AS OF; elsewhere declare it in the source "
                                           "(pt AS PROCTIME()) and use that column"))
        if name in NOT_YET:
            raise SqlError(Diagnostic(f"aggregate {name} is not supported yet", node_span(node), source,
                                      help=NOT_YET_HELP))
        raise SqlError(Diagnostic(f"unknown function '{node.name}'", node_span(node), source,
                                  help=did_you_mean(name, SCALAR_FUNCTIONS + sorted(AGGREGATES))))
    for cls, why in _REFUSED.items():
        if isinstance(node, cls):
            raise SqlError(Diagnostic(f"function {node.sql_name()} is not supported: {why}", node_span(node), source))


# -- lowering ---------------------------------------------------------------------------

_DOUBLE = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
_EXACT_LIMIT = "1e15"  # beyond this a DOUBLE has no fractional digits left


def _int_literal(e: exp.Expression | None) -> int | None:
    if e is None:
        return 0
    if isinstance(e, exp.Neg):
        v = _int_literal(e.this)
        return -v if v is not None else None
    if isinstance(e, exp.Paren):
        return _int_literal(e.this)
    return int(e.name) if isinstance(e, exp.Literal) and e.is_int else None


def _decimal_of_double(x: exp.Expression) -> exp.Expression:
    """The decimal a DOUBLE prints as (Java's ``BigDecimal.valueOf``, which Flink rounds)."""
    text = exp.Cast(this=exp.Cast(this=x.copy(), to=exp.DataType.build("DOUBLE")), to=exp.DataType.build("VARCHAR"))
    return exp.Cast(this=text, to=exp.DataType.build("DECIMAL(38, 18)"))


def _guarded(x: exp.Expression, exact: exp.Expression, fallback: exp.Expression, dtype: exp.DataType) -> exp.Expression:
    small = exp.LT(this=exp.Abs(this=x.copy()), expression=exp.Literal.number(_EXACT_LIMIT))
    return exp.Case().when(small, exp.Cast(this=exact, to=dtype.copy()), copy=False).else_(fallback, copy=False)


def _truncate_decimal(v: exp.Expression, n: int) -> exp.Expression:
    """``v`` truncated toward zero to ``n`` decimals, with exact decimal rounding (HALF_UP) only: the magnitude
    less half a unit, rounded, with the sign put back (0 stays 0: ROUND(-0.5) alone would give -1)."""
    half = exp.Literal.number(f"{5 * 10 ** (-n - 1):.{max(n + 1, 0)}f}" if n >= 0 else 5 * 10 ** (-n - 1))
    magnitude = exp.Round(this=exp.Sub(this=exp.Abs(this=v.copy()), expression=half), decimals=exp.Literal.number(n))
    return exp.Mul(this=exp.Sign(this=v.copy()), expression=magnitude)


def _lower_round(node: exp.Round) -> exp.Expression | None:
    # DuckDB rounds the binary double (ROUND(1.005, 2) = 1.0); Flink and Spark round its decimal form (1.01).
    x, dtype = node.this, node.this.type
    n = _int_literal(node.args.get("decimals"))
    if dtype is None or dtype.this not in _DOUBLE or n is None or node.args.get("truncate") is not None:
        return None
    exact = exp.Round(this=_decimal_of_double(x), decimals=exp.Literal.number(n))
    return _guarded(x, exact, node.copy(), dtype)


def _lower_trunc(node: exp.Trunc) -> exp.Expression | None:
    # Spark has no numeric TRUNCATE; DuckDB's truncates the binary double.
    x, dtype = node.this, node.this.type
    n = _int_literal(node.args.get("decimals"))
    if dtype is None or n is None:
        return None
    if dtype.is_type(*exp.DataType.INTEGER_TYPES):
        if n >= 0:
            return x.copy()
        unit = exp.Literal.number(10 ** -n)
        return exp.Cast(this=exp.Sub(this=x.copy(), expression=exp.Mod(this=x.copy(), expression=unit)), to=dtype.copy())
    if dtype.this == exp.DataType.Type.DECIMAL:
        return exp.Cast(this=_truncate_decimal(x, n), to=dtype.copy())
    if dtype.this in _DOUBLE:
        exact = _truncate_decimal(_decimal_of_double(x), n)
        if n >= 0:
            fallback = x.copy()
        else:
            fallback = exp.Sub(this=x.copy(), expression=exp.Mod(this=x.copy(), expression=exp.Literal.number(10 ** -n)))
        return _guarded(x, exact, fallback, dtype)
    return None


def row_cast(value: exp.Expression, to: exp.DataType) -> exp.Expression | None:
    """A CAST of a ROW to a ROW type with other field names, field by field in order (Flink's rule; DuckDB
    matches fields by name). None when ``value`` is not such a ROW."""
    source = value.type
    if source is None or source.this != exp.DataType.Type.STRUCT or to.this != exp.DataType.Type.STRUCT:
        return None
    fields, targets = struct_fields(source), struct_fields(to)
    if len(fields) != len(targets) or list(fields) == list(targets):
        return None
    built = exp.Struct(expressions=[
        exp.PropertyEQ(this=exp.to_identifier(name, quoted=True),
                       expression=exp.Cast(this=exp.Dot(this=value.copy(), expression=exp.to_identifier(src, quoted=True)),
                                           to=dtype.copy()))
        for src, (name, dtype) in zip(fields, targets.items())])
    return exp.Case().when(exp.Is(this=value.copy(), expression=exp.Null()), exp.Null(), copy=False).else_(
        built, copy=False)


def _lower_cast(node: exp.Cast) -> exp.Expression | None:
    source = node.this.type
    if source is None:
        return None
    positional = row_cast(node.this, node.to)
    if positional is not None:
        return positional
    zoned = lower_zoned_cast(node, lambda local: format_timestamp(local, "yyyy-MM-dd HH:mm:ss.SSS"))
    if zoned is not None:  # to or from TIMESTAMP_LTZ, in the session time zone
        return zoned
    # ``.this in`` a set of type names, not ``is_type``, which builds a DataType for every name it compares.
    if node.to.this in exp.DataType.INTEGER_TYPES and source.this in _DOUBLE | {exp.DataType.Type.DECIMAL}:
        # Flink (and Spark) truncate toward zero; DuckDB rounds.
        new = node.copy()
        new.set("this", exp.Trunc(this=new.this))
        return new
    if node.to.this not in exp.DataType.TEXT_TYPES:
        return None
    # Flink prints TIMESTAMP(3) with exactly three fractional digits and booleans as TRUE / FALSE.
    if source.is_type(exp.DataType.Type.TIMESTAMP):
        return format_timestamp(node.this, "yyyy-MM-dd HH:mm:ss.SSS")
    if source.is_type(exp.DataType.Type.BOOLEAN):
        b = node.this
        return (exp.Case().when(b.copy(), exp.Literal.string("TRUE"), copy=False)
                .when(exp.Not(this=b.copy()), exp.Literal.string("FALSE"), copy=False))
    return None


def _lower_floor_ceil_to(node: exp.Expression) -> exp.Expression | None:
    # FLOOR/CEIL(date TO unit) is a DATE in Flink; Spark's DATE_TRUNC and adding units give TIMESTAMPs.
    operand = floor_ceil_operand(node)
    if operand.type is None or not operand.type.is_type(exp.DataType.Type.DATE):
        return None
    date = exp.DataType.build("DATE")
    new = exp.Cast(this=node.copy(), to=date)
    new.type = date
    return new


_LOWERINGS = {exp.Round: _lower_round, exp.Trunc: _lower_trunc, exp.Cast: _lower_cast, exp.TryCast: _lower_cast,
              **{cls: lower_local_time for cls in LOCAL_TIME_CALLS}}


def lower_functions(tree: exp.Expression) -> exp.Expression:
    """Rewrite, in place, the calls of a type-annotated tree whose engine rendering depends on types.

    Run it on the output of ``lower.sqlgen.typed`` (every node carries its type).
    Returns the tree (a new root if the root itself was rewritten).
    """
    nodes = [n for n in tree.walk() if type(n) in _LOWERINGS or n.meta.get(FLOOR_CEIL_TO)]
    for node in reversed(nodes):  # children before their parents
        lowerings = ([_lower_floor_ceil_to] if node.meta.get(FLOOR_CEIL_TO) else []) + \
            ([_LOWERINGS[type(node)]] if type(node) in _LOWERINGS else [])
        new = next((n for n in (lower(node) for lower in lowerings) if n is not None), None)
        if new is None:
            continue
        if new.type is None:
            new.type = node.type
        if node is tree:
            tree = new
        else:
            node.replace(new)
    return tree
