"""Python scalar functions, run by DuckDB over Arrow arrays: the registry every dsms connection installs from.

The facade registers each function once (:func:`register`) under a name
unique in the process (``FunctionDef.internal``); a DuckDB connection of the
runtime or of the DuckDB route installs what it has not yet seen before it
runs SQL (:func:`install`), so a query's per-batch SQL calls the function
like a built-in one, a vector of rows at a time.

A *vectorized* function takes ``pyarrow`` arrays and returns an array (or
anything ``pyarrow.array`` takes) of the same length. Any other function
takes plain Python values (``None`` for NULL, as Flink passes it); it is
called once per distinct argument value when it has one argument (the
batch is dictionary-encoded), else once per row.

A Python *aggregate function* registers its accumulator steps here too
(``runtime/udaf.py``).

A *table function* (``LATERAL TABLE``) gives rows: :func:`table_rows` makes
it a function over plain values that returns the list of a row's rows,
registered like the others with an ``ARRAY<ROW<...>>`` result.

A failure is looked for row by row only once the batch has failed: the
function is called again on each row alone, so the error names the first
row it fails on. The error (:class:`UdfError`) travels through DuckDB as
text; :func:`udf_failure` gets it back for the runtime and the DuckDB route,
which report it as a :class:`~dsms.runtime.errors.PythonFunctionError`.

Example:
    >>> import duckdb, pyarrow.compute as pc
    >>> register(PythonFunction("twice", "twice__py0", lambda x: pc.multiply(x, 2), pa.int64(), vectorized=True))
    >>> con = duckdb.connect()
    >>> install(con, set())
    >>> con.sql("SELECT twice__py0(21)").fetchall()
    [(42,)]
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from dataclasses import dataclass

import duckdb
import pyarrow as pa

from ..planner.types import to_sql_type
from .errors import PythonFunctionError

_COUNTER = itertools.count(1)


def unique_name(name: str) -> str:
    """A name for ``name``'s function that no other function of this process has."""
    return f"{name}__py{next(_COUNTER)}"


class UdfError(RuntimeError):
    """A Python function failed or returned something that is not its declared result (raised inside DuckDB)."""


def udf_failure(error: BaseException, where: str) -> PythonFunctionError | None:
    """The Python function failure that made DuckDB raise ``error`` (None: it was something else).

    DuckDB calls functions on its own threads and passes on only the text of what they raised (one line:
    :meth:`PythonFunction._failure` makes it so).
    """
    marker = f"{UdfError.__name__}: "
    text = str(error)
    if not isinstance(error, duckdb.Error) or marker not in text:
        return None
    return PythonFunctionError(f"{text.split(marker, 1)[1].splitlines()[0]} (in {where})")


def takes_nothing(func: Callable) -> bool:
    """Whether ``func`` is called without arguments (``def now_ms()``)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    return not any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def takes_arrays(func: Callable) -> bool:
    """Whether ``func`` declares a pyarrow array parameter (``def f(x: pa.Array)``)."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return False
    for p in params:
        a = p.annotation
        if a in (pa.Array, pa.ChunkedArray) or (isinstance(a, str) and a.split(".")[-1] in ("Array", "ChunkedArray")):
            return True
    return False


