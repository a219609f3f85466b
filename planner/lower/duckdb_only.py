"""Calls that only DuckDB evaluates (the JSON functions), found in a plan so Spark can refuse it.

The JSON functions are built over DuckDB's json functions
(``grammar/json_functions.py``), which Spark SQL does not have; the runtime
and the DuckDB route run them.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass

from sqlglot import exp

from ...grammar.json_functions import DuckDBJsonFunc
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


def duckdb_only_call(root: L.Node) -> exp.Expression | None:
    """The first expression of the plan that calls a DuckDB-only function (None: there is none)."""
    for node in L.walk(root):
        if not is_dataclass(node):
            continue
        for f in fields(node):
            if f.name == "input" or f.name == "inputs":
                continue
            for e in _expressions(getattr(node, f.name, None)):
                if e.find(DuckDBJsonFunc) is not None:
                    return e
    return None
