"""Binding ``CROSS JOIN UNNEST(x) [WITH ORDINALITY] AS t(a, ...)`` and ``LEFT JOIN UNNEST(x) ... ON TRUE``.

The UNNEST is correlated with the relation on its left: ``x`` is an
expression over its columns (an ARRAY, an ARRAY of ROWs, or a MAP), and
the result is that relation with the element columns added (see
``logical/unnest.py``). Output names are the alias's column names, else
Flink's defaults (the ROW's field names, ``EXPR$0`` for an array of
scalars, ``key``/``value`` for a map, ``ORDINALITY``).
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ..logical.unnest import Unnest
from ..types import sql_name, unique_name
from .context import BindContext
from .expressions import Scope, ScopeColumn, bind_scalar, infer_type
from .udf import LATERAL_TABLE

_USAGE = "CROSS JOIN UNNEST(x) AS t(a, ...) or LEFT JOIN UNNEST(x) AS t(a, ...) ON TRUE"


def is_unnest_join(join: exp.Join) -> bool:
    return isinstance(join.this, exp.Unnest)


def bind_unnest(node, scope: Scope, join: exp.Join, ctx: BindContext) -> tuple[Unnest, Scope]:
    """``node`` (with ``scope``) joined with the UNNEST of ``join``; the scope gains the element columns."""
    call: exp.Unnest = join.this
    outer = _outer(join, ctx)
    if len(call.expressions) != 1:
        raise ctx.error("UNNEST takes one array or map here", call, help=_USAGE)
    expr = bind_scalar(call.expressions[0], scope, ctx.source, clause="UNNEST")
    dtype = infer_type(expr, node.schema, ctx.source)
    shape, parts, defaults, types = _shape(dtype, call, ctx)
    alias = call.args.get("alias")
    names, ordinality = _names(call, alias, dtype, defaults, ctx)
    types = types + ((pa.int32(),) if ordinality else ())
    taken = list(node.schema.names)
    internal = []
    for n in names:
        internal.append(unique_name(n, taken))
        taken.append(internal[-1])
    out = Unnest(node, expr, shape, tuple(internal), types, parts, ordinality, outer)
    qualifier = alias.name.lower() if alias is not None and alias.name else None
    added = tuple(ScopeColumn(qualifier, n, out.schema.find(i)) for n, i in zip(names, internal))
    return out, Scope(scope.columns + added)


def _shape(dtype: pa.DataType, call: exp.Unnest, ctx: BindContext):
    """(shape, ROW fields taken, default column names, column types) of an UNNEST of ``dtype``."""
    if pa.types.is_list(dtype) and pa.types.is_struct(dtype.value_type):
        parts = tuple(f.name for f in dtype.value_type)
        return "rows", parts, parts, tuple(f.type for f in dtype.value_type)
    if pa.types.is_list(dtype):
        return "array", (), ("EXPR$0",), (dtype.value_type,)
    if pa.types.is_map(dtype):
        return "map", (), ("key", "value"), (dtype.key_type, dtype.item_type)
    raise ctx.error(f"UNNEST takes an ARRAY or a MAP, not {sql_name(dtype)}", call.expressions[0], help=_USAGE)


def _names(call: exp.Unnest, alias, dtype: pa.DataType, defaults: tuple, ctx: BindContext) -> tuple[list, bool]:
    """The user's names of the element columns (then the ordinality's), and whether WITH ORDINALITY was given."""
    given = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    offset = call.args.get("offset")
    ordinality = offset is not None and offset is not False
    if ordinality and isinstance(offset, exp.Identifier):
        given.append(offset.name)
    wanted = len(defaults) + (1 if ordinality else 0)
    if given and len(given) != wanted:
        what = f"{len(defaults)} column{'s' if len(defaults) > 1 else ''}" + (" and the ordinality" if ordinality else "")
        example = ", ".join(list(defaults) + (["n"] if ordinality else []))
        lateral = call.meta.get(LATERAL_TABLE)
        source = f"the table function {lateral}" if lateral else f"UNNEST of {sql_name(dtype)}"
        raise ctx.error(f"{source} gives {what}, but the alias names {len(given)}",
                        alias or call, help=f"name {wanted}: AS t({example})")
    return given or list(defaults) + (["ORDINALITY"] if ordinality else []), ordinality


def _outer(join: exp.Join, ctx: BindContext) -> bool:
    side, kind, on = join.side.upper(), join.kind.upper(), join.args.get("on")
    if side == "LEFT":
        if not (isinstance(on, exp.Boolean) and on.this is True):
            raise ctx.error("LEFT JOIN UNNEST(...) takes ON TRUE only", on or join,
                            help="filter the unnested rows in WHERE instead")
        return True
    if side or kind not in ("", "CROSS", "INNER") or (on is not None and not (isinstance(on, exp.Boolean) and on.this)):
        raise ctx.error("UNNEST joins its input row by row", join, help=_USAGE)
    return False
