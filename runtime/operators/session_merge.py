"""Gaps and islands with numpy: rows in (partition, start) order merged into sessions.

Used by the session operator (session.py). Every row is an interval
``[__s, __e)`` of one partition: an event ``[t, t + gap)`` or an open
session. Sorted by partition and start, an interval starts a new session
where it begins after every earlier interval of its partition has ended
(as Flink's ``TimeWindow.intersects``: touching intervals merge)::

    partition   a        a        a         b
    interval    [0, 8)   [5, 13)  [20, 28)  [6, 14)
    reach       8        13       28        14     running maximum of the ends
    new session yes      no       yes       yes    start > reach before it, or a new partition

The running maximum restarts per partition by lifting each partition's
times above the previous partition's: one ``maximum.accumulate`` for all.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .source import int64_values

S, E = "__s", "__e"
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: spreads consecutive keys over the slots


def int_keys(column: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """An integer column without NULLs as int64 values in numpy (None for other columns, or uint64)."""
    if not pa.types.is_integer(column.type) or column.type == pa.uint64() or column.null_count:
        return None
    if column.type != pa.int64():
        column = column.cast(pa.int64())
    return int64_values(column)


class KeyFilter:
    """Whether integer keys may be among a set, never with a false negative.

    Keys in a range of at most 16 slots per key (user ids, say) are looked
    up exactly in a table over that range; others in a one-hash Bloom
    filter of 16 slots per key. A false positive costs only work: an open
    session taken for a partition the batch does not have is merged with
    nothing and stays as it was.
    """

    def __init__(self, keys: np.ndarray):
        low, high = int(keys.min()), int(keys.max())
        self._dense = high - low < 16 * len(keys) + 1024 and -(2**63) < low and high < 2**63 - 1
        if self._dense:  # slots low - 1 and high + 1 stand for every key outside the range
            self._low, self._high = low - 1, high + 1
            self._slots = np.zeros(high - low + 3, dtype=bool)
            self._slots[keys - self._low] = True
        else:
            bits = int(np.ceil(np.log2(16 * len(keys))))
            self._shift = np.uint64(64 - bits)
            self._slots = np.zeros(1 << bits, dtype=bool)
            self._slots[self._slot(keys)] = True

    def _slot(self, keys: np.ndarray) -> np.ndarray:
        if self._dense:
            return np.clip(keys, self._low, self._high) - self._low
        return (keys.view(np.uint64) * _GOLDEN) >> self._shift  # Fibonacci hashing

    def may_hold(self, keys: np.ndarray) -> np.ndarray:
        return self._slots[self._slot(keys)]


class Islands:
    """Sessions found among n rows: the rows' order, where each session starts in it, its start and end."""

    def __init__(self, order: np.ndarray | None, firsts: np.ndarray, n: int):
        self.order = order  # the rows' permutation into (partition, start) order; None: in order already
        self.firsts = firsts  # positions, in that order, of the rows that start a session
        self.n = n
        # Per session: its start and end, and its integer partition value (when the rows had one).
        self.starts: np.ndarray | None = None
        self.ends: np.ndarray | None = None
        self.keys: np.ndarray | None = None

    @functools.cached_property
    def first_rows(self) -> np.ndarray:
        """The rows that start a session, as given."""
        return self.order[self.firsts] if self.order is not None else self.firsts

    @functools.cached_property
    def lasts(self) -> np.ndarray:
        lasts = np.empty_like(self.firsts)
        np.subtract(self.firsts[1:], 1, out=lasts[:-1])
        lasts[-1] = self.n - 1
        return lasts

    @functools.cached_property
    def ids(self) -> np.ndarray:
        """Each row's session number, in the rows' order."""
        ids = np.zeros(self.n, dtype=np.int64)
        ids[self.firsts[1:]] = 1
        return np.cumsum(ids, out=ids)

    def in_order(self, values: np.ndarray) -> np.ndarray:
        return values[self.order] if self.order is not None else values

    def reduce(self, values: np.ndarray, how: str) -> np.ndarray:
        """Per session, the ``how`` (sum, min, max, bit_and, bit_or, bit_xor) of the rows' ``values``."""
        values = self.in_order(values)
        if how == "sum" and values.dtype.kind in "iu":  # exact (modulo 2**64, as any int64 sum)
            total = np.cumsum(values)
            out = total[self.lasts]
            out -= total[self.firsts]
            out += values[self.firsts]
            return out
        if how == "sum":  # one pass over the rows; in their order, as a reduceat would add them
            return np.bincount(self.ids, weights=values, minlength=len(self.firsts)).astype(values.dtype)
        return _REDUCE[how].reduceat(values, self.firsts)


