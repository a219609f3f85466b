"""DuckDB SQL for OVER aggregates, run when the watermark releases rows.

The runtime registers the rows the watermark released as ``__ready`` and,
for a bounded frame, the rows kept from before as ``__hist`` (both with
a ``__seq`` arrival number, so equal times keep their arrival order);
:attr:`OverSql.compute` returns the released rows with their aggregates,
in time order. ``retain`` keeps, of ``__hist`` and ``__ready``, what a
later row's ROWS frame can still reach (RANGE frames are trimmed by time
in the runtime). An UNBOUNDED frame keeps no rows but running totals per
partition (``__carry``), which ``carry`` advances::

    ROWS 2 PRECEDING, partition a      hist: r1 r2 | ready: r3 r4
    r3 = agg(r1, r2, r3); r4 = agg(r2, r3, r4); kept: r3 r4

Window functions (:class:`~logical.over.OverCall`): FIRST_VALUE / LAST_VALUE
are the argument at the smallest / largest (time, arrival) of the frame
among its non-NULL values (Flink's skip NULLs); a RANGE frame holds the
current row's peers, so peers share the last one's value, as in Flink.
ROW_NUMBER, RANK and DENSE_RANK count on from the carried row and time
counts. LAG reads the rows before it in (time, arrival) order, the last
``offset`` rows of each partition kept in ``__hist`` (its default also
replaces a NULL there); peers take the last peer's value, as Flink's LAG
does (LAG has the default RANGE frame).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..logical.nodes import AggCall
from ..logical.over import OverCall, OverFrame
from ..types import Schema, sum_type
from .sqlgen_group import q, sql_type

SEQ = "__seq"


@dataclass(frozen=True)
class OverSql:
    compute: str
    retain: str | None  # ROWS n PRECEDING, LAG: the rows to keep
    carry: str | None  # UNBOUNDED: the new running totals
    carry_schema: pa.Schema | None


def over_sql(columns: list[str], partition: tuple[str, ...], order: str, frame: OverFrame,
             aggs: tuple[AggCall | OverCall, ...], schema: Schema) -> OverSql:
    P = [q(p) for p in partition]
    T = q(order)
    part = f"PARTITION BY {', '.join(P)} " if P else ""
    by_arrival = f"ORDER BY {T}, {SEQ}"
    if frame.preceding is None:
        bounds = "UNBOUNDED PRECEDING"
    elif frame.kind == "ROWS":
        bounds = f"{frame.preceding} PRECEDING"
    else:
        bounds = f"INTERVAL '{frame.preceding} microseconds' PRECEDING"
    # A RANGE frame includes the rows with the same time (peers); ROWS counts rows in arrival order.
    window = f"{part}{by_arrival if frame.kind == 'ROWS' else f'ORDER BY {T}'} {frame.kind} BETWEEN {bounds} AND CURRENT ROW"
    out_cols = ", ".join(q(c) for c in columns)

    keep_rows = max([a.offset for a in aggs if a.func == "lag"] +
                    ([frame.preceding] if frame.kind == "ROWS" and frame.preceding else []), default=0)
    both = "SELECT * FROM __hist UNION ALL BY NAME SELECT * FROM __ready"
    retain = (f"SELECT * EXCLUDE (__rk) FROM (SELECT *, row_number() OVER ({part}ORDER BY {T} DESC, "
              f"{SEQ} DESC) AS __rk FROM ({both}) AS u) AS k WHERE __rk <= {keep_rows}") if keep_rows else None
    if frame.preceding is not None:
        items = [f"{_window_item(a, schema, T)} AS {q(a.name)}" for a in aggs]
        union = "SELECT *, FALSE AS __new FROM __hist UNION ALL BY NAME SELECT *, TRUE AS __new FROM __ready"
        compute = (f"SELECT {out_cols}, {', '.join(q(a.name) for a in aggs)} FROM ("
                   f"SELECT *, {', '.join(items)} FROM ({union}) AS u WINDOW __w AS ({window})) AS r "
                   f"WHERE __new ORDER BY {T}, {SEQ}")
        return OverSql(compute, retain if frame.kind == "ROWS" else None, None, None)

    # UNBOUNDED PRECEDING: running totals before this release, plus a window over the released rows.
    parts: list[tuple[str, str, str, str, pa.DataType]] = []  # (name, per-row window, batch total, merge, type)
    finals: list[str] = []
    lag_values: list[tuple[str, str]] = []  # LAG: (value, name) over __hist and __ready, joined by arrival number
    for i, a in enumerate(aggs):
        arg = q(a.arg) if a.arg else "*"
        if isinstance(a, OverCall):
            value = _carried_call(a, i, arg, parts, P, T, frame, schema, lag_values)
            finals.append(f"CAST({value} AS {sql_type(a.type)}) AS {q(a.name)}")
            continue
        if a.func in ("count", "avg"):
            parts.append((f"__c{i}", f"COUNT({arg}) OVER __w", f"COUNT({arg})", "SUM", pa.int64()))
        if a.func in ("sum", "avg"):
            st = a.type if a.func == "sum" else sum_type(schema.find(a.arg).type)
            parts.append((f"__s{i}", f"CAST(SUM({arg}) OVER __w AS {sql_type(st)})",
                          f"CAST(SUM({arg}) AS {sql_type(st)})", "SUM", st))
        if a.func in ("min", "max"):
            parts.append((f"__m{i}", f"{a.func.upper()}({arg}) OVER __w", f"{a.func.upper()}({arg})",
                          a.func.upper(), schema.find(a.arg).type))
        count = f"(COALESCE(c.__c{i}, 0) + r.__r_c{i})"
        total = f"CASE WHEN c.__s{i} IS NULL THEN r.__r_s{i} WHEN r.__r_s{i} IS NULL THEN c.__s{i} " \
                f"ELSE c.__s{i} + r.__r_s{i} END"
        if a.func == "count":
            value = count
        elif a.func == "sum":
            value = total
        elif a.func == "avg":
            value = _average(total, count, a.type)
        else:
            value = f"{'LEAST' if a.func == 'min' else 'GREATEST'}(c.__m{i}, r.__r_m{i})"
        finals.append(f"CAST({value} AS {sql_type(a.type)}) AS {q(a.name)}")
    window_items = ", ".join(f"{w} AS {q('__r_' + n[2:])}" for n, w, _, _, _ in parts)
    on = " AND ".join(f"r.{p} IS NOT DISTINCT FROM c.{p}" for p in P) or "TRUE"
    lagged = ""
    if lag_values:
        peers = f"PARTITION BY {', '.join(P + [T])}"
        values = [f"{v} AS {n}" for v, n in lag_values]
        if frame.kind == "RANGE":  # Flink: a peer group gets the LAG of its last row
            values = [f"last_value({n}) OVER ({peers} ORDER BY {SEQ} ROWS BETWEEN UNBOUNDED PRECEDING AND "
                      f"UNBOUNDED FOLLOWING) AS {n}" for _, n in lag_values]
            both = f"SELECT *, {', '.join(f'{v} AS {n}' for v, n in lag_values)} FROM ({both}) AS b"
        lagged = f" JOIN (SELECT {SEQ}, {', '.join(values)} FROM ({both}) AS u) AS g ON g.{SEQ} = r.{SEQ}"
    compute = (f"SELECT {', '.join('r.' + q(c) for c in columns)}, {', '.join(finals)} FROM ("
               f"SELECT *, {window_items or 'NULL AS __none'} FROM __ready WINDOW __w AS ({window})) AS r"
               f"{lagged} LEFT JOIN __carry c ON {on} ORDER BY r.{T}, r.{SEQ}")
    totals = ", ".join(f"{t} AS {n}" for n, _, t, _, _ in parts)
    merged = ", ".join(f"CAST({m.format(n=n) if '{' in m else f'{m}({n})'} AS {sql_type(ty)}) AS {n}"
                       for n, _, _, m, ty in parts)
    group = f" GROUP BY {', '.join(P)}" if P else ""
    keys = "".join(p + ", " for p in P)
    carry_schema = pa.schema([pa.field(p, schema.find(p).type) for p in partition] +
                             [pa.field(n, ty) for n, _, _, _, ty in parts])
    if not parts:  # only LAG: nothing to carry but the rows in __hist
        return OverSql(compute, retain, f"SELECT {keys}0 AS __none FROM __ready WHERE FALSE", pa.schema(
            [pa.field(p, schema.find(p).type) for p in partition] + [pa.field("__none", pa.int32())]))
    # __ord orders the carried values before this release's (FIRST_VALUE keeps the older, LAST_VALUE the newer)
    carry = (f"SELECT {keys}{merged} FROM (SELECT *, 0 AS __ord FROM __carry UNION ALL BY NAME "
             f"SELECT {keys}{totals}, 1 AS __ord FROM __ready{group}) AS u{group}")
    return OverSql(compute, retain, carry, carry_schema)


def _ordering(T: str) -> str:
    return f"struct_pack(t := {T}, s := {SEQ})"


def _nonnull_arg(func: str, arg: str, T: str) -> str:
    """arg_min / arg_max of ``arg`` by (time, arrival) over its non-NULL values (NULL orderings are skipped)."""
    return f"{func}({arg}, CASE WHEN {arg} IS NULL THEN NULL ELSE {_ordering(T)} END)"


def _carried_call(a: OverCall, i: int, arg: str, parts: list, P: list[str], T: str, frame: OverFrame,
                  schema: Schema, lag_values: list[tuple[str, str]]) -> str:
    """The value of a window function under an UNBOUNDED frame: this release's window over ``__ready`` (alias
    r) on top of what is carried per partition (alias c); adds the carried parts to ``parts``."""
    part = f"PARTITION BY {', '.join(P)} " if P else ""
    if a.func in ("row_number", "rank", "dense_rank"):
        order = f"ORDER BY {T}, {SEQ}" if a.func == "row_number" else f"ORDER BY {T}"
        counted = "COUNT(DISTINCT " + T + ")" if a.func == "dense_rank" else "COUNT(*)"
        parts.append((f"__c{i}", f"{a.func}() OVER ({part}{order})", counted, "SUM", pa.int64()))
        return f"(COALESCE(c.__c{i}, 0) + r.__r_c{i})"
    if a.func in ("first_value", "last_value"):
        first = a.func == "first_value"
        func = "arg_min" if first else "arg_max"
        parts.append((f"__f{i}", f"{_nonnull_arg(func, arg, T)} OVER __w", _nonnull_arg(func, arg, T),
                      f"{func}({{n}}, CASE WHEN {{n}} IS NULL THEN NULL ELSE __ord END)", a.type))
        return f"COALESCE(c.__f{i}, r.__r_f{i})" if first else f"COALESCE(r.__r_f{i}, c.__f{i})"
    value = f"lag({arg}, {a.offset}) OVER ({part}ORDER BY {T}, {SEQ})"
    if a.default is not None:  # Flink: the default also stands for a NULL value at the offset
        value = f"COALESCE({value}, CAST({a.default.sql(dialect='duckdb')} AS {sql_type(a.type)}))"
    lag_values.append((value, f"__lag{i}"))
    return f"g.__lag{i}"


def _window_item(a: AggCall | OverCall, schema: Schema, T: str) -> str:
    """An aggregate or FIRST_VALUE / LAST_VALUE over ``__w`` (a bounded frame, over __hist and __ready)."""
    if not isinstance(a, OverCall):
        return _window_agg(a, schema)
    arg = q(a.arg)
    return f"{_nonnull_arg('arg_min' if a.func == 'first_value' else 'arg_max', arg, T)} OVER __w"


def _window_agg(a: AggCall, schema: Schema) -> str:
    arg = q(a.arg) if a.arg else "*"
    if a.func == "count":
        return f"COUNT({arg}) OVER __w"
    if a.func == "avg":
        st = sql_type(sum_type(schema.find(a.arg).type))
        return _average(f"CAST(SUM({arg}) OVER __w AS {st})", f"COUNT({arg}) OVER __w", a.type)
    return f"CAST({a.func.upper()}({arg}) OVER __w AS {sql_type(a.type)})"


def _average(total: str, count: str, dtype: pa.DataType) -> str:
    """AVG with Flink's type: an integer column's average is an integer, truncated toward zero."""
    if pa.types.is_integer(dtype):
        return f"CAST(({total}) // NULLIF({count}, 0) AS {sql_type(dtype)})"
    return f"CAST(CAST({total} AS DOUBLE) / NULLIF({count}, 0) AS {sql_type(dtype)})"
