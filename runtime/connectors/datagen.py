"""The runtime half of the datagen source (``planner/connectors/datagen.py``): rows made up, vectorized.

Every value is a function of (seed, column, row number): a SplitMix64 hash
of the row numbers, computed for a whole batch at once with numpy. So the
rows do not depend on how batches are cut, a reader that ``seek``\\ s to a
checkpoint's position makes exactly the rows after it, and two runs with
the same ``seed`` make the same rows. Without a ``seed`` a random one is
drawn and kept in the position.

Pacing: ``rows-per-second`` rows become due per second of the clock
(the first second's at once); a read returns at most the rows due, an
empty batch when none are, and None after the last row of a bounded
source (``number-of-rows``, or the shortest sequence with an end).
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.connectors.datagen import DEFAULT_ROWS_PER_SECOND, FieldGen, plan_fields
from .base import ReadRequest, SourceContext, SourceReader

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer: a well-spread uint64 from each uint64."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


class DatagenReader:
    """A SourceReader of generated rows (see the module docstring)."""

    def __init__(self, req: ReadRequest, ctx: SourceContext):
        options = {k.lower(): v for k, v in req.options.items()}
        src = ctx.source
        physical = pa.schema([pa.field(c, src.schema.find(c).type) for c in src.physical])
        gens = plan_fields(options, physical)
        self.gens = [gens[name] for name in req.schema.names]
        self.salts = {name: i for i, name in enumerate(physical.names)}  # a column's values do not depend on the query
        self.schema = req.schema
        self.batch_rows = req.batch_rows
        self.clock = ctx.clock
        self.rate = int(options.get("rows-per-second", DEFAULT_ROWS_PER_SECOND))
        limits = [int(options["number-of-rows"])] if "number-of-rows" in options else []
        limits += [g.count for g in gens.values() if g.count is not None]
        self.total = min(limits) if limits else None
        self.seed = int(options["seed"]) if "seed" in options else int.from_bytes(os.urandom(7), "little")
        self.rows = 0
        self.started_us = self.clock.now_us()

    def read(self) -> pa.Table | None:
        if self.total is not None and self.rows >= self.total:
            return None
        elapsed = max(0, self.clock.now_us() - self.started_us)
        due = self.rate + elapsed * self.rate // 1_000_000
        n = min(self.batch_rows, due - self.rows)
        if self.total is not None:
            n = min(n, self.total - self.rows)
        if n <= 0:
            return self.schema.empty_table()
        index = np.arange(self.rows, self.rows + n, dtype=np.uint64)
        self.rows += n
        now = self.clock.now_us()
        return pa.table([self._column(g, index, now) for g in self.gens], schema=self.schema)

    def _draws(self, g: FieldGen, index: np.ndarray, per_row: int = 1) -> np.ndarray:
        """``per_row`` random uint64 per row, shape (rows, per_row)."""
        salt = _mix(np.array([(self.seed * 1_000_003 + self.salts[g.name]) % 2**64], dtype=np.uint64))[0]
        with np.errstate(over="ignore"):
            x = index[:, None] * np.uint64(per_row) + np.arange(per_row, dtype=np.uint64)[None, :]
        return _mix(_mix(x) ^ salt)

    def _column(self, g: FieldGen, index: np.ndarray, now_us: int) -> pa.Array:
        t = g.type
        if g.kind == "sequence":
            with np.errstate(over="ignore"):
                values = index.astype(np.int64) * np.int64(g.step) + np.int64(g.start)
            if pa.types.is_timestamp(t):
                return pa.array(values, pa.timestamp("us")).cast(t)
            if pa.types.is_string(t) or pa.types.is_large_string(t):
                return pa.array(values).cast(t)
            return pa.array(values).cast(t)
        u = self._draws(g, index)[:, 0] if not (pa.types.is_string(t) or pa.types.is_large_string(t)) else None
        if pa.types.is_timestamp(t):
            past = (u % np.uint64(g.max_past_us + 1)).astype(np.int64)
            return pa.array(np.int64(now_us) - past, pa.timestamp("us")).cast(t)
        if pa.types.is_boolean(t):
            return pa.array((u & np.uint64(1)).astype(bool))
        if pa.types.is_integer(t):
            span = g.max - g.min + 1
            offset = u if span >= 2**64 else u % np.uint64(span)
            with np.errstate(over="ignore"):
                values = (offset + np.uint64(g.min % 2**64)).view(np.int64)
            return pa.array(values).cast(t)
        if pa.types.is_floating(t) or pa.types.is_decimal(t):
            unit = (u >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)
            values = pa.array(g.min + unit * (g.max - g.min))
            if pa.types.is_decimal(t):
                return pc.round(values, t.scale).cast(t, safe=False)
            return values.cast(t)
        return self._strings(g, index)

    def _strings(self, g: FieldGen, index: np.ndarray) -> pa.Array:
        """Random hex strings of ``g.length`` characters: 16 characters from each draw."""
        n, length = len(index), g.length
        draws = self._draws(g, index, max(1, -(-length // 16)))
        nibbles = (draws[:, :, None] >> (np.arange(16, dtype=np.uint64) * np.uint64(4))) & np.uint64(15)
        chars = _HEX[nibbles.reshape(n, -1)[:, :length].astype(np.intp)]
        offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int32) * length).tobytes())
        array = pa.StringArray.from_buffers(n, offsets, pa.py_buffer(np.ascontiguousarray(chars).tobytes()))
        return array.cast(g.type)

    @property
    def position(self) -> dict:
        return {"rows": self.rows, "seed": self.seed}

    def seek(self, position: dict) -> None:
        self.rows = int(position.get("rows", 0))
        self.seed = int(position.get("seed", self.seed))
        self.started_us = self.clock.now_us() - self.rows * 1_000_000 // self.rate

    @property
    def skipped(self) -> int:
        return 0

    def close(self) -> None:
        pass  # holds no resources


def open_source(req: ReadRequest, ctx: SourceContext) -> SourceReader:
    return DatagenReader(req, ctx)