_REDUCE = {"min": np.minimum, "max": np.maximum, "bit_and": np.bitwise_and, "bit_or": np.bitwise_or,
           "bit_xor": np.bitwise_xor}


def keyed_islands(keys: np.ndarray, s: np.ndarray, e: np.ndarray) -> Islands:
    """The sessions of rows with integer partition values ``keys``, starts ``s`` and ends ``e``, in any order.

    One sort of a combined int64 key (partition, start) when the ranges
    allow it, the usual case: lifting each partition above the last one
    (by the span of all times) then also restarts the running maximum of
    the ends per partition. A lexicographic sort otherwise.
    """
    low, base = int(keys.min()), int(s.min())
    span = int(e.max()) - base + 1
    if (int(keys.max()) - low + 1) * span >= 2**62:
        order = np.lexsort((s, keys))
        sorted_keys = keys[order]
        pid = np.zeros(len(keys), dtype=np.int64)
        np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=pid[1:])
        found = sorted_islands(np.cumsum(pid, out=pid), s[order], e[order])
        found.order = order
        found.keys = keys[found.first_rows]
        return found
    lift = keys - low  # in place from here on: fewer temporary arrays
    lift *= span
    lift -= base
    order, start_key = sort_order(s + lift)
    lift += e
    reach = np.maximum.accumulate(lift[order], out=lift)
    found = Islands(order, _starts(start_key, reach), len(keys))
    # The first row's combined key holds the session's partition and start; within a session the
    # lift is the same, so its end is the reach minus the first row's lifted start.
    first_key = start_key[found.firsts]
    found.keys = first_key // span
    found.starts = first_key - found.keys * span + base
    found.keys += low
    ends = reach[found.lasts]
    ends -= first_key
    ends += found.starts
    found.ends = ends
    return found


def sort_order(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The permutation that sorts non-negative ``key`` (equal keys in any order), and the sorted keys.

    Sorting the keys with each row's index in their low bits is about three
    times faster than an argsort. When the index does not fit beside the
    key, the key's lowest bits make room (at most 9: times in milliseconds
    then still differ); the order is checked, and an argsort taken if keys
    that close came out of order.
    """
    n = len(key)
    index_bits = max(1, (n - 1).bit_length())
    shift = max(0, int(key.max()).bit_length() + index_bits - 63)
    if shift > 9:
        order = np.argsort(key)
        return order, key[order]
    packed = key >> shift
    packed <<= index_bits
    packed |= np.arange(n)
    packed.sort()
    packed &= (1 << index_bits) - 1
    ordered = key[packed]
    if shift and np.any(ordered[1:] < ordered[:-1]):
        packed = np.argsort(key)
        ordered = key[packed]
    return packed, ordered


def sorted_islands(pid: np.ndarray, s: np.ndarray, e: np.ndarray) -> Islands:
    """The sessions of rows in (partition id ``pid``, start ``s``) order; ``pid`` counts up from 0."""
    n = len(s)
    base, span = int(s.min()), int(e.max()) - int(s.min()) + 1
    ls, le = s, e
    if span * (int(pid[-1]) + 1) >= 2**62:  # times far apart: their order is all that matters
        values, inverse = np.unique(np.concatenate([s, e]), return_inverse=True)
        ls, le, base, span = inverse[:n], inverse[n:], 0, len(values)
    lift = pid * span - base
    found = Islands(None, _starts(ls + lift, np.maximum.accumulate(le + lift)), n)
    found.starts = s[found.firsts]
    found.ends = np.maximum.reduceat(e, found.firsts)
    return found


def _starts(start_key: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """Rows that start a session: those starting after every earlier row (lifted) has ended."""
    start = np.empty(len(start_key), dtype=bool)
    start[0] = True
    np.greater(start_key[1:], reach[:-1], out=start[1:])
    return np.flatnonzero(start)


def partition_ids(table: pa.Table, partition: tuple[str, ...]) -> np.ndarray:
    """For rows in partition order: 0 for the first partition, then +1 at every change of partition."""
    n = table.num_rows
    new = np.zeros(n, dtype=bool)
    for name in partition:
        col = table.column(name).combine_chunks()
        a, b = col.slice(1), col.slice(0, n - 1)
        differs = pc.or_(pc.fill_null(pc.not_equal(a, b), False), pc.xor(pc.is_null(a), pc.is_null(b)))
        new[1:] |= differs.to_numpy(zero_copy_only=False)
    return np.cumsum(new, dtype=np.int64)
