"""DuckDB statements for a group aggregate whose state lives in DuckDB tables.

A group aggregate without a window keeps, per key, a running row count,
each aggregate's accumulators (signed counts and sums, so retractions
subtract) and the output it last emitted. MIN, MAX and COUNT(DISTINCT)
cannot be undone from a sum, so each keeps a multiset log of
(key, value, count). Per batch the runtime registers the batch as
``__input`` and runs :attr:`GroupAggSql.per_batch` in order; the last
statement returns the changes::

    key seen before, result changed   -> -U old row, +U new row
    key new                           -> +I new row
    every row of the key retracted    -> -D old row
    result unchanged                  -> nothing (as in Flink)

Tables are named after the operator id, in the job's own connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..aggregate_kinds import SEQ
from ..logical.nodes import AggCall
from ..physical.specs import OP
from ..types import Schema, to_sql_type
from ..vocabulary import RETRACTIONS, ChangeOp, sql_codes
from .sqlgen_ttl import group_agg_ttl, now


def q(name: str) -> str:
    return exp.to_identifier(name, quoted=True).sql("duckdb")


def sql_type(t: pa.DataType) -> str:
    return to_sql_type(t).sql("duckdb")


@dataclass(frozen=True)
class GroupAggSql:
    setup: tuple[str, ...]  # create the state tables
    per_batch: tuple[str, ...]  # run in order; the last returns the changes
    compact: tuple[str, ...]  # merge the multiset logs (run now and then)
    state_tables: tuple[str, ...]
    expire: tuple[str, ...] = ()  # SET 'state.ttl': drop the keys not written for that long (lower/sqlgen_ttl.py)
    oldest: str = ""  # the oldest last-write time held


def group_agg_sql(op_id: int, keys: tuple[str, ...], aggs: tuple[AggCall, ...], input_schema: Schema,
                  updating_input: bool, input_sql: str, ttl_us: int = 0) -> GroupAggSql:
    state, d, o, n, emit = (f"__state_{op_id}", f"__d_{op_id}", f"__o_{op_id}", f"__n_{op_id}", f"__emit_{op_id}")
    K = [q(k) for k in keys]
    key_types = [sql_type(input_schema.find(k).type) for k in keys]

    on, keys_of = _joins_on(K), _keys_of(K)
    sign = f"CASE WHEN {q(OP)} IN {sql_codes(RETRACTIONS)} THEN -1 ELSE 1 END" if updating_input else "1"
    signed = f"(SELECT *, {sign} AS __sg FROM ({input_sql}) AS __rows)"

    columns = [(k, t) for k, t in zip(K, key_types)] + [("__cnt", "BIGINT")]
    delta = ["SUM(__sg) AS __cnt"]
    merged = ["COALESCE(o.__cnt, 0) + d.__cnt AS __cnt"]
    outputs: list[tuple[str, str]] = []  # (expression over n and multiset results, type)
    multiset_steps, multiset_joins, setup, compact, tables = [], [], [], [], [state]

    b = _Build(op_id, K, key_types, d, signed, on, keys_of, columns, delta, merged, setup, multiset_steps,
               multiset_joins, compact, tables)
    for i, a in enumerate(aggs):
        if a.kind.retracts_by_sign and not a.keeps_values:
            outputs.append(_signed(b, i, a))
        elif a.kind.ordered:
            outputs.append(_ordered_log(b, i, a))
        else:
            outputs.append(_multiset_log(b, i, a))

    columns += [(f"__out{i}", t) for i, (_, t) in enumerate(outputs)]
    if ttl_us:  # when the key was last written, in processing time
        columns.append(("__at", "BIGINT"))
    accumulators = [c for c, _ in columns[len(K):] if not c.startswith("__out") and c != "__at"]
    setup.insert(0, f"CREATE TABLE IF NOT EXISTS {state} ({', '.join(f'{c} {t}' for c, t in columns)})")

    # Without keys, a batch whose rows were all filtered away must not look like a key.
    group_by = f" GROUP BY {', '.join(K)}" if K else " HAVING COUNT(*) > 0"
    out_items = ", ".join(f"CAST({e} AS {t}) AS __out{i}" for i, (e, t) in enumerate(outputs))
    per_batch = [
        # the batch's signed partials per key
        f"CREATE OR REPLACE TEMP TABLE {d} AS SELECT {''.join(k + ', ' for k in K)}{', '.join(delta)} "
        f"FROM {signed} AS s{group_by}",
        # the state of the keys it touches
        f"CREATE OR REPLACE TEMP TABLE {o} AS SELECT s.* FROM {state} s SEMI JOIN {d} d ON {on('s', 'd')}",
        *multiset_steps,
        # new accumulators, then new outputs
        f"CREATE OR REPLACE TEMP TABLE {n} AS SELECT {''.join(k + ', ' for k in keys_of('d'))}{', '.join(merged)} "
        f"FROM {d} d LEFT JOIN {o} o ON {on('d', 'o')}",
        f"CREATE OR REPLACE TEMP TABLE {n} AS SELECT {''.join(k + ', ' for k in keys_of('n'))}"
        f"{', '.join('n.' + c for c in accumulators)}, {out_items}{f', {now(op_id)} AS __at' if ttl_us else ''} "
        f"FROM {n} n {' '.join(multiset_joins)}",
    ]

    per_batch += _changes(b, [q(a.name) for a in aggs], len(outputs), state, o, n, emit)
    if not ttl_us:
        return GroupAggSql(tuple(setup), tuple(per_batch), tuple(compact), tuple(tables))
    logs = tuple(tables[1:])
    if logs and updating_input:  # a retraction of an expired key is ignored: its values leave no trace
        per_batch[-1:-1] = [f"DELETE FROM {log} AS m USING {d} WHERE {on('m', d)} AND NOT EXISTS "
                            f"(SELECT 1 FROM {state} AS s WHERE {on('s', 'm')})" for log in logs]
    ttl = group_agg_ttl(op_id, state, keys, logs, ttl_us)
    return GroupAggSql(tuple(setup), tuple(per_batch), tuple(compact), tuple(tables), ttl.expire, ttl.oldest)


def _joins_on(K: list[str]) -> Callable[[str, str], str]:
    """A join condition on the keys between two aliases (NULL keys match)."""
    return lambda a, b: " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM {b}.{k}" for k in K) or "TRUE"


def _keys_of(K: list[str]) -> Callable[[str], list[str]]:
    return lambda alias: [f"{alias}.{k}" for k in K]


def _changes(b: _Build, names: list[str], n_out: int, state: str, o: str, n: str, emit: str) -> list[str]:
    """The batch's changes (old state ``o`` against new ``n``), then the state updated; the last returns them."""
    K, d, on, keys_of = b.K, b.d, b.on, b.keys_of
    names = K + names
    changed = " OR ".join(f"o.__out{i} IS DISTINCT FROM n.__out{i}" for i in range(n_out)) or "FALSE"

    def rows(src: str, op: ChangeOp, order: int) -> str:
        values = keys_of(src) + [f"{src}.__out{i}" for i in range(n_out)]
        return (", ".join(f"{v} AS {name}" for v, name in zip(values, names)) +
                f", CAST({op.sql} AS TINYINT) AS {q(OP)}, {order} AS __ord")

    both = f"FROM {o} o JOIN {n} n ON {on('o', 'n')}"
    return [
        f"CREATE OR REPLACE TEMP TABLE {emit} AS SELECT {', '.join(names + [q(OP)])} FROM ("
        f"SELECT {rows('o', ChangeOp.UPDATE_BEFORE, 0)} {both} WHERE n.__cnt > 0 AND ({changed}) UNION ALL "
        f"SELECT {rows('n', ChangeOp.UPDATE_AFTER, 1)} {both} WHERE n.__cnt > 0 AND ({changed}) UNION ALL "
        f"SELECT {rows('n', ChangeOp.INSERT, 1)} FROM {n} n ANTI JOIN {o} o ON {on('n', 'o')} WHERE n.__cnt > 0 UNION ALL "
        f"SELECT {rows('o', ChangeOp.DELETE, 0)} {both} WHERE n.__cnt <= 0) AS changes ORDER BY __ord",
        f"DELETE FROM {state} USING {d} WHERE {on(state, d)}",
        f"INSERT INTO {state} SELECT * FROM {n} WHERE __cnt > 0",
        f"SELECT * FROM {emit}",
    ]


