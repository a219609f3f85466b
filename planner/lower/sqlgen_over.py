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
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..logical.nodes import AggCall
from ..logical.over import OverFrame
from ..types import Schema, sum_type
from .sqlgen_group import q, sql_type

SEQ = "__seq"


@dataclass(frozen=True)
class OverSql:
    compute: str
    retain: str | None  # ROWS n PRECEDING: the rows to keep
    carry: str | None  # UNBOUNDED: the new running totals
    carry_schema: pa.Schema | None


def over_sql(columns: list[str], partition: tuple[str, ...], order: str, frame: OverFrame,
             aggs: tuple[AggCall, ...], schema: Schema) -> OverSql:
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

    if frame.preceding is not None:
        items = [f"{_window_agg(a, schema)} AS {q(a.name)}" for a in aggs]
        union = "SELECT *, FALSE AS __new FROM __hist UNION ALL BY NAME SELECT *, TRUE AS __new FROM __ready"
        compute = (f"SELECT {out_cols}, {', '.join(q(a.name) for a in aggs)} FROM ("
                   f"SELECT *, {', '.join(items)} FROM ({union}) AS u WINDOW __w AS ({window})) AS r "
                   f"WHERE __new ORDER BY {T}, {SEQ}")
        retain = None
        if frame.kind == "ROWS":
            both = "SELECT * FROM __hist UNION ALL BY NAME SELECT * FROM __ready"
            retain = (f"SELECT * EXCLUDE (__rk) FROM (SELECT *, row_number() OVER ({part}ORDER BY {T} DESC, "
                      f"{SEQ} DESC) AS __rk FROM ({both}) AS u) AS k WHERE __rk <= {frame.preceding}")
        return OverSql(compute, retain, None, None)

    # UNBOUNDED PRECEDING: running totals before this release, plus a window over the released rows.
    parts: list[tuple[str, str, str, str, pa.DataType]] = []  # (name, per-row window, batch total, merge, type)
    finals: list[str] = []
    for i, a in enumerate(aggs):
        arg = q(a.arg) if a.arg else "*"
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
    compute = (f"SELECT {', '.join('r.' + q(c) for c in columns)}, {', '.join(finals)} FROM ("
               f"SELECT *, {window_items} FROM __ready WINDOW __w AS ({window})) AS r "
               f"LEFT JOIN __carry c ON {on} ORDER BY r.{T}, r.{SEQ}")
    totals = ", ".join(f"{t} AS {n}" for n, _, t, _, _ in parts)
    merged = ", ".join(f"CAST({m}({n}) AS {sql_type(ty)}) AS {n}" for n, _, _, m, ty in parts)
    group = f" GROUP BY {', '.join(P)}" if P else ""
    keys = "".join(p + ", " for p in P)
    carry = (f"SELECT {keys}{merged} FROM (SELECT * FROM __carry UNION ALL BY NAME "
             f"SELECT {keys}{totals} FROM __ready{group}) AS u{group}")
    carry_schema = pa.schema([pa.field(p, schema.find(p).type) for p in partition] +
                             [pa.field(n, ty) for n, _, _, _, ty in parts])
    return OverSql(compute, None, carry, carry_schema)


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
