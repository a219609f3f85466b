"""DuckDB statements for ``SET 'state.ttl'``: state keyed by the time it was last touched, expired in bulk.

The runtime sets the DuckDB variable :func:`now_variable` to the
processing time (the injected clock) before an operator handles a batch;
the operator's statements stamp what the batch touches with it. Expiry
is one DELETE per state table over the stamped column, run only when the
oldest stamp has passed the TTL (see ``runtime/operators/ttl.py``).

* **Group aggregate**: the state row of a key carries ``__at``, rewritten
  whenever a batch changes the key. An expired key is gone: its next row
  starts a new count (``+I``), as in Flink; its MIN/MAX multisets go too.
* **Top-N and deduplication**: per partition key, as joins: a key table
  holds each partition's last touch (a batch touches the partitions it
  changes; keep-first deduplication, the keys it emits); an expired
  partition's candidates and emitted rows go, so its next row starts it
  afresh (``+I``), as in Flink.
* **Regular join**: rows are expired per join key, both sides at once. A
  key table holds each join key's last touch: a batch touches the keys it
  holds, on whichever side, so a stream event keeps its table row alive
  (it reads it). When a key expires, its rows of both inputs go together,
  so a later row of that key starts from an empty state and the changelog
  stays valid (an outer join never retracts a padded row it did not emit).
  A retraction of a row that has expired is ignored (nothing to retract).

Expiry emits nothing: the rows already emitted stay, as in Flink.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .sqltree import call, col, cols, create_table, create_temp, insert, render, select_from, star, sub, table


def now_variable(op_id: int) -> str:
    return f"__now_{op_id}"


def now(op_id: int) -> exp.Expression:
    """The processing time of the batch being handled (microseconds): ``getvariable('__now_<id>')``."""
    return call("getvariable", exp.Literal.string(now_variable(op_id)))


@dataclass(frozen=True)
class TtlSql:
    setup: tuple[str, ...] = ()  # create the key table (joins)
    tables: tuple[str, ...] = ()  # state tables to checkpoint besides the operator's own
    expire: tuple[str, ...] = ()  # drop what was last touched at or before now - ttl
    oldest: str = ""  # the oldest stamp held (NULL: none)


def _expired(op_id: int, ttl_us: int) -> exp.Expression:
    """``__at <= now - ttl``: last touched longer than the TTL ago."""
    return exp.LTE(this=exp.column("__at"), expression=exp.Sub(this=now(op_id), expression=exp.Literal.number(ttl_us)))


def _oldest(name: str) -> str:
    return render(select_from(name, None, exp.Min(this=exp.column("__at"))))


def _matching(pairs: list[tuple[exp.Expression, exp.Expression]]) -> exp.Expression:
    parts = [exp.NullSafeEQ(this=a, expression=b) for a, b in pairs]
    return exp.and_(*parts) if parts else exp.true()


def _delete(name: str, as_: str, using: exp.Expression, where: exp.Expression) -> exp.Delete:
    """``DELETE FROM name AS as_ USING using WHERE where``."""
    return exp.Delete(this=table(name, as_), using=[using], where=exp.Where(this=where))


def group_agg_ttl(op_id: int, state: str, keys: tuple[str, ...], logs: tuple[str, ...], ttl_us: int) -> TtlSql:
    """Expire keys of a group aggregate's state table (``__at`` column) and their multiset logs."""
    gone = f"__expired_{op_id}"
    K = cols(keys)
    expire: list[exp.Expression] = []
    if logs:
        expire.append(create_temp(gone, select_from(state, None, *(K or [exp.alias_(exp.Literal.number(1), "__unit")]))
                                  .where(_expired(op_id, ttl_us))))
    expire.append(exp.Delete(this=table(state), where=exp.Where(this=_expired(op_id, ttl_us))))
    match = _matching([(col(k, "m"), col(k, "e")) for k in keys])
    expire += [_delete(log, "m", table(gone, "e"), match.copy()) for log in logs]
    return TtlSql(expire=tuple(render(e) for e in expire), oldest=_oldest(state))