@dataclass
class _Build:
    """What the statements of a group aggregate are assembled from (see group_agg_sql)."""

    op_id: int
    K: list[str]  # the quoted keys
    key_types: list[str]
    d: str  # the batch's partials per key
    signed: str  # the input rows with their sign (__sg)
    on: Callable[[str, str], str]
    keys_of: Callable[[str], list[str]]
    columns: list  # the state table's columns
    delta: list  # the batch's accumulators per key
    merged: list  # the new accumulators
    setup: list
    steps: list
    joins: list
    compact: list
    tables: list


def _signed(b: _Build, i: int, a: AggCall) -> tuple[str, str]:
    """Signed accumulators (counts and sums): a retraction subtracts what its row added."""
    parts = {}
    for p in a.partials(retracting=True):
        name, t = f"__a{i}{p.suffix}", sql_type(p.type)
        parts[p.suffix] = exp.column(name, table="n")
        b.columns.append((name, t))
        if a.arg is None:
            b.delta.append(f"SUM(__sg) AS {name}")
        elif p.first == "count":
            b.delta.append(f"SUM(CASE WHEN {q(a.arg)} IS NULL THEN 0 ELSE __sg END) AS {name}")
        else:
            value = exp.Cast(this=p.value(exp.column(a.arg, quoted=True)), to=to_sql_type(p.type))
            b.delta.append(f"SUM({value.sql('duckdb')} * __sg) AS {name}")
        b.merged.append(f"CAST(COALESCE(o.{name}, 0) + COALESCE(d.{name}, 0) AS {t}) AS {name}")
    return a.kind.final(parts, a.type).sql("duckdb"), sql_type(a.type)


