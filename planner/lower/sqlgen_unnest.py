"""DuckDB SQL for an UNNEST (``logical/unnest.py``), over a batch or a relation.

Two SELECTs: the inner one repeats each row once per element with
DuckDB's ``UNNEST`` in the select list (two UNNESTs of equal length, the
elements and their positions, advance together); the outer one names the
element columns (a ROW's fields become columns). Every input column
passes through with ``*``, the changelog op column included, so each
unnested row keeps its outer row's kind.

Example (``CROSS JOIN UNNEST(tags) WITH ORDINALITY AS t(tag, n)``)::

    SELECT * EXCLUDE ("__u", "__n"), "__u" AS "tag", CAST("__n" AS INT) AS "n"
    FROM (SELECT *, UNNEST("tags") AS "__u", UNNEST(GENERATE_SERIES(1, LEN("tags"))) AS "__n" FROM batch)
"""

from __future__ import annotations

from sqlglot import exp

from ..bind.expressions import col
from ..logical.unnest import Unnest

_U, _N, _K, _V = "__u", "__n", "__k", "__v"


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def lit(value: int) -> exp.Expression:
    return exp.Literal.number(value)


def _unnest(e: exp.Expression, alias: str) -> exp.Expression:
    return exp.alias_(exp.Unnest(expressions=[e]), alias, quoted=True)


def _or_one_null(e: exp.Expression, length: exp.Expression) -> exp.Expression:
    """LEFT JOIN UNNEST: an empty or NULL list becomes one NULL element, so its row is kept."""
    return exp.Case().when(exp.GT(this=length, expression=lit(0)), e, copy=False).else_(
        exp.Array(expressions=[exp.Null()]), copy=False)


def unnest_select(node: Unnest, src: exp.Expression, value: exp.Expression) -> exp.Select:
    """The SELECT computing ``node`` from ``src`` (a table or subquery); ``value`` is ``node.expr`` typed."""
    hidden: list[str] = []
    inner: list[exp.Expression] = [exp.Star()]
    if node.shape == "map":
        keys, values = fn("map_keys", value), fn("map_values", value.copy())
        length = fn("cardinality", value.copy())
        if node.outer:
            keys, values = _or_one_null(keys, length), _or_one_null(values, length.copy())
        inner += [_unnest(keys, _K), _unnest(values, _V)]
        parts = [col(_K), col(_V)]
        hidden += [_K, _V]
    else:
        length = fn("len", value.copy())
        elements = _or_one_null(value, length) if node.outer else value
        inner.append(_unnest(elements, _U))
        hidden.append(_U)
        if node.shape == "rows":
            parts = [exp.Dot(this=col(_U), expression=exp.to_identifier(p, quoted=True)) for p in node.parts]
        else:
            parts = [col(_U)]
    if node.ordinality:
        positions = fn("generate_series", lit(1), fn("len", value.copy()) if node.shape != "map" else length.copy())
        if node.outer:
            positions = _or_one_null(positions, length.copy())
        inner.append(_unnest(positions, _N))
        hidden.append(_N)
        parts.append(exp.Cast(this=col(_N), to=exp.DataType.build("INT")))
    expanded = exp.select(*inner).from_(src)
    outer = [exp.Star(except_=[col(h) for h in hidden])]
    outer += [exp.alias_(p, name, quoted=True) for p, name in zip(parts, node.names)]
    return exp.select(*outer).from_(
        exp.Subquery(this=expanded, alias=exp.TableAlias(this=exp.Identifier(this="u", quoted=True))))
