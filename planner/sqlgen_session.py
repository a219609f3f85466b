"""DuckDB SQL for session windows: gaps and islands over open sessions and a batch.

A session operator keeps its open sessions as one Arrow table (the state),
one row per (partition, session, grouping key) with partial aggregates,
or one row per event when the sessions are not aggregated (a SESSION
table function on its own). Columns: the partition keys, ``__s`` and
``__e`` (session start and end in epoch microseconds; an event at ``t``
is the session ``[t, t + gap)``), then the grouping keys, COUNT(DISTINCT)
columns and partial columns.

Per batch, the operator turns the batch into one row per event
(:attr:`SessionSql.rows`), takes the state rows of the partitions the
batch touches (``touched``), sorts both by partition and time (``sort``)
and merges overlapping or touching intervals with numpy (a new session
starts where an interval begins after every earlier one of its partition
has ended, as Flink's ``TimeWindow.intersects``)::

    gap 30 min, partition u1      13:02   13:14          13:57
    intervals                     [----------)
                                          [----------)
                                                          [----------)
    sessions                      [13:02, 13:44)          [13:57, 14:27)

An out-of-order event that bridges two sessions merges them: the islands
are recomputed over all the partition's rows.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class SessionSql:
    rows: str  # per batch, over __input: one state row per event
    touched: str  # over __state and __rows: each state row with __t (its partition has new rows)
    sort: str  # over __u: the rows in (partition, start) order, for the islands


def session_sql(inner: str, time_col: str, gap: int, partition: tuple[str, ...], group: tuple[str, ...],
                partials: list[tuple[str, str, str, pa.DataType]] | None, state_schema: pa.Schema) -> SessionSql:
    """The statements of a session operator (see the module docstring).

    ``inner`` is the SQL of the rows (over ``__input``); ``group`` the grouping
    keys and COUNT(DISTINCT) columns; ``partials`` None for unaggregated
    sessions, whose rows keep every column of the state schema.
    """
    P = [q(p) for p in partition]
    ts = f"epoch_us({q(time_col)})"
    cols = ", ".join(q(f.name) for f in state_schema)
    if partials is None:
        rows = f"SELECT *, {ts} AS {S}, {ts} + {gap} AS {E} FROM ({inner}) AS r"
    else:
        items = [f"{ts} AS {S}", f"{ts} + {gap} AS {E}"] + [f"{e} AS {q(n)}" for n, e, _, _ in partials]
        rows = f"SELECT *, {', '.join(items)} FROM ({inner}) AS r"
    rows = f"SELECT {cols} FROM ({rows}) AS e"
    on = " AND ".join(f"st.{p} IS NOT DISTINCT FROM t.{p}" for p in P) or "TRUE"
    keys = ", ".join(P) if P else "1 AS __unit"
    touched = (f"SELECT st.*, t.__hit IS NOT NULL AS __t FROM __state st "
               f"LEFT JOIN (SELECT DISTINCT {keys}, TRUE AS __hit FROM __rows) t ON {on}")
    # Equal starts need no order among them: the later one starts no session either way.
    order = ", ".join(P + [S])
    return SessionSql(rows, touched, f"SELECT * FROM __u ORDER BY {order}")


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
