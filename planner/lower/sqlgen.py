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
from ..windows import assign_windows, timestamp

DIALECT = "duckdb"
_IN = "__in"


def fn(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def lit(value: int) -> exp.Expression:
    return exp.Literal.number(value)


def epoch_us(e: exp.Expression) -> exp.Expression:
    return fn("epoch_us", e)


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
    """Each row with its windows' bounds, once per window (``windows.assign_windows``).

    Rows keep whatever columns the batch has (sources read only the columns
    a plan uses), so the input is selected with ``*``.
    """
    return assign_windows(w, src, None, _bounds)


def _bounds(start_us: exp.Expression, end_us: exp.Expression) -> list[exp.Expression]:
    return [
        exp.alias_(timestamp(start_us), "window_start", quoted=True),
        exp.alias_(timestamp(end_us), "window_end", quoted=True),
        exp.alias_(timestamp(exp.Sub(this=end_us.copy(), expression=lit(L.WINDOW_TIME_OFFSET_US))), "window_time",
                   quoted=True),
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
