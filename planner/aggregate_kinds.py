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

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import sqlglot  # noqa: F401  (the doctest parses with it)
from sqlglot import exp

from .types import is_numeric, sum_type, to_sql_type


class AggregateTypeError(ValueError):
    """An aggregate's argument has a type it cannot take (the binder turns it into a Diagnostic)."""


@dataclass(frozen=True)
class Partial:
    """One partial column of an aggregate.

    ``value`` makes the per-row value from the argument (None: the argument
    as it is); ``first`` folds a batch's values (``count``: non-NULL values);
    ``merge`` folds partials. ``retract_only`` partials are kept only where
    rows can be taken away (a group aggregate over an updating input).
    """

    suffix: str
    first: str  # count | sum | min | max | bit_and | bit_or | bit_xor | list | <how>_by (_Ordered)
    type: pa.DataType
    cast: bool = False  # the value is the argument cast to ``type`` (else the fold's result is cast)
    square: bool = False  # the value is the argument squared (in ``type``)
    retract_only: bool = False

    @property
    def merge(self) -> str:
        """How partials of this column combine: counts and sums add up."""
        return "sum" if self.first == "count" else self.first

    def value(self, arg: exp.Expression) -> exp.Expression:
        """The per-row value of the argument ``arg`` this partial folds."""
        v = exp.Cast(this=arg.copy(), to=to_sql_type(self.type)) if self.cast and self.first != "count" else arg.copy()
        if self.square:
            v = exp.Mul(this=exp.Paren(this=v), expression=exp.Paren(this=v.copy()))
        return v


FOLD = "aggregate_fold"  # the meta flag of the SQL aggregates fold() makes (lower_window puts OVER on them)
_FOLDS = {"count": exp.Count, "sum": exp.Sum, "min": exp.Min, "max": exp.Max}


def fold(how: str, value: exp.Expression, distinct: bool = False) -> exp.Expression:
    """The SQL aggregate ``how`` over ``value`` (``count``, ``sum``, ``min``, ``max``, ``bit_*``)."""
    arg = exp.Distinct(expressions=[value]) if distinct else value
    out = _FOLDS[how](this=arg) if how in _FOLDS else exp.Anonymous(this=how.upper(), expressions=[arg])
    out.meta[FOLD] = True
    return out


class AggregateKind(ABC):
    """Base of the aggregate kinds (see the module docstring)."""

    name: str = ""
    sql_classes: tuple[type, ...] = ()  # the sqlglot classes it parses as
    sql_names: tuple[str, ...] = ()  # or the names of an anonymous call
    takes_distinct = False  # DISTINCT changes the result
    distinct_is_same = False  # DISTINCT is allowed and changes nothing (MIN, MAX)
    in_over = False  # computed over OVER windows (planner/sqlgen_over.py)
    ordered = False  # its value depends on the arrival order of the rows (_Ordered)
    python = False  # a Python aggregate function (python_aggregate.py)
    skips_nulls = True  # NULL arguments are skipped (ARRAY_AGG keeps them, as Flink)
    distinct_help = "DISTINCT works with COUNT, SUM, AVG, MIN and MAX"  # the help of a refused agg(DISTINCT x)
    not_on_spark = ""  # why the Spark route cannot compute it (empty: it can)
    numeric_only = False
    integer_only = False

    def __repr__(self) -> str:
        return self.name

    def result_type(self, arg: pa.DataType | None) -> pa.DataType:
        """Flink's result type for an argument of type ``arg`` (None for ``*``)."""
        self.check(arg)
        return arg

    def check(self, arg: pa.DataType | None) -> None:
        if self.numeric_only and arg is not None and not is_numeric(arg):
            raise AggregateTypeError(f"{self.name} needs a numeric argument, not {arg}")
        if self.integer_only and arg is not None and not pa.types.is_integer(arg):
            raise AggregateTypeError(f"{self.name} needs an integer argument, not {arg}")

    def with_null_treatment(self, ignore: bool) -> AggregateKind:
        """The kind for ``IGNORE NULLS`` (``ignore``) or ``RESPECT NULLS`` written after the argument."""
        if ignore == self.skips_nulls:
            return self
        raise AggregateTypeError(f"{self.name} skips NULL values: RESPECT NULLS is not supported" if self.skips_nulls
                                 else f"{self.name} keeps NULL values: IGNORE NULLS is not supported")

    def with_arguments(self, extra: list[exp.Expression]) -> AggregateKind:
        """The kind for a call with arguments after the first (LISTAGG's separator)."""
        if extra:
            raise AggregateTypeError(f"{self.name} takes one argument")
        return self

    @abstractmethod
    def partials(self, arg: pa.DataType | None) -> tuple[Partial, ...]:
        """The partial columns for an argument of type ``arg``."""

    def final(self, cols: dict[str, exp.Expression], out: pa.DataType) -> exp.Expression:
        """The result from the merged partials (by suffix), as SQL of type ``out``."""
        (p,) = [p for p in cols.values()]
        return p

    def final_arrow(self, cols: dict[str, pa.ChunkedArray], out: pa.DataType):
        """The result from the merged partials (by suffix), as an Arrow column of type ``out``."""
        (p,) = [p for p in cols.values()]
        return p.cast(out)

    @property
    def retracts_by_sign(self) -> bool:
        """Whether rows taken away are subtracted from the partials (counts and sums only)."""
        return all(p.first in ("count", "sum") for p in self.partials(pa.int64()))

    def over_values(self, v: exp.Expression, arg: pa.DataType | None, out: pa.DataType,
                    distinct: bool = False) -> exp.Expression:
        """The whole aggregate as one SQL expression over the rows' values ``v`` (the batch routes)."""
        folded = {p.suffix: fold(p.first, p.value(v), distinct and self.takes_distinct)
                  for p in self.partials(arg) if not p.retract_only}
        return exp.Cast(this=self.final(folded, out), to=to_sql_type(out))

    def over_multiset(self, v: exp.Expression, n: exp.Expression, arg: pa.DataType | None,
                      out: pa.DataType, distinct: bool = False) -> exp.Expression:
        """The aggregate over the distinct live values ``v`` of a multiset, each ``n`` times (n > 0)."""
        del n  # a value's multiplicity changes nothing for MIN, MAX, BIT_AND, BIT_OR and DISTINCT
        return self.over_values(v, arg, out)


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


