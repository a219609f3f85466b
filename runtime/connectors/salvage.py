"""The error path's basic tool: find the failing items of a batch that failed as a whole.

Sources convert a batch in one vectorized call. When that call fails, the
batch is split in halves and each half tried again, recursively, until the
failing parts are single items. Good parts come back as tables, in order.
Because the *same* vectorized code judges every part, an item is rejected
exactly when it fails on its own, and there is no second, per-row
implementation of the rules to drift out of step. One bad item in n costs
about 2·log2(n) calls over a total of ~2n items.

It is used for the distinct values of a column that did not convert
(``convert.convert_rows``) and, as the last resort, for lines that a
parser rejects without saying which (``line_source``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pyarrow as pa


class BadInput(ValueError):
    """A batch holds something that cannot be read (which row is found afterwards)."""


@dataclass
class Salvage:
    """What is left of a batch after the failing items are taken out.

    Attributes:
        tables: the results of the good parts, in order.
        bad: the indexes of the failing items, in order.
    """

    tables: list[pa.Table] = field(default_factory=list)
    bad: list[int] = field(default_factory=list)


def salvage(n: int, attempt: Callable[[int, int], pa.Table]) -> Salvage:
    """Try items ``[0, n)``, which failed together, part by part.

    Args:
        n: how many items (rows, lines or values) the batch holds.
        attempt: ``attempt(lo, hi)`` processes items ``[lo, hi)`` or raises :class:`BadInput`.

    Returns:
        The good parts' results and the failing items' indexes.
    """
    result = Salvage()

    def visit(lo: int, hi: int, known_bad: bool) -> None:
        if not known_bad:
            try:
                result.tables.append(attempt(lo, hi))
                return
            except BadInput:
                pass
        if hi - lo == 1:
            result.bad.append(lo)
            return
        mid = (lo + hi) // 2
        visit(lo, mid, False)
        visit(mid, hi, False)

    if n:
        visit(0, n, True)
    return result
