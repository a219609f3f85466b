"""DuckDB SQL for session windows: gaps and islands over open sessions and a batch.

A session operator keeps its open sessions as one Arrow table (the state),
one row per (partition, session, grouping key) with partial aggregates,
or one row per event when the sessions are not aggregated (a SESSION
table function on its own). Columns: the partition keys, ``__s`` and
``__e`` (session start and end in epoch microseconds; an event at ``t``
is the session ``[t, t + gap)``), then the grouping keys, COUNT(DISTINCT)
columns and partial columns.

Per batch, :func:`session_merge_sql` runs one statement with the batch
registered as ``__input`` and the state as ``__state``. It takes the
state rows of the partitions the batch touches, adds one row per event,
and merges overlapping or touching intervals (a new session starts where
an interval begins after every earlier one has ended, as Flink's
``TimeWindow.intersects``)::

    gap 30 min, partition u1      13:02   13:14          13:57
    intervals                     [----------)
                                          [----------)
                                                          [----------)
    sessions                      [13:02, 13:44)          [13:57, 14:27)

An out-of-order event that bridges two sessions merges them: the islands
are recomputed over all the partition's rows. The statement returns the
whole new state with ``__t`` marking the rows of touched partitions.
"""

from __future__ import annotations

import pyarrow as pa

from .logical import AggCall
from .sqlgen_group import q, sql_type
from .types import Schema, sum_type

S, E = "__s", "__e"


def partial_columns(aggs: tuple[AggCall, ...], schema: Schema) -> list[tuple[str, str, str, pa.DataType]]:
    """Per aggregate, its partial columns: (name, per-event SQL, merge function, type)."""
    out = []
    for i, a in enumerate(aggs):
        arg = q(a.arg) if a.arg else None
        if a.func == "count" and a.distinct:
            continue  # the argument is kept as a grouping column
        if a.func == "count":
            expr = "CAST(1 AS BIGINT)" if arg is None else f"CAST({arg} IS NOT NULL AS BIGINT)"
            out.append((f"__p{i}", expr, "sum", pa.int64()))
        elif a.func == "sum":
            out.append((f"__p{i}", f"CAST({arg} AS {sql_type(a.type)})", "sum", a.type))
        elif a.func == "avg":
            st = sum_type(schema.find(a.arg).type)
            out.append((f"__p{i}s", f"CAST({arg} AS {sql_type(st)})", "sum", st))
            out.append((f"__p{i}c", f"CAST({arg} IS NOT NULL AS BIGINT)", "sum", pa.int64()))
        else:
            out.append((f"__p{i}", arg, a.func, schema.find(a.arg).type))
    return out


def session_merge_sql(inner: str, time_col: str, gap: int, partition: tuple[str, ...], group: tuple[str, ...],
                      partials: list[tuple[str, str, str, pa.DataType]] | None, state_schema: pa.Schema) -> str:
    """The per-batch statement (see the module docstring).

    ``inner`` is the SQL of the rows (over ``__input``); ``group`` the grouping
    keys and COUNT(DISTINCT) columns; ``partials`` None for unaggregated
    sessions, whose rows keep every column of the state schema.
    """
    P = [q(p) for p in partition]
    ts = f"epoch_us({q(time_col)})"
    if partials is None:
        payload = [q(f.name) for f in state_schema if f.name not in (S, E)]
        rows = f"SELECT *, {ts} AS {S}, {ts} + {gap} AS {E} FROM ({inner}) AS r"
    else:
        G = [q(g) for g in group]
        payload = G + [q(n) for n, _, _, _ in partials]
        items = P + [f"{ts} AS {S}", f"{ts} + {gap} AS {E}"] + G + [f"{e} AS {q(n)}" for n, e, _, _ in partials]
        rows = f"SELECT {', '.join(items)} FROM ({inner}) AS r"
    cols = ", ".join([*P, S, E, *[c for c in payload if c not in P]])

    on = " AND ".join(f"st.{p} IS NOT DISTINCT FROM t.{p}" for p in P)
    if P:
        touched = f"t AS (SELECT DISTINCT {', '.join(P)} FROM b)"
        old = f"SELECT {cols} FROM __state st SEMI JOIN t ON {on}"
        untouched = f"SELECT {cols}, false AS __t FROM __state st ANTI JOIN t ON {on}"
    else:
        touched = "t AS (SELECT COUNT(*) AS n FROM b)"
        old = f"SELECT {cols} FROM __state st WHERE (SELECT n FROM t) > 0"
        untouched = f"SELECT {cols}, false AS __t FROM __state st WHERE (SELECT n FROM t) = 0"
    part = f"PARTITION BY {', '.join(P)} " if P else ""
    ctes = [
        f"b AS ({rows})",
        touched,
        f"u AS ({old} UNION ALL SELECT {cols} FROM b)",
        f"o AS (SELECT *, MAX({E}) OVER ({part}ORDER BY {S}, {E} ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
        f" AS __pe FROM u)",
        f"i AS (SELECT *, SUM(CASE WHEN __pe IS NULL OR {S} > __pe THEN 1 ELSE 0 END) OVER ({part}ORDER BY {S}, {E} "
        f"ROWS UNBOUNDED PRECEDING) AS __isl FROM o)",
    ]
    island = f"PARTITION BY {', '.join(P + ['__isl'])}"
    types = {f.name: f.type for f in state_schema}
    if partials is None:
        rest = [c for c in payload if c not in P]
        merged = (f"SELECT {', '.join(P)}{', ' if P else ''}MIN({S}) OVER ({island}) AS {S}, "
                  f"MAX({E}) OVER ({island}) AS {E}{''.join(', ' + c for c in rest)} FROM i")
    else:
        merge = [f"CAST({fn.upper()}({q(n)}) AS {sql_type(types[n])}) AS {q(n)}" for n, _, fn, _ in partials]
        keys = P + ["__isl"] + G
        ctes.append(f"g AS (SELECT {', '.join(keys)}, MIN({S}) AS {S}, MAX({E}) AS {E}"
                    f"{''.join(', ' + m for m in merge)} FROM i GROUP BY {', '.join(keys)})")
        merged = (f"SELECT {', '.join(P)}{', ' if P else ''}MIN({S}) OVER ({island}) AS {S}, "
                  f"MAX({E}) OVER ({island}) AS {E}{''.join(', ' + c for c in payload)} FROM g")
    return f"WITH {', '.join(ctes)} SELECT *, true AS __t FROM ({merged}) AS m UNION ALL {untouched}"


def session_state_schema(partition: tuple[str, ...], group: tuple[str, ...], partials, input_schema: Schema) -> pa.Schema:
    """The state table's columns (see the module docstring)."""
    fields = [pa.field(p, input_schema.find(p).type) for p in partition]
    fields += [pa.field(S, pa.int64()), pa.field(E, pa.int64())]
    if partials is None:
        fields += [pa.field(f.name, f.type) for f in input_schema if f.name not in partition]
    else:
        fields += [pa.field(g, input_schema.find(g).type) for g in group]
        fields += [pa.field(n, t) for n, _, _, t in partials]
    return pa.schema(fields)
