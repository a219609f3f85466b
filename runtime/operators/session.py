"""Session windows: sessions per partition that merge, emitted when they close.

Input delta -> output delta::

    batch       : rows -> merged into the open sessions of their partitions
                  (rows in (partition, start) order, then gaps and islands with
                  numpy; see planner/sqlgen_session.py);
                  nothing out by default; changes out with EMIT CHANGES, and
                  corrections of already emitted sessions under ALLOWED LATENESS
    watermark W : every session with end < W is closed -> one row per
                  (session, key); dropped from the state (kept another
                  `lateness` when corrections are allowed)

The order comes from a DuckDB sort of the batch and the open sessions it
can reach; with one integer partition column (a user id) the open
sessions are kept in order and the sorted batch is merged into them.

A session ``[s, e)`` closes only when the watermark is past ``e``: an
event at exactly ``e`` (not late while the watermark is ``e``) would still
extend it, since touching sessions merge. Output rows carry ``window_time
= e - 1 ms``, so the operator forwards its input watermark minus 1 ms: a
window over the sessions never sees a row behind its watermark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.logical import WINDOW_TIME_OFFSET_US
from ...planner.physical_stream import SessionOp
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, Env, Logic
from .emit import EmitTable
from .source import int64_values
from .window_agg import _final

S, E = "__s", "__e"


class SessionLogic(Logic):
    def __init__(self, spec: SessionOp, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        self.state = env.state.panes(spec.id, "sessions")
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.ordered = env.state.value(spec.id, "in_order", False)  # sessions in (partition, start) order
        self.lateness = spec.emit.lateness_us
        self.out_schema = pa.schema([f for f in spec.schema if f.name != "__op"])
        self.emitted = EmitTable(spec.emit_sql, env, spec.id, spec.schema) if spec.emit_sql else None
        self.merges = [(c, how) for a in spec.aggs for c, how in a.partials if how != "distinct"]
        self.merges += [(a.partials[0][0], "count_distinct") for a in spec.aggs if a.func == "count_distinct"]

    @property
    def state_rows(self) -> int:
        return self.state.rows

    def next_fire_time(self) -> int | None:
        """A session closes once the watermark is past its end."""
        sessions = self._sessions()
        if not sessions.num_rows:
            return None
        end = pc.min(sessions.column(E))
        return int(end.as_py()) + 1 if end.is_valid else None

    def _sessions(self) -> pa.Table:
        tables = self.state.get(0)
        return tables[0] if tables else self.spec.state_schema.empty_table()

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        rows = conform(self.duck.run(self.spec.sql.rows, batch), self.spec.state_schema)
        if rows.num_rows == 0:
            return []
        sessions = self._sessions()
        small = sessions.num_rows > 8 * rows.num_rows
        ordered = None if small else self._merge_sorted(sessions, rows)
        if ordered is not None:  # the open sessions stay in (partition, start) order: merge the batch in
            sessions = conform(self._islands(ordered), self.spec.state_schema)
            self.ordered.value = True
        else:
            sessions = self._merge_touched(sessions, rows)
            self.ordered.value = False
        self.state.replace(0, sessions)
        if self.emitted is None:
            return []
        visible = sessions  # the diff keeps the batch's partitions
        if self.spec.emit.mode != "changes":
            visible = sessions.filter(pc.less(sessions.column(E), self.fired.value))  # only closed sessions
        return self._diff(visible, rows)

    def _merge_touched(self, sessions: pa.Table, rows: pa.Table) -> pa.Table:
        """The sessions after a batch, re-sorting only what the batch can reach (DuckDB sort)."""
        kept = []
        # A session that ends before the batch's first event cannot be reached by it.
        reachable = pc.greater_equal(sessions.column(E), pc.min(rows.column(S)))
        if not pc.all(reachable).as_py():
            kept.append(sessions.filter(pc.invert(reachable)))
            sessions = sessions.filter(reachable)
        if sessions.num_rows > 2 * rows.num_rows:  # a small batch: only the partitions it touches
            flagged = self._sql(self.spec.sql.touched, __state=sessions, __rows=rows)
            touched = flagged.column("__t")
            kept.append(conform(flagged.filter(pc.invert(touched)).drop_columns(["__t"]), self.spec.state_schema))
            sessions = conform(flagged.filter(touched).drop_columns(["__t"]), self.spec.state_schema)
        ordered = self._sql(self.spec.sql.sort, __u=pa.concat_tables([sessions, rows]))
        merged = conform(self._islands(ordered), self.spec.state_schema)
        return pa.concat_tables([*kept, merged]) if kept else merged

    def _merge_sorted(self, sessions: pa.Table, rows: pa.Table) -> pa.Table | None:
        """Sessions (kept in order) and the batch in (partition, start) order, by a merge instead of a sort.

        Only for no partition or one integer partition column without NULLs,
        whose order with the start fits one int64 key; None otherwise.
        """
        partition = self.spec.partition
        if len(partition) > 1 or (partition and not pa.types.is_integer(rows.schema.field(partition[0]).type)):
            return None
        columns = [t.column(partition[0]) for t in (sessions, rows)] if partition else []
        if any(c.null_count for c in columns):
            return None
        starts = [int64_values(t.column(S)) for t in (sessions, rows)]
        keys = [c.to_numpy().astype(np.int64) for c in columns] or [np.zeros(len(x), np.int64) for x in starts]
        every_start, every_key = np.concatenate(starts), np.concatenate(keys)
        base, span = int(every_start.min()), int(every_start.max() - every_start.min()) + 1
        low = int(every_key.min())
        if (int(every_key.max()) - low + 1) * span >= 2**62:
            return None
        old_key, new_key = ((k - low) * span + (s - base) for k, s in zip(keys, starts))
        if not self.ordered.value and sessions.num_rows:
            order = np.argsort(old_key)  # equal keys need no order (see sort in sqlgen_session)
            sessions, old_key = sessions.take(pa.array(order)), old_key[order]
        order = np.argsort(new_key)
        rows, new_key = rows.take(pa.array(order)), new_key[order]
        # Where each new row goes among the old ones; the old ones fill the other places, in order.
        at = np.searchsorted(old_key, new_key, side="right") + np.arange(len(new_key))
        index = np.empty(len(old_key) + len(new_key), dtype=np.int64)
        is_new = np.zeros(len(index), dtype=bool)
        is_new[at] = True
        index[at] = len(old_key) + np.arange(len(new_key))
        index[~is_new] = np.arange(len(old_key))
        return pa.concat_tables([sessions, rows]).take(pa.array(index))

    def _islands(self, t: pa.Table) -> pa.Table:
        """Merge the intervals of rows sorted by (partition, start) into sessions (see sqlgen_session)."""
        n = t.num_rows
        s, e = int64_values(t.column(S)), int64_values(t.column(E))
        new_group = np.zeros(n, dtype=bool)
        new_group[0] = True
        for name in self.spec.partition:
            col = t.column(name).combine_chunks()
            if pa.types.is_integer(col.type) and col.null_count == 0:
                values = col.to_numpy()
                new_group[1:] |= values[1:] != values[:-1]
                continue
            a, b = col.slice(1), col.slice(0, n - 1)
            differs = pc.or_(pc.fill_null(pc.not_equal(a, b), False), pc.xor(pc.is_null(a), pc.is_null(b)))
            new_group[1:] |= differs.to_numpy(zero_copy_only=False)
        rank = np.cumsum(new_group, dtype=np.int64)
        base, span = int(s.min()), int(e.max() - s.min()) + 1
        if span * (int(rank[-1]) + 1) >= 2**62:  # times far apart: their order is all that matters
            values, inverse = np.unique(np.concatenate([s, e]), return_inverse=True)
            s, e, base, span = inverse[:n], inverse[n:], 0, len(values)
        # A running maximum of the ends, restarted per partition by lifting each partition above the last.
        lift = rank * span - base
        reach = np.maximum.accumulate(e + lift)
        start = np.empty(n, dtype=bool)
        start[0] = True
        np.greater(s[1:] + lift[1:], reach[:-1], out=start[1:])
        island = np.cumsum(start) - 1
        firsts = np.flatnonzero(start)
        starts = int64_values(t.column(S))[firsts]
        ends = np.maximum.reduceat(int64_values(t.column(E)), firsts)
        if not self.spec.aggs:  # unaggregated: every row, with its session's bounds
            return t.set_column(t.schema.get_field_index(S), S, pa.array(starts[island])) \
                    .set_column(t.schema.get_field_index(E), E, pa.array(ends[island]))
        group = list(self.spec.group)
        columns = {c: t.column(c).take(pa.array(firsts)) for c in self.spec.partition}
        columns[S], columns[E] = pa.array(starts), pa.array(ends)
        partials = [t.column(c).combine_chunks() for c, _ in self.spec.merges]
        if not group and all(p.null_count == 0 and (pa.types.is_integer(p.type) or pa.types.is_floating(p.type))
                             for p in partials):
            # Rows are in island order: each island's partials merge with one reduceat per column.
            ufunc = {"sum": np.add, "min": np.minimum, "max": np.maximum}
            for (c, how), p in zip(self.spec.merges, partials):
                columns[c] = pa.array(ufunc[how].reduceat(p.to_numpy(), firsts), p.type)
            return pa.table(columns)
        parts = pa.table({"__isl": pa.array(island), **{c: t.column(c) for c in group},
                          **{c: t.column(c) for c, _ in self.spec.merges}})
        merged = parts.group_by(["__isl", *group], use_threads=False).aggregate(list(self.spec.merges))
        which = int64_values(merged.column("__isl"))
        columns = {c: t.column(c).take(pa.array(firsts[which])) for c in self.spec.partition}
        columns[S], columns[E] = pa.array(starts[which]), pa.array(ends[which])
        columns.update({c: merged.column(c) for c in group})
        columns.update({c: merged.column(f"{c}_{how}") for c, how in self.spec.merges})
        return pa.table(columns)

    def _sql(self, sql: str, **tables: pa.Table) -> pa.Table:
        for name, table in tables.items():
            self.con.register(name, table)
        try:
            return self.con.sql(sql).to_arrow_table()
        finally:
            for name in tables:
                self.con.unregister(name)

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
        """Output rows (window bounds, keys, aggregates) of state rows (unaggregated rows in window-end order)."""
        spec = self.spec
        if not spec.aggs:
            table = rows.take(pc.sort_indices(rows, [(E, "ascending"), (S, "ascending")]))
            columns = _window_columns(table)
            for f in self.out_schema:
                if f.name not in columns:
                    columns[f.name] = table.column(f.name)
        else:
            keys = [S, E, *spec.partition, *[k for k in spec.group if k in spec.keys]]
            if any(a.func == "count_distinct" for a in spec.aggs):
                table = rows.group_by(keys, use_threads=False).aggregate(self.merges)
            else:  # one state row per (session, key) already: name the partials as merged ones
                table = pa.table({**{k: rows.column(k) for k in keys},
                                  **{f"{c}_{how}": rows.column(c) for c, how in self.merges}})
            columns = _window_columns(table)  # in state order: by partition, then time
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
