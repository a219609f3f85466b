"""DuckDB SQL for per-batch work, built as sqlglot trees.

The runtime evaluates filters, projections, window assignment and partial
aggregation by running one DuckDB statement over each micro-batch. This
module builds those statements from logical nodes. Window arithmetic is
done on integer epoch microseconds with a floor modulo, so it is exact for
any timestamp, before or after 1970.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp
from sqlglot.optimizer.annotate_types import annotate_types

from ...grammar.dialect import Dsms
from ..bind.expressions import col
from ..functions import lower_functions
from ..logical import nodes as L
from ..physical.specs import BATCH, OP
from ..types import Schema, to_sql_type

DIALECT = "duckdb"
_IN = "__in"


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def lit(value: int) -> exp.Expression:
    return exp.Literal.number(value)


def epoch_us(e: exp.Expression) -> exp.Expression:
    return fn("epoch_us", e)


def from_us(e: exp.Expression) -> exp.Expression:
    return fn("make_timestamp", e)


def floor_to(us: exp.Expression, width: int, offset: int = 0) -> exp.Expression:
    """``us`` rounded down to a multiple of ``width`` (shifted by ``offset``), exactly."""
    shifted = exp.Paren(this=exp.Sub(this=us.copy(), expression=lit(offset))) if offset else us.copy()
    mod = exp.Mod(this=exp.Paren(this=exp.Add(this=exp.Paren(this=exp.Mod(this=shifted, expression=lit(width))),
                                              expression=lit(width))), expression=lit(width))
    return exp.Sub(this=us.copy(), expression=exp.Paren(this=mod))


def typed(expr: exp.Expression, schema: Schema) -> exp.Expression:
    """A copy of a bound expression annotated with types, so it renders with Flink semantics.

    (sqlglot turns ``INT / INT`` into an integer division only when it
    knows both sides are integers.)
    """
    if isinstance(expr, exp.Column):
        return expr.copy()
    probe = expr.copy()
    for c in probe.find_all(exp.Column):
        c.set("table", exp.Identifier(this=_IN, quoted=True))
    query = exp.select(probe).from_(exp.Table(this=exp.Identifier(this=_IN, quoted=True)))
    annotated = annotate_types(query, schema={_IN: schema.to_type_dict()} if len(schema) else None,
                               dialect=Dsms).expressions[0]
    for c in annotated.find_all(exp.Column):
        c.set("table", None)
    # Calls whose Flink meaning depends on argument types (ROUND of a DOUBLE, TRUNCATE, CAST to VARCHAR).
    return lower_functions(annotated)


def cast(e: exp.Expression, dtype: pa.DataType) -> exp.Expression:
    return exp.Cast(this=e, to=to_sql_type(dtype))


def batch_table() -> exp.Table:
    return exp.Table(this=exp.Identifier(this=BATCH, quoted=True))


def subquery(inner: exp.Select, alias: str = "t") -> exp.Subquery:
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=exp.Identifier(this=alias, quoted=True)))


def star_from(source: exp.Expression) -> exp.Select:
    return exp.select(exp.Star()).from_(source)


def layer(node: L.Node, inner: exp.Expression) -> exp.Select:
    """The SELECT that computes ``node`` from ``inner`` (the SQL of its input)."""
    src = subquery(inner) if isinstance(inner, exp.Select) else inner
    schema = node.inputs[0].schema
    if isinstance(node, L.Filter):
        return star_from(src).where(typed(node.condition, schema))
    if isinstance(node, L.Project):
        items = [exp.alias_(typed(e, schema), name, quoted=True) for name, e in node.exprs]
        if node.changelog == L.UPDATING:
            items.append(col(OP))  # an updating stream keeps its row kinds
        return exp.select(*items).from_(src)
    if isinstance(node, L.WindowTVF):
        return window_columns(node.window, src, schema)
    raise TypeError(f"{type(node).__name__} is not a per-batch node")


def window_columns(w: L.WindowSpec, src: exp.Expression, schema: Schema) -> exp.Select:
    """Each row with its windows' bounds; HOP and CUMULATE rows repeat once per window.

    Rows keep whatever columns the batch has (sources read only the columns
    a plan uses), so the input is selected with ``*``.
    """
    us = epoch_us(col(w.time_col))
    if w.kind == "TUMBLE":
        start = floor_to(us, w.size, w.offset)
        end = exp.Add(this=start.copy(), expression=lit(w.size))
        return exp.select(exp.Star(), *_bounds(start, end)).from_(src)
    if w.kind == "HOP":
        last = floor_to(us, w.slide, w.offset)
        first = exp.Sub(this=last.copy(), expression=lit(w.size - w.slide))
        series = fn("generate_series", first, last, lit(w.slide))
        expanded = exp.select(exp.Star(), exp.alias_(exp.Unnest(expressions=[series]), "__ws", quoted=True)).from_(src)
        ws = col("__ws")
        return exp.select(_star_except("__ws"), *_bounds(ws, exp.Add(this=ws.copy(), expression=lit(w.size)))) \
            .from_(subquery(expanded))
    if w.kind == "CUMULATE":
        start = floor_to(us, w.size, w.offset)
        first_end = exp.Add(this=floor_to(us, w.step, w.offset), expression=lit(w.step))
        series = fn("generate_series", first_end, exp.Add(this=start.copy(), expression=lit(w.size)), lit(w.step))
        expanded = exp.select(exp.Star(), exp.alias_(start, "__ws", quoted=True),
                              exp.alias_(exp.Unnest(expressions=[series]), "__we", quoted=True)).from_(src)
        return exp.select(_star_except("__ws", "__we"), *_bounds(col("__ws"), col("__we"))).from_(subquery(expanded))
    raise ValueError(f"{w.kind} windows cannot be assigned per batch")


def _star_except(*names: str) -> exp.Star:
    return exp.Star(except_=[col(n) for n in names])


def _bounds(start_us: exp.Expression, end_us: exp.Expression) -> list[exp.Expression]:
    return [
        exp.alias_(from_us(start_us), "window_start", quoted=True),
        exp.alias_(from_us(end_us), "window_end", quoted=True),
        exp.alias_(from_us(exp.Sub(this=end_us.copy(), expression=lit(L.WINDOW_TIME_OFFSET_US))), "window_time", quoted=True),
    ]


def chain_sql(chain: list[L.Node], base: exp.Expression | None = None) -> exp.Select:
    """One statement for a chain of per-batch nodes (bottom first) over the batch."""
    sql: exp.Expression = base if base is not None else star_from(batch_table())
    for node in chain:
        sql = layer(node, sql)
    return sql


def column_picks(chain: list[L.Node]) -> tuple[tuple[str, str], ...] | None:
    """For a chain of projections of bare columns: (output column, input column) pairs; None otherwise."""
    picks = None
    for node in chain:
        if not isinstance(node, L.Project) or node.changelog == L.UPDATING:
            return None
        sources = dict(picks) if picks is not None else None
        step = []
        for name, e in node.exprs:
            field = node.input.schema.find(e.name) if isinstance(e, exp.Column) and not e.table else None
            if field is None or (sources is not None and field.name not in sources):
                return None
            step.append((name, sources[field.name] if sources is not None else field.name))
        picks = tuple(step)
    return picks


def render(tree: exp.Expression) -> str:
    return tree.sql(dialect=DIALECT)
