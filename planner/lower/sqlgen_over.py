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


LAST = "__last"  # the last time (epoch microseconds) a partition released rows


@dataclass(frozen=True)
class OverSql:
    compute: str
    retain: str | None  # ROWS n PRECEDING: the rows to keep
    carry: str | None  # UNBOUNDED: the new running totals
    carry_schema: pa.Schema | None
    # Bounded frames on event time (Flink's late rule, docs/time.md): ``__last`` holds per partition the last
    # time released. ``last_of_rows``: for each row of ``__rows`` (in ``__seq`` order) its partition's;
    # ``advance_last``: ``__last`` after the release ``__ready``, without the partitions whose state Flink
    # has cleaned up by the watermark ``?`` (RANGE: 1.5 times the frame after their last row, none of them
    # still in ``__pending``);
    # ``retain_by_partition`` (RANGE): the rows of ``__hist`` and ``__ready`` within the frame of the
    # partition's last time.
    last_of_rows: str | None = None
    advance_last: str | None = None
    last_schema: pa.Schema | None = None
    retain_by_partition: str | None = None


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
        both = "SELECT * FROM __hist UNION ALL BY NAME SELECT * FROM __ready"
        if frame.kind == "ROWS":
            retain = (f"SELECT * EXCLUDE (__rk) FROM (SELECT *, row_number() OVER ({part}ORDER BY {T} DESC, "
                      f"{SEQ} DESC) AS __rk FROM ({both}) AS u) AS k WHERE __rk <= {frame.preceding}")
        return OverSql(compute, retain, None, None, **_last_released(partition, order, frame, schema, both))

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


MIN_TIME = -(2**63)


def _last_released(partition: tuple[str, ...], order: str, frame: OverFrame, schema: Schema, both: str) -> dict:
    """The statements of a bounded frame's per-partition late rule (see OverSql)."""
    P = [q(p) for p in partition]
    on = " AND ".join(f"r.{p} IS NOT DISTINCT FROM l.{p}" for p in P) or "TRUE"
    if P:
        last_of_rows = (f"SELECT COALESCE(l.{LAST}, {MIN_TIME}) AS {LAST} FROM __rows AS r "
                        f"LEFT JOIN __last AS l ON {on} ORDER BY r.{SEQ}")
    else:
        last_of_rows = (f"SELECT COALESCE((SELECT max({LAST}) FROM __last), {MIN_TIME}) AS {LAST} "
                        f"FROM __rows ORDER BY {SEQ}")
    keys = "".join(p + ", " for p in P)
    group = f" GROUP BY {', '.join(P)}" if P else ""
    # Flink's RowTimeRangeBoundedPrecedingFunction clears an idle partition's state (and so its last time)
    # once the watermark reaches its cleanup timer, 1.5 frames (in ms) and 1 ms after its last row.
    cleanup = ((frame.preceding // 1000) * 3 // 2 + 1) * 1000 if frame.kind == "RANGE" else None
    advance = (f"SELECT {keys}max({LAST}) AS {LAST} FROM (SELECT {keys}{LAST} FROM __last UNION ALL "
               f"SELECT {keys}epoch_us({q(order)}) AS {LAST} FROM __ready) AS u{group}")
    if cleanup is not None:  # a partition with rows still pending has a later row: not due
        pending = " AND ".join(f"p.{k} IS NOT DISTINCT FROM g.{k}" for k in P) or "TRUE"
        advance = (f"SELECT * FROM ({advance}) AS g WHERE g.{LAST} + {cleanup} > ? "
                   f"OR EXISTS (SELECT 1 FROM __pending AS p WHERE {pending})")
    last_schema = pa.schema([pa.field(p, schema.find(p).type) for p in partition] + [pa.field(LAST, pa.int64())])
    retain = None
    if frame.kind == "RANGE":
        retain = (f"SELECT r.* FROM ({both}) AS r JOIN __last AS l ON {on} "
                  f"WHERE epoch_us(r.{q(order)}) >= l.{LAST} - {frame.preceding}")
    return dict(last_of_rows=last_of_rows, advance_last=advance, last_schema=last_schema,
                retain_by_partition=retain)


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
