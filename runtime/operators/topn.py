"""Top-N and deduplication (SQL in planner/lower/sqlgen_topn.py).

Input delta -> output delta, by kind::

    window  batch: rows of windows -> buffered by window end
            watermark W: each window with end <= W -> its top N rows (append-only)
    global  batch: +I/+U add rows, -U/-D remove them -> per touched partition, the
            changes of its top N: -D/+I rows (or -U/+U per row number when it is read;
            RANK and DENSE_RANK: -D/+I of rows with their rank)
    first   batch: rows -> one candidate per key (the earliest; the first to arrive on ties)
            watermark W: candidates with time < W -> emitted once per key (append-only)
    last    batch: rows -> per key, the latest row if not older than the emitted one:
            +I, or -U old +U new

With ``SET 'state.ttl'`` (global, first, last) a partition not touched
for that long is forgotten (``ttl.py``): its next row starts it afresh.

Rows of a window that has already been emitted (late for this operator,
possible only with a source's allowed lateness) are dropped and counted
in ``late_dropped``, as Flink's window Top-N drops late rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.logical.nodes import WINDOW_TIME_OFFSET_US
from ...planner.lower.sqlgen_topn import RANK, SEQ
from ...planner.lower.sqlgen_ttl import expired_table
from ...planner.physical.specs import OP
from ...planner.physical.stream_specs import TopNSpec
from ..duck import conform
from .base import MIN_WATERMARK, CountsLate, Env, Logic
from .emit import EmitTable
from .source import int64_values
from .ttl import StateTtl


class TopNLogic(CountsLate, Logic):
    def __init__(self, spec: TopNSpec, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.seq = env.state.value(spec.id, "seq", 0)
        self.panes = env.state.panes(spec.id, "rows")
        self.count_late(env, spec.id)
        self.columns = list(spec.columns)
        self.out_schema = pa.schema([f for f in spec.schema if f.name != OP])
        self.emitted = EmitTable(spec.emit_sql, env, spec.id, spec.schema) if spec.emit_sql else None
        for stmt in (spec.sql.setup if spec.kind == "global" else ()) + spec.ttl_setup:
            self.con.execute(stmt)
        # The store keeps one table set per operator: the emitted rows, the candidates, the partitions' TTL.
        tables = (spec.emit_sql.table,) if spec.emit_sql else ()
        tables += (spec.sql.tables if spec.kind == "global" else ()) + spec.ttl_tables
        if tables:
            env.state.duck_tables(spec.id, tables, env.duck)
        self.ttl = StateTtl(spec, self.con, env.clock) if spec.ttl_us else None

    @property
    def state_rows(self) -> int:
        return self.panes.rows

    # -- batches ---------------------------------------------------------------------

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        kind = self.spec.kind
        if self.ttl is not None:
            self._expire(self.ttl.before_batch)
        if kind == "global":
            return self._global(batch)
        if self.spec.input_sql is not None:
            batch = self.duck.run(self.spec.input_sql, batch)
        rows = batch.select(self.columns)
        if kind == "window":
            ends = pc.cast(rows.column(self.spec.window_end), pa.int64())
            # Late when its window had fired: the watermark at its last millisecond (window_time), as Flink.
            late = pc.less_equal(pc.subtract(ends, WINDOW_TIME_OFFSET_US), self.fired.value)
            if pc.any(late).as_py():
                self.late_dropped += int(pc.sum(late).as_py())
                rows, ends = rows.filter(pc.invert(late)), ends.filter(pc.invert(late))
            self.panes.add_split(ends, rows)
            return []
        rows = rows.append_column(SEQ, pa.array(np.arange(self.seq.value, self.seq.value + rows.num_rows)))
        self.seq.value += rows.num_rows
        if kind == "first":
            pending, seen = self._table(0, rows.schema), self._table(1, self._key_schema(rows))
            if self.panes.pieces(1) > 1:
                self.panes.replace(1, seen)  # one table of the keys already emitted
            out = self.duck.sql(self.spec.sql.first, __pending=pending, __seen=seen, __rows=rows)
            self.panes.replace(0, out)
            return []
        changed = self.duck.sql(self.spec.sql.last, __rows=rows)  # kind == "last"
        if self.ttl is not None:
            self.duck.execute_all(self.spec.touch, changed)
        return self._diff(changed)

    def _global(self, batch: pa.Table) -> list[pa.Table]:
        self.duck.execute_all(self.spec.sql.per_batch, batch)
        op_id = self.spec.id
        if self.emitted is None:
            out = self.duck.run_all(self.spec.sql.multiset_diff)
            if RANK in out.column_names:  # RANK, DENSE_RANK: the rank compared with the row
                out = out.rename_columns([self.spec.rank if c == RANK else c for c in out.column_names])
            return [conform(out, self.spec.schema)] if out.num_rows else []
        top = self.con.sql(f"SELECT * FROM __top_{op_id}").to_arrow_table()
        scope = self.con.sql(f"SELECT * FROM __touched_{op_id}").to_arrow_table()
        changes = self.emitted.diff(self._ranked(top), scope if self.spec.partition else None)
        return [changes] if changes.num_rows else []

    # -- watermarks ------------------------------------------------------------------

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        if watermark <= self.fired.value:
            return []
        self.fired.value = watermark
        kind = self.spec.kind
        if kind == "window":
            ready = []
            for end in self.panes.keys():
                if end > watermark:
                    break
                ready.extend(self.panes.pop(end))
            if not ready:
                return []
            ranked = self.duck.sql(self.spec.sql.rank, __ready=pa.concat_tables(ready))
            return [self._ranked(ranked)]
        if kind == "first":
            pending = self._table(0, None)
            if pending is None or pending.num_rows == 0:
                return []
            times = int64_values(pending.column(self.spec.order[0][0]))
            due = times < watermark
            if not due.any():
                return []
            out = pending.filter(pa.array(due))
            self.panes.replace(0, pending.filter(pa.array(~due)))
            self.panes.add(1, out.select(list(self.spec.partition)) if self.spec.partition
                           else pa.table({"__unit": pa.array([1] * out.num_rows, pa.int8())}))
            if self.ttl is not None:  # a key's TTL starts when its first row is emitted
                self._expire(self.ttl.before_batch)
                self.duck.execute_all(self.spec.touch, out)
            out = out.sort_by([(self.spec.order[0][0], "ascending"), (SEQ, "ascending")]).drop_columns([SEQ])
            return [self._ranked(out)]
        return []

    def on_tick(self, now_us: int) -> list[pa.Table]:
        if self.ttl is not None:
            self._expire(self.ttl.expire)
        return []

    def _expire(self, step) -> None:
        """Run a TTL step; keep-first deduplication then forgets the expired keys it emitted (Arrow state)."""
        if not step() or self.spec.kind != "first":
            return
        seen = self._table(1, None)
        if seen is None or seen.num_rows == 0:
            return
        names = list(self.spec.partition) or ["__unit"]
        match = " AND ".join(f's."{c}" IS NOT DISTINCT FROM e.__k{i}' for i, c in enumerate(names)) \
            if self.spec.partition else "TRUE"
        kept = self.duck.sql(f"SELECT s.* FROM __seen AS s ANTI JOIN {expired_table(self.spec.id)} AS e ON {match}",
                             __seen=seen)
        self.panes.replace(1, kept)

    # -- helpers ---------------------------------------------------------------------

    def _ranked(self, table: pa.Table) -> pa.Table:
        """Output rows: the rank column named (or dropped) as the query reads it."""
        if RANK not in table.column_names and self.spec.rank:
            table = table.append_column(RANK, pa.array(np.ones(table.num_rows, dtype=np.int64)))
        if RANK in table.column_names:
            table = table.rename_columns([self.spec.rank if c == RANK else c for c in table.column_names]) \
                if self.spec.rank else table.drop_columns([RANK])
        return conform(table, self.out_schema)

    def _diff(self, current: pa.Table) -> list[pa.Table]:
        scope = current.select(list(self.spec.partition)) if self.spec.partition else None
        changes = self.emitted.diff(self._ranked(current), scope)
        return [changes] if changes.num_rows else []

    def _table(self, key: int, schema: pa.Schema | None) -> pa.Table | None:
        tables = self.panes.get(key)
        if not tables:
            return schema.empty_table() if schema is not None else None
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _key_schema(self, rows: pa.Table) -> pa.Schema:
        if self.spec.partition:
            return rows.select(list(self.spec.partition)).schema
        return pa.schema([pa.field("__unit", pa.int8())])
