"""Session windows: sessions per partition that merge, emitted when they close.

Input delta -> output delta::

    batch       : rows -> merged with the open sessions of their partitions
                  (gaps and islands, see session_merge.py);
                  nothing out by default; changes out with EMIT CHANGES, and
                  corrections of already emitted sessions under ALLOWED LATENESS
    watermark W : every session with end < W is closed -> one row per
                  (session, key), then forgotten (kept another `lateness`
                  when corrections are allowed)

The open sessions are kept in *runs* (a PaneState of the state store,
run number -> table, so a snapshot holds them): each batch adds one run,
the sessions it created or changed. A batch takes out of the older runs
only the open sessions of the partitions it has (looked up in a table or
Bloom filter of its keys, ``KeyFilter``), marks them dead there (end =
DEAD) and merges them with its events into its new run; the other
sessions are not copied. A run is
dropped once all its sessions have closed, a few batches after it was
made, and the runs are compacted into one when there are more than
``MAX_RUNS``. A session is *open* while its end is at or above the
watermark (minus the lateness): so closing a session costs nothing, and
dead or closed rows are skipped by every later batch::

    run 1   (u1 [0, 30)) (u2 [3, 33)) (u3 [5, 35))
    batch   u2 at 20, u4 at 21
    run 1   (u1 [0, 30)) (u2 DEAD)    (u3 [5, 35))
    run 2   (u2 [3, 50)) (u4 [21, 51))

With one integer partition column (a user id) or none, the batch and the
sessions it takes are put in (partition, start) order by one numpy sort;
other partition columns take the general path: all open sessions that the
batch can reach are sorted with it in DuckDB. When the plan only picks
the batch's columns, its rows are made with Arrow, not a DuckDB statement.

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

from ...planner.logical.nodes import WINDOW_TIME_OFFSET_US
from ...planner.physical.stream_specs import SessionSpec
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env, Logic
from .emit import EmitTable
from .partial_merge import group_merge
from .session_merge import E, Islands, KeyFilter, S, int_keys, keyed_islands, partition_ids, sorted_islands
from .source import int64_values
from .window_agg import final_column

DEAD = -(2**63)  # the end of a session taken out of its run: below every watermark
MAX_RUNS = 8


class SessionLogic(CountsLate, Logic):
    def __init__(self, spec: SessionSpec, env: Env):
        self.spec = spec
        self.duck, self.con = env.duck, env.duck.con
        self.runs = env.state.panes(spec.id, "sessions")  # run number -> one table of sessions
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.out_schema = pa.schema([f for f in spec.schema if f.name != "__op"])
        self.emitted = EmitTable(spec.emit_sql, env, spec.id, spec.schema) if spec.emit_sql else None
        self.keep_us = spec.emit.lateness_us if self.emitted is not None else 0  # closed sessions stay mergeable
        self.merges = [(c, how) for a in spec.aggs for c, how, _ in a.partials]
        part = spec.partition
        self.int_partition = not part or (len(part) == 1 and pa.types.is_integer(spec.state_schema.field(part[0]).type)
                                          and spec.state_schema.field(part[0]).type != pa.uint64())
        self.batches = {"numpy": 0, "general": 0}  # how many batches each path merged
        self.count_late(env, spec.id)

    @property
    def state_rows(self) -> int:
        """The open sessions (rows of them)."""
        alive = self._open_from(self.fired.value)
        return sum(int(np.count_nonzero(int64_values(t.column(E)) >= alive)) for _, t in self._runs())

    def next_fire_time(self) -> int | None:
        """A session closes once the watermark is past its end: the least end of the open ones."""
        alive = self._open_from(self.fired.value)
        ends = [e[e >= alive] for e in (int64_values(t.column(E)) for _, t in self._runs())]
        ends = [e for e in ends if e.size]
        return int(min(e.min() for e in ends)) + 1 if ends else None

    def _open_from(self, watermark: int) -> int:
        """The least end of a session still open (mergeable) at ``watermark``."""
        return watermark - self.keep_us if watermark < MAX_WATERMARK else MAX_WATERMARK

    def _runs(self) -> list[tuple[int, pa.Table]]:
        return [(k, t) for k in self.runs.keys() for t in self.runs.get(k)]

    # -- batches ------------------------------------------------------------------------

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        rows = self._rows(batch)
        if rows.num_rows == 0:
            return []
        alive = self._open_from(self.fired.value)
        keys = self._int_keys(rows)
        if keys is not None:
            merged, keys = self._take_open(rows, keys, alive)
            found = keyed_islands(keys, int64_values(merged.column(S)), int64_values(merged.column(E)))
            self.batches["numpy"] += 1
        else:
            merged = self._general(rows, alive)
            found = sorted_islands(partition_ids(merged, self.spec.partition),
                                   int64_values(merged.column(S)), int64_values(merged.column(E)))
            self.batches["general"] += 1
        sessions = self._drop_late(self._sessions(merged, found), found)
        self._add_run(sessions, alive)
        if self.emitted is None:
            return []
        visible = self._open_sessions(alive)  # the diff keeps those of the batch's partitions
        if self.spec.emit.mode != "changes":
            visible = visible.filter(pc.less(visible.column(E), self.fired.value))  # only closed sessions
        return self._diff(visible, rows)

    def _drop_late(self, sessions: pa.Table, found: Islands) -> pa.Table:
        """The sessions without those that had closed before their events arrived, which are counted.

        As Flink's ``MergingWindowProcessFunction``: an event is late only when the session it merges into
        (with the open sessions and the other events) had closed at the watermark then, which is the
        operator's watermark (the source cuts its batches before events behind it). Such a session holds
        only events of this batch: an open session ends at or above the watermark, and merging only grows.
        """
        if self.keep_us or self.fired.value == MIN_WATERMARK:
            return sessions
        late = found.ends < self.fired.value
        if not late.any():
            return sessions
        self.late_dropped += int((found.lasts - found.firsts + 1)[late].sum())
        return sessions.filter(pc.greater_equal(sessions.column(E), self.fired.value))

    def _rows(self, batch: pa.Table) -> pa.Table:
        """One state row per event: straight from the batch's columns when the plan allows, else by DuckDB."""
        direct = self.spec.sql.direct
        if direct is None or not all(c is None or c in batch.column_names for _, _, c in direct):
            return conform(self.duck.run(self.spec.sql.rows, batch), self.spec.state_schema)
        columns = []
        for _, how, name in direct:
            if how == "one":
                columns.append(pa.array(np.ones(batch.num_rows, dtype=np.int64)))
                continue
            column = batch.column(name)
            if how == "valid":
                column = pc.is_valid(column).cast(pa.int64())
            elif how in ("start", "end"):
                if not (pa.types.is_timestamp(column.type) and column.type.unit == "us"):
                    return conform(self.duck.run(self.spec.sql.rows, batch), self.spec.state_schema)
                column = pa.chunked_array([c.view(pa.int64()) for c in column.chunks], pa.int64())  # epoch us
                if how == "end":
                    column = pc.add(column, self.spec.window.gap)
            columns.append(column)
        return conform(pa.table(columns, names=[n for n, _, _ in direct]), self.spec.state_schema)

    def _int_keys(self, rows: pa.Table) -> np.ndarray | None:
        """The batch's partition values for the numpy path: one integer column without NULLs, or none."""
        if not self.int_partition:
            return None
        if not self.spec.partition:
            return np.zeros(rows.num_rows, dtype=np.int64)
        name = self.spec.partition[0]
        if any(t.column(name).null_count for _, t in self._runs()):
            return None
        return int_keys(rows.column(name))

    def _take_open(self, rows: pa.Table, keys: np.ndarray, alive: int) -> tuple[pa.Table, np.ndarray]:
        """The batch with the open sessions of its partitions, which leave their runs; and all their keys."""
        name = self.spec.partition[0] if self.spec.partition else None
        members = KeyFilter(keys) if name else None
        pieces, piece_keys = [rows], [keys]
        for k, t in self._runs():
            ends = int64_values(t.column(E))
            hit = ends >= alive
            if name:
                run_keys = int_keys(t.column(name))
                hit &= members.may_hold(run_keys)
            taken = np.flatnonzero(hit)
            if not len(taken):
                continue
            pieces.append(t.take(taken))
            piece_keys.append(run_keys[taken] if name else np.zeros(len(taken), dtype=np.int64))
            dead = ends.copy()
            dead[taken] = DEAD
            self.runs.replace(k, t.set_column(t.schema.get_field_index(E), t.schema.field(E), pa.array(dead)))
        if len(pieces) == 1:
            return rows, keys
        return pa.concat_tables(pieces), np.concatenate(piece_keys)  # columns are combined as they are read

    def _general(self, rows: pa.Table, alive: int) -> pa.Table:
        """The batch and the open sessions it can reach, in (partition, start) order (DuckDB sort).

        The other open sessions stay, as one run.
        """
        sessions = self._take_all(alive)
        kept = []
        # A session that ends before the batch's first event cannot be reached by it.
        reachable = pc.greater_equal(sessions.column(E), pc.min(rows.column(S)))
        if not pc.all(reachable).as_py():
            kept.append(sessions.filter(pc.invert(reachable)))
            sessions = sessions.filter(reachable)
        if sessions.num_rows > 2 * rows.num_rows:  # a small batch: only the partitions it touches
            flagged = self.duck.sql(self.spec.sql.touched, __state=sessions, __rows=rows)
            touched = flagged.column("__t")
            kept.append(conform(flagged.filter(pc.invert(touched)).drop_columns(["__t"]), self.spec.state_schema))
            sessions = conform(flagged.filter(touched).drop_columns(["__t"]), self.spec.state_schema)
        if kept:
            self._add_run(pa.concat_tables(kept), alive)
        return conform(self.duck.sql(self.spec.sql.sort, __u=pa.concat_tables([sessions, rows])), self.spec.state_schema)

    def _open_sessions(self, alive: int) -> pa.Table:
        """Every open session, as one table."""
        tables = [t.take(np.flatnonzero(int64_values(t.column(E)) >= alive)) for _, t in self._runs()]
        return pa.concat_tables(tables) if tables else self.spec.state_schema.empty_table()

    def _take_all(self, alive: int) -> pa.Table:
        """Every open session, as one table; the runs are emptied."""
        sessions = self._open_sessions(alive)
        for k in self.runs.keys():
            self.runs.pop(k)
        return sessions

    def _add_run(self, sessions: pa.Table, alive: int) -> None:
        if not sessions.num_rows:
            return
        keys = self.runs.keys()
        self.runs.replace(keys[-1] + 1 if keys else 0, sessions)
        if len(self.runs) > MAX_RUNS:  # many small batches: one run again, without the dead and closed rows
            self.runs.replace(0, self._take_all(alive).combine_chunks())

    def _sessions(self, t: pa.Table, found: Islands) -> pa.Table:
        """The sessions ``found`` among ``t``'s rows, as state rows in (partition, start) order."""
        spec = self.spec
        starts = found.starts
        partials = [t.column(c) for c, _ in spec.merges]
        if spec.aggs and not spec.group and all(_plain_number(p) for p in partials):
            columns = {}
            if found.keys is not None and spec.partition:
                columns[spec.partition[0]] = pa.array(found.keys)
            else:
                columns.update({c: t.column(c).take(pa.array(found.first_rows)) for c in spec.partition})
            columns[S], columns[E] = pa.array(starts), pa.array(found.ends)
            for (c, how), p in zip(spec.merges, partials):
                columns[c] = pa.array(found.reduce(_numbers(p), how))
            return conform(pa.table(columns), spec.state_schema)
        if found.order is not None:
            t = t.combine_chunks().take(pa.array(found.order))
        ids = found.ids
        if not spec.aggs:  # unaggregated: every row, with its session's bounds
            t = t.set_column(t.schema.get_field_index(S), S, pa.array(starts[ids]))
            return t.set_column(t.schema.get_field_index(E), E, pa.array(found.ends[ids]))
        group = list(spec.group)
        parts = pa.table({"__isl": pa.array(ids), **{c: t.column(c) for c in group},
                          **{c: t.column(c) for c, _ in spec.merges}})
        merged = group_merge(parts, ["__isl", *group], list(spec.merges))
        which = int64_values(merged.column("__isl"))
        columns = {c: t.column(c).take(pa.array(found.firsts[which])) for c in spec.partition}
        columns[S], columns[E] = pa.array(starts[which]), pa.array(found.ends[which])
        columns.update({c: merged.column(c) for c in group})
        columns.update({c: merged.column(f"{c}_{how}") for c, how in spec.merges})
        return conform(pa.table(columns), spec.state_schema)

    # -- watermarks ---------------------------------------------------------------------

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        fired = self.fired.value
        if watermark <= fired:
            return []
        keep_from = self._open_from(watermark)
        newly, visible = [], []
        for k, t in self._runs():
            ends = int64_values(t.column(E))
            closing = (ends >= fired) & (ends < watermark)
            closing = np.flatnonzero(closing)  # a take of indexes is twice as fast as a filter by a mask
            if len(closing):
                newly.append(t.take(closing))
            if self.emitted is not None:  # what is closed and still kept, for the corrections
                visible.append(t.take(np.flatnonzero((ends >= self._open_from(fired)) & (ends < watermark))))
            if ends.max() < keep_from:
                self.runs.pop(k)
        out: list[pa.Table] = []
        if self.emitted is None:
            if newly:
                out.append(self._finalize(pa.concat_tables(newly)))
        else:
            if newly and self.spec.emit.mode != "changes":
                out.extend(self._diff(pa.concat_tables(visible), pa.concat_tables(newly)))
            self.emitted.evict(keep_from)
        self.fired.value = watermark
        return [t for t in out if t.num_rows]

    def output_watermark(self, watermark: int) -> int:
        # A session [s, e) is emitted once the watermark is past e, with window_time e - 1 ms; a window over
        # the results fires when its watermark reaches its last millisecond, so this stays below e - 1 ms
        # until the session is out.
        return watermark if watermark >= MAX_WATERMARK else watermark - WINDOW_TIME_OFFSET_US - 1

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
            columns = _window_columns(table, spec.window.local_shift)
            for f in self.out_schema:
                if f.name not in columns:
                    columns[f.name] = table.column(f.name)
        else:
            keys = [S, E, *spec.partition, *[k for k in spec.group if k in spec.keys]]
            order = [(k, "ascending") for k in keys]
            if any(a.distinct is not None for a in spec.aggs):
                table = group_merge(rows, keys, self.merges).sort_by(order)
            else:  # one state row per (session, key) already: name the partials as merged ones
                table = pa.table({**{k: rows.column(k) for k in keys},
                                  **{f"{c}_{how}": rows.column(c) for c, how in self.merges}})
            columns = _window_columns(table, spec.window.local_shift)
            for k in spec.keys:
                columns[k] = table.column(k)
            for a in spec.aggs:
                columns[a.name] = final_column(a, table, rows, keys, order)
        return conform(pa.table([columns[f.name] for f in self.out_schema], names=self.out_schema.names),
                       self.out_schema)


def _plain_number(column: pa.ChunkedArray) -> bool:
    return column.null_count == 0 and (pa.types.is_integer(column.type) or pa.types.is_floating(column.type))


def _numbers(column: pa.ChunkedArray) -> np.ndarray:
    if column.type == pa.int64():
        return int64_values(column)
    if column.type == pa.float64():  # the buffer as it is (to_numpy costs milliseconds)
        return int64_values(column).view(np.float64)
    return column.combine_chunks().to_numpy()


def _window_columns(table: pa.Table, local_shift: int = 0) -> dict:
    """window_start and window_end (shown ``local_shift`` later: local time, over a TIMESTAMP_LTZ
    attribute), and window_time, the instant end - 1 ms."""
    s, e = table.column(S), table.column(E)
    shown_s, shown_e = (pc.add(s, local_shift), pc.add(e, local_shift)) if local_shift else (s, e)
    return {"window_start": _timestamps(shown_s), "window_end": _timestamps(shown_e),
            "window_time": _timestamps(pc.subtract(e, WINDOW_TIME_OFFSET_US))}


def _timestamps(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Epoch microseconds as timestamps, without a copy."""
    return pa.chunked_array([c.view(pa.timestamp("us")) for c in column.chunks], pa.timestamp("us"))
