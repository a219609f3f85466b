"""Aggregates whose value depends on the order rows arrive in, and COLLECT's multiset.

FIRST_VALUE, LAST_VALUE, LISTAGG and ARRAY_AGG number the rows they
receive (``SEQ``) and keep, under retractions, each value with its arrival
number; COLLECT counts its values. Registered in ``aggregate_kinds.KINDS``.

``ARRAY_AGG(DISTINCT x)`` and ``COLLECT(DISTINCT x)`` are kinds of their own
(``with_distinct``), as Flink computes a DISTINCT aggregate: a per-group map
of each value's count feeds the inner aggregate a value when its first copy
arrives and takes it away when its last copy is retracted. Over an
append-only input that is each value once, where ARRAY_AGG(x) would list it
first; COLLECT(DISTINCT x) counts each value once::

    x arrives     3  1  3  NULL  1        ARRAY_AGG(DISTINCT x)   [3, 1, NULL]
                                          COLLECT(DISTINCT x)     {3: 1, 1: 1}
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from .aggregate_base import AggregateKind, AggregateTypeError, Partial
from .types import to_sql_type


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

    def over_ordered(self, v: exp.Expression, seq: exp.Expression, out: pa.DataType,
                     first: exp.Expression | None = None) -> exp.Expression:
        """The whole aggregate as SQL over the rows' values ``v`` in the order of ``seq`` (``first``: a condition
        true for the first row of each value, which alone counts: the DISTINCT kinds)."""
        value = self.batch_items(v, seq)["v"]
        if first is not None:
            kept = exp.Where(this=first.copy())
            if isinstance(value, exp.Filter):
                kept = exp.Where(this=exp.and_(value.expression.this.copy(), first.copy()))
                value = value.this
            value = exp.Filter(this=value, expression=kept)
        return exp.Cast(this=value, to=to_sql_type(out))

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
    ``ARRAY_AGG(DISTINCT x)`` (``distinct``) lists each value once (NULL too, unless IGNORE NULLS), where it
    first arrived; under retractions a value leaves when its last copy does, and comes back at the end.
    """

    name = "ARRAY_AGG"
    how = "array"
    takes_distinct = True

    def __init__(self, ignore_nulls: bool = False, distinct: bool = False):
        self.skips_nulls = ignore_nulls
        self.distinct = distinct
        self.takes_distinct = not distinct  # the DISTINCT kind drops repeats itself (AggCall.keeps_values)
        self.sql_classes = (ArrayAggIgnoringNulls,) if ignore_nulls else (exp.ArrayAgg,)

    def with_null_treatment(self, ignore: bool) -> AggregateKind:
        return ARRAY_AGG_IGNORE_NULLS if ignore else ARRAY_AGG

    def with_distinct(self) -> AggregateKind:
        return ArrayAgg(self.skips_nulls, distinct=True)

    def final_arrow(self, cols, out):
        merged = cols["v"].cast(out)
        return first_occurrences(merged.combine_chunks()) if self.distinct else merged

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
    ``COLLECT(DISTINCT x)`` (``distinct``) counts each live value once, as Flink's distinct map feeds
    CollectAggFunction a value only when its first copy arrives.
    """

    name = "COLLECT"
    sql_names = ("COLLECT",)
    not_on_spark = "a MULTISET is a MAP of counts, which the Spark lowering does not build"
    takes_distinct = True

    def __init__(self, distinct: bool = False):
        self.distinct = distinct
        self.takes_distinct = not distinct  # the DISTINCT kind counts each value once itself

    def with_distinct(self) -> AggregateKind:
        return Collect(distinct=True)

    def result_type(self, arg):
        element = arg if arg is not None else pa.null()
        return pa.map_(element, pa.int32())

    def partials(self, arg):
        return (Partial("l", "list", pa.list_(arg if arg is not None else pa.null())),)

    def final(self, cols, out):
        values = exp.Anonymous(this="LIST_DISTINCT", expressions=[cols["l"]]) if self.distinct else cols["l"]
        counted = exp.Anonymous(this="LIST_AGGREGATE", expressions=[values, exp.Literal.string("histogram")])
        return exp.Cast(this=exp.Coalesce(this=counted, expressions=[exp.Anonymous(this="MAP", expressions=[])]),
                        to=to_sql_type(out))

    def final_arrow(self, cols, out):
        return multiset_of_lists(cols["l"].combine_chunks(), out, self.distinct)

    def over_multiset(self, v, n, arg, out, distinct=False):
        where = exp.Where(this=exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null())))
        values = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[v.copy()]), expression=where)
        once = exp.Cast(this=exp.Literal.number(1), to=to_sql_type(out.item_type))
        counts = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[once if self.distinct else n.copy()]),
                            expression=where.copy())
        built = exp.Anonymous(this="MAP", expressions=[values, counts])
        return exp.Cast(this=exp.Coalesce(this=built, expressions=[exp.Anonymous(this="MAP", expressions=[])]),
                        to=to_sql_type(out))


def multiset_of_lists(lists: pa.ListArray, out: pa.DataType, distinct: bool = False) -> pa.MapArray:
    """Per list, its non-NULL values counted (``out``: ``MAP<T, INT>``; ``distinct``: each counted once); a NULL
    list is an empty multiset."""
    values = lists.flatten()
    rows = pa.table({"g": pc.list_parent_indices(lists), "v": values}).filter(pc.is_valid(values))
    counted = rows.group_by(["g", "v"], use_threads=False).aggregate([([], "count_all")]).sort_by([("g", "ascending")])
    per_list = np.bincount(counted.column("g").to_numpy(), minlength=len(lists)) if counted.num_rows \
        else np.zeros(len(lists), np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_list)]), pa.int32())
    counts = counted.column("count_all").combine_chunks().cast(out.item_type)
    if distinct:
        counts = pa.array(np.ones(len(counts), np.int32), pa.int32()).cast(out.item_type)
    return pa.MapArray.from_arrays(offsets, counted.column("v").combine_chunks().cast(out.key_type), counts, type=out)


def first_occurrences(lists: pa.ListArray) -> pa.ListArray:
    """Per list, each value once, where it first occurs (NULL is a value too); a NULL list stays NULL::

        [3, 1, 3, NULL, 1, NULL]  ->  [3, 1, NULL]
    """
    values = lists.flatten()
    parents = pc.list_parent_indices(lists)
    rows = pa.table({"g": parents, "v": values, "i": pa.array(np.arange(len(values), dtype=np.int64))})
    firsts = rows.group_by(["g", "v"], use_threads=False).aggregate([("i", "min")]).column("i_min")
    kept = np.sort(firsts.to_numpy()) if len(firsts) else np.zeros(0, np.int64)
    per_list = np.bincount(parents.to_numpy()[kept], minlength=len(lists)) if len(kept) \
        else np.zeros(len(lists), np.int64)
    offsets = pa.array(np.concatenate([[0], np.cumsum(per_list)]), pa.int32())
    return pa.ListArray.from_arrays(offsets, values.take(pa.array(kept, pa.int64())), type=lists.type,
                                    mask=lists.is_null())


FIRST_VALUE, LAST_VALUE, LISTAGG = FirstValue(), LastValue(), ListAgg()
ARRAY_AGG, ARRAY_AGG_IGNORE_NULLS, COLLECT = ArrayAgg(), ArrayAgg(ignore_nulls=True), Collect()
