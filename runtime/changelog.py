"""The changelog column: how an updating stream says what each row does.

Append-only batches have no op column. Updating batches carry ``__op``
(int8), with Flink's row kinds: ``+I`` insert, ``-U`` the row before an
update, ``+U`` the row after it, ``-D`` delete.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

OP = "__op"
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
OP_NAMES = ("+I", "-U", "+U", "-D")


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
    return pc.is_in(table.column(OP), pa.array([UPDATE_BEFORE, DELETE], pa.int8()))
