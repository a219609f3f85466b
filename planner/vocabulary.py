"""Words the planner and the runtime share: the changelog column and its row kinds.

The planner writes SQL that reads and writes the changelog column; the
runtime's operators and connectors read and write it as Arrow. Both take
the codes from here (the runtime may import the planner, not the other way
round), so no ``IN (1, 3)`` stands for "a retraction" anywhere.

Example:
    >>> ChangeOp.DELETE, int(ChangeOp.DELETE), ChangeOp.DELETE.short
    (<ChangeOp.DELETE: 3>, 3, '-D')
    >>> f"CASE WHEN __op IN {sql_codes(RETRACTIONS)} THEN -1 ELSE 1 END"
    'CASE WHEN __op IN (1, 3) THEN -1 ELSE 1 END'
    >>> [op.short for op in ChangeOp]
    ['+I', '-U', '+U', '-D']
"""

from __future__ import annotations

from enum import IntEnum

OP = "__op"  # the changelog column of updating streams: int8 codes of ChangeOp


class ChangeOp(IntEnum):
    """A row kind of a changelog (Flink's RowKind), by its code in the ``__op`` column."""

    INSERT = 0  # +I
    UPDATE_BEFORE = 1  # -U: the row before an update
    UPDATE_AFTER = 2  # +U: the row after it
    DELETE = 3  # -D

    @property
    def short(self) -> str:
        """+I, -U, +U or -D, as changelog formats and ``subscribe`` show it."""
        return ("+I", "-U", "+U", "-D")[self]

    @property
    def sql(self) -> str:
        """The code as a SQL literal."""
        return str(int(self))


RETRACTIONS = (ChangeOp.UPDATE_BEFORE, ChangeOp.DELETE)  # they take a row away
ADDITIONS = (ChangeOp.INSERT, ChangeOp.UPDATE_AFTER)  # they add one


def sql_codes(ops) -> str:
    """A SQL list of the codes of ``ops``, for ``IN``: ``(1, 3)``."""
    return "(" + ", ".join(str(int(o)) for o in ops) + ")"
