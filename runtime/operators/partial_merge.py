"""Merging partial aggregates by key, vectorized, for every merge an aggregate kind may declare.

Window and session operators keep partial aggregates (planner/aggregate_kinds.py)
as Arrow rows per (pane, key) and merge them with a hash group-by. Arrow's
group-by does ``sum``, ``min`` and ``max``; the bitwise merges (``bit_and``,
``bit_or``, ``bit_xor``) are done with numpy's ``reduceat`` over the rows
in group order::

    k  b                      k  b_bit_or
    1  0b001                  1  0b011
    2  0b100      ->          2  0b100
    1  0b010

The result is named as Arrow names it (``<column>_<merge>``), keys first.
A DISTINCT aggregate's value is folded over the distinct values of its
argument per group (:func:`fold_distinct`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_BITWISE = {"bit_and": (np.bitwise_and, -1), "bit_or": (np.bitwise_or, 0), "bit_xor": (np.bitwise_xor, 0)}
_ROW, _ONE = "__merge_row", "__merge_one"


def group_merge(table: pa.Table, keys: list[str], merges: list[tuple[str, str]]) -> pa.Table:
    """``table`` grouped by ``keys`` with each (column, merge) applied: keys, then ``<column>_<merge>``."""
    native = [(c, how) for c, how in merges if how not in _BITWISE]
    bitwise = [(c, how) for c, how in merges if how in _BITWISE]
    if not bitwise:
        return table.group_by(keys, use_threads=False).aggregate(native)
    if not keys:  # one group: Arrow's list aggregate needs a key to group by
        one = table.append_column(_ONE, pa.repeat(pa.scalar(0, pa.int8()), table.num_rows))
        return group_merge(one, [_ONE], merges).drop_columns([_ONE])
    numbered = table.append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    grouped = numbered.group_by(keys, use_threads=False).aggregate(
        [*native, (_ROW, "list"), *[(c, "count") for c, _ in bitwise]])
    rows = grouped.column(f"{_ROW}_list").combine_chunks()
    order = rows.flatten().to_numpy()
    starts = rows.offsets.to_numpy()[:-1]
    out = grouped.drop_columns([f"{_ROW}_list", *{f"{c}_count" for c, _ in bitwise}])
    for c, how in bitwise:
        reduce, identity = _BITWISE[how]
        column = table.column(c)
        values = pc.fill_null(column, identity).to_numpy().astype(np.int64)[order]
        merged = reduce.reduceat(values, starts) if len(starts) else values[:0]
        present = pc.greater(grouped.column(f"{c}_count"), 0)
        out = out.append_column(f"{c}_{how}", pc.if_else(present, pa.array(merged).cast(column.type), None))
    return out.select([*keys, *[f"{c}_{how}" for c, how in merges]])  # in the order asked


def fold_distinct(table: pa.Table, keys: list[str], value: str, folds: list[tuple[str, str, pa.DataType]]) -> pa.Table:
    """Per group of ``keys``, each (suffix, fold, type) over the distinct non-NULL values of ``value``.

    ``fold`` is ``count`` or a merge; the result has the keys, then a
    column per suffix, in the order of :func:`group_merge` over the same keys.
    """
    distinct = table.select([*keys, value]).group_by([*keys, value], use_threads=False).aggregate([])
    specs = []
    for suffix, how, dtype in folds:
        name = f"__d_{suffix}"
        distinct = distinct.append_column(name, distinct.column(value).cast(dtype))
        specs.append((name, how))
    merged = group_merge(distinct, keys, specs)
    return merged.rename_columns(keys + [s for s, _, _ in folds])
