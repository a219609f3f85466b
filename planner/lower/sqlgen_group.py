"""DuckDB statements for a group aggregate whose state lives in DuckDB tables.

A group aggregate without a window keeps, per key, a running row count,
each aggregate's accumulators (signed counts and sums, so retractions
subtract) and the output it last emitted. MIN, MAX and COUNT(DISTINCT)
cannot be undone from a sum, so each keeps a multiset log of
(key, value, count). A Python aggregate keeps its accumulator (a BLOB)
and updates it by calling the function (``planner/python_aggregate.py``). Per batch the runtime registers the batch as
``__input`` and runs :attr:`GroupAggSql.per_batch` in order; the last
statement returns the changes::

    key seen before, result changed   -> -U old row, +U new row
    key new                           -> +I new row
    every row of the key retracted    -> -D old row
    result unchanged                  -> nothing (as in Flink)

Tables are named after the operator id, in the job's own connection.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..aggregate_kinds import SEQ
from ..logical.nodes import AggCall
from ..types import Schema
from ..vocabulary import OP, ChangeOp
from .sqlgen_ttl import group_agg_ttl, now_variable
from .sqltree import (
    alias,
    asc,
    call,
    cast,
    col,
    cols,
    create_table,
    create_temp,
    delete_using,
    insert,
    lit,
    op_column,
    q,  # noqa: F401 - (the modules still writing text take it from here)
    render,
    row_number,
    same,
    select_from,
    sign,
    sql_type,  # noqa: F401 - (as q)
    star,
    sub,
    table,
    union_all,
)


@dataclass(frozen=True)
class GroupAggSql:
    setup: tuple[str, ...]  # create the state tables
    per_batch: tuple[str, ...]  # run in order; the last returns the changes
    compact: tuple[str, ...]  # merge the multiset logs (run now and then)
    state_tables: tuple[str, ...]
    expire: tuple[str, ...] = ()  # SET 'state.ttl': drop the keys not written for that long (sqlgen_ttl.py)
    oldest: str = ""  # the oldest last-write time held


def _sum(e: exp.Expression) -> exp.Expression:
    return exp.Sum(this=e)


def _add(a: exp.Expression, b: exp.Expression) -> exp.Expression:
    return exp.Add(this=a, expression=b)


def _positive(e: exp.Expression) -> exp.Expression:
    return exp.GT(this=e, expression=lit(0))


def _when(cond: exp.Expression, then: exp.Expression, default: exp.Expression | None = None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


class _Aggregates:
    """The accumulator columns, their per-batch deltas and merges, and each aggregate's output expression.

    How an aggregate keeps its state follows from its kind (planner/aggregate_kinds.py): partials that are
    counts and sums are signed accumulators; the others keep a log of the values (in arrival order for the
    ordered kinds) and are recomputed over its live values for the keys a batch touches.
    """

    def __init__(self, op_id: int, keys: list[str], input_schema: Schema, signed: exp.Expression):
        self.op_id, self.keys, self.schema, self.signed = op_id, keys, input_schema, signed
        self.d = f"__d_{op_id}"
        self.columns: list[tuple[str, pa.DataType | str]] = []  # accumulators after the keys and __cnt
        self.delta: list[exp.Expression] = [exp.alias_(_sum(exp.column("__sg")), "__cnt")]
        self.merged: list[exp.Expression] = [exp.alias_(_add(exp.func("COALESCE", exp.column("__cnt", "o"), lit(0)),
                                                              exp.column("__cnt", "d")), "__cnt")]
        self.outputs: list[tuple[exp.Expression, pa.DataType]] = []
        self.setup: list[exp.Expression] = []
        self.multiset_steps: list[exp.Expression] = []
        self.multiset_joins: list[tuple[str, exp.Expression]] = []
        self.compact: list[exp.Expression] = []
        self.logs: list[str] = []

    def add(self, i: int, a: AggCall) -> None:
        if a.kind.python:
            out = self._python(i, a)
        elif a.kind.retracts_by_sign and not a.keeps_values:
            out = self._signed(i, a)
        elif a.kind.ordered:
            out = self._ordered_log(i, a)
        else:
            out = self._multiset(i, a)
        self.outputs.append((out, a.type))

    def _signed(self, i: int, a: AggCall) -> exp.Expression:
        """Signed accumulators (counts and sums): a retraction subtracts what its row added."""
        arg = col(a.arg) if a.arg else None
        parts = {}
        for p in a.partials(retracting=True):
            name = f"__a{i}{p.suffix}"
            parts[p.suffix] = exp.column(name, "n")
            self.columns.append((name, p.type))
            if arg is None:
                signed: exp.Expression = exp.column("__sg")
            elif p.first == "count":  # the non-NULL values
                signed = _when(exp.Is(this=arg.copy(), expression=exp.Null()), lit(0), exp.column("__sg"))
            else:
                signed = exp.Mul(this=cast(p.value(arg), p.type), expression=exp.column("__sg"))
            self.delta.append(exp.alias_(_sum(signed), name))
            total = _add(exp.func("COALESCE", exp.column(name, "o"), lit(0)),
                         exp.func("COALESCE", exp.column(name, "d"), lit(0)))
            self.merged.append(exp.alias_(cast(total, p.type), name))
        return a.kind.final(parts, a.type)

    def _python(self, i: int, a: AggCall) -> exp.Expression:
        """A Python aggregate: its accumulator per key (a BLOB), stepped by the batch's rows in arrival order
        (``accumulate`` for a +1 row, ``retract`` for a -1 row; runtime/udaf.py)."""
        name, arg = f"__a{i}p", col(a.arg)
        self.columns.append((name, pa.binary()))
        change = exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier("s"), expression=exp.column("__sg")),
                                         exp.PropertyEQ(this=exp.to_identifier("v"), expression=arg)])
        changes = exp.ArrayAgg(this=exp.Order(this=change, expressions=[asc(col(SEQ))]))
        present = exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null()))
        self.delta.append(exp.alias_(exp.Filter(this=changes, expression=exp.Where(this=present)), name))
        self.merged.append(exp.alias_(a.kind.step(exp.column(name, "o"), exp.column(name, "d")), name))
        return a.kind.value(exp.column(name, "n"))

    def _log(self, log: str, a: AggCall, extra: list[tuple[str, pa.DataType | str]]) -> exp.Column:
        """A log table of (keys, value, ``extra``) for aggregate ``a``; its argument as a column."""
        self.logs.append(log)
        self.setup.append(create_table(log, [(k, self.schema.find(k).type) for k in self.keys] +
                                       [("__v", a.arg_type)] + extra))
        return col(a.arg)

    def _per_key(self, result: str, value: exp.Expression, live: exp.Expression) -> exp.Column:
        """``result``: per key of the batch, ``value`` over its ``live`` rows (an aggregate of nothing where it has
        none: COUNT gives 0); joined to the new state by key."""
        keys, d = self.keys, self.d
        reduced = select_from(d, "d", *cols(keys, "d"), exp.alias_(value, "__r")).join(
            sub(live, "live"), on=same("d", "live", keys), join_type="left")
        if keys:
            reduced = reduced.group_by(*cols(keys, "d"))
        self.multiset_steps.append(create_temp(result, reduced))
        self.multiset_joins.append((result, same("n", result, keys)))
        return exp.column("__r", result)

    def _multiset(self, i: int, a: AggCall) -> exp.Expression:
        """MIN, MAX, DISTINCT ...: a log of (keys, value, count) per key; the result over its live values."""
        log, keys = f"__ms_{self.op_id}_{i}", self.keys
        arg = self._log(log, a, [("__n", pa.int64())])
        self.multiset_steps.append(insert(log, select_from(self.signed, None, *cols(keys), exp.alias_(arg, "__v"),
                                                           exp.alias_(_sum(exp.column("__sg")), "__n"))
                                          .where(exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null())))
                                          .group_by(*cols(keys), arg.copy())))
        live = select_from(log, "m", *cols(keys, "m"), exp.column("__v", "m"),
                           exp.alias_(_sum(exp.column("__n", "m")), "__n")) \
            .join(table(self.d, "d"), on=same("m", "d", keys), join_type="semi") \
            .group_by(*cols(keys, "m"), exp.column("__v", "m")) \
            .having(_positive(_sum(exp.column("__n", "m"))))
        reduce = a.kind.over_multiset(exp.column("__v", "live"), exp.column("__n", "live"), a.arg_type, a.type,
                                      a.distinct)
        group = [*cols(keys), exp.column("__v")]
        self.compact.append(exp.Create(this=table(log), kind="TABLE", replace=True, expression=select_from(
            log, None, *group, exp.alias_(_sum(exp.column("__n")), "__n")).group_by(*[g.copy() for g in group])
            .having(exp.NEQ(this=_sum(exp.column("__n")), expression=lit(0)))))
        return self._per_key(f"__m_{self.op_id}_{i}", reduce, live)

    def _ordered_log(self, i: int, a: AggCall) -> exp.Expression:
        """FIRST_VALUE, LAST_VALUE, LISTAGG, ARRAY_AGG: a log of (keys, value, arrival number, +1 or -1) per aggregate.

        A value's occurrences are its +1 rows in arrival order; its -1 rows (retractions) take away the earliest
        ones, as Flink's ``*WithRetractAggFunction``. The result is the kind's aggregate over the live occurrences.
        """
        log, keys = f"__ol_{self.op_id}_{i}", self.keys
        arg = self._log(log, a, [(SEQ, pa.int64()), ("__n", pa.int64())])
        rows = select_from(self.signed, None, *cols(keys), exp.alias_(arg, "__v"), col(SEQ),
                           exp.alias_(exp.column("__sg"), "__n"))
        if a.kind.skips_nulls:  # ARRAY_AGG keeps NULLs (and retracts them, earliest first)
            rows = rows.where(exp.Not(this=exp.Is(this=arg.copy(), expression=exp.Null())))
        self.multiset_steps.append(insert(log, rows))
        touched = select_from(log, "m", star("m")).join(table(self.d, "d"), on=same("m", "d", keys),
                                                         join_type="semi")
        value = a.kind.over_ordered(exp.column("__v", "live"), col(SEQ, "live"), a.type)
        live = _live_distinct if a.kind.distinct else _live_occurrences
        self.compact.append(exp.Create(this=table(log), kind="TABLE", replace=True,
                                       expression=live(table(log, "m"), keys)))
        return self._per_key(f"__m_{self.op_id}_{i}", value, live(sub(touched, "m"), keys))


def _live_occurrences(source: exp.Expression, keys: list[str]) -> exp.Select:
    """The +1 rows of an ordered log (``source``, aliased ``m``) that no retraction took away: per value, as
    many of its earliest occurrences are gone as it has -1 rows."""
    value = [*cols(keys), exp.column("__v")]
    added = exp.Paren(this=_positive(exp.column("__n")))
    rank = row_number([*value, added], [asc(col(SEQ))])
    retracted = _when(exp.LT(this=exp.column("__n"), expression=lit(0)), lit(1), lit(0))
    gone = exp.Window(this=_sum(retracted), partition_by=[v.copy() for v in value])
    numbered = exp.select(star("m"), exp.alias_(rank, "__rk"), exp.alias_(gone, "__gone")).from_(source)
    return select_from(sub(numbered, "o"), None, exp.Star(except_=[exp.column("__rk"), exp.column("__gone")])) \
        .where(exp.and_(_positive(exp.column("__n")), exp.GT(this=exp.column("__rk"), expression=exp.column("__gone"))))


def _live_distinct(source: exp.Expression, keys: list[str]) -> exp.Select:
    """The live values of an ordered log (``source``, aliased ``m``) of a DISTINCT kind (ARRAY_AGG(DISTINCT x)),
    one row each, as Flink's distinct map feeds them: a value enters when its count rises above 0 and leaves
    when it falls back to 0; its place (``SEQ``) is where it last entered, its ``__n`` its count::

        a: +1 @1  +1 @3  -1 @4        count 1, entered @1       (a, @1, 1)
        b: +1 @2  -1 @5  +1 @6        count 1, entered again @6 (b, @6, 1)
    """
    value = [*cols(keys), exp.column("__v")]
    running = exp.Window(this=_sum(exp.column("__n")), partition_by=[v.copy() for v in value],
                         order=exp.Order(expressions=[asc(col(SEQ))]),
                         spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                             end="CURRENT ROW"))
    counted = exp.select(star("m"), exp.alias_(running, "__run")).from_(source)
    entered = exp.and_(_positive(exp.column("__run")),
                       exp.LTE(this=exp.Sub(this=exp.column("__run"), expression=exp.column("__n")), expression=lit(0)))
    start = exp.Max(this=_when(entered, col(SEQ)))
    return select_from(sub(counted, "r"), None, *[v.copy() for v in value], exp.alias_(start, SEQ),
                       exp.alias_(cast(_sum(exp.column("__n")), pa.int64()), "__n")) \
        .group_by(*[v.copy() for v in value]).having(_positive(_sum(exp.column("__n"))))


def group_agg_sql(op_id: int, keys: tuple[str, ...], aggs: tuple[AggCall, ...], input_schema: Schema,
                  updating_input: bool, input_sql: exp.Expression, ttl_us: int = 0) -> GroupAggSql:
    """The statements of a group aggregate over the rows of ``input_sql`` (a query over ``__input``)."""
    state, d, o, n, emit = (f"__state_{op_id}", f"__d_{op_id}", f"__o_{op_id}", f"__n_{op_id}", f"__emit_{op_id}")
    K = list(keys)
    signed = sub(select_from(sub(input_sql, "__rows"), None, star(), exp.alias_(sign(updating_input), "__sg")), "s")
    acc = _Aggregates(op_id, K, input_schema, signed)
    for i, a in enumerate(aggs):
        acc.add(i, a)

    outs = [f"__out{i}" for i in range(len(acc.outputs))]
    columns = [(k, input_schema.find(k).type) for k in K] + [("__cnt", pa.int64())] + acc.columns + \
        [(name, t) for name, (_, t) in zip(outs, acc.outputs)] + ([("__at", pa.int64())] if ttl_us else [])
    accumulators = ["__cnt"] + [c for c, _ in acc.columns]
    setup = [create_table(state, columns), *acc.setup]

    # Without keys, a batch whose rows were all filtered away must not look like a key.
    delta = select_from(signed, None, *cols(K), *acc.delta)
    delta = delta.group_by(*cols(K)) if K else delta.having(_positive(exp.Count(this=exp.Star())))
    new = select_from(n, "n", *cols(K, "n"), *[exp.column(c, "n") for c in accumulators],
                      *[alias(cast(e, t), name) for name, (e, t) in zip(outs, acc.outputs)])
    if ttl_us:  # when the key was last written, in processing time
        new.select(exp.alias_(call("getvariable", exp.Literal.string(now_variable(op_id))), "__at"), copy=False)
    for result, on in acc.multiset_joins:
        new = new.join(table(result), on=on, join_type="left")
    per_batch: list[exp.Expression] = [
        create_temp(d, delta),  # the batch's signed partials per key
        create_temp(o, select_from(state, "s", star("s")).join(table(d, "d"), on=same("s", "d", K),
                                                                join_type="semi")),  # the state of its keys
        *acc.multiset_steps,
        # new accumulators, then new outputs
        create_temp(n, select_from(d, "d", *cols(K, "d"), *acc.merged).join(table(o, "o"), on=same("d", "o", K),
                                                                            join_type="left")),
        create_temp(n, new),
    ]

    names = K + [a.name for a in aggs]
    changed = exp.Paren(this=exp.or_(*[exp.NullSafeNEQ(this=exp.column(c, "o"), expression=exp.column(c, "n"))
                                       for c in outs])) if outs else exp.false()
    alive = _positive(exp.column("__cnt", "n"))

    def rows(src: str, op: ChangeOp, order: int) -> list[exp.Expression]:
        return [alias(v, name) for v, name in zip(cols(K, src) + [exp.column(c, src) for c in outs], names)] + \
            [op_column(op), exp.alias_(lit(order), "__ord")]

    def both(items: list[exp.Expression]) -> exp.Select:
        return select_from(o, "o", *items).join(table(n, "n"), on=same("o", "n", K))

    changes = union_all(
        both(rows("o", ChangeOp.UPDATE_BEFORE, 0)).where(exp.and_(alive, changed)),
        both(rows("n", ChangeOp.UPDATE_AFTER, 1)).where(exp.and_(alive.copy(), changed.copy())),
        select_from(n, "n", *rows("n", ChangeOp.INSERT, 1)).join(table(o, "o"), on=same("n", "o", K),
                                                                 join_type="anti").where(alive.copy()),
        both(rows("o", ChangeOp.DELETE, 0)).where(exp.LTE(this=exp.column("__cnt", "n"), expression=lit(0))),
    )
    per_batch += [
        create_temp(emit, select_from(sub(changes, "changes"), None, *cols(names), col(OP))
                    .order_by(asc(exp.column("__ord")))),
        delete_using(state, table(d), same(state, d, K)),
        insert(state, select_from(n, None, star()).where(_positive(exp.column("__cnt")))),
        select_from(emit, None, star()),
    ]
    tables = (state, *acc.logs)
    if ttl_us and acc.logs and updating_input:  # a retraction of an expired key is ignored: its values leave no trace
        per_batch[-1:-1] = [delete_using(log, table(d), exp.and_(same(log, d, K), exp.Not(this=exp.Exists(
            this=select_from(state, "s", lit(1)).where(same("s", log, K)))))) for log in acc.logs]
    if not ttl_us:
        return GroupAggSql(_all(setup), _all(per_batch), _all(acc.compact), tables)
    ttl = group_agg_ttl(op_id, state, keys, tuple(acc.logs), ttl_us)
    return GroupAggSql(_all(setup), _all(per_batch), _all(acc.compact), tables, ttl.expire, ttl.oldest)


def _all(statements: list[exp.Expression]) -> tuple[str, ...]:
    return tuple(render(s) for s in statements)