class _Ordered(AggregateKind):
    """FIRST_VALUE, LAST_VALUE, LISTAGG and ARRAY_AGG: their value depends on the order rows arrive in.

    A row's place is an arrival number (the runtime numbers the rows it
    receives; the batch routes use the source order). The partials are the
    value (``v``, merged by ``<how>_by`` the order column) and the order of
    the partial's first or last row (``o``); NULLs are skipped, as in Flink
    (ARRAY_AGG keeps them: ``skips_nulls``).
    Under retractions the group aggregate keeps each value with its arrival
    number, and a retraction takes away the value's earliest occurrence (as
    Flink's ``*WithRetractAggFunction`` do).
    """

    ordered = True
    how = "first"  # first | last | listagg | array

    def partials(self, arg):
        value = pa.string() if self.how == "listagg" else (arg if arg is not None else pa.int64())
        return (Partial("v", f"{self.how}_by", value), Partial("o", "max" if self.how == "last" else "min", pa.int64()))

    def batch_items(self, v: exp.Expression, seq: exp.Expression) -> dict[str, exp.Expression]:
        """The partials of a batch as SQL over the value ``v`` and the arrival number ``seq``."""
        present = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null())),
                                       true=seq.copy())]) if self.skips_nulls else seq.copy()
        if self.how == "array":  # no row (only a group aggregate's key without live values): NULL
            value = exp.Filter(this=exp.ArrayAgg(this=exp.Order(this=v.copy(), expressions=[exp.Ordered(this=seq.copy())])),
                               expression=exp.Where(this=exp.Not(this=exp.Is(this=present.copy(),
                                                                              expression=exp.Null()))))
        elif self.how == "listagg":
            value = exp.GroupConcat(this=exp.Order(this=v.copy(), expressions=[exp.Ordered(this=seq.copy())]),
                                    separator=exp.Literal.string(self.separator))
        else:
            value = (exp.ArgMax if self.how == "last" else exp.ArgMin)(this=v.copy(), expression=present)
        return {"v": value, "o": (exp.Max if self.how == "last" else exp.Min)(this=present.copy())}

    def over_ordered(self, v: exp.Expression, seq: exp.Expression, out: pa.DataType) -> exp.Expression:
        """The whole aggregate as SQL over the rows' values ``v`` in the order of ``seq``."""
        return exp.Cast(this=self.batch_items(v, seq)["v"], to=to_sql_type(out))

    def over_values(self, v, arg, out, distinct=False):
        raise AggregateTypeError(f"{self.name} needs the order rows arrive in")

    def final(self, cols, out):
        return cols["v"]

    def final_arrow(self, cols, out):
        return cols["v"].cast(out)


class FirstValue(_Ordered):
    name = "FIRST_VALUE"
    sql_classes = (exp.FirstValue,)


class LastValue(_Ordered):
    name = "LAST_VALUE"
    sql_classes = (exp.LastValue,)
    how = "last"


class ListAgg(_Ordered):
    """LISTAGG(x [, separator]): the strings in arrival order, joined by the separator (',' by default)."""

    name = "LISTAGG"
    sql_names = ("LISTAGG",)
    how = "listagg"

    def __init__(self, separator: str = ","):
        self.separator = separator

    def check(self, arg):
        if arg is not None and not pa.types.is_string(arg) and not pa.types.is_large_string(arg):
            raise AggregateTypeError(f"LISTAGG needs a string argument, not {arg}: CAST it to STRING")

    def result_type(self, arg):
        self.check(arg)
        return pa.string()

    def with_arguments(self, extra):
        if not extra:
            return self
        if len(extra) != 1 or not isinstance(extra[0], exp.Literal) or not extra[0].is_string:
            raise AggregateTypeError("LISTAGG takes (string [, separator]), the separator a string literal")
        return ListAgg(extra[0].name)


