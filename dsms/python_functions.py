"""Python functions: ``Engine.create_function``, ``@dsms.udf``, ``@dsms.udtf``, ``CREATE FUNCTION`` / ``DROP FUNCTION``.

A function is known to the catalog by its SQL name and result type
(``planner/catalog.py::FunctionDef``) and registered once for DuckDB
(``runtime/udf.py``), which calls it a batch at a time on the runtime and
the DuckDB route. ``CREATE FUNCTION f AS 'package.module.func' LANGUAGE
PYTHON`` imports the module with the script's folder on the import path;
the result type comes from ``@dsms.udf(returns=...)`` on the function, or
from its return annotation (``-> float`` is ``DOUBLE``). A table function
(a generator, one marked ``@dsms.udtf(returns=...)``, or an object with an
``eval`` method, as PyFlink's ``TableFunction``) gives rows of its
``returns`` type and is called in ``LATERAL TABLE`` (``planner/bind/udf.py``).
An aggregate function (an object or class with ``create_accumulator``,
``accumulate``, ``get_value`` and, where needed, ``retract`` and ``merge``)
registers its accumulator steps (``runtime/udaf.py``,
``planner/python_aggregate.py``).

Example:
    >>> import dsms, pyarrow.compute as pc
    >>> @dsms.udf(returns="BIGINT")
    ... def twice(x: pa.Array) -> pa.Array:
    ...     return pc.multiply(x, 2)
    >>> engine = dsms.Engine()
    >>> engine.create_function("twice", twice)
    >>> engine.execute("CREATE STREAM s (n BIGINT) WITH (connector = 'memory')").message
    'Created stream s'
    >>> q = engine.query("SELECT twice(n) AS t FROM s")
    >>> _ = engine.insert("s", [{"n": 1}, {"n": 20}]); engine.run_until_idle()
    >>> q.snapshot().column("t").to_pylist()
    [2, 40]
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
from collections.abc import Callable

import pyarrow as pa
from sqlglot import exp

from .grammar import CreateFunction, Diagnostic, Drop, Span, SqlError
from .grammar.dialect import parse_expression
from .planner.catalog import Catalog, FunctionDef
from .planner.python_aggregate import PythonAggregate
from .planner.types import parse_type
from .runtime.udaf import Accumulators, register_aggregate, values_in_arrow
from .runtime.udf import (
    PythonFunction,
    register,
    table_rows,
    takes_arrays,
    takes_nothing,
    unique_name,
)

_ATTRIBUTE = "__dsms_udf__"  # what @udf and @udtf leave on a function: (returns, vectorized, table)
_ANNOTATED = {float: "DOUBLE", int: "BIGINT", str: "STRING", bool: "BOOLEAN", "float": "DOUBLE", "int": "BIGINT",
              "str": "STRING", "bool": "BOOLEAN"}


def udf(func: Callable | None = None, *, returns: str, vectorized: bool | None = None):
    """Declare a Python function's SQL result type (and whether it takes pyarrow arrays) for ``CREATE FUNCTION``.

    ``vectorized`` defaults to whether a parameter is annotated ``pa.Array``.
    """
    def mark(f: Callable) -> Callable:
        setattr(f, _ATTRIBUTE, (returns, vectorized, False))
        return f
    return mark(func) if func is not None else mark


def udtf(func: Callable | None = None, *, returns: str):
    """Declare a Python table function and the SQL type of its rows (``'ROW<word STRING, n INT>'``, or one type
    for rows of one column ``f0``), for ``LATERAL TABLE(f(x))``.

    It is called with plain values, once per row, and gives that row's rows: it yields them (or returns an
    iterable of them, or None for none), each a tuple of the fields, a mapping by name, or a value for a one-field
    ROW.
    """
    def mark(f: Callable) -> Callable:
        setattr(f, _ATTRIBUTE, (returns, False, True))
        return f
    return mark(func) if func is not None else mark


def _is_table_function(func: Callable) -> bool:
    marked = getattr(func, _ATTRIBUTE, None)
    if marked is not None:
        return marked[2]
    return inspect.isgeneratorfunction(func) or inspect.isgeneratorfunction(getattr(func, "eval", None)) \
        or callable(getattr(func, "eval", None))


def define_function(catalog: Catalog, name: str, func: Callable, returns: str | None = None,
                    vectorized: bool | None = None, *, target: str | None = None, temporary: bool = True,
                    span: Span | None = None, source: str | None = None) -> FunctionDef:
    """Check and register ``func`` as the SQL function ``name``; replaces a Python function of that name."""
    def error(message: str, help: str | None = None) -> SqlError:
        return SqlError(Diagnostic(message, span, source, help=help))

    try:
        call = parse_expression(f"{name}(1)")
    except SqlError:
        call = None
    if not isinstance(call, exp.Anonymous):
        raise error(f"'{name}' cannot name a Python function: it is a built-in function or a keyword",
                    help="choose another name")
    if hasattr(func, "accumulate") or hasattr(func, "get_value"):
        return _define_aggregate(catalog, name, func, returns, target, temporary, error)
    table = _is_table_function(func)
    marked = getattr(func, _ATTRIBUTE, None)
    if table and not callable(func):
        func = func.eval
    if not callable(func):
        raise error(f"function {name}: {func!r} is not callable")
    if returns is None and marked is not None:
        returns = marked[0]
    if vectorized is None and marked is not None:
        vectorized = marked[1]
    if returns is None:
        returns = _ANNOTATED.get(getattr(func, "__annotations__", {}).get("return"))
    if returns is None:
        raise error(f"function {name}: its result type is not declared",
                    help="decorate it with @dsms.udf(returns='DOUBLE') (a table function: @dsms.udtf(returns="
                         "'ROW<a INT, b STRING>')), annotate it (-> float), or pass returns= to create_function")
    try:
        result_type = parse_type(returns, span, source)
    except SqlError as e:
        raise error(f"function {name}: {e.diagnostic.message}") from None
    vectorized = takes_arrays(func) if vectorized is None else vectorized
    registered, call = result_type, func
    if table:
        if vectorized:
            raise error(f"function {name}: a table function takes plain values, not pyarrow arrays",
                        help="give it one row's values and yield that row's rows")
        if not pa.types.is_struct(result_type):  # rows of one column, named f0 as in Flink
            result_type = pa.struct([pa.field("f0", result_type)])
        registered, call = pa.list_(result_type), table_rows(func, result_type)
    internal = _internal_name(name, target, result_type)
    register(PythonFunction(name, internal, call, registered, vectorized, nullary=takes_nothing(func)))
    fn = FunctionDef(name, internal, result_type, target or getattr(func, "__qualname__", repr(func)), temporary,
                     table=table)
    catalog.functions[name.lower()] = fn
    return fn


def _define_aggregate(catalog: Catalog, name: str, func, returns: str | None, target: str | None, temporary: bool,
                      error) -> FunctionDef:
    """Register an aggregate function (an object, or a class, with ``create_accumulator``, ``accumulate``,
    ``get_value`` and optionally ``retract`` and ``merge``, as PyFlink's ``AggregateFunction``)."""
    if inspect.isclass(func):
        func = func()
    missing = [m for m in ("create_accumulator", "accumulate", "get_value") if not callable(getattr(func, m, None))]
    if missing:
        raise error(f"aggregate function {name}: it has no {', '.join(missing)}",
                    help="define create_accumulator(), accumulate(acc, value) and get_value(acc)")
    marked = getattr(func, _ATTRIBUTE, None)
    returns = returns or (marked[0] if marked else None)
    if returns is None:
        returns = _ANNOTATED.get(getattr(func.get_value, "__annotations__", {}).get("return"))
    if returns is None:
        raise error(f"aggregate function {name}: its result type is not declared",
                    help="pass returns= to create_function, decorate the class with @dsms.udf(returns='DOUBLE'), "
                         "or annotate get_value (-> float)")
    try:
        result_type = parse_type(returns)
    except SqlError as e:
        raise error(f"aggregate function {name}: {e.diagnostic.message}") from None
    internal = _internal_name(name, target, result_type)
    steps = Accumulators(name, func, result_type)
    register_aggregate(steps, internal)
    kind = PythonAggregate(name, internal, result_type, values_in_arrow(internal), steps.can_retract, steps.can_merge)
    fn = FunctionDef(name, internal, result_type, target or type(func).__qualname__, temporary, aggregate=kind)
    catalog.functions[name.lower()] = fn
    return fn


def _internal_name(name: str, target: str | None, result_type) -> str:
    if target is None:
        return unique_name(name.lower())
    # the same in every process, so a restored query's plan is the one its checkpoint was taken for
    digest = hashlib.sha256(f"{name.lower()} {target} {result_type}".encode()).hexdigest()[:10]
    return f"{name.lower()}__py_{digest}"


def function_key(name: str) -> str:
    """The name a saved function has in the state directory (apart from streams, tables and views)."""
    return f"function {name.lower()}"


def python_paths(files: str, base_dir: str | None) -> list[str]:
    """The import paths ``SET 'python.files'`` adds, as Flink's: a ``.py`` file's folder, a ``.zip`` or a folder,
    comma-separated, relative ones against the script's folder."""
    paths = []
    for item in (f.strip() for f in files.split(",")):
        if not item:
            continue
        path = os.path.normpath(os.path.join(base_dir or os.getcwd(), os.path.expanduser(item)))
        paths.append(os.path.dirname(path) if path.endswith(".py") else path)
    return paths


def import_function(target: str, paths: list[str]) -> Callable:
    """The callable that ``'package.module.func'`` names, importable from ``paths`` (the script's folder,
    ``python.files``) or the Python path."""
    module_name, _, attribute = target.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"'{target}' is not 'module.function'")
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    module = importlib.import_module(module_name)
    return getattr(module, attribute)


