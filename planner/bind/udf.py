"""Calls of Python scalar functions (``CREATE FUNCTION``, ``Engine.create_function``), bound before the rest.

A call whose name is a Python function of the catalog becomes a
:class:`PythonCall` wrapped in a ``CAST`` to the function's declared result
type, so typing and the rendered SQL need nothing else. It renders as a
call of the name the function is registered under in DuckDB (``FunctionDef.internal``:
unique in the process, so two engines may each have their own ``f``); the
runtime and the DuckDB route register it on their connections
(``runtime/udf.py``); Spark refuses it (``lower/duckdb_only.py``).

Example:
    >>> import pyarrow as pa
    >>> from sqlglot import exp
    >>> from dsms.grammar.dialect import parse_expression
    >>> from dsms.planner.catalog import Catalog, FunctionDef
    >>> catalog = Catalog()
    >>> catalog.functions["tax"] = FunctionDef("tax", "tax__py1", pa.float64(), "shop.tax")
    >>> bind_python_calls(parse_expression("tax(price) + 1"), catalog).sql("duckdb")
    'CAST(TAX__PY1(price) AS DOUBLE) + 1'
"""

from __future__ import annotations

from sqlglot import exp

from ..catalog import Catalog
from ..logical.nodes import PYTHON_ARGS, PYTHON_NAME
from ..types import to_sql_type

_UDF = "dsms_python_function"


class PythonCall(exp.Expression, exp.Func):
    """A call of a Python scalar function; ``meta['dsms_python_function']`` is its registered name."""

    arg_types = {"expressions": False}
    is_var_len_args = True
    _sql_names = ["DSMS_PYTHON_CALL"]

    def sql_name(self) -> str:  # the registered name of this call's function, not the class's
        return self.meta.get(_UDF, "DSMS_PYTHON_CALL")


def bind_python_calls(tree: exp.Expression, catalog: Catalog) -> exp.Expression:
    """``tree`` with each call of a catalog Python function replaced (a new tree when there is any)."""
    if not catalog.functions or tree.find(exp.Anonymous) is None:
        return tree

    def rewrite(node: exp.Expression) -> exp.Expression:
        fn = catalog.functions.get(node.name.lower()) if isinstance(node, exp.Anonymous) else None
        if fn is None:
            return node
        # A call without arguments passes a constant, which DuckDB hands over as a column of the batch's length.
        call = PythonCall(expressions=[a.copy() for a in node.expressions] or [exp.Literal.number(1)])
        call.meta[_UDF] = fn.internal
        call.meta[PYTHON_NAME] = fn.name
        cast = exp.Cast(this=call, to=to_sql_type(fn.returns))
        cast.meta.update(node.meta)  # keep the call's place in the statement, for errors
        cast.meta[PYTHON_NAME] = fn.name  # what EXPLAIN shows (logical/nodes.py::show)
        cast.meta[PYTHON_ARGS] = bool(node.expressions)
        return cast

    return tree.transform(rewrite, copy=True)
