"""Calls of Python functions (``CREATE FUNCTION``, ``Engine.create_function``), bound before the rest.

A call whose name is a Python function of the catalog becomes a
:class:`PythonCall` wrapped in a ``CAST`` to the function's declared result
type, so typing and the rendered SQL need nothing else. It renders as a
call of the name the function is registered under in DuckDB (``FunctionDef.internal``:
unique in the process, so two engines may each have their own ``f``); the
runtime and the DuckDB route register it on their connections
(``runtime/udf.py``); Spark refuses it (``lower/duckdb_only.py``).

A call of an aggregate function becomes a :class:`PythonAggregateCall`
carrying its kind (``planner/python_aggregate.py``), which the aggregate
binder takes like a built-in aggregate.

A table function is called in ``LATERAL TABLE(f(x)) AS t(a, ...)`` (after
a comma, ``CROSS JOIN`` or ``LEFT JOIN ... ON TRUE``). Its registered
function returns the ARRAY of the rows ``f`` gives for a row, so the call
becomes ``UNNEST(f(x)) AS t(a, ...)`` and is planned as an UNNEST
(``bind/unnest.py``): a row of the input is repeated once per row of its
call, and an update of an input row retracts the rows of its old call.

Example:
    >>> import pyarrow as pa
    >>> from sqlglot import exp
    >>> from dsms.grammar.dialect import parse_expression, parse_query
    >>> from dsms.planner.catalog import Catalog, FunctionDef
    >>> catalog = Catalog()
    >>> catalog.functions["tax"] = FunctionDef("tax", "tax__py1", pa.float64(), "shop.tax")
    >>> bind_python_calls(parse_expression("tax(price) + 1"), catalog).sql("duckdb")
    'CAST(TAX__PY1(price) AS DOUBLE) + 1'
    >>> catalog.functions["words"] = FunctionDef("words", "words__py2", pa.struct([("f0", pa.string())]), "w",
    ...                                          table=True)
    >>> q = parse_query("SELECT w FROM t, LATERAL TABLE(words(s)) AS x(w)")
    >>> bind_python_calls(q, catalog).args["joins"][0].this.sql("duckdb")
    'UNNEST(CAST(WORDS__PY2(s) AS STRUCT("f0" TEXT)[])) AS x(w)'
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar import Diagnostic, SqlError
from ..aggregate_kinds import BOUND_KIND
from ..catalog import Catalog, FunctionDef
from ..logical.nodes import PYTHON_ARGS, PYTHON_NAME
from ..python_aggregate import PythonAggregateCall
from ..timeutil import node_span
from ..types import to_sql_type

_UDF = "dsms_python_function"
LATERAL_TABLE = "dsms_lateral_table"  # on an UNNEST made from LATERAL TABLE: the table function's name


class PythonCall(exp.Expression, exp.Func):
    """A call of a Python scalar function; ``meta['dsms_python_function']`` is its registered name."""

    arg_types = {"expressions": False}
    is_var_len_args = True
    _sql_names = ["DSMS_PYTHON_CALL"]

    def sql_name(self) -> str:  # the registered name of this call's function, not the class's
        return self.meta.get(_UDF, "DSMS_PYTHON_CALL")


def bind_python_calls(tree: exp.Expression, catalog: Catalog, source: str | None = None) -> exp.Expression:
    """``tree`` with each call of a catalog Python function replaced (a new tree when there is any), and each
    ``LATERAL TABLE`` of a table function made an UNNEST of its call."""
    if not catalog.functions or tree.find(exp.Anonymous) is None:
        return tree

    def error(message: str, node: exp.Expression, help: str) -> SqlError:
        return SqlError(Diagnostic(message, node_span(node), source, help=help))

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Lateral):
            return _lateral_table(node, catalog, error, rewrite)
        fn = catalog.functions.get(node.name.lower()) if isinstance(node, exp.Anonymous) else None
        if fn is None:
            return node
        if fn.table:
            raise error(f"{fn.name} is a table function: it gives rows, not a value", node,
                        help=f"call it in FROM: FROM t, LATERAL TABLE({fn.name}(...)) AS r(...)")
        if fn.aggregate is not None:
            return _aggregate_call(node, fn, rewrite, error)
        return _call(node, fn)

    return tree.transform(rewrite, copy=True)


def _aggregate_call(node: exp.Anonymous, fn: FunctionDef, rewrite, error) -> exp.Expression:
    """A call of an aggregate function; several arguments are passed packed in a ROW (the function gets them
    spread out: ``accumulate(acc, a, b)``)."""
    args = [a.transform(rewrite, copy=True) for a in node.expressions]
    if not args:
        raise error(f"the aggregate function {fn.name} needs an argument", node,
                    help=f"call it as {fn.name}(x) or {fn.name}(x, y, ...)")
    if len(args) == 1 or any(isinstance(a, exp.Distinct) for a in args):
        arg = args[0]
    else:
        arg = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"f{i}", quoted=True), expression=a)
                                      for i, a in enumerate(args)])
    agg = PythonAggregateCall(this=arg)
    agg.meta.update(node.meta)
    agg.meta[BOUND_KIND] = fn.aggregate.with_spread(len(args))
    return agg


def _call(node: exp.Anonymous, fn: FunctionDef) -> exp.Expression:
    """The call ``node`` of ``fn`` as the call of its registered name, cast to its result type."""
    # A call without arguments passes a constant, which DuckDB hands over as a column of the batch's length.
    call = PythonCall(expressions=[a.copy() for a in node.expressions] or [exp.Literal.number(1)])
    call.meta[_UDF] = fn.internal
    call.meta[PYTHON_NAME] = fn.name
    returns = pa.list_(fn.returns) if fn.table else fn.returns
    cast = exp.Cast(this=call, to=to_sql_type(returns))
    cast.meta.update(node.meta)  # keep the call's place in the statement, for errors
    cast.meta[PYTHON_NAME] = fn.name  # what EXPLAIN shows (logical/nodes.py::show)
    cast.meta[PYTHON_ARGS] = bool(node.expressions)
    return cast


def _lateral_table(node: exp.Lateral, catalog: Catalog, error, rewrite) -> exp.Expression:
    """``LATERAL TABLE(f(x)) AS t(a, ...)`` of a table function ``f`` as ``UNNEST(f(x)) AS t(a, ...)``."""
    table = node.this
    if not (isinstance(table, exp.Anonymous) and table.name.upper() == "TABLE"):
        return node
    usage = "LATERAL TABLE(f(x)) AS t(a, ...) with f a Python table function"
    call = table.expressions[0] if len(table.expressions) == 1 else None
    fn = catalog.functions.get(call.name.lower()) if isinstance(call, exp.Anonymous) else None
    if fn is None or not fn.table:
        what = f"{fn.name} is a scalar function" if fn is not None else "LATERAL TABLE takes one table function call"
        raise error(what, call or node, help=usage)
    args = [a.transform(rewrite, copy=True) for a in call.expressions]
    unnest = exp.Unnest(expressions=[_call(exp.Anonymous(this=call.this, expressions=args), fn)],
                        alias=node.args.get("alias"))
    unnest.meta.update(node.meta)
    unnest.meta[LATERAL_TABLE] = fn.name
    unnest.expressions[0].meta.update(call.meta)
    return unnest
