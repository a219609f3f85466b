"""Python aggregate functions with accumulators, as PyFlink's ``AggregateFunction``.

A function has ``create_accumulator()``, ``accumulate(acc, *args)``,
``get_value(acc)`` and, where it is needed, ``retract(acc, *args)`` (an
updating input) and ``merge(acc, accs)`` (HOP, CUMULATE and SESSION
windows, whose windows share slices). The state of a group is its
accumulator, pickled into a *blob* (a BLOB in a group aggregate's DuckDB
state table, a binary column in a window's panes), so it is checkpointed
with the rest and does not grow with the values. A blob is one of::

    (ACC, acc)          an accumulator
    (ROWS, (n, values)) one batch's values of a group, not yet accumulated
                        (tuples of the n arguments of a call, if n > 1)

A window's batch gives ROWS blobs per (pane, key) (DuckDB groups the batch,
:meth:`Accumulators.rows`); the pane folds them into its accumulator
(:meth:`Accumulators.combine`: ``accumulate`` per row), so a TUMBLE window
never needs ``merge``; a window made of several panes merges
their accumulators into a fresh one when it fires. A group aggregate
updates its keys' accumulators in place (:meth:`Accumulators.step`:
``accumulate`` for ``+I``/``+U`` rows, ``retract`` for ``-U``/``-D``).

Each step is registered as a DuckDB function (:func:`register_aggregate`),
under the aggregate's internal name and a suffix (``_rows``, ``_step``,
``_value``; the bare name is the batch routes' finisher over the list of a
group's values). A failure inside the function is a :class:`UdfError`
naming the function, the method and the row (or accumulator) it failed on.

Example:
    >>> class Total:
    ...     def create_accumulator(self): return [0]
    ...     def accumulate(self, acc, v): acc[0] += v
    ...     def retract(self, acc, v): acc[0] -= v
    ...     def get_value(self, acc): return acc[0]
    >>> t = Accumulators("total", Total(), pa.int64())
    >>> blob = t.step(None, [{"s": 1, "v": 5}, {"s": 1, "v": 7}, {"s": -1, "v": 5}], 1)
    >>> t.value(t.combine([blob, t.rows([1, 2], 1)]))
    10
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from ..planner.types import to_sql_type
from .errors import PythonFunctionError
from .udf import UdfError, _describe, _short, register

ACC, ROWS = 0, 1


def _args(value: Any, spread: int) -> tuple:
    """The arguments of one call: a call with several arguments passes them packed in a ROW."""
    return tuple(value.values()) if spread > 1 else (value,)


def _present(values: list | None, spread: int) -> list:
    """The non-NULL ``values``, each a tuple of arguments when a call passes ``spread`` > 1 of them in a ROW."""
    if spread > 1:
        return [tuple(v.values()) for v in values or () if v is not None]
    return [v for v in values or () if v is not None]


def _load(blob: bytes) -> tuple[int, Any]:
    return pickle.loads(blob)


def _dump(acc: Any) -> bytes:
    return pickle.dumps((ACC, acc), protocol=pickle.HIGHEST_PROTOCOL)


class Accumulators:
    """The accumulator steps of one Python aggregate function ``func`` (see the module docstring)."""

    def __init__(self, name: str, func: Any, returns: pa.DataType):
        self.name, self.func, self.returns = name, func, returns
        self.can_retract = callable(getattr(func, "retract", None))
        self.can_merge = callable(getattr(func, "merge", None))

    def _failed(self, method: str, shown: str, e: Exception) -> UdfError:
        return UdfError(f"the Python aggregate function {self.name} failed in {method} on {shown}: {_describe(e)}")

    def fresh(self) -> Any:
        try:
            return self.func.create_accumulator()
        except Exception as e:  # user code: any failure is the function's
            raise self._failed("create_accumulator", "a new group", e) from None

    def _add(self, acc: Any, args: tuple, retract: bool = False) -> None:
        method = "retract" if retract else "accumulate"
        try:
            getattr(self.func, method)(acc, *args)
        except Exception as e:  # user code: the error names the row it failed on
            raise self._failed(method, f"the row {self.name}({', '.join(_short(repr(a)) for a in args)})", e) \
                from None

    def _add_all(self, acc: Any, values: list, spread: int) -> None:
        """``accumulate`` each value into ``acc`` (a tuple of arguments when ``spread`` > 1). The hot loop: the
        method is looked up once, and one argument is passed as it is."""
        add = self.func.accumulate
        v: Any = None
        try:
            if spread == 1:
                for v in values:
                    add(acc, v)
            else:
                for v in values:
                    add(acc, *v)
        except Exception as e:  # user code: the error names the row it failed on
            args = v if spread > 1 else (v,)
            raise self._failed("accumulate", f"the row {self.name}({', '.join(_short(repr(a)) for a in args)})", e) \
                from None

    def _open(self, blob: bytes | None) -> Any:
        """The accumulator of a blob (a ROWS blob accumulated into a fresh one)."""
        if blob is None:
            return self.fresh()
        tag, payload = _load(blob)
        if tag == ACC:
            return payload
        acc = self.fresh()
        self._add_all(acc, payload[1], payload[0])
        return acc

    def _merged(self, accs: list) -> Any:
        acc = self.fresh()
        if not self.can_merge:  # the planner refuses such windows; kept as a clear error, not a wrong result
            raise UdfError(f"the Python aggregate function {self.name} has no merge(acc, accs)")
        try:
            self.func.merge(acc, accs)
        except Exception as e:
            raise self._failed("merge", f"{len(accs)} accumulators ({_short(repr(accs))})", e) from None
        return acc

    def rows(self, values: list | None, spread: int) -> bytes:
        """A ROWS blob of one group's non-NULL argument values (a ROW of them for ``spread`` > 1 arguments)."""
        return pickle.dumps((ROWS, (spread, _present(values, spread))), protocol=pickle.HIGHEST_PROTOCOL)

    def combine(self, blobs: list[bytes]) -> bytes:
        """One accumulator of ``blobs`` (in arrival order): their accumulators merged, their rows accumulated."""
        if len(blobs) == 1 and _load(blobs[0])[0] == ACC:
            return blobs[0]
        accs, pending = [], []
        for blob in blobs:
            tag, payload = _load(blob)
            (accs if tag == ACC else pending).append(payload)
        acc = self._merged(accs) if len(accs) > 1 else accs[0] if accs else self.fresh()
        for spread, values in pending:
            self._add_all(acc, values, spread)
        return _dump(acc)

    def step(self, blob: bytes | None, changes: list | None, spread: int) -> bytes:
        """The accumulator ``blob`` (None: a new group) after ``changes``: ``{'s': +1 or -1, 'v': value}`` rows."""
        acc = self._open(blob)
        changes = changes or ()
        if all(change["s"] > 0 for change in changes):  # an append-only input: accumulate only, in one loop
            self._add_all(acc, _present([change["v"] for change in changes], spread), spread)
            return _dump(acc)
        for change in changes:
            if change["v"] is not None:
                self._add(acc, _args(change["v"], spread), retract=change["s"] < 0)
        return _dump(acc)

    def value(self, blob: bytes | None) -> Any:
        acc = self._open(blob)
        try:
            return self.func.get_value(acc)
        except Exception as e:
            raise self._failed("get_value", f"the accumulator {_short(repr(acc))}", e) from None

    def finish(self, values: list | None, counts: list | None, spread: int) -> Any:
        """The result over one group's values, each ``counts`` times (the batch routes: no state)."""
        acc = self.fresh()
        if counts is None:
            self._add_all(acc, _present(values, spread), spread)
        else:  # a multiset: each value its count times
            kept = [(v, c) for v, c in zip(values or (), counts) if v is not None]
            self._add_all(acc, _present([v for v, c in kept for _ in range(int(c))], spread), spread)
        try:
            return self.func.get_value(acc)
        except Exception as e:
            raise self._failed("get_value", f"the accumulator {_short(repr(acc))}", e) from None


