"""Window aggregation: TUMBLE, HOP and CUMULATE, assembled from panes.

Input delta -> output delta::

    batch   : rows (ts, keys, values)           -> nothing (state grows)
    watermark W : every window [s, e) with e - 1 ms <= W not yet emitted
                  -> one row per (window, key), then its panes are freed

Each batch is aggregated once by the planner's partial SQL into rows per
(pane, key): a pane is the largest slice every window is made of (the
window itself for TUMBLE, gcd(slide, size) for HOP, the step for
CUMULATE). A window is assembled when the watermark passes its end by
merging the partials of its panes, so an event is aggregated once however
many windows it belongs to::

    HOP(size=3, slide=1)     panes:  |p0|p1|p2|p3|p4|
    window [0,3) = p0+p1+p2          |==========|
    window [1,4) = p1+p2+p3             |==========|

Empty windows are not emitted (as in Flink).

Late events, as Flink's ``SlicingWindowAggProcessor`` judges them: an
event counts in every window of its pane that had not fired when it
arrived (the watermark then is below the window's end). So an event
behind the watermark still counts in open windows, and a HOP event may be
late for its earlier windows and on time for its later ones (those are
assembled from its pane after it arrived). As in Flink, a window has
fired once the watermark reaches its last millisecond (window_time, its
end - 1 ms). An event whose every window had fired is dropped and counted
in ``late_dropped``::

    TUMBLE 1 min, bound 5 s, events at :10 :30 :20 -> watermark :25 when :20 arrives
    window [0, 60) is open: it counts 3 events
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.acero  # noqa: F401  (group_by needs it; importing it mid-run costs 0.2 s)
import pyarrow.compute as pc

from ...planner.logical.nodes import WINDOW_TIME_OFFSET_US
from ...planner.physical.specs import OP, PANE, ROWS_COLUMN, PartialAgg, WindowAggSpec
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env, Logic
from .partial_merge import fold_distinct, group_merge, numbered, ordered_merges

# A pane that collected this many partial tables is merged into one.
COMPACT_AT = 8
_WS, _WE = "__ws", "__we"
_PANE_PLACE = 1 << 44  # arrival numbers stay below it; a pane's place in its window is counted above them


class WindowAggLogic(CountsLate, Logic):
    def __init__(self, spec: WindowAggSpec, env: Env):
        self.spec = spec
        self.duck = env.duck
        self.window = spec.window
        self.panes = env.state.panes(spec.id, "panes")
        self.fired = env.state.value(spec.id, "fired_until", MIN_WATERMARK)
        self.group = [*spec.keys, *spec.distinct_columns]
        self.merges = [(column, how) for a in spec.aggs for column, how, _ in a.partials]
        self.ordered = ordered_merges(spec.aggs)
        # The order columns of the aggregates that list values (ARRAY_AGG, LISTAGG): a window takes its panes
        # in time order (newest first for HOP, as Flink), each pane's values in arrival order.
        lists = {c for c, how in self.merges if how in ("array_by", "listagg_by")}
        self.pane_ordered = [order for value, (order, _) in self.ordered.items() if value in lists]
        self.seq = env.state.value(spec.id, "seq", 0) if spec.numbered else None
        self.merges.append((ROWS_COLUMN, "sum"))
        # A Python aggregate's pane holds one accumulator per key, however many rows it saw (runtime/udaf.py).
        self.python = any(a.kind.python for a in spec.aggs)
        self.lateness = 0  # how long a window takes corrections after it fires (WindowEmitLogic)
        self.count_late(env, spec.id)
        self.out_schema = pa.schema([f for f in spec.schema if f.name != OP])  # the rows, without a changelog column

    @property
    def state_rows(self) -> int:
        return self.panes.rows

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        self._add(batch)
        return []

    def next_fire_time(self) -> int | None:
        fired = self._reach(self.fired.value)
        for pane in self.panes.keys():  # the earliest pane has the earliest window end
            ends = [end for _, end in self.window.windows_of_pane(pane) if end > fired]
            if ends:
                return min(ends) - WINDOW_TIME_OFFSET_US
        return None

    def _add(self, batch: pa.Table) -> list[int]:
        """Aggregate a batch into its panes; the panes it touched."""
        if self.seq is not None:
            batch = numbered(batch, self.seq)
        partial = self.duck.run(self.spec.partial_sql, batch)
        if partial.num_rows == 0:
            return []
        partial = self._drop_late(partial)
        if partial.num_rows == 0:
            return []
        self.panes.add_split(partial.column(PANE), partial.drop_columns([PANE]))
        touched = pc.unique(partial.column(PANE)).to_pylist()
        for key in touched:
            if self.python:  # a pane keeps one accumulator per key: the batch's rows are accumulated now
                self.panes.replace(key, self._merge_partials(self.panes.get(key)))
            elif self.panes.pieces(key) >= COMPACT_AT:
                self.panes.compact(key, self._merge_partials)
        return touched

    def _drop_late(self, partial: pa.Table) -> pa.Table:
        """The partial rows of panes that some open window still needs; the others' events are counted."""
        fired = self.fired.value
        if fired == MIN_WATERMARK:
            return partial
        w = self.window
        panes = partial.column(PANE).to_numpy()
        late = pa.array(w.last_end(panes) + self.lateness <= self._reach(fired))  # every window of the pane fired
        if not pc.any(late).as_py():
            return partial
        self.late_dropped += int(pc.sum(partial.column(ROWS_COLUMN).filter(late)).as_py())
        return partial.filter(pc.invert(late))

    def _merge_partials(self, tables: list[pa.Table]) -> pa.Table:
        table = pa.concat_tables(tables)
        merged = group_merge(table, self.group, self.merges, self.ordered)
        return merged.rename_columns(self.group + [c for c, _ in self.merges]).select(table.column_names)

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        fired = self.fired.value
        if watermark <= fired:
            return []
        # A window fires when the watermark reaches its last millisecond, window_time (Flink's isWindowFired).
        reach, done = self._reach(watermark), self._reach(fired)
        ready: set[tuple[int, int]] = set()
        for pane in self.panes.keys():
            if pane >= reach:
                break  # every window of this pane (and of later ones) ends after the watermark
            for start, end in self.window.windows_of_pane(pane):
                if done < end <= reach:
                    ready.add((start, end))
        out = [self._emit(sorted(ready, key=lambda w: (w[1], w[0])))] if ready else []
        for pane in self.panes.keys():
            if pane >= reach:
                break
            if self.window.pane_expiry(pane) <= reach:
                self.panes.pop(pane)
        self.fired.value = watermark
        return out

    def _placed(self, partial: pa.Table, place: int) -> pa.Table:
        """A pane's partials with the order of its listing aggregates moved to the pane's ``place`` in a window."""
        for column in self.pane_ordered:
            i = partial.schema.get_field_index(column)
            partial = partial.set_column(i, column, pc.add(partial.column(column), place * _PANE_PLACE))
        return partial

    def _reach(self, watermark: int) -> int:
        """The largest window end that has fired at ``watermark`` (processing-time windows: at their end)."""
        if self.spec.processing_time or not MIN_WATERMARK < watermark < MAX_WATERMARK:
            return watermark
        return watermark + WINDOW_TIME_OFFSET_US

    def _emit(self, windows: list[tuple[int, int]]) -> pa.Table:
        pane = self.window.pane
        pieces = []
        for start, end in windows:
            for p in range(start, end, pane):
                place = (end - pane - p if self.window.type.newest_pane_first else p - start) // pane
                for t in self.panes.get(p):
                    n = t.num_rows
                    t = self._placed(t, place)
                    pieces.append(t.append_column(_WS, pa.repeat(pa.scalar(start, pa.int64()), n))
                                   .append_column(_WE, pa.repeat(pa.scalar(end, pa.int64()), n)))
        if not pieces:
            return self.out_schema.empty_table()
        table = pa.concat_tables(pieces)
        keys = [_WS, _WE, *self.spec.keys]
        order = [(_WE, "ascending"), (_WS, "ascending")] + [(k, "ascending") for k in self.spec.keys]
        merged = group_merge(table, keys, self.merges, self.ordered).sort_by(order)
        columns: dict[str, pa.Array] = {}
        ws, we = merged.column(_WS), merged.column(_WE)
        shift = self.spec.window.local_shift  # windows over TIMESTAMP_LTZ: bounds shown in local time
        columns["window_start"] = (pc.add(ws, shift) if shift else ws).cast(pa.timestamp("us"))
        columns["window_end"] = (pc.add(we, shift) if shift else we).cast(pa.timestamp("us"))
        columns["window_time"] = pc.subtract(we, WINDOW_TIME_OFFSET_US).cast(self.out_schema.field("window_time").type)
        for k in self.spec.keys:
            columns[k] = merged.column(k)
        for a in self.spec.aggs:
            columns[a.name] = final_column(a, merged, table, keys, order)
        schema = self.out_schema
        return conform(pa.table([columns[f.name] for f in schema], names=schema.names), schema)


def final_column(agg: PartialAgg, merged: pa.Table, partials: pa.Table, keys: list[str], order) -> pa.ChunkedArray:
    """An aggregate's value per group of ``merged`` (``partials`` grouped by ``keys`` and sorted by ``order``)."""
    if agg.distinct is not None:  # folded over the distinct values of its argument, in the same group order
        folds = [(p.suffix, p.first, p.type) for p in agg.kind.partials(agg.arg_type) if not p.retract_only]
        folded = fold_distinct(partials, keys, agg.distinct, folds).sort_by(order)
        return agg.kind.final_arrow({s: folded.column(s) for s, _, _ in folds}, agg.type)
    return agg.kind.final_arrow({suffix: merged.column(f"{column}_{how}") for column, how, suffix in agg.partials},
                                agg.type)
