"""Calls that only DuckDB evaluates, found in a plan so Spark can refuse it with the reason.

Values in the session time zone (TIMESTAMP_LTZ, LOCALTIMESTAMP, CURRENT_DATE)
are computed with DuckDB's time zone functions (``bind/time_zone.py``). The
JSON functions are built over DuckDB's json functions
(``grammar/json_functions.py``), which Spark SQL does not have; Python
scalar functions are registered on DuckDB connections (``bind/udf.py``,
``runtime/udf.py``). The runtime and the DuckDB route run both.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

import pyarrow as pa
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


_SESSION_ZONE = ("compute in the session time zone (TIMESTAMP_LTZ values, LOCALTIMESTAMP, CURRENT_DATE)",
                 "the session time zone ('table.local-time-zone') is not lowered to Spark SQL; the duckdb route "
                 "(SET 'engine' = 'duckdb') runs it")


def _in_session_zone(root: L.Node) -> bool:
    """Whether a node carries TIMESTAMP_LTZ values or reads the clock in the session zone."""
    return (any(pa.types.is_timestamp(f.type) and f.type.tz for n in L.walk(root) for f in n.schema)
            or any(e.find(exp.Localtimestamp, exp.CurrentDate) is not None
                   for n in L.walk(root) for value in vars(n).values() for e in _expressions(value)))


def duckdb_only_call(root: L.Node) -> tuple[str, str] | None:
    """What the plan asks that only DuckDB does, and why: (what, why), or None."""
    if _in_session_zone(root):
        return _SESSION_ZONE
    for node in L.walk(root):
        if not is_dataclass(node):
            continue
        python = next((a for a in getattr(node, "aggs", ()) if getattr(a, "kind", None) and a.kind.python), None)
        if python is not None:
            return (f"call the Python aggregate function {python.kind.name}",
                    "Python functions run inside DuckDB (registered on its connections); the duckdb route runs them "
                    "too")
        refused = next((a for a in getattr(node, "aggs", ()) if getattr(a, "kind", None) and a.kind.not_on_spark),
                       None)
        if refused is not None:
            return (f"compute {refused.kind.name}", f"{refused.kind.not_on_spark}; the duckdb route runs it")
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
