"""The changelog column: how an updating stream says what each row does.

Append-only batches have no op column. Updating batches carry ``__op``
(int8), with Flink's row kinds: ``+I`` insert, ``-U`` the row before an
update, ``+U`` the row after it, ``-D`` delete.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..planner.vocabulary import OP, RETRACTIONS, ChangeOp
from .duck import conform, registered
from .errors import ChangelogError

INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = ChangeOp  # the row kinds (planner/vocabulary.py)
OP_NAMES = tuple(op.short for op in ChangeOp)


def has_op(table: pa.Table) -> bool:
    return OP in table.column_names


def with_op(table: pa.Table, op: int) -> pa.Table:
    """``table`` with every row marked ``op``."""
    return table.append_column(OP, pa.array([op] * 0, pa.int8()) if table.num_rows == 0
                               else pa.repeat(pa.scalar(op, pa.int8()), table.num_rows))


def op_names(table: pa.Table) -> pa.Array:
    """The op column as strings (+I, -U, +U, -D); all +I for an append-only batch."""
    if not has_op(table):
        return pa.repeat(pa.scalar("+I"), table.num_rows)
    return pc.take(pa.array(OP_NAMES), table.column(OP))


def is_retraction(table: pa.Table) -> pa.Array:
    return pc.is_in(table.column(OP), pa.array(RETRACTIONS, pa.int8()))


def apply_changes(current: pa.Table | None, deltas: list[pa.Table], strict: bool = False) -> pa.Table:
    """The relation after applying changelog ``deltas`` to ``current`` (a multiset of rows).

    +I and +U add a row; -U and -D remove one equal row. With ``strict``,
    removing a row that is not there raises ChangelogError (a valid
    changelog never does that).
    """
    parts = []
    if current is not None and current.num_rows:
        parts.append(current.append_column("__n", pa.repeat(pa.scalar(1, pa.int64()), current.num_rows)))
    for d in deltas:
        if d.num_rows == 0:
            continue
        sign = pc.if_else(is_retraction(d), -1, 1).cast(pa.int64()) if has_op(d) else \
            pa.repeat(pa.scalar(1, pa.int64()), d.num_rows)
        body = d.drop_columns([OP]) if has_op(d) else d
        parts.append(body.append_column("__n", sign))
    if not parts:
        return current if current is not None else pa.table({})
    if strict:
        # Apply in order, so a retraction that comes before its insert is caught.
        running = None
        for p in parts:
            running = _sum_counts([running, p] if running is not None else [p])
            if pc.any(pc.less(running.column("__n"), 0)).as_py():
                bad = running.filter(pc.less(running.column("__n"), 0)).drop_columns(["__n"]).slice(0, 3)
                raise ChangelogError(f"retraction of rows that were never emitted: {bad.to_pylist()}")
        counted = running
    else:
        counted = _sum_counts(parts)
    counted = counted.filter(pc.greater(counted.column("__n"), 0))
    repeat = counted.column("__n").to_numpy()
    indices = pa.array(np.repeat(np.arange(len(repeat)), repeat))
    return counted.drop_columns(["__n"]).take(indices)


def _sum_counts(parts: list[pa.Table]) -> pa.Table:
    table = pa.concat_tables(parts, promote_options="default")
    cols = [c for c in table.column_names if c != "__n"]
    if any(pa.types.is_nested(t) for t in table.schema.types):
        return _sum_counts_nested(table, cols)
    summed = table.group_by(cols, use_threads=False).aggregate([("__n", "sum")])
    return summed.rename_columns(cols + ["__n"])


def _sum_counts_nested(table: pa.Table, cols: list[str]) -> pa.Table:
    """``_sum_counts`` when a column is a ROW, ARRAY or MAP (Arrow cannot group by those; DuckDB can)."""
    con = duckdb.connect()
    try:
        with registered(con, __changes=table):
            summed = con.sql('SELECT * EXCLUDE ("__n"), CAST(SUM("__n") AS BIGINT) AS "__n" FROM "__changes" '
                             "GROUP BY ALL").to_arrow_table()
    finally:
        con.close()
    return conform(summed, pa.schema(list(table.schema.remove(table.schema.get_field_index("__n")))
                                     + [pa.field("__n", pa.int64())]))
