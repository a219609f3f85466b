"""DuckDB statements for ChangelogNormalize: an upsert stream -> a valid changelog.

A table with a primary key is read as *changes by key*: an upsert (``+I``
or ``+U``: "this is now the row of its key"), a delete (``-D``: "the key is
gone"), and, from Debezium updates, the row before the update (``-U``).
Such a stream is not yet a changelog downstream operators can apply: an
upsert of a known key must retract the old row first, a delete must carry
the full row it removes, and repeats must vanish. The normalize step keeps
the current row of every key (in a DuckDB table) and turns each change
into what it means, as Flink's ChangelogNormalize does::

    input (by arrival)         state before      output
    +I (1, 'a')                -                 +I (1, 'a')
    +I (1, 'b')                (1, 'a')          -U (1, 'a'), +U (1, 'b')
    +I (1, 'b')                (1, 'b')          nothing (unchanged)
    -D (1, NULL)               (1, 'b')          -D (1, 'b')
    -D (2, NULL)               -                 nothing (unknown key)
    -U (1, 'a'), +U (1, 'c')   (1, 'b')          -U (1, 'b'), +U (1, 'c')   (a -U followed
                                                 by an upsert of its key is redundant)

Every change of a batch is handled in arrival order per key, but
vectorized: the row a change replaces is the previous change of its key in
the batch (``LAG`` over the key, ordered by the arrival number ``__seq``
the runtime adds), or the stored row for the first change of a key.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ..physical.specs import BATCH
from ..vocabulary import ADDITIONS, OP, ChangeOp
from .sqltree import (
    alias,
    asc,
    col,
    cols,
    create_table,
    create_temp,
    delete_using,
    desc,
    insert,
    lit,
    op_column,
    render,
    row_number,
    same,
    select_from,
    star,
    sub,
    union_all,
)

SEQ = "__seq"  # the arrival number of each change in its batch, added by the runtime


@dataclass(frozen=True)
class NormalizeSql:
    setup: tuple[str, ...]
    per_batch: tuple[str, ...]  # run in order; the last returns the changes
    state_table: str


def normalize_sql(op_id: int, columns: list[tuple[str, object]], keys: tuple[str, ...]) -> NormalizeSql:
    """Statements for a normalize operator over ``columns`` ((name, arrow type) pairs, no op column)."""
    state, kinds, changes = f"__norm_{op_id}", f"__nk_{op_id}", f"__ne_{op_id}"
    names = [n for n, _ in columns]
    values = [n for n in names if n not in keys]
    K = list(keys)

    def per_key(func: exp.Expression) -> exp.Window:  # over the changes of a key, in arrival order
        return exp.Window(this=func, partition_by=cols(K), order=exp.Order(expressions=[asc(exp.column(SEQ))]))

    def additions(e: exp.Expression) -> exp.Expression:
        return exp.In(this=e, expressions=[lit(int(o)) for o in ADDITIONS])

    def when(cond: exp.Expression, then: exp.Expression, default: exp.Expression) -> exp.Case:
        return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)

    # __u: 1 upsert, 0 delete, 2 a -U made redundant by the upsert of its key that follows it
    redundant = exp.and_(exp.EQ(this=col(OP), expression=lit(int(ChangeOp.UPDATE_BEFORE))),
                         additions(per_key(exp.Lead(this=col(OP)))))
    kind = exp.Case(ifs=[exp.If(this=additions(col(OP)), true=lit(1)), exp.If(this=redundant, true=lit(2))],
                    default=lit(0))
    classified = select_from(sub(select_from(BATCH, None, star(), exp.alias_(kind, "__u")), "b"), None, star()) \
        .where(exp.NEQ(this=exp.column("__u"), expression=lit(2)))

    first = exp.Is(this=exp.column("__pseq", "p"), expression=exp.Null())
    lagged = select_from(kinds, None, star(), exp.alias_(per_key(exp.Lag(this=exp.column(SEQ))), "__pseq"),
                         exp.alias_(per_key(exp.Lag(this=exp.column("__u"))), "__pu"),
                         *[exp.alias_(per_key(exp.Lag(this=col(v))), f"__p{i}") for i, v in enumerate(values)])
    present = exp.Not(this=exp.Is(this=exp.column("__present", "s"), expression=exp.Null()))
    # the row each change replaces: the previous change of its key in the batch, or the stored row
    previous = select_from("__np", "p", star("p"), exp.alias_(when(first, present, exp.EQ(
        this=exp.column("__pu", "p"), expression=lit(1))), "__has"),
        *[exp.alias_(when(first.copy(), col(v, "s"), exp.column(f"__p{i}", "p")), f"__q{i}")
          for i, v in enumerate(values)]) \
        .join(sub(select_from(state, None, star(), exp.alias_(exp.true(), "__present")), "s"),
              on=same("p", "s", K), join_type="left")
    unchanged = exp.and_(*[exp.NullSafeEQ(this=col(v), expression=exp.column(f"__q{i}"))
                           for i, v in enumerate(values)]) if values else exp.true()
    current = cols(names)
    before = cols(K) + [alias(exp.column(f"__q{i}"), v) for i, v in enumerate(values)]

    def part(items: list[exp.Expression], op: ChangeOp, order: int, where: exp.Expression) -> exp.Select:
        return select_from("__nq", None, *[i.copy() for i in items], op_column(op), exp.column(SEQ),
                           exp.alias_(lit(order), "__sub")).where(where)

    upsert, delete, has = (exp.EQ(this=exp.column("__u"), expression=lit(1)),
                           exp.EQ(this=exp.column("__u"), expression=lit(0)), exp.column("__has"))
    changed = exp.and_(upsert, has, exp.Not(this=exp.Paren(this=unchanged)))
    found = union_all(
        part(before, ChangeOp.UPDATE_BEFORE, 0, changed),
        part(current, ChangeOp.UPDATE_AFTER, 1, changed.copy()),
        part(current, ChangeOp.INSERT, 1, exp.and_(upsert.copy(), exp.Not(this=has.copy()))),
        part(before, ChangeOp.DELETE, 0, exp.and_(delete, has.copy())),
    ).with_("__np", as_=lagged).with_("__nq", as_=previous)
    latest = select_from(sub(select_from(kinds, None, star(), exp.alias_(
        row_number(cols(K), [desc(exp.column(SEQ))]), "__rn")), "l"), None, *current) \
        .where(exp.and_(exp.EQ(this=exp.column("__rn"), expression=lit(1)), upsert.copy()))
    per_batch = (
        create_temp(kinds, classified),
        create_temp(changes, found),
        delete_using(state, sub(select_from(kinds, None, *cols(K)).distinct(), "d"), same(state, "d", K)),
        insert(state, latest),
        select_from(changes, None, *cols(names), col(OP)).order_by(asc(exp.column(SEQ)), asc(exp.column("__sub"))),
    )
    return NormalizeSql((render(create_table(state, columns)),), tuple(render(s) for s in per_batch), state)
