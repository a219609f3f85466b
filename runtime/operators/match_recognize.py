"""MATCH_RECOGNIZE: one row per match of a row pattern in each partition's rows, in time order.

Input delta -> output delta::

    batch       : rows -> pending (nothing out); rows behind the watermark are late: dropped and counted
    watermark W : the pending rows with time < W, in time order per partition (arrival order among
                  equal times), walk the pattern; each completed match -> one row (partition, measures)

A row is matched only once the watermark has passed it, so rows are
matched in event-time order whatever order they arrived in (as Flink
sorts rows before its CEP operator). Per release: one DuckDB statement
evaluates every DEFINE condition (PREV as LAG over the partition) into a
bit mask per row, a Python walk follows the masks (match_nfa.py), and one
statement computes the measures of all matches at once.

State: the pending rows; the partial matches (runs) and the rows they
took; the last rows a PREV can reach. With WITHIN a run is dropped once
the watermark is WITHIN past its first row, so state stays bounded.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.lower.sqlgen_match import MATCH, NEW, PID, REV, SEQ, VAR, cond_column
from ...planner.physical.match_specs import MatchRecognizeSpec
from ..duck import conform
from .base import MAX_WATERMARK, MIN_WATERMARK, CountsLate, Env, Logic
from .match_nfa import Matcher, flatten, unflatten
from .source import int64_values

_PENDING, _KEPT, _RUNS = 0, 1, 2
_NAN = float("nan")


def _canon(value):
    """A partition value as a dict key: every NaN is one object (NaN != NaN, but a tuple compares identity first)."""
    return _NAN if isinstance(value, float) and value != value else value
_RUN_COLUMNS = ("__start", "__start_t", "__elem", "__count")


class MatchRecognizeLogic(CountsLate, Logic):
    def __init__(self, spec: MatchRecognizeSpec, env: Env):
        self.spec = spec
        self.duck = env.duck
        self.state = env.state.panes(spec.id, "rows")
        self.runs_state = env.state.panes(spec.id, "runs")  # a table of its own: its columns differ
        self.seq = env.state.value(spec.id, "seq", 0)
        self.fired = env.state.value(spec.id, "released_until", MIN_WATERMARK)
        self.count_late(env, spec.id)
        self.matcher = Matcher(spec.terms, spec.skip, spec.skip_var, spec.within_us, spec.variables)
        self._runs_cache: tuple[object, dict] | None = None  # (the state table they were read from, runs)

    @property
    def state_rows(self) -> int:
        return self.state.rows + self.runs_state.rows

    def on_batch(self, port: int, batch: pa.Table) -> list[pa.Table]:
        if self.spec.input_sql is not None:
            batch = self.duck.run(self.spec.input_sql, batch)
        rows = batch.select(list(self.spec.columns))
        n = rows.num_rows
        rows = rows.append_column(SEQ, pa.array(np.arange(self.seq.value, self.seq.value + n, dtype=np.int64)))
        self.seq.value += n
        late = pc.less(rows.column(self.spec.order).cast(pa.int64()), self.fired.value)
        if pc.any(late).as_py():
            self.late_dropped += int(pc.sum(late).as_py())
            rows = rows.filter(pc.invert(late))
        self.state.add(_PENDING, rows)
        return []

    def on_watermark(self, watermark: int) -> list[pa.Table]:
        if watermark <= self.fired.value:
            return []
        self.fired.value = watermark
        pending = self._take(_PENDING)
        if pending is None or pending.num_rows == 0:
            self._expire(watermark)
            return []
        ready_mask = int64_values(pending.column(self.spec.order)) < watermark
        if not ready_mask.any():
            self._expire(watermark)
            return []
        ready = pending.filter(pa.array(ready_mask))
        self.state.replace(_PENDING, pending.filter(pa.array(~ready_mask)))
        out = self._release(ready, watermark)
        return [conform(out, self.spec.schema)] if out is not None and out.num_rows else []

    def _take(self, key: int, state=None) -> pa.Table | None:
        tables = (state if state is not None else self.state).get(key)
        if not tables:
            return None
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def _release(self, ready: pa.Table, watermark: int) -> pa.Table | None:
        spec = self.spec
        kept = self._take(_KEPT)
        rows = pa.concat_tables([kept.append_column(NEW, pa.array(np.zeros(kept.num_rows, dtype=bool))),
                                 ready.append_column(NEW, pa.array(np.ones(ready.num_rows, dtype=bool)))]) \
            if kept is not None and kept.num_rows else \
            ready.append_column(NEW, pa.array(np.ones(ready.num_rows, dtype=bool)))
        ordered = self.duck.sql(spec.conditions_sql, __rows=rows)
        seqs = int64_values(ordered.column(SEQ))
        times = int64_values(ordered.column(spec.order))
        pids = int64_values(ordered.column(PID).cast(pa.int64()))
        new = ordered.column(NEW).to_numpy(zero_copy_only=False)
        masks = np.zeros(len(seqs), dtype=np.int64)
        for i in range(len(spec.variables)):
            masks |= ordered.column(cond_column(i)).to_numpy(zero_copy_only=False).astype(np.int64) << i
        keys = self._partition_keys(ordered, pids)
        runs = self._load_runs()
        matched: list[tuple] = []
        # Per partition, the kept rows are older than the released ones: the new rows are a suffix.
        starts = np.flatnonzero(np.concatenate(([True], np.diff(pids) != 0)))
        ends = np.append(starts[1:], len(pids))
        first_new = starts + np.add.reduceat(~new, starts) if len(starts) else starts
        seq_l, time_l, mask_l = seqs.tolist(), times.tolist(), masks.tolist()
        walk = self.matcher.walk
        for lo, hi, pid in zip(first_new.tolist(), ends.tolist(), pids[starts].tolist()):
            if lo == hi:
                continue
            key = keys[pid]
            left, found = walk(runs.get(key, []), seq_l[lo:hi], time_l[lo:hi], mask_l[lo:hi])
            matched.extend(found)
            runs[key] = left
        self._prune(runs, watermark)
        self._save(runs, rows, ordered, seqs)
        if not matched:
            return None
        return self._measures(matched, rows)

    def _partition_keys(self, ordered: pa.Table, pids: np.ndarray) -> dict[int, tuple]:
        if not self.spec.partition:
            return {0: ()}
        firsts = np.flatnonzero(np.concatenate(([True], np.diff(pids) != 0)))
        picked = ordered.select(list(self.spec.partition)).take(pa.array(firsts))
        columns = [picked.column(c).to_pylist() for c in self.spec.partition]
        return {int(pids[f]): tuple(_canon(col[i]) for col in columns) for i, f in enumerate(firsts)}

    def _prune(self, runs: dict, watermark: int) -> None:
        """Drop runs that can no longer grow: WITHIN has passed since their first row."""
        within = self.spec.within_us
        for key in list(runs):
            if within and watermark < MAX_WATERMARK:
                runs[key] = [r for r in runs[key] if r[1] + within > watermark]
            elif watermark >= MAX_WATERMARK:
                runs[key] = []  # the input has ended: no run can complete
            if not runs[key]:
                del runs[key]

    def _expire(self, watermark: int) -> None:
        if not self.spec.within_us and watermark < MAX_WATERMARK:
            return
        runs = self._load_runs()
        before = sum(len(r) for r in runs.values())
        self._prune(runs, watermark)
        if sum(len(r) for r in runs.values()) != before:
            kept = self._take(_KEPT)
            if kept is not None:
                self._save(runs, kept, None, None)

    def _save(self, runs: dict, rows: pa.Table, ordered: pa.Table | None, seqs: np.ndarray | None) -> None:
        """Keep the rows live runs took and those a later PREV reaches; store the runs."""
        taken = [s for rs in runs.values() for r in rs for s in flatten(r[4])[0]]
        keep = np.isin(int64_values(rows.column(SEQ)), np.asarray(taken, dtype=np.int64))
        if ordered is not None and self.spec.max_prev:
            reach = seqs[int64_values(ordered.column(REV)) <= self.spec.max_prev]
            keep |= np.isin(int64_values(rows.column(SEQ)), reach)
        kept = rows.filter(pa.array(keep))
        if NEW in kept.column_names:
            kept = kept.drop_columns([NEW])
        self.state.replace(_KEPT, kept)
        table = self._runs_table(runs, kept.schema)
        self.runs_state.replace(_RUNS, table)
        self._runs_cache = (table, runs)

    def _runs_table(self, runs: dict, row_schema: pa.Schema) -> pa.Table:
        part = list(self.spec.partition)
        data: dict[str, list] = {c: [] for c in part + list(_RUN_COLUMNS) + ["__seqs", "__times", "__vars"]}
        for key, rs in runs.items():
            for start, start_t, elem, count, path in rs:
                for c, v in zip(part, key):
                    data[c].append(v)
                for c, v in zip(_RUN_COLUMNS, (start, start_t, elem, count)):
                    data[c].append(v)
                s, t, v = flatten(path)
                data["__seqs"].append(s)
                data["__times"].append(t)
                data["__vars"].append(v)
        fields = [row_schema.field(c) for c in part] + [pa.field(c, pa.int64()) for c in _RUN_COLUMNS] + \
            [pa.field(c, pa.list_(pa.int64())) for c in ("__seqs", "__times", "__vars")]
        return pa.table([pa.array(data[f.name], type=f.type) for f in fields], schema=pa.schema(fields))

    def _load_runs(self) -> dict:
        table = self._take(_RUNS, self.runs_state)
        if table is None:
            return {}
        if self._runs_cache is not None and self._runs_cache[0] is table:
            return self._runs_cache[1]
        part = list(self.spec.partition)
        cols = {c: table.column(c).to_pylist() for c in table.column_names}
        runs: dict = {}
        for i in range(table.num_rows):
            key = tuple(_canon(cols[c][i]) for c in part)
            runs.setdefault(key, []).append((cols["__start"][i], cols["__start_t"][i], cols["__elem"][i],
                                             cols["__count"][i], unflatten(cols["__seqs"][i], cols["__times"][i], cols["__vars"][i])))
        return runs

    def _measures(self, matched: list[tuple], rows: pa.Table) -> pa.Table:
        match_ids, seqs, vars_ = [], [], []
        for m, path in enumerate(matched):
            s, _, v = flatten(path)
            match_ids.extend([m] * len(s))
            seqs.extend(s)
            vars_.extend(v)
        mapping = pa.table({MATCH: pa.array(match_ids, pa.int64()), SEQ: pa.array(seqs, pa.int64()),
                            VAR: pa.array(vars_, pa.int64())})
        return self.duck.sql(self.spec.measures_sql, __rows=rows.drop_columns([NEW]), __map=mapping)
