"""Python aggregate functions (``accumulate`` / ``get_value``) as an aggregate kind.

dsms keeps an aggregate's state as Arrow and DuckDB values, not as Python
objects, so a Python aggregate keeps the values it aggregates: its partial
is the LIST of its non-NULL argument values (merged by concatenation, pane
by pane and batch by batch), and its result is computed when it is needed
by a *finisher*: a Python scalar function, registered for DuckDB under
``internal``, that takes the list of values (and, over a group aggregate's
multiset of live values, the count of each) and calls the function's
``create_accumulator``, ``accumulate`` for each value and ``get_value``.
Over an updating input a retracted value leaves the multiset, so the
result is recomputed from what is left (``retract`` is not needed).

Example:
    >>> kind = PythonAggregate("median", "median__fin1", pa.float64(), finish=None)
    >>> [(p.suffix, p.first, str(p.type)) for p in kind.partials(pa.int64())]
    [('l', 'list', 'list<item: int64>')]
    >>> kind.over_values(exp.column("x"), pa.int64(), pa.float64()).sql("duckdb")
    'CAST(MEDIAN__FIN1(LIST(x) FILTER(WHERE NOT x IS NULL), NULL) AS DOUBLE)'
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
from sqlglot import exp

from .aggregate_kinds import AggregateKind, Partial
from .types import to_sql_type


class PythonAggregate(AggregateKind):
    """A Python aggregate function: its partial is the list of its values; a finisher computes the result."""

    in_over = False
    python = True

    def __init__(self, name: str, internal: str, returns: pa.DataType,
                 finish: Callable[[pa.Array], pa.Array] | None):
        self.name = name
        self.internal = internal  # the finisher's name in DuckDB: f(values LIST, counts LIST or NULL)
        self.returns = returns
        self.finish = finish  # the finisher over a list array, for the runtime's windows (Arrow)

    def __eq__(self, other) -> bool:
        return isinstance(other, PythonAggregate) and other.internal == self.internal

    def __hash__(self) -> int:
        return hash(self.internal)

    def __deepcopy__(self, memo):  # a call's meta holds its kind; copies of the tree share it
        return self

    def result_type(self, arg):
        return self.returns

    def partials(self, arg):
        return (Partial("l", "list", pa.list_(arg if arg is not None else pa.null())),)

    def _finished(self, values: exp.Expression, counts: exp.Expression) -> exp.Expression:
        return exp.Cast(this=exp.Anonymous(this=self.internal, expressions=[values, counts]),
                        to=to_sql_type(self.returns))

    def final(self, cols, out):
        return self._finished(cols["l"], exp.Null())

    def final_arrow(self, cols, out):
        return self.finish(cols["l"].combine_chunks()).cast(out)

    def over_values(self, v, arg, out, distinct=False):
        present = exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))
        values = exp.Filter(this=exp.Anonymous(this="LIST", expressions=[v.copy()]), expression=exp.Where(this=present))
        return self._finished(values, exp.Null())

    def over_multiset(self, v, n, arg, out, distinct=False):
        return self._finished(exp.Anonymous(this="LIST", expressions=[v.copy()]),
                              exp.Anonymous(this="LIST", expressions=[n.copy()]))


class PythonAggregateCall(exp.Expression, exp.AggFunc):
    """A call of a Python aggregate function; its kind is in ``meta`` (``aggregate_kinds.BOUND_KIND``)."""

    arg_types = {"this": True}

    def sql_name(self) -> str:
        kind = self.meta.get("dsms_aggregate_kind")
        return kind.name if kind is not None else "PYTHON_AGGREGATE"
