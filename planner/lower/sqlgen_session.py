"""DuckDB SQL for session windows: gaps and islands over open sessions and a batch.

A session operator keeps its open sessions as Arrow tables (the state),
one row per (partition, session, grouping key) with partial aggregates,
or one row per event when the sessions are not aggregated (a SESSION
table function on its own). Columns: the partition keys, ``__s`` and
``__e`` (session start and end in epoch microseconds; an event at ``t``
is the session ``[t, t + gap)``), then the grouping keys, COUNT(DISTINCT)
columns and partial columns.

Per batch, the operator turns the batch into one row per event
(:attr:`SessionSql.rows`, or straight from the batch's columns when
:func:`direct_rows` says how), takes the state rows of the partitions the
batch touches, sorts both by partition and time (with numpy for one
integer partition column; else ``touched`` and ``sort`` in DuckDB) and
merges overlapping or touching intervals with numpy (a new session
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
from typing import NamedTuple

import pyarrow as pa
from sqlglot import exp

from ..logical.nodes import AggCall
from ..types import Schema
from .sqltree import alias, asc, call, cast, col, cols, lit, render, same, select_from, star, sub

S, E = "__s", "__e"


class Partial(NamedTuple):
    """One partial column of a session's aggregates."""

    name: str
    sql: exp.Expression  # per event
    merge: str  # how partials merge: sum | min | max
    type: pa.DataType
    source: tuple[str, str | None]  # per event without SQL: ("one", None) | ("valid", arg) | ("column", arg);
    #                                 ("sql", None): only the SQL makes it (a square)


def partial_columns(aggs: tuple[AggCall, ...], schema: Schema) -> list[Partial]:
    """Per aggregate, its partial columns, as one value per event (named as physical_window.partial_agg names
    them)."""
    out = []
    for i, a in enumerate(aggs):
        if a.keeps_values:
            continue  # the argument is kept as a grouping column
        arg = col(a.arg) if a.arg else None
        for p in a.partials():
            name = f"__p{i}{p.suffix}"
            if a.kind.python:  # the event's value, accumulated when its session merges (runtime/udaf.py)
                out.append(Partial(name, a.kind.batch_partial(exp.Array(expressions=[arg]), of_list=True), p.merge,
                                   p.type, ("sql", None)))
            elif arg is None:
                out.append(Partial(name, cast(lit(1), pa.int64()), p.merge, pa.int64(), ("one", None)))
            elif p.first == "count":
                out.append(Partial(name, cast(_valid(arg), pa.int64()), p.merge, pa.int64(), ("valid", a.arg)))
            else:
                out.append(Partial(name, cast(p.value(arg), p.type), p.merge, p.type,
                                   ("sql", None) if p.square else ("column", a.arg)))
    return out


def _valid(e: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e.copy(), expression=exp.Null()))


def direct_rows(picks: tuple[tuple[str, str], ...] | None, time_col: str, partials: list[Partial] | None,
                state_schema: pa.Schema, schema: Schema) -> tuple[tuple[str, str, str | None], ...] | None:
    """How to make the state rows straight from the batch's columns, without a statement; None if it takes one.

    ``picks``: (column of the rows, column of the batch) pairs when the rows
    only pick and rename the batch's columns. Per state column: (name, how,
    batch column), how one of ``column`` (as it is, cast to the state's
    type), ``start`` (the time column's epoch microseconds), ``end`` (start
    + gap), ``one`` (1), ``valid`` (1 if not NULL, else 0).
    """
    if picks is None:
        return None
    batch = dict(picks)
    sources = {S: ("start", time_col), E: ("end", time_col)}
    for p in partials or ():
        how, arg = p.source
        if how == "sql":
            return None
        if how == "column" and not _widens(schema.find(arg).type, p.type):
            return None
        sources[p.name] = p.source
    out = []
    for f in state_schema:
        how, column = sources.get(f.name, ("column", f.name))
        if column is not None and column not in batch:
            return None
        out.append((f.name, how, batch[column] if column is not None else None))
    return tuple(out)


def _widens(source: pa.DataType, target: pa.DataType) -> bool:
    """An Arrow cast from ``source`` to ``target`` gives what DuckDB's CAST does (same or wider numbers)."""
    if source == target:
        return True
    numeric = (pa.types.is_integer, pa.types.is_floating)
    return any(a(source) for a in numeric) and any(b(target) for b in numeric) and \
        (pa.types.is_floating(target) or not pa.types.is_floating(source))


@dataclass(frozen=True)
class SessionSql:
    rows: str  # per batch, over __input: one state row per event
    touched: str  # over __state and __rows: each state row with __t (its partition has new rows)
    sort: str  # over __u: the rows in (partition, start) order, for the islands
    direct: tuple[tuple[str, str, str | None], ...] | None = None  # rows without a statement (direct_rows)


def session_sql(inner: exp.Expression, time_col: str, gap: int, partition: tuple[str, ...], group: tuple[str, ...],
                partials: list[Partial] | None, state_schema: pa.Schema, direct=None) -> SessionSql:
    """The statements of a session operator (see the module docstring).

    ``inner`` is the query of the rows (over ``__input``); ``group`` the grouping
    keys and COUNT(DISTINCT) columns; ``partials`` None for unaggregated
    sessions, whose rows keep every column of the state schema.
    """
    ts = call("epoch_us", col(time_col))
    items = [exp.alias_(ts, S), exp.alias_(exp.Add(this=ts.copy(), expression=lit(gap)), E)]
    items += [alias(p.sql, p.name) for p in partials or ()]
    events = select_from(sub(inner, "r"), None, star(), *items)
    rows = select_from(sub(events, "e"), None, *cols(f.name for f in state_schema))
    hits = select_from("__rows", None, *(cols(partition) or [exp.alias_(lit(1), "__unit")]),
                       exp.alias_(exp.true(), "__hit")).distinct()
    touched = select_from("__state", "st", star("st"), exp.alias_(exp.Not(this=exp.Is(
        this=exp.column("__hit", "t"), expression=exp.Null())), "__t")) \
        .join(sub(hits, "t"), on=same("st", "t", partition), join_type="left")
    # Equal starts need no order among them: the later one starts no session either way.
    sort = select_from("__u", None, star()).order_by(*[asc(p) for p in partition], asc(exp.column(S)))
    return SessionSql(render(rows), render(touched), render(sort), direct)


def session_state_schema(partition: tuple[str, ...], group: tuple[str, ...], partials, input_schema: Schema) -> pa.Schema:
    """The state table's columns (see the module docstring)."""
    fields = [pa.field(p, input_schema.find(p).type) for p in partition]
    fields += [pa.field(S, pa.int64()), pa.field(E, pa.int64())]
    if partials is None:
        fields += [pa.field(f.name, f.type) for f in input_schema if f.name not in partition]
    else:
        fields += [pa.field(g, input_schema.find(g).type) for g in group]
        fields += [pa.field(p.name, p.type) for p in partials]
    return pa.schema(fields)
