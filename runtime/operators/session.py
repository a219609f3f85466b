"""Session windows: sessions per partition that merge, emitted when they close.

Input delta -> output delta::

    batch       : rows -> merged into the open sessions of their partitions
                  (gaps and islands in DuckDB, see planner/sqlgen_session.py);
                  nothing out by default; changes out with EMIT CHANGES, and
                  corrections of already emitted sessions under ALLOWED LATENESS
    watermark W : every session with end < W is closed -> one row per
                  (session, key); dropped from the state (kept another
                  `lateness` when corrections are allowed)

A session ``[s, e)`` closes only when the watermark is past ``e``: an
event at exactly ``e`` (not late while the watermark is ``e``) would still
extend it, since touching sessions merge. Output rows carry ``window_time
= e - 1 ms``, so the operator forwards its input watermark minus 1 ms: a
window over the sessions never sees a row behind its watermark.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ...planner.logical import WINDOW_TIME_OFFSET_US
from ...planner.physical import BATCH
from ...planner.physical_stream import SessionOp
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, Env, Logic
from .emit import EmitTable
from .window_agg import _final

S, E = "__s", "__e"


class SessionLogic(Logic):
    def __init__(self, spec: SessionOp, env: Env):
        self.spec = spec
        self.con = env.duck.con
        self.state = env.state.panes(spec.id, "sessions")
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.lateness = spec.emit.lateness_us
        self.out_schema = pa.schema([f for f in spec.schema if f.name != "__op"])
        self.emitted = EmitTable(spec.emit_sql, env, spec.id, spec.schema) if spec.emit_sql else None
        self.merges = [(c, how) for a in spec.aggs for c, how in a.partials if how != "distinct"]
        self.merges += [(a.partials[0][0], "count_distinct") for a in spec.aggs if a.func == "count_distinct"]

    @property
    def state_rows(self) -> int:
        return self.state.rows

    def _sessions(self) -> pa.Table:
        tables = self.state.get(0)
        return tables[0] if tables else self.spec.state_schema.empty_table()

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        self.con.register(BATCH, batch)
        self.con.register("__state", self._sessions())
        try:
            merged = self.con.sql(self.spec.merge_sql).to_arrow_table()
        finally:
            self.con.unregister(BATCH)
            self.con.unregister("__state")
        touched = merged.column("__t")
        sessions = conform(merged.drop_columns(["__t"]), self.spec.state_schema)
        self.state.replace(0, sessions)
        if self.emitted is None:
            return []
        rows = sessions.filter(touched)
        if self.spec.emit.mode != "changes":
            rows = rows.filter(pc.less(rows.column(E), self.fired.value))  # only closed sessions are visible
        return self._diff(rows, sessions.filter(touched))

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        fired = self.fired.value
        if watermark <= fired:
            return []
        sessions = self._sessions()
        ends = sessions.column(E)
        out: list[pa.Table] = []
        if self.emitted is None:
            closed = pc.less(ends, watermark)
            done = sessions.filter(closed)
            if done.num_rows:
                out.append(self._finalize(done))
            self.state.replace(0, sessions.filter(pc.invert(closed)))
        else:
            if self.spec.emit.mode != "changes":
                newly = sessions.filter(pc.and_(pc.greater_equal(ends, fired), pc.less(ends, watermark)))
                if newly.num_rows:
                    visible = sessions.filter(pc.less(ends, watermark))
                    out.extend(self._diff(visible, newly))
            bound = watermark - self.lateness if watermark < MAX_WATERMARK else MAX_WATERMARK
            self.state.replace(0, sessions.filter(pc.greater_equal(ends, bound)))
            self.emitted.evict(bound)
        self.fired.value = watermark
        return [t for t in out if t.num_rows]

    def output_watermark(self, watermark: int) -> int:
        return watermark if watermark >= MAX_WATERMARK else watermark - WINDOW_TIME_OFFSET_US

    def _diff(self, rows: pa.Table, scope_rows: pa.Table) -> list[pa.Table]:
        """Emit what changed for the partitions of ``scope_rows``, whose visible sessions are ``rows``."""
        partition = list(self.spec.partition)
        scope = scope_rows.select(partition).group_by(partition, use_threads=False).aggregate([]) \
            if partition else None
        changes = self.emitted.diff(self._finalize(rows), scope)
        return [changes] if changes.num_rows else []

    def _finalize(self, rows: pa.Table) -> pa.Table:
        """Output rows (window bounds, keys, aggregates) of state rows, in window-end order."""
        spec = self.spec
        if not spec.aggs:
            table = rows.sort_by([(E, "ascending"), (S, "ascending")])
            columns = _window_columns(table)
            for f in self.out_schema:
                if f.name not in columns:
                    columns[f.name] = table.column(f.name)
        else:
            keys = [S, E, *spec.partition, *[k for k in spec.group if k in spec.keys]]
            table = rows.group_by(keys, use_threads=False).aggregate(self.merges)
            table = table.sort_by([(E, "ascending"), (S, "ascending")] + [(k, "ascending") for k in spec.keys])
            columns = _window_columns(table)
            for k in spec.keys:
                columns[k] = table.column(k)
            for a in spec.aggs:
                columns[a.name] = _final(a, table)
        return conform(pa.table([columns[f.name] for f in self.out_schema], names=self.out_schema.names),
                       self.out_schema)


def _window_columns(table: pa.Table) -> dict:
    s, e = table.column(S), table.column(E)
    return {"window_start": s.cast(pa.timestamp("us")), "window_end": e.cast(pa.timestamp("us")),
            "window_time": pc.subtract(e, WINDOW_TIME_OFFSET_US).cast(pa.timestamp("us"))}
