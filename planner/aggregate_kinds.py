"""Aggregate kinds: what each aggregate function is, once, for every route.

An aggregate is computed in pieces wherever dsms runs it: per micro-batch
into *partials* (one row per pane and key), partials merged when a window
fires, signed partials added and subtracted by a group aggregate over an
updating input, and the whole thing as one SQL aggregate on the batch
routes. Each kind says, in one class:

* its SQL names (the sqlglot class or function names it is parsed as),
* its result type for an argument type (Flink's),
* its partials: per row a *value*, folded per batch by ``first``
  (``count`` counts non-NULL values, ``sum``, ``min``, ``max``, ``bit_and``,
  ``bit_or``, ``bit_xor``) and merged across batches by ``merge``,
* ``final``: the result from the merged partials, as SQL and as Arrow,
* how it retracts: partials that are only counts and sums can be
  subtracted (``retracts_by_sign``); the others keep a multiset of values
  and are recomputed over what is left (``over_multiset``).

The runtime's per-batch SQL, its merging of panes, the group aggregate's
state, the session windows and the DuckDB and Spark lowerings all derive
what they need from these; none tests an aggregate's name. Adding an
aggregate is one class here (plus its row in docs/sql.md).

Example:
    >>> STDDEV_POP.result_type(pa.float64()), [p.suffix for p in STDDEV_POP.partials(pa.float64())]
    (DataType(double), ['c', 's', 'q'])
    >>> x = exp.column("x")
    >>> AVG.over_values(x, pa.int32(), pa.int32()).sql("duckdb")
    'CAST(CASE WHEN COUNT(x) > 0 THEN SUM(x) // COUNT(x) END AS INT)'
    >>> kind_of(sqlglot.parse_one("BIT_OR(x)")).name, kind_of(sqlglot.parse_one("UPPER(x)"))
    ('BIT_OR', None)
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import sqlglot  # noqa: F401  (the doctest parses with it)
from sqlglot import exp

from .aggregate_base import FOLD, AggregateKind, AggregateTypeError, Partial, fold  # noqa: F401 - re-exported
from .aggregate_ordered import (  # noqa: F401 - re-exported
    ARRAY_AGG,
    ARRAY_AGG_IGNORE_NULLS,
    COLLECT,
    FIRST_VALUE,
    LAST_VALUE,
    LISTAGG,
    ArrayAggIgnoringNulls,
    multiset_of_lists,
)
from .types import sum_type, to_sql_type


def _case_positive(count: exp.Expression, then: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=exp.GT(this=count, expression=exp.Literal.number(0)), true=then)])


def _valid(count: pa.ChunkedArray):
    """A count column with 0 as NULL, so what is divided by it is NULL there."""
    return pc.if_else(pc.equal(count, 0), None, count)


def _average_type(arg: pa.DataType) -> pa.DataType:
    """As in Flink, the average (or deviation) of an integer column is an integer (truncated)."""
    if pa.types.is_integer(arg):
        return arg
    if pa.types.is_decimal(arg):
        return pa.decimal128(38, max(arg.scale, 6))
    return pa.float64()


class Count(AggregateKind):
    name = "COUNT"
    in_over = True
    sql_classes = (exp.Count,)
    takes_distinct = True

    def result_type(self, arg):
        return pa.int64()

    def partials(self, arg):
        return (Partial("c", "count", pa.int64()),)


class Sum(AggregateKind):
    name = "SUM"
    in_over = True
    sql_classes = (exp.Sum,)
    takes_distinct = True
    numeric_only = True

    def result_type(self, arg):
        self.check(arg)
        return sum_type(arg)

    def partials(self, arg):
        # The count tells an empty sum (NULL) from a zero one once rows can be taken away.
        return (Partial("s", "sum", sum_type(arg) if arg is not None else pa.int64()),
                Partial("c", "count", pa.int64(), retract_only=True))

    def final(self, cols, out):
        return _case_positive(cols["c"], cols["s"]) if "c" in cols else cols["s"]

    def final_arrow(self, cols, out):
        return cols["s"].cast(out)


class Avg(AggregateKind):
    name = "AVG"
    in_over = True
    sql_classes = (exp.Avg,)
    takes_distinct = True
    numeric_only = True

    def result_type(self, arg):
        self.check(arg)
        return _average_type(arg)

    def partials(self, arg):
        return (Partial("s", "sum", sum_type(arg) if arg is not None else pa.int64()), Partial("c", "count", pa.int64()))

    def final(self, cols, out):
        s, c = cols["s"], cols["c"]
        if pa.types.is_integer(out):
            return _case_positive(c, exp.IntDiv(this=s, expression=c.copy()))  # truncates toward zero, as Flink
        return _case_positive(c, exp.Div(this=exp.Cast(this=s, to=to_sql_type(pa.float64())), expression=c.copy()))

    def final_arrow(self, cols, out):
        total, count = cols["s"], _valid(cols["c"])
        if pa.types.is_integer(out):
            return pc.divide(total, count).cast(out)  # truncates toward zero, as Flink
        if pa.types.is_decimal(total.type) and pa.types.is_decimal(out):
            # Arrow widens a decimal quotient's scale past 38 digits: divide in 256 bits, then round half up to
            # the result's scale, as Flink's decimal AVG does.
            exact = pc.divide(total.cast(pa.decimal256(total.type.precision, total.type.scale)),
                              count.cast(pa.decimal256(19, 0)))
            return pc.round(exact, ndigits=out.scale, round_mode="half_up").cast(out)
        return pc.divide(total.cast(pa.float64()), count.cast(pa.float64())).cast(out)


class _Extreme(AggregateKind):
    """MIN and MAX: DISTINCT changes nothing; retractions need the multiset of values."""

    in_over = True
    distinct_is_same = True

    def partials(self, arg):
        return (Partial("m", self.name.lower(), arg if arg is not None else pa.int64()),)


class Min(_Extreme):
    name = "MIN"
    sql_classes = (exp.Min,)


class Max(_Extreme):
    name = "MAX"
    sql_classes = (exp.Max,)


class _Moment(AggregateKind):
    """STDDEV and VAR: a count, a sum and a sum of squares, as Flink's AggregateReduceFunctionsRule computes.

    The variance is computed as DOUBLE (``(SUM(x*x) - SUM(x)*SUM(x)/COUNT(x)) / COUNT(x)``, over
    ``COUNT(x) - 1`` for the samples) and, like AVG, has the argument's type: an integer argument gives the
    value truncated toward zero, as Flink does.
    """

    numeric_only = True
    sample = False
    root = False

    def result_type(self, arg):
        self.check(arg)
        return _average_type(arg)

    def partials(self, arg):
        t = pa.int64() if arg is not None and pa.types.is_integer(arg) else pa.float64()
        return (Partial("c", "count", pa.int64()), Partial("s", "sum", t, cast=True),
                Partial("q", "sum", t, cast=True, square=True))

    def final(self, cols, out):
        c, s, q = (exp.Cast(this=cols[x], to=to_sql_type(pa.float64())) for x in ("c", "s", "q"))
        n = exp.Sub(this=c.copy(), expression=exp.Literal.number(1)) if self.sample else c.copy()
        spread = exp.Sub(this=q, expression=exp.Div(this=exp.Mul(this=s, expression=s.copy()), expression=c))
        value = exp.Div(this=exp.Paren(this=spread), expression=exp.Paren(this=n.copy()))
        if self.root:
            value = exp.Sqrt(this=exp.Greatest(this=value, expressions=[exp.Literal.number(0)]))
        if pa.types.is_integer(out):  # truncated toward zero; the variance is never below 0 but for rounding
            value = exp.Floor(this=exp.Greatest(this=value, expressions=[exp.Literal.number(0)]))
        return _case_positive(n, value)

    def final_arrow(self, cols, out):
        c, s, q = (cols[x].cast(pa.float64()) for x in ("c", "s", "q"))
        n = pc.subtract(c, 1.0) if self.sample else c
        n = pc.if_else(pc.less_equal(n, 0), None, n)
        value = pc.divide(pc.subtract(q, pc.divide(pc.multiply(s, s), c)), n)
        if self.root:
            value = pc.sqrt(pc.max_element_wise(value, 0.0, skip_nulls=False))
        if pa.types.is_integer(out):
            value = pc.floor(pc.max_element_wise(value, 0.0, skip_nulls=False))
        return value.cast(out, safe=False)


class StddevPop(_Moment):
    name = "STDDEV_POP"
    sql_classes = (exp.StddevPop,)
    root = True


class StddevSamp(_Moment):
    name = "STDDEV_SAMP"
    sql_classes = (exp.StddevSamp, exp.Stddev)
    sample = root = True


class VarPop(_Moment):
    name = "VAR_POP"
    sql_classes = (exp.VariancePop,)


class VarSamp(_Moment):
    name = "VAR_SAMP"
    sql_classes = (exp.Variance,)
    sample = True


class _Bitwise(AggregateKind):
    """BIT_AND, BIT_OR and BIT_XOR of integers (NULLs are skipped)."""

    integer_only = True

    def partials(self, arg):
        return (Partial("b", self.name.lower(), arg if arg is not None else pa.int64()),)


class BitAnd(_Bitwise):
    name = "BIT_AND"
    sql_names = ("BIT_AND",)


class BitOr(_Bitwise):
    name = "BIT_OR"
    sql_names = ("BIT_OR",)


class BitXor(_Bitwise):
    name = "BIT_XOR"
    sql_names = ("BIT_XOR",)

    def over_multiset(self, v, n, arg, out, distinct=False):
        # x XOR x = 0: a value counts once if it is there an odd number of times.
        odd = exp.EQ(this=exp.Mod(this=n, expression=exp.Literal.number(2)), expression=exp.Literal.number(1))
        return self.over_values(exp.Case(ifs=[exp.If(this=odd, true=v)]), arg, out)



COUNT, SUM, AVG, MIN, MAX = Count(), Sum(), Avg(), Min(), Max()
STDDEV_POP, STDDEV_SAMP, VAR_POP, VAR_SAMP = StddevPop(), StddevSamp(), VarPop(), VarSamp()
BIT_AND, BIT_OR, BIT_XOR = BitAnd(), BitOr(), BitXor()
KINDS: tuple[AggregateKind, ...] = (COUNT, SUM, AVG, MIN, MAX, STDDEV_POP, STDDEV_SAMP, VAR_POP, VAR_SAMP,
                                    BIT_AND, BIT_OR, BIT_XOR, FIRST_VALUE, LAST_VALUE, LISTAGG, ARRAY_AGG,
                                    ARRAY_AGG_IGNORE_NULLS, COLLECT)
NAMES = tuple(dict.fromkeys(k.name for k in KINDS)) + ("STDDEV", "VARIANCE")

# Flink aggregates dsms does not run yet, by the name a user writes (refused with this list, not as unknown).
NOT_YET = ("JSON_ARRAYAGG", "JSON_OBJECTAGG")
NOT_YET_HELP = "ARRAY_AGG(x) collects the values into an array"


def written_name(node: exp.Expression) -> str:
    """The name of a call as a user writes it (``JSON_OBJECTAGG``, not sqlglot's class name)."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return "JSON_OBJECTAGG" if isinstance(node, exp.JSONObjectAgg) else node.sql_name()


SEQ = "__seq"  # the arrival number the runtime gives the rows of an ordered aggregate (_Ordered)


BOUND_KIND = "dsms_aggregate_kind"  # a call's kind the binder chose (a Python aggregate function: python_aggregate.py)


def kind_of(node: exp.Expression) -> AggregateKind | None:
    """The aggregate kind of a parsed call, or None if it is not an aggregate dsms knows."""
    if BOUND_KIND in node.meta:
        return node.meta[BOUND_KIND]
    for k in KINDS:
        if type(node) in k.sql_classes or (isinstance(node, exp.Anonymous) and node.name.upper() in k.sql_names):
            return k
    return None


def is_aggregate(node: exp.Expression) -> bool:
    """A call of an aggregate (known or not: an unknown one is refused by the binder with the list)."""
    return isinstance(node, exp.AggFunc) or kind_of(node) is not None
