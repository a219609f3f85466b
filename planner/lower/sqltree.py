"""sqlglot builders for the statements of stateful operators (their state lives in DuckDB tables).

The runtime runs these statements per batch in the job's DuckDB
connection; they are built here as sqlglot trees and rendered once, at
planning, with :func:`render` (never joined from strings), so a name is
always quoted the same way and a statement is always well formed.

Column names are quoted identifiers; table names (the operator's state
and scratch tables, ``__state_<id>``, and the relations the runtime
registers, ``__input``) and table aliases are plain.

Example:
    >>> stmt = create_temp("__o_1", select_from("__state_1", "s", star("s")).join(
    ...     table("__d_1", "d"), on=same("s", "d", ["k"]), join_type="semi"))
    >>> render(stmt)
    'CREATE OR REPLACE TEMPORARY TABLE __o_1 AS SELECT s.* FROM __state_1 AS s SEMI JOIN __d_1 AS d ON s."k" IS NOT DISTINCT FROM d."k"'
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from sqlglot import exp

from ..types import to_sql_type
from ..vocabulary import OP, RETRACTIONS, ChangeOp

DIALECT = "duckdb"


def render(tree: exp.Expression) -> str:
    return tree.sql(dialect=DIALECT)


def q(name: str) -> str:
    """A column name quoted, as text (for the statements still written as text, and messages)."""
    return exp.to_identifier(name, quoted=True).sql(DIALECT)


def sql_type(t: pa.DataType) -> str:
    """An Arrow type as DuckDB names it, as text."""
    return to_sql_type(t).sql(DIALECT)


def ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column, optionally qualified by a table alias."""
    return exp.Column(this=ident(name), table=exp.to_identifier(table) if table else None)


def cols(names: Iterable[str], table: str | None = None) -> list[exp.Column]:
    return [col(n, table) for n in names]


def star(table: str | None = None) -> exp.Expression:
    return exp.Column(this=exp.Star(), table=exp.to_identifier(table)) if table else exp.Star()


def lit(value: int) -> exp.Literal:
    return exp.Literal.number(value)


def alias(e: exp.Expression, name: str) -> exp.Alias:
    return exp.alias_(e, name, quoted=True)


def table(name: str, as_: str | None = None) -> exp.Table:
    t = exp.Table(this=exp.to_identifier(name))
    if as_:
        t.set("alias", exp.TableAlias(this=exp.to_identifier(as_)))
    return t


def sub(query: exp.Expression, as_: str) -> exp.Subquery:
    return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(as_)))


def select_from(source: str | exp.Expression, as_: str | None, *items: exp.Expression) -> exp.Select:
    """``SELECT items FROM source [AS as_]`` (``source``: a table name, or a query made a subquery)."""
    if isinstance(source, str):
        src: exp.Expression = table(source, as_)
    elif isinstance(source, (exp.Select, exp.Union)):
        src = sub(source, as_ or "t")
    else:
        src = source
    return exp.select(*items).from_(src)


def same(a: str, b: str, names: Iterable[str]) -> exp.Expression:
    """``a.n IS NOT DISTINCT FROM b.n`` for each name (NULL keys match, as a GROUP BY groups them); TRUE if none."""
    parts = [exp.NullSafeEQ(this=col(n, a), expression=col(n, b)) for n in names]
    return exp.and_(*parts) if parts else exp.true()


def any_differs(a: str, b: str, names: Iterable[str]) -> exp.Expression:
    """``a.n IS DISTINCT FROM b.n`` for some name; FALSE if none."""
    parts = [exp.NullSafeNEQ(this=col(n, a), expression=col(n, b)) for n in names]
    return exp.Paren(this=exp.or_(*parts)) if parts else exp.false()


def cast(e: exp.Expression, t: pa.DataType | str) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType.build(t) if isinstance(t, str) else to_sql_type(t))


def op_code(op: ChangeOp) -> exp.Expression:
    """A row kind as the changelog column holds it: ``CAST(<code> AS TINYINT)``."""
    return cast(lit(int(op)), "TINYINT")


def op_column(op: ChangeOp) -> exp.Alias:
    return alias(op_code(op), OP)


def sign(updating: bool) -> exp.Expression:
    """+1 for a row that adds, -1 for one that retracts (``__op`` in -U, -D); 1 when the input only adds."""
    if not updating:
        return lit(1)
    retracts = exp.In(this=col(OP), expressions=[lit(int(o)) for o in RETRACTIONS])
    return exp.Case(ifs=[exp.If(this=retracts, true=exp.Neg(this=lit(1)))], default=lit(1))


def create_temp(name: str, query: exp.Expression) -> exp.Create:
    """``CREATE OR REPLACE TEMPORARY TABLE name AS query``: a scratch table of one batch."""
    return exp.Create(this=table(name), kind="TABLE", replace=True, expression=query,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


def create_table(name: str, columns: Iterable[tuple[str, pa.DataType | str]]) -> exp.Create:
    """``CREATE TABLE IF NOT EXISTS name (columns)``: a state table (kept across batches and checkpoints)."""
    defs = [exp.ColumnDef(this=ident(n), kind=exp.DataType.build(t) if isinstance(t, str) else to_sql_type(t))
            for n, t in columns]
    return exp.Create(this=exp.Schema(this=table(name), expressions=defs), kind="TABLE", exists=True)


def insert(name: str, query: exp.Expression) -> exp.Insert:
    return exp.Insert(this=table(name), expression=query)


def delete_using(name: str, using: exp.Table, where: exp.Expression) -> exp.Delete:
    """``DELETE FROM name USING using WHERE where``."""
    return exp.Delete(this=table(name), using=[using], where=exp.Where(this=where))


def union_all(*queries: exp.Expression) -> exp.Expression:
    out = queries[0]
    for query in queries[1:]:
        out = exp.Union(this=out, expression=query, distinct=False)
    return out


def call(name: str, *args: exp.Expression) -> exp.Anonymous:
    """A DuckDB function by its name (``epoch_us``, ``range``)."""
    return exp.Anonymous(this=name, expressions=list(args))


def row_number(partition: list[exp.Expression], order: list[exp.Ordered] | None = None) -> exp.Window:
    return exp.Window(this=exp.RowNumber(), partition_by=partition or None,
                      order=exp.Order(expressions=order) if order else None)


def group_by_all(query: exp.Select) -> exp.Select:
    query.set("group", exp.Group(expressions=[exp.Var(this="ALL")]))
    return query


def asc(e: exp.Expression | str, nulls_first: bool = False) -> exp.Ordered:
    """Ascending (NULLs last unless ``nulls_first``, DuckDB's default)."""
    return exp.Ordered(this=col(e) if isinstance(e, str) else e, desc=False, nulls_first=nulls_first)


def desc(e: exp.Expression | str, nulls_first: bool = False) -> exp.Ordered:
    """Descending (NULLs last unless ``nulls_first``)."""
    return exp.Ordered(this=col(e) if isinstance(e, str) else e, desc=True, nulls_first=nulls_first)
