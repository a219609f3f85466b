"""Python aggregate functions (PyFlink's ``AggregateFunction``) as an aggregate kind.

The partial of a Python aggregate is its accumulator, pickled (a BLOB; the
runtime's steps are in ``runtime/udaf.py``, registered for DuckDB under the
function's ``internal`` name and a suffix):

* a window's batch groups its rows per (pane, key) in DuckDB and gives each
  group's values as one blob (``<internal>_rows``); the operator folds them
  into the pane's accumulator (``accumulate``) and merges the accumulators of
  a window's panes when it fires (``merge``: merges are the ``py:<internal>``
  kind of merge of ``runtime/operators/partial_merge.py``);
* a group aggregate keeps one accumulator per key in its state table and
  updates it with the batch's signed rows in arrival order
  (``<internal>_step``: ``accumulate``, or ``retract`` for a retraction);
* the result is ``get_value`` of the accumulator (``<internal>_value``).

The batch routes compute it in one pass over each group's values (the
finisher ``<internal>``). NULL values of a one-argument call are skipped, as
the built-in aggregates skip them; a call with several arguments passes
them packed in a ROW (``spread``), and the function gets them as
``accumulate(acc, a, b, ...)``.

Example:
    >>> kind = PythonAggregate("median", "median__py1", pa.float64(), finish=None)
    >>> [(p.suffix, p.first, str(p.type)) for p in kind.partials(pa.int64())]
    [('a', 'py:median__py1', 'binary')]
    >>> kind.batch_partial(exp.column("x")).sql("duckdb")
    'MEDIAN__PY1_ROWS(LIST(x) FILTER(WHERE NOT x IS NULL), 1)'
    >>> kind.over_values(exp.column("x"), pa.int64(), pa.float64()).sql("duckdb")
    'CAST(MEDIAN__PY1(LIST(x) FILTER(WHERE NOT x IS NULL), NULL, 1) AS DOUBLE)'
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pyarrow as pa
from sqlglot import exp

from .aggregate_kinds import AggregateKind, Partial
from .types import to_sql_type

MERGE_PREFIX = "py:"  # the merge of a Python aggregate's partial: py:<internal>


class PythonAggregate(AggregateKind):
    """A Python aggregate function: its partial is its pickled accumulator (see the module docstring)."""

    in_over = False
    python = True

    def __init__(self, name: str, internal: str, returns: pa.DataType,
                 finish: Callable[[pa.Array], pa.Array] | None, can_retract: bool = False, can_merge: bool = False):
        self.name = name
        self.internal = internal  # its functions' names in DuckDB (runtime/udaf.py::register_aggregate)
        self.returns = returns
        self.finish = finish  # the results of a binary column of accumulators, for the runtime's windows (Arrow)
        self.can_retract = can_retract
        self.can_merge = can_merge
        self.spread = 1  # how many arguments a call passes (packed in a ROW when more than one)

    def with_spread(self, n: int) -> PythonAggregate:
        """The kind of a call with ``n`` arguments."""
        if n == self.spread:
            return self
        out = copy.copy(self)
        out.spread = n
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, PythonAggregate) and (other.internal, other.spread) == (self.internal, self.spread)

    def __hash__(self) -> int:
        return hash((self.internal, self.spread))

    def __deepcopy__(self, memo):  # a call's meta holds its kind; copies of the tree share it
        return self

    def result_type(self, arg):
        return self.returns

    def partials(self, arg):
        return (Partial("a", MERGE_PREFIX + self.internal, pa.binary()),)

    def _call(self, suffix: str, *args: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this=self.internal + suffix, expressions=list(args))

    def _spread(self) -> exp.Expression:
        return exp.Literal.number(self.spread)

    def _present(self, v: exp.Expression) -> exp.Expression:
        """``LIST(v)`` of the rows whose argument is not NULL (a FILTER makes it NULL where it does not hold)."""
        present = exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))
        return exp.Filter(this=exp.Anonymous(this="LIST", expressions=[v.copy()]), expression=exp.Where(this=present))

    def batch_partial(self, v: exp.Expression, of_list: bool = False) -> exp.Expression:
        """The blob of a group's values in one batch (a window's per-batch partial); ``of_list``: of the values of
        the list ``v`` (one event of a session: ``[x]``; its NULL values are skipped)."""
        return self._call("_rows", v if of_list else self._present(v), self._spread())

    def step(self, acc: exp.Expression, changes: exp.Expression) -> exp.Expression:
        """The accumulator ``acc`` (NULL: a new key) after the LIST of ``{'s': sign, 'v': value}`` ``changes``."""
        return self._call("_step", acc, changes, self._spread())

    def value(self, acc: exp.Expression) -> exp.Expression:
        return exp.Cast(this=self._call("_value", acc), to=to_sql_type(self.returns))

    def final(self, cols, out):
        return self.value(cols["a"])

    def final_arrow(self, cols, out):
        return self.finish(cols["a"].combine_chunks()).cast(out)

    def over_values(self, v, arg, out, distinct=False):
        return exp.Cast(this=self._call("", self._present(v), exp.Null(), self._spread()), to=to_sql_type(self.returns))

    def over_multiset(self, v, n, arg, out, distinct=False):
        return exp.Cast(this=self._call("", exp.Anonymous(this="LIST", expressions=[v.copy()]),
                                        exp.Anonymous(this="LIST", expressions=[n.copy()]), self._spread()),
                        to=to_sql_type(self.returns))


class PythonAggregateCall(exp.Expression, exp.AggFunc):
    """A call of a Python aggregate function; its kind is in ``meta`` (``aggregate_kinds.BOUND_KIND``)."""

    arg_types = {"this": True}

    def __hash__(self) -> int:  # two functions called on the same argument are two aggregates
        return hash((super().__hash__(), self.meta.get("dsms_aggregate_kind")))

    def __eq__(self, other) -> bool:
        return self is other or (type(self) is type(other) and hash(self) == hash(other))

    def sql_name(self) -> str:
        kind = self.meta.get("dsms_aggregate_kind")
        return kind.name if kind is not None else "PYTHON_AGGREGATE"