def create_function(catalog: Catalog, stmt: CreateFunction, base_dir: str | None) -> tuple[bool, str]:
    """Run ``CREATE [TEMPORARY [SYSTEM]] FUNCTION``: whether it made one, and the message of its result."""
    name = stmt.name.value
    if stmt.language != "python":
        raise SqlError(Diagnostic(f"LANGUAGE {stmt.language.upper()} is not supported: dsms runs Python functions",
                                  stmt.span, stmt.source, help="LANGUAGE PYTHON (the default)"))
    if name.lower() in catalog.functions:
        if stmt.if_not_exists:
            return False, f"function {name} already exists"
        raise SqlError(Diagnostic(f"function '{name}' already exists", stmt.name.span, stmt.source,
                                  help="DROP FUNCTION it first, or use CREATE FUNCTION IF NOT EXISTS"))
    paths = [p for p in (base_dir,) if p] + python_paths(catalog.setting("python.files"), base_dir)
    try:
        func = import_function(stmt.target, paths)
    except Exception as e:  # an import runs user code: any failure is reported, with its kind
        raise SqlError(Diagnostic(f"cannot load Python function '{stmt.target}': {type(e).__name__}: {e}",
                                  stmt.span, stmt.source,
                                  help="the module must be importable from the script's folder, a path of "
                                       "SET 'python.files', or the Python path")) from None
    define_function(catalog, name, func, target=stmt.target, temporary=stmt.temporary, span=stmt.name.span,
                    source=stmt.source)
    return True, f"Created function {name}"


def drop_function(catalog: Catalog, stmt: Drop) -> str:
    """Run ``DROP [TEMPORARY] FUNCTION [IF EXISTS]``: the message of its result (a query that calls the function
    keeps running it)."""
    name = stmt.name.value
    callers = [o for o in catalog.of_kind("view", "sink", "materialized view")
               if any(c.name.lower() == name.lower() for c in o.query.find_all(exp.Anonymous))]
    if callers and name.lower() in catalog.functions:  # a restart could not plan them again
        raise SqlError(Diagnostic(
            f"cannot drop function '{name}': " + ", ".join(f"{o.object_kind} '{o.name}'" for o in callers)
            + (" calls it" if len(callers) == 1 else " call it"), stmt.name.span, stmt.source,
            help="drop " + ", ".join(f"{o.object_kind} {o.name}" for o in callers) + " first"))
    if catalog.functions.pop(name.lower(), None) is None:
        if stmt.if_exists:
            return f"function {name} does not exist"
        raise SqlError(Diagnostic(f"unknown function '{name}'", stmt.name.span, stmt.source,
                                  help="SHOW FUNCTIONS lists the functions"))
    return f"Dropped function {name}"