def join_ttl(op_id: int, tables: tuple[str, str], left_keys: list[exp.Expression], right_keys: list[exp.Expression],
             ttl_us: int) -> tuple[TtlSql, str]:
    """Key-table statements of a regular join; ``left_keys`` / ``right_keys`` are its equi keys over the
    aliases ``l`` and ``r`` (none: the whole state is one key). Also returns the key table."""
    keys = f"__jk_{op_id}"
    left_keys, right_keys = left_keys or [exp.true()], right_keys or [exp.true()]
    names = [f"__k{i}" for i in range(len(left_keys))]
    empty = select_from(tables[0], "l", *[exp.alias_(e.copy(), n) for e, n in zip(left_keys, names)],
                        exp.alias_(exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build("BIGINT")), "__at")).limit(0)
    setup = (render(exp.Create(this=table(keys), kind="TABLE", exists=True, expression=empty)),)
    gone = f"__jx_{op_id}"
    expire: list[exp.Expression] = [create_temp(gone, select_from(keys, None, star()).where(_expired(op_id, ttl_us)))]
    for name, alias, exprs in ((tables[0], "l", left_keys), (tables[1], "r", right_keys)):
        match = _matching([(e.copy(), exp.column(n, "e")) for e, n in zip(exprs, names)])
        expire.append(_delete(name, alias, table(gone, "e"), match))
    expire.append(exp.Delete(this=table(keys), where=exp.Where(this=_expired(op_id, ttl_us))))
    return TtlSql(setup=setup, tables=(keys,), expire=tuple(render(e) for e in expire), oldest=_oldest(keys)), keys


def touch_keys(op_id: int, keys_table: str, batch: str, alias: str, exprs: list[exp.Expression]) -> tuple[str, ...]:
    """Stamp the join keys a batch (``batch`` aliased ``alias``, keys ``exprs`` over it) holds with now."""
    exprs = exprs or [exp.true()]
    names = [f"__k{i}" for i in range(len(exprs))]
    distinct = select_from(batch, alias, *[exp.alias_(e.copy(), n) for e, n in zip(exprs, names)]).distinct()
    match = _matching([(exp.column(n, "t"), exp.column(n, "b")) for n in names])
    return (render(_delete(keys_table, "t", sub(distinct, "b"), match)),
            render(insert(keys_table, select_from(sub(distinct.copy(), "b"), None, star(), now(op_id)))))


def partition_ttl(op_id: int, key_ddl: list[tuple[str, object]], tables: tuple[str, ...], ttl_us: int) -> TtlSql:
    """A key table for partitions (``key_ddl``: column names and Arrow types; none: one partition) and the
    statements that expire partitions from ``tables`` (each holding the partition columns). The expired
    keys are left in ``expired_table(op_id)`` for state the statements do not reach."""
    keys, gone = f"__ttl_{op_id}", expired_table(op_id)
    names = [f"__k{i}" for i in range(max(len(key_ddl), 1))]
    columns = [(n, t) for n, (_, t) in zip(names, key_ddl)] or [("__k0", "BOOLEAN")]
    expire: list[exp.Expression] = [create_temp(gone, select_from(keys, None, star()).where(_expired(op_id, ttl_us)))]
    for name in tables:
        match = _matching([(col(c, "t"), exp.column(n, "e")) for (c, _), n in zip(key_ddl, names)])
        expire.append(_delete(name, "t", table(gone, "e"), match))
    expire.append(exp.Delete(this=table(keys), where=exp.Where(this=_expired(op_id, ttl_us))))
    setup = create_table(keys, [*columns, ("__at", "BIGINT")])
    return TtlSql(setup=(render(setup),), tables=(keys,), expire=tuple(render(e) for e in expire),
                  oldest=_oldest(keys))


def partition_touch(op_id: int, batch: str, partition: list[str]) -> tuple[str, ...]:
    """Stamp the partitions the rows of ``batch`` belong to (``partition``: column names)."""
    return touch_keys(op_id, f"__ttl_{op_id}", batch, "b", [col(c, "b") for c in partition])


def expired_table(op_id: int) -> str:
    return f"__ttlx_{op_id}"