class ArrayAggIgnoringNulls(exp.ArrayAgg):
    """``ARRAY_AGG(x IGNORE NULLS)`` as the binder rewrites it: a class of its own, so that the call is not
    equal to ``ARRAY_AGG(x)`` (sqlglot compares trees by class and arguments)."""

    @classmethod
    def sql_name(cls) -> str:
        return "ARRAY_AGG"


class ArrayAgg(_Ordered):
    """ARRAY_AGG(x): the values in arrival order, NULLs included (Flink's default, RESPECT NULLS; ``IGNORE
    NULLS`` skips them); NULL for no rows.

    A retraction takes away the value's earliest occurrence, as Flink's ``ArrayAggFunction.retract``.
    """

    name = "ARRAY_AGG"
    how = "array"
    distinct_help = ("not yet (Flink has it); over an append-only input ARRAY_DISTINCT(ARRAY_AGG(x)) gives each "
                     "value once, in the order it first arrived")

    def __init__(self, ignore_nulls: bool = False):
        self.skips_nulls = ignore_nulls
        self.sql_classes = (ArrayAggIgnoringNulls,) if ignore_nulls else (exp.ArrayAgg,)

    def with_null_treatment(self, ignore: bool) -> AggregateKind:
        return ARRAY_AGG_IGNORE_NULLS if ignore else ARRAY_AGG

    not_on_spark = "Spark SQL's collect_list skips NULL values and takes no order, and ARRAY_AGG keeps both"

    def result_type(self, arg):
        return pa.list_(arg if arg is not None else pa.null())

    def partials(self, arg):
        return (Partial("v", "array_by", self.result_type(arg)), Partial("o", "min", pa.int64()))


class Collect(AggregateKind):
    """COLLECT(x): the MULTISET of the non-NULL values, kept as ``MAP<T, INT>`` (value -> count) as dsms stores
    a MULTISET; an empty multiset for no values, as Flink's ``CollectAggFunction``.

    Its partial is the list of the values (merged by concatenation); the counts are made when it is finished.
    Over an updating input the group aggregate keeps the multiset of live values and their counts.
    """

    name = "COLLECT"
    sql_names = ("COLLECT",)
    not_on_spark = "a MULTISET is a MAP of counts, which the Spark lowering does not build"

    def result_type(self, arg):
        element = arg if arg is not None else pa.null()
        return pa.map_(element, pa.int32())

    def partials(self, arg):
        return (Partial("l", "list", pa.list_(arg if arg is not None else pa.null())),)

    def final(self, cols, out):
        counted = exp.Anonymous(this="LIST_AGGREGATE", expressions=[cols["l"], exp.Literal.string("histogram")])
        return exp.Cast(this=exp.Coalesce(this=counted, expressions=[exp.Anonymous(this="MAP", expressions=[])]),
                        to=to_sql_type(out))

    def final_arrow(self, cols, out):
        return multiset_of_lists(cols["l"].combine_chunks(), out)

    def over_multiset(self, v, n, arg, out, distinct=False):
        where = exp.Where(this=exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null())))
        values = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[v.copy()]), expression=where)
        counts = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[n.copy()]), expression=where.copy())
        built = exp.Anonymous(this="MAP", expressions=[values, counts])
        return exp.Cast(this=exp.Coalesce(this=built, expressions=[exp.Anonymous(this="MAP", expressions=[])]),
                        to=to_sql_type(out))


def multiset_of_lists(lists: pa.ListArray, out: pa.DataType) -> pa.MapArray:
    """Per list, its non-NULL values counted (``out``: ``MAP<T, INT>``); a NULL list is an empty multiset."""
    values = lists.flatten()
    rows = pa.table({"g": pc.list_parent_indices(lists), "v": values}).filter(pc.is_valid(values))
    counted = rows.group_by(["g", "v"], use_threads=False).aggregate([([], "count_all")]).sort_by([("g", "ascending")])
    per_list = np.bincount(counted.column("g").to_numpy(), minlength=len(lists)) if counted.num_rows \
        else np.zeros(len(lists), np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_list)]), pa.int32())
    return pa.MapArray.from_arrays(offsets, counted.column("v").combine_chunks().cast(out.key_type),
                                   counted.column("count_all").combine_chunks().cast(out.item_type), type=out)


COUNT, SUM, AVG, MIN, MAX = Count(), Sum(), Avg(), Min(), Max()
STDDEV_POP, STDDEV_SAMP, VAR_POP, VAR_SAMP = StddevPop(), StddevSamp(), VarPop(), VarSamp()
BIT_AND, BIT_OR, BIT_XOR = BitAnd(), BitOr(), BitXor()
FIRST_VALUE, LAST_VALUE, LISTAGG = FirstValue(), LastValue(), ListAgg()
ARRAY_AGG, ARRAY_AGG_IGNORE_NULLS, COLLECT = ArrayAgg(), ArrayAgg(ignore_nulls=True), Collect()
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
