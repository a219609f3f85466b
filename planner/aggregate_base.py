"""What an aggregate kind is (``AggregateKind``) and the partials it is computed in (``Partial``).

The kinds themselves are in ``aggregate_kinds.py`` (the registry) and
``aggregate_ordered.py`` (the ones whose value depends on arrival order).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from .types import is_numeric, to_sql_type


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
    distinct = False  # the kind of an agg(DISTINCT x) that drops repeated values itself (with_distinct)
    in_over = False  # computed over OVER windows (planner/sqlgen_over.py)
    ordered = False  # its value depends on the arrival order of the rows (_Ordered)
    python = False  # a Python aggregate function (python_aggregate.py)
    skips_nulls = True  # NULL arguments are skipped (ARRAY_AGG keeps them, as Flink)
    distinct_help = "DISTINCT works with COUNT, SUM, AVG, MIN, MAX, ARRAY_AGG and COLLECT"  # of a refused agg(DISTINCT x)
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

    def with_distinct(self) -> AggregateKind:
        """The kind for ``agg(DISTINCT x)``: itself where the DISTINCT values are folded as the argument's
        distinct values (``AggCall.keeps_values``); ARRAY_AGG and COLLECT have kinds of their own."""
        return self

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


