"""Calls that only DuckDB evaluates, found in a plan so Spark can refuse it with the reason.

The JSON functions are built over DuckDB's json functions
(``grammar/json_functions.py``), which Spark SQL does not have; Python
scalar functions are registered on DuckDB connections (``bind/udf.py``,
``runtime/udf.py``). The runtime and the DuckDB route run both.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from sqlglot import exp

from ...grammar.json_functions import DuckDBJsonFunc
from ..bind.udf import PYTHON_NAME, PythonCall
from ..logical import nodes as L


def _expressions(value):
    if isinstance(value, exp.Expression):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _expressions(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _expressions(v)


_JSON = ("evaluate the JSON functions (JSON_VALUE, JSON_QUERY, JSON_EXISTS, JSON_OBJECT, JSON_ARRAY, JSON_STRING, "
         "IS JSON)", "they are built on DuckDB's json functions, which Spark SQL does not have; the duckdb route "
         "runs them too")


def duckdb_only_call(root: L.Node) -> tuple[str, str] | None:
    """What the plan asks that only DuckDB does, and why: (what, why), or None."""
    for node in L.walk(root):
        if not is_dataclass(node):
            continue
        for f in fields(node):
            if f.name in ("input", "inputs"):
                continue
            for e in _expressions(getattr(node, f.name, None)):
                call = e.find(PythonCall)
                if call is not None:
                    return (f"call the Python function {call.meta.get(PYTHON_NAME)}",
                            "Python functions run inside DuckDB (registered on its connections); the duckdb "
                            "route runs them too")
                if e.find(DuckDBJsonFunc) is not None:
                    return _JSON
    return None