def _plain(column) -> list:
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    return column.to_pylist()


def _first(column) -> int:
    """A constant argument DuckDB passes as a column (the number of arguments packed in a ROW)."""
    return int(column[0].as_py()) if len(column) else 1


@dataclass(frozen=True)
class AggregateStep:
    """One step of a Python aggregate as DuckDB calls it (the shape ``udf.install`` registers)."""

    name: str
    internal: str
    call: Callable[..., list]
    returns: pa.DataType
    nullary: bool = False

    def __call__(self, *columns) -> pa.Array:
        out = self.call(*columns)
        try:
            array = pa.array(out, type=self.returns)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise UdfError(f"the Python aggregate function {self.name} returned values that are not "
                           f"{to_sql_type(self.returns).sql('duckdb')}: {_describe(e)}") from None
        return array


def register_aggregate(acc: Accumulators, internal: str) -> None:
    """Register the DuckDB functions of ``acc`` under ``internal`` (and its suffixed names)."""
    def finish(values, counts, spread):
        n, repeats = _first(spread), _plain(counts)
        return [acc.finish(v, c, n) for v, c in zip(_plain(values), repeats)]

    def rows(values, spread):
        n = _first(spread)
        return [acc.rows(v, n) for v in _plain(values)]

    def step(blobs, changes, spread):
        n = _first(spread)
        return [acc.step(b, c, n) for b, c in zip(_plain(blobs), _plain(changes))]

    def value(blobs):
        return [acc.value(b) for b in _plain(blobs)]

    name = acc.name
    register(AggregateStep(name, internal, finish, acc.returns))
    register(AggregateStep(name, f"{internal}_rows", rows, pa.binary()))
    register(AggregateStep(name, f"{internal}_step", step, pa.binary()))
    register(AggregateStep(name, f"{internal}_value", value, acc.returns))
    _ACCUMULATORS[internal] = acc


_ACCUMULATORS: dict[str, Accumulators] = {}


def accumulators(internal: str) -> Accumulators:
    """The registered aggregate function ``internal`` (a window's merge names it: ``py:<internal>``)."""
    return _ACCUMULATORS[internal]


def combine_groups(column: pa.ChunkedArray, internal: str, order, offsets) -> pa.Array:
    """Per group (rows ``order[offsets[g]:offsets[g+1]]`` of ``column``), its blobs combined into one."""
    acc = accumulators(internal)
    blobs = column.combine_chunks().take(pa.array(order, pa.int64())).to_pylist() if len(order) else []
    try:
        out = [acc.combine(blobs[offsets[g]:offsets[g + 1]]) for g in range(len(offsets) - 1)]
    except UdfError as e:
        raise PythonFunctionError(str(e)) from None
    return pa.array(out, pa.binary())


def values_in_arrow(internal: str) -> Callable[[pa.Array], pa.Array]:
    """The results of the blobs of a binary column (a window's merged panes), its failure a PythonFunctionError."""
    def finish(blobs: pa.Array) -> pa.Array:
        acc = accumulators(internal)
        try:
            return pa.array([acc.value(b) for b in blobs.to_pylist()], type=acc.returns)
        except UdfError as e:
            raise PythonFunctionError(str(e)) from None
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
            raise PythonFunctionError(f"the Python aggregate function {acc.name} returned values that are not "
                                      f"{to_sql_type(acc.returns).sql('duckdb')}: {_describe(e)}") from None

    return finish