@dataclass(frozen=True)
class PythonFunction:
    """A Python scalar function as DuckDB calls it: a batch of argument arrays -> one result array."""

    name: str
    internal: str
    func: Callable
    returns: pa.DataType
    vectorized: bool
    nullary: bool = False  # it takes no arguments: the call passes a constant only to carry the row count

    def __call__(self, *columns) -> pa.Array:
        args = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in columns]
        rows = len(args[0]) if args else 1
        if self.nullary:  # called once per row (a function without arguments is there to differ per row)
            try:
                return self._conform([self.func() for _ in range(rows)], rows)
            except Exception as e:  # user code: any failure is the function's
                raise UdfError(f"the Python function {self.name} failed on the row {self.name}(): "
                               f"{_describe(e)}") from None
        try:
            return self._conform(self._apply(args), rows)
        except Exception as e:  # user code: any failure is the function's, and is reported with its row
            raise self._failure(args, rows, e) from None

    def _apply(self, args: list[pa.Array]):
        if self.vectorized:
            return self.func(*args)
        if len(args) == 1 and _encodable(args[0].type):
            # One call per distinct value (NULL included: Flink passes None), spread back by the indices.
            encoded = args[0].dictionary_encode(null_encoding="encode")
            values = [self.func(v) for v in encoded.dictionary.to_pylist()]
            return self._conform(values, len(values)).take(encoded.indices)
        if not args:
            return [self.func()]
        return [self.func(*row) for row in zip(*(a.to_pylist() for a in args))]

    def _conform(self, out, rows: int) -> pa.Array:
        if isinstance(out, pa.ChunkedArray):
            out = out.combine_chunks()
        try:
            array = out if isinstance(out, pa.Array) else pa.array(out, type=self.returns)
            if array.type != self.returns:
                array = array.cast(self.returns)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as e:
            raise UdfError(f"it returned values that are not {to_sql_type(self.returns).sql('duckdb')}: {e}") \
                from None
        if len(array) != rows:
            raise UdfError(f"it returned {len(array)} values for {rows} rows")
        return array

    def _failure(self, args: list[pa.Array], rows: int, cause: Exception) -> UdfError:
        """The error for a failed batch: the batch is run again one row at a time to find the row (error path
        only), and the error names the function, that row's arguments and what went wrong."""
        for i in range(rows if args else 0):
            row = [a.slice(i, 1) for a in args]
            try:
                self._conform(self._apply(row), 1)
            except Exception as e:  # the first row that fails alone
                shown = ", ".join(_short(repr(a[0].as_py())) for a in row)
                error = UdfError(f"the Python function {self.name} failed on the row {self.name}({shown}): "
                                 f"{_describe(e)}")
                break
        else:  # no row fails alone: the batch as a whole is what it cannot take
            error = UdfError(f"the Python function {self.name} failed on a batch of {rows} rows: {_describe(cause)}")
        return error


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _describe(e: Exception) -> str:
    text = str(e) if isinstance(e, UdfError) else f"{type(e).__name__}: {e}"
    return " ".join(text.split())  # one line: DuckDB passes the message on as text


def _encodable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_dictionary(t))


def table_rows(func: Callable, row: pa.StructType) -> Callable:
    """``func`` (a generator, or a function returning an iterable of rows or None) as a function returning the
    list of its rows, each a dict of ``row``'s fields.

    A row given may be a tuple or list (the fields in order), a mapping (by name), or, for a one-field ROW,
    the value itself.

    Example:
        >>> def split(s):
        ...     yield from ((w, len(w)) for w in s.split())
        >>> table_rows(split, pa.struct([("word", pa.string()), ("n", pa.int32())]))("a bc")
        [{'word': 'a', 'n': 1}, {'word': 'bc', 'n': 2}]
    """
    names = [f.name for f in row]
    single = len(names) == 1

    def rows(*args) -> list[dict]:
        out = []
        for item in func(*args) or ():
            if isinstance(item, dict):
                out.append(item)
            elif single and not isinstance(item, (tuple, list)):
                out.append({names[0]: item})
            elif isinstance(item, (tuple, list)) and len(item) == len(names):
                out.append(dict(zip(names, item)))
            else:
                raise UdfError(f"it gave the row {item!r}, not {len(names)} field{'s' if len(names) > 1 else ''} "
                               f"({', '.join(names)})")
        return out

    rows.__name__ = getattr(func, "__name__", "rows")
    return rows


_FUNCTIONS: dict[str, PythonFunction] = {}  # and the steps of aggregate functions (udaf.AggregateStep)


def register(fn: PythonFunction) -> None:
    """Make ``fn`` available to every connection that installs from now on."""
    _FUNCTIONS[fn.internal] = fn


def install(con: duckdb.DuckDBPyConnection, installed: set[str]) -> None:
    """Create on ``con`` the registered functions not in ``installed`` (the names already created there)."""
    if len(installed) == len(_FUNCTIONS):
        return
    for internal, fn in list(_FUNCTIONS.items()):
        if internal in installed:
            continue
        # Deterministic, as Flink assumes a function is, except one without arguments (random-like).
        con.create_function(internal, fn, None, to_sql_type(fn.returns).sql("duckdb"), type="arrow",
                            null_handling="special", side_effects=fn.nullary)
        installed.add(internal)