def _multiset_log(b: _Build, i: int, a: AggCall) -> tuple[str, str]:
    """A multiset log of (key, value, count); the result is recomputed over the live values of the batch's keys."""
    K, d, on, keys_of = b.K, b.d, b.on, b.keys_of
    arg = q(a.arg)
    log, result = f"__ms_{b.op_id}_{i}", f"__m_{b.op_id}_{i}"
    b.tables.append(log)
    group = ", ".join(K + ["__v"])
    ddl_keys = "".join(f"{k} {t}, " for k, t in zip(K, b.key_types))
    b.setup.append(f"CREATE TABLE IF NOT EXISTS {log} ({ddl_keys}__v {sql_type(a.arg_type)}, __n BIGINT)")
    b.steps.append(
        f"INSERT INTO {log} SELECT {', '.join(K + [f'{arg} AS __v'])}, SUM(__sg) AS __n "
        f"FROM {b.signed} WHERE {arg} IS NOT NULL GROUP BY {', '.join(K + [arg])}")
    reduce = a.kind.over_multiset(exp.column("__v", table="live"), exp.column("__n", table="live"), a.arg_type,
                                  a.type, a.distinct).sql("duckdb")
    live = (f"SELECT {', '.join(keys_of('m') + ['m.__v'])}, SUM(m.__n) AS __n FROM {log} m SEMI JOIN {d} d "
            f"ON {on('m', 'd')} GROUP BY {', '.join(keys_of('m') + ['m.__v'])} HAVING SUM(m.__n) > 0")
    # from the batch's keys, so a key without live values gets the aggregate of nothing (COUNT: 0)
    b.steps.append(
        f"CREATE OR REPLACE TEMP TABLE {result} AS SELECT {''.join(k + ', ' for k in keys_of('d'))}{reduce} AS __r "
        f"FROM {d} d LEFT JOIN ({live}) AS live ON {on('d', 'live')}" +
        (f" GROUP BY {', '.join(keys_of('d'))}" if K else ""))
    b.joins.append(f"LEFT JOIN {result} ON {on('n', result)}")
    b.compact.append(f"CREATE OR REPLACE TABLE {log} AS SELECT {group}, SUM(__n) AS __n FROM {log} "
                     f"GROUP BY {group} HAVING SUM(__n) <> 0")
    return f"{result}.__r", sql_type(a.type)


def _ordered_log(b: _Build, i: int, a: AggCall) -> tuple[str, str]:
    """FIRST_VALUE, LAST_VALUE, LISTAGG: a log of (key, value, arrival number, +1 or -1) per aggregate.

    A value's occurrences are its +1 rows in arrival order; its -1 rows (retractions) take away the earliest
    ones, as Flink's ``*WithRetractAggFunction``. The result is the kind's aggregate over the live occurrences.
    """
    K, d, on, keys_of = b.K, b.d, b.on, b.keys_of
    arg, log, result = q(a.arg), f"__ol_{b.op_id}_{i}", f"__m_{b.op_id}_{i}"
    b.tables.append(log)
    ddl_keys = "".join(f"{k} {t}, " for k, t in zip(K, b.key_types))
    b.setup.append(f"CREATE TABLE IF NOT EXISTS {log} ({ddl_keys}__v {sql_type(a.arg_type)}, {SEQ} BIGINT, "
                   "__n BIGINT)")
    b.steps.append(f"INSERT INTO {log} SELECT {''.join(k + ', ' for k in K)}{arg} AS __v, {SEQ}, __sg AS __n "
                   f"FROM {b.signed} WHERE {arg} IS NOT NULL")
    part = ", ".join(K + ["__v"])

    def live(source: str) -> str:
        return (f"SELECT * EXCLUDE (__rk, __gone) FROM (SELECT m.*, ROW_NUMBER() OVER (PARTITION BY {part}, __n > 0 "
                f"ORDER BY {SEQ}) AS __rk, SUM(CASE WHEN __n < 0 THEN 1 ELSE 0 END) OVER (PARTITION BY {part}) AS __gone "
                f"FROM {source}) AS o WHERE __n > 0 AND __rk > __gone")

    touched = f"(SELECT m.* FROM {log} m SEMI JOIN {d} d ON {on('m', 'd')}) AS m"
    value = a.kind.over_ordered(exp.column("__v", table="live"), exp.column(SEQ, table="live"), a.type).sql("duckdb")
    b.steps.append(f"CREATE OR REPLACE TEMP TABLE {result} AS SELECT {''.join(k + ', ' for k in keys_of('d'))}{value} "
                   f"AS __r FROM {d} d LEFT JOIN ({live(touched)}) AS live ON {on('d', 'live')}" +
                   (f" GROUP BY {', '.join(keys_of('d'))}" if K else ""))
    b.joins.append(f"LEFT JOIN {result} ON {on('n', result)}")
    b.compact.append(f"CREATE OR REPLACE TABLE {log} AS {live(log + ' AS m')}")
    return f"{result}.__r", sql_type(a.type)
