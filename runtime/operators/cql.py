"""CQL's relation-to-stream operators over a relation given per instant.

The input holds, for each instant (a window end, every ``slide``), the
rows of the relation at that instant. Input delta -> output delta::

    batch       : rows tagged with their instant -> buffered
    watermark W : for each instant t <= W in order, R(t) against R(t - slide):
                  relation -> -D (R(t-slide) - R(t)), +I (R(t) - R(t-slide))
                  insert   -> R(t) - R(t-slide)              (ISTREAM)
                  delete   -> R(t-slide) - R(t)              (DSTREAM)

Differences are of multisets (EXCEPT ALL); an instant without rows is an
empty relation, so everything leaves at the instant after the last rows.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...planner.physical.specs import OP
from ...planner.physical.stream_specs import SnapshotDiffSpec
from ..changelog import DELETE, INSERT, with_op
from ..duck import conform
from .base import MIN_WATERMARK, CountsLate, Env, Logic


class SnapshotDiffLogic(CountsLate, Logic):
    def __init__(self, spec: SnapshotDiffSpec, env: Env):
        self.spec = spec
        self.duck = env.duck
        self.panes = env.state.panes(spec.id, "instants")
        self.previous = env.state.panes(spec.id, "previous")  # key 0: the relation at the last instant
        self.last = env.state.value(spec.id, "last_instant", None)
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.rows_schema = pa.schema([f for f in spec.schema if f.name != OP])
        self.count_late(env, spec.id)

    @property
    def state_rows(self) -> int:
        return self.panes.rows + self.previous.rows

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.input_sql is not None:
            batch = self.duck.run(self.spec.input_sql, batch)
        instants = pc.cast(batch.column(self.spec.instant), pa.int64())
        late = pc.less_equal(instants, self.fired.value)
        if pc.any(late).as_py():
            self.late_dropped += int(pc.sum(late).as_py())
            batch, instants = batch.filter(pc.invert(late)), instants.filter(pc.invert(late))
        self.panes.add_split(instants, conform(batch.select(list(self.spec.columns)), self.rows_schema))
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        if watermark <= self.fired.value:
            return []
        self.fired.value = watermark
        slide = self.spec.slide_us
        out: list[pa.Table] = []
        previous = self._previous()
        for instant in [k for k in self.panes.keys() if k <= watermark]:
            if self.last.value is not None and instant > self.last.value + slide and previous.num_rows:
                out += self._changes(previous, self.rows_schema.empty_table())  # an empty instant between
                previous = self.rows_schema.empty_table()
            current = pa.concat_tables(self.panes.pop(instant))
            out += self._changes(previous, current)
            previous, self.last.value = current, instant
        if previous.num_rows and self.last.value + slide <= watermark:
            out += self._changes(previous, self.rows_schema.empty_table())  # nothing at the next instant
            previous = self.rows_schema.empty_table()
            self.last.value += slide
        self.previous.replace(0, previous)
        return [t for t in out if t.num_rows]

    def _previous(self) -> pa.Table:
        tables = self.previous.get(0)
        return tables[0] if tables else self.rows_schema.empty_table()

    def _changes(self, old: pa.Table, new: pa.Table) -> list[pa.Table]:
        kind = self.spec.kind
        removed = self._minus(old, new) if kind in ("relation", "delete") else None
        added = self._minus(new, old) if kind in ("relation", "insert") else None
        if kind == "insert":
            return [added]
        if kind == "delete":
            return [removed]
        return [with_op(removed, DELETE), with_op(added, INSERT)]

    def _minus(self, a: pa.Table, b: pa.Table) -> pa.Table:
        """The multiset difference a - b."""
        if a.num_rows == 0 or b.num_rows == 0:
            return a
        return conform(self.duck.sql("SELECT * FROM __a EXCEPT ALL SELECT * FROM __b", __a=a, __b=b),
                       self.rows_schema)
