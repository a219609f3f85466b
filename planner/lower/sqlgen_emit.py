"""DuckDB statements that turn "what a window result is now" into changes.

An operator that emits early results or corrections (EMIT CHANGES,
ALLOWED LATENESS, periodic firing) keeps the rows it has emitted in a
DuckDB table. To emit, it registers the current rows of some *scope* (a
set of windows, or of session partitions) as ``__cur`` (rows outside the
scope are ignored) and the scope as ``__scope``, and runs :attr:`EmitSql.diff`; the last statement returns
the changes against what was emitted before for that scope::

    identity in both, values differ    -> -U emitted row, +U current row
    identity only in the current rows  -> +I
    identity only in the emitted rows  -> -D   (a session merged away)
    unchanged                          -> nothing

and the emitted table then holds the current rows for that scope.
``evict`` drops rows of windows that can no longer change (parameter: a
bound in epoch microseconds on ``window_end``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..vocabulary import OP, ChangeOp
from .sqltree import (
    alias,
    any_differs,
    asc,
    call,
    col,
    cols,
    create_table,
    create_temp,
    delete_using,
    insert,
    lit,
    op_column,
    render,
    row_number,
    same,
    select_from,
    star,
    table,
    union_all,
)


@dataclass(frozen=True)
class EmitSql:
    setup: str
    diff: tuple[str, ...]  # the last statement returns the changes (with __op)
    evict: str  # one parameter: rows with epoch_us(window_end) below it go
    table: str


def emit_sql(op_id: int, schema: pa.Schema, identity: tuple[str, ...], scope: tuple[str, ...]) -> EmitSql:
    """Statements for an emitted-rows table with ``schema`` (the operator's output, without __op)."""
    emitted, old, pairs = f"__emitted_{op_id}", f"__emitted_old_{op_id}", f"__emitted_pairs_{op_id}"
    cur, changes = f"__emitted_cur_{op_id}", f"__emit_changes_{op_id}"
    names = [f.name for f in schema]
    values = [c for c in names if c not in identity]

    def rows(src: str, op: ChangeOp, group: int, rank: exp.Expression, prefix: str = "") -> list[exp.Expression]:
        """A change row of ``op`` from ``src``'s columns (``prefix``: their names in a row of pairs)."""
        return [alias(col(prefix + c, src), c) for c in names] + \
            [op_column(op), exp.alias_(lit(group), "__g"), exp.alias_(rank, "__rank")]

    def pair_rank(plus: int) -> exp.Expression:  # -U then +U of each pair, pairs in order
        twice = exp.Mul(this=exp.column("__rank", "p"), expression=lit(2))
        return exp.Add(this=twice, expression=lit(plus)) if plus else twice

    both = same("o", "c", identity)
    paired = [alias(col(c, "o"), "__o_" + c) for c in names] + [alias(col(c, "c"), "__n_" + c) for c in names]
    diff = [
        create_temp(old, select_from(emitted, "e", star("e")).join(table("__scope", "s"), on=same("e", "s", scope),
                                                                   join_type="semi")),
        create_temp(cur, select_from("__cur", "c", star("c")).join(table("__scope", "s"), on=same("c", "s", scope),
                                                                   join_type="semi")),
        create_temp(pairs, select_from(old, "o", exp.alias_(row_number([]), "__rank"), *paired)
                    .join(table(cur, "c"), on=both).where(any_differs("o", "c", values))),
        create_temp(changes, select_from(union_all(
            select_from(old, "o", *rows("o", ChangeOp.DELETE, 0, lit(0)))
            .join(table(cur, "c"), on=both, join_type="anti"),
            select_from(pairs, "p", *rows("p", ChangeOp.UPDATE_BEFORE, 1, pair_rank(0), "__o_")),
            select_from(pairs, "p", *rows("p", ChangeOp.UPDATE_AFTER, 1, pair_rank(1), "__n_")),
            select_from(cur, "c", *rows("c", ChangeOp.INSERT, 2, lit(0)))
            .join(table(old, "o"), on=same("c", "o", identity), join_type="anti"),
        ), "changes", *cols(names), col(OP)).order_by(asc(exp.column("__g")), asc(exp.column("__rank")))),
        delete_using(emitted, table("__scope", "s"), same(emitted, "s", scope)),
        insert(emitted, select_from(cur, None, *cols(names))),
        select_from(changes, None, star()),
    ]
    evict = exp.Delete(this=table(emitted), where=exp.Where(this=exp.LT(
        this=call("epoch_us", col("window_end")), expression=exp.Placeholder())))
    return EmitSql(render(create_table(emitted, [(f.name, f.type) for f in schema])),
                   tuple(render(s) for s in diff), render(evict), emitted)
