"""Merging partial aggregates by key, vectorized, for every merge an aggregate kind may declare; and
the arrival numbers that ordered aggregates (FIRST_VALUE, LAST_VALUE, LISTAGG, ARRAY_AGG) read.

Window and session operators keep partial aggregates (planner/aggregate_kinds.py)
as Arrow rows per (pane, key) and merge them with a hash group-by. Arrow's
group-by does ``sum``, ``min`` and ``max``; ``py:<function>`` (a Python aggregate's accumulators,
``runtime/udaf.py``) merges them; the bitwise merges (``bit_and``,
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

from ...planner.aggregate_kinds import SEQ
from ...planner.python_aggregate import MERGE_PREFIX
from ..udaf import combine_groups

_NATIVE = {"sum", "min", "max", "count"}
_BITWISE = {"bit_and": (np.bitwise_and, -1), "bit_or": (np.bitwise_or, 0), "bit_xor": (np.bitwise_xor, 0)}
_ROW, _ONE = "__merge_row", "__merge_one"


def group_merge(table: pa.Table, keys: list[str], merges: list[tuple[str, str]],
                ordered: dict[str, tuple[str, str | None]] | None = None) -> pa.Table:
    """``table`` grouped by ``keys`` with each (column, merge) applied: keys, then ``<column>_<merge>``.

    ``ordered``: for the ``first_by``, ``last_by``, ``listagg_by`` and ``array_by`` merges, the column's order column
    and (LISTAGG) separator.
    """
    native = [(c, how) for c, how in merges if how in _NATIVE]
    other = [(c, how) for c, how in merges if how not in _NATIVE]
    if not other:
        return table.group_by(keys, use_threads=False).aggregate(native)
    if not keys:  # one group: Arrow's list aggregate needs a key to group by
        one = table.append_column(_ONE, pa.repeat(pa.scalar(0, pa.int8()), table.num_rows))
        return group_merge(one, [_ONE], merges, ordered).drop_columns([_ONE])
    numbered_rows = table.append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    grouped = numbered_rows.group_by(keys, use_threads=False).aggregate([*native, (_ROW, "list")])
    rows = grouped.column(f"{_ROW}_list").combine_chunks()
    order = rows.flatten().to_numpy()  # the table's rows, group after group
    offsets = rows.offsets.to_numpy()
    groups = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    out = grouped.drop_columns([f"{_ROW}_list"])
    for c, how in other:
        column = table.column(c)
        if how in _BITWISE:
            merged = _bitwise(column, how, order, offsets)
        elif how == "list":
            merged = _concatenated(column, order, offsets)
        elif how.startswith(MERGE_PREFIX):  # Python accumulators: merged, and pending rows accumulated
            merged = combine_groups(column, how[len(MERGE_PREFIX):], order, offsets)
        else:
            order_column, separator = (ordered or {})[c]
            merged = _in_order(column, table.column(order_column), how, separator, order, offsets, groups)
        out = out.append_column(f"{c}_{how}", merged)
    return out.select([*keys, *[f"{c}_{how}" for c, how in merges]])  # in the order asked


def _bitwise(column: pa.ChunkedArray, how: str, order: np.ndarray, offsets: np.ndarray) -> pa.Array:
    reduce, identity = _BITWISE[how]
    values = pc.fill_null(column, identity).to_numpy().astype(np.int64)[order]
    starts = offsets[:-1]
    merged = reduce.reduceat(values, starts) if len(starts) else values[:0]
    present = np.add.reduceat(column.is_valid().to_numpy(zero_copy_only=False)[order].astype(np.int64), starts) \
        if len(starts) else np.zeros(0, dtype=np.int64)
    return pc.if_else(pa.array(present > 0), pa.array(merged).cast(column.type), None)


def _concatenated(column: pa.ChunkedArray, order: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """Per group: its rows' lists one after the other (a NULL list adds nothing)."""
    lists = column.combine_chunks().take(pa.array(order, pa.int64()))
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ends = np.concatenate([[0], np.cumsum(lengths)])
    return pa.ListArray.from_arrays(pa.array(ends[offsets], pa.int32()), lists.flatten(), type=column.type)


def _in_order(column: pa.ChunkedArray, order_column: pa.ChunkedArray, how: str, separator: str | None,
              order: np.ndarray, offsets: np.ndarray, groups: np.ndarray) -> pa.Array:
    """Per group: the value of the row with the least (``first_by``) or greatest (``last_by``) order, or the
    values joined in order (``listagg_by``) or their lists one after the other in order (``array_by``); rows
    without an order (no value) are skipped."""
    seq = order_column.take(pa.array(order))
    valid = seq.is_valid().to_numpy(zero_copy_only=False)
    filler = np.iinfo(np.int64).min if how == "last_by" else np.iinfo(np.int64).max
    key = pc.fill_null(seq, filler).to_numpy()
    perm = np.lexsort((key, groups))  # by group, then by order
    counts = np.add.reduceat(valid.astype(np.int64), offsets[:-1]) if len(groups) else np.zeros(0, np.int64)
    if how == "array_by":
        kept = perm[valid[perm]]
        merged = _concatenated(column, order[kept], np.concatenate([[0], np.cumsum(counts)]))
        return pc.if_else(pa.array(counts > 0), merged, None)
    if how == "listagg_by":
        kept = perm[valid[perm]]  # the rows with a value, group after group, in order
        values = column.take(pa.array(order[kept]))
        lists = pa.ListArray.from_arrays(pa.array(np.concatenate([[0], np.cumsum(counts)]), pa.int32()),
                                         values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values)
        joined = pc.binary_join(lists, separator)
        return pc.if_else(pa.array(counts > 0), joined, None)
    pick = offsets[1:] - 1 if how == "last_by" else offsets[:-1]
    chosen = column.take(pa.array(order[perm[pick]])) if len(pick) else column.slice(0, 0)
    return pc.if_else(pa.array(counts > 0), chosen, None)


def ordered_merges(aggs) -> dict[str, tuple[str, str | None]]:
    """For a window operator's PartialAggs: each ordered value column's order column and separator."""
    out = {}
    for a in aggs:
        if a.kind.ordered:
            columns = {suffix: column for column, _, suffix in a.partials}
            out[columns["v"]] = (columns["o"], getattr(a.kind, "separator", None))
    return out


def fold_distinct(table: pa.Table, keys: list[str], value: str, folds: list[tuple[str, str, pa.DataType]]) -> pa.Table:
    """Per group of ``keys``, each (suffix, fold, type) over the distinct non-NULL values of ``value``.

    ``fold`` is ``count`` or a merge; the result has the keys, then a
    column per suffix, in the order of :func:`group_merge` over the same keys.
    """
    distinct = table.select([*keys, value]).group_by([*keys, value], use_threads=False).aggregate([])
    specs = []
    for suffix, how, dtype in folds:
        name = f"__d_{suffix}"
        column = distinct.column(value)  # a count counts the values of any type; the other folds need dtype
        distinct = distinct.append_column(name, column if how == "count" else column.cast(dtype))
        specs.append((name, how))
    merged = group_merge(distinct, keys, specs)
    return merged.rename_columns(keys + [s for s, _, _ in folds])


def numbered(batch: pa.Table, counter) -> pa.Table:
    """``batch`` with its rows' arrival numbers (``SEQ``), continuing ``counter`` (a checkpointed state value)."""
    n = batch.num_rows
    batch = batch.append_column(SEQ, pa.array(np.arange(counter.value, counter.value + n, dtype=np.int64)))
    counter.value += n
    return batch
