"""A job: one running query, from its sources through its operators to its output.

The job pulls a batch from one source at a time, pushes it through the
operator DAG depth-first, then advances watermarks: an operator's input
watermark is the minimum over its inputs (MillWheel's low watermark), and
what an operator releases on a watermark is delivered downstream before
the watermark itself. The source with the lowest watermark is read next,
so inputs advance together and state stays small.

When every source is exhausted, each watermark becomes +infinity: all
pending windows fire, the output is flushed and the job finishes.
"""

from __future__ import annotations

import time
from typing import Callable

import duckdb
import pyarrow as pa

from ..planner.physical.match_specs import MatchRecognizeSpec
from ..planner.physical.sort_specs import LimitSpec, TemporalSortSpec
from ..planner.physical.specs import (
    CalcSpec,
    GroupAggSpec,
    PhysicalPlan,
    SourceSpec,
    UnionSpec,
    ValuesSpec,
    WindowAggSpec,
)
from ..planner.physical.stream_specs import OverAggSpec, SessionSpec, SnapshotDiffSpec, TopNSpec, WindowEmitSpec
from .checkpoint import Checkpoint, plan_fingerprint
from .connectors.base import SourceReader
from .connectors.read_to_end import check_read_to_end
from .errors import EvaluationError  # noqa: F401 - (raised here; programs catch it from dsms)
from .lifecycle import JobMetrics, Lifecycle
from .operators.base import MAX_WATERMARK, MIN_WATERMARK, Env, Logic
from .operators.calc import CalcLogic, UnionLogic
from .operators.cql import SnapshotDiffLogic
from .operators.group_agg import GroupAggLogic
from .operators.match_recognize import MatchRecognizeLogic
from .operators.over import OverAggLogic
from .operators.registry_joins import JOIN_LOGICS
from .operators.session import SessionLogic
from .operators.sort import LimitLogic, TemporalSortLogic
from .operators.source import SourceLogic
from .operators.topn import TopNLogic
from .operators.window_agg import WindowAggLogic
from .operators.window_emit import WindowEmitLogic
from .progress import job_progress
from .routes import JobStats, Output
from .udf import udf_failure

OUTPUT = -1  # the pseudo operator that receives the root's output

_LOGICS = {CalcSpec: CalcLogic, GroupAggSpec: GroupAggLogic, UnionSpec: UnionLogic, WindowAggSpec: WindowAggLogic,
           SessionSpec: SessionLogic, WindowEmitSpec: WindowEmitLogic, OverAggSpec: OverAggLogic,
           TopNSpec: TopNLogic, SnapshotDiffSpec: SnapshotDiffLogic, TemporalSortSpec: TemporalSortLogic,
           LimitSpec: LimitLogic, MatchRecognizeSpec: MatchRecognizeLogic, **JOIN_LOGICS}


class ValuesSource:
    """A bounded source of literal rows (VALUES, SELECT without FROM)."""

    def __init__(self, spec: ValuesSpec, env: Env):
        self.spec, self.duck = spec, env.duck
        self.finished = False
        self.rows_read = self.late = 0
        self._done = False

    name = "values"

    @property
    def watermark(self) -> int:
        return MAX_WATERMARK if self.finished else MIN_WATERMARK

    @property
    def position(self) -> dict:
        return {"done": self._done}

    def seek(self, position: dict) -> None:
        self._done = bool(position.get("done"))

    def poll(self):
        if self._done:
            self.finished = True
            return None
        self._done = True
        table = self.duck.query(self.spec.sql)
        self.rows_read = table.num_rows
        return table


class Job(Lifecycle):
    """A query on the runtime: its operator DAG driven batch by batch (the ``Job`` protocol of ``routes.py``)."""

    route = "runtime"

    def __init__(self, plan: PhysicalPlan, output: Output, env: Env,
                 open_reader: Callable[[SourceSpec], SourceReader], late_log: Callable[[SourceSpec], object] | None = None):
        self.plan = plan
        self.output = output
        self.env = env
        self.logics: dict[int, Logic] = {}
        self.sources: list[tuple[int, SourceLogic | ValuesSource]] = []
        for op in plan.ops:
            if isinstance(op, SourceSpec):
                logic = SourceLogic(op, open_reader(op), env, late_log(op) if late_log else None)
                self.sources.append((op.id, logic))
            elif isinstance(op, ValuesSpec):
                self.sources.append((op.id, ValuesSource(op, env)))
            else:
                self.logics[op.id] = _LOGICS[type(op)](op, env)
        self.children: dict[int, list[tuple[int, int]]] = {op.id: [] for op in plan.ops}
        for op in plan.ops:
            for port, parent in enumerate(op.inputs):
                self.children[parent].append((op.id, port))
        # The root's results go to the output; a statement set's roots each to their own (port = its index).
        for port, root in enumerate(plan.outputs or (plan.output,)):
            self.children[root].append((OUTPUT, port))
        self._root_wm = [MIN_WATERMARK] * len(plan.outputs or (plan.output,))
        self.in_wm = {op.id: [MIN_WATERMARK] * len(op.inputs) for op in plan.ops}
        self.combined = {op.id: MIN_WATERMARK for op in plan.ops}
        self.out_wm = {op.id: MIN_WATERMARK for op in plan.ops}
        self.output_watermark = MIN_WATERMARK
        self.metrics = JobMetrics()
        self.done = False
        self.paused = False  # a paused job is not given turns: its sources are not read
        self.cancelled = False  # stopped for good by the program (DROP QUERY, cancel())
        self.error: BaseException | None = None  # why the job failed (it is not given turns either)
        self._timed = [i for i, logic in self.logics.items() if type(logic).on_tick is not Logic.on_tick]
        self.idle_ports: dict[int, set[int]] = {op.id: set() for op in plan.ops}
        self.source_idle: dict[int, bool] = {}
        self.backfill = None  # its history on a batch route first, as its first turn (runtime/backfill.py)
        self.backfilled = None  # that backfill, once done (what it read and where the replay began)

    # -- driving --------------------------------------------------------------------

    def step(self) -> bool:
        """Process one source batch (or finish the job). Returns whether anything happened."""
        if self.done:
            return False
        began = time.perf_counter()
        try:
            if self.backfill is not None:
                backfill, self.backfill = self.backfill, None
                backfill.run(self)
                self.backfilled = backfill
                return True
            return self._turn()
        finally:
            self.metrics.busy_s += time.perf_counter() - began

    def replay_turn(self) -> bool:
        """One turn while a backfill replays the history (its output is muted meanwhile)."""
        return self._turn()

    def _turn(self) -> bool:
        active = [(op_id, s) for op_id, s in self.sources if not s.finished]
        if not active:
            self._finish()
            return True
        ticked = self._tick()
        # Lowest watermark first; on a tie, tables (reference data) before streams.
        for op_id, source in sorted(active, key=lambda item: (item[1].watermark,
                                                              not getattr(item[1], "is_table", False))):
            before = source.rows_read
            table = self._evaluate(op_id, source.poll)  # computed columns are evaluated as it reads
            if source.rows_read != before and self.source_idle.get(op_id):
                self.source_idle[op_id] = False  # data again: consumers wait for it again
                self._set_idle(op_id, False)
            if table is None:
                self._advance(op_id, MAX_WATERMARK)
                return True
            if table.num_rows:
                self._push_cut(op_id, table, getattr(source, "cuts", ()))
            if source.rows_read != before:
                self.metrics.meter.mark(source.rows_read - before)
                self._advance(op_id, source.watermark)
                return True
        return ticked

    def _tick(self) -> bool:
        """Let processing time act: watermarks that follow the clock, and operators' timers.

        Counts as progress only when it produced output, so that running
        until idle ends even though the clock always moves.
        """
        before = self.metrics.rows_out
        now = self.env.clock.now_us()
        self._check_idle()
        for op_id, source in self.sources:
            if (getattr(source, "follows_clock", False) or getattr(source, "partitioned", False)) \
                    and not source.finished:
                self._advance(op_id, source.watermark)
        for op_id in self._timed:
            for out in self.logics[op_id].on_tick(now):
                if out.num_rows:
                    self._push(op_id, out)
        return self.metrics.rows_out != before

    def run(self) -> None:
        """Run until every source is exhausted (bounded inputs only)."""
        while self.step():
            pass

    def _finish(self) -> None:
        for op_id, _ in self.sources:
            self._advance(op_id, MAX_WATERMARK)
        self.done = True
        self.metrics.finished = time.time()
        self.output.close()

    # -- data and watermarks ------------------------------------------------------

    def _push(self, op_id: int, table: pa.Table) -> None:
        for child, port in self.children[op_id]:
            if child == OUTPUT:
                self.metrics.rows_out += table.num_rows
                if self.plan.outputs:
                    self.output.write_port(port, table)
                else:
                    self.output.write(table)
                continue
            for out in self._evaluate(child, self.logics[child].on_batch, port, table):
                if out.num_rows:
                    self._push(child, out)

    def _push_cut(self, op_id: int, table: pa.Table, cuts) -> None:
        """A source's batch, advancing its watermark at each cut (row, watermark) within it, so that the
        operators above see every event with the watermark as it stood when the event arrived."""
        done = 0
        for row, watermark in cuts:
            if row > done:
                self._push(op_id, table.slice(done, row - done))
            self._advance(op_id, watermark)
            done = row
        self._push(op_id, table.slice(done) if done else table)

    def _evaluate(self, op_id: int, handler, *args) -> list[pa.Table]:
        """An operator's handler; an expression that fails on the data (a CAST of 'a' to BIGINT) fails the
        query with what went wrong and where, not with the statement DuckDB ran."""
        try:
            return handler(*args)
        except (duckdb.Error, pa.ArrowInvalid) as e:
            raise udf_failure(e, self.plan.ops[op_id].label) or EvaluationError(self.plan.ops[op_id].label, e) \
                from None

    def _advance(self, op_id: int, watermark: int) -> None:
        if watermark <= self.out_wm[op_id]:
            return
        self.out_wm[op_id] = watermark
        for child, port in self.children[op_id]:
            if child == OUTPUT:
                self._root_wm[port] = watermark
                self.output_watermark = min(self._root_wm)
                continue
            self.in_wm[child][port] = watermark
            self._combine(child)

    def _combine(self, op_id: int) -> None:
        """Move an operator to its input watermark (by default the minimum), leaving idle inputs out."""
        idle = self.idle_ports[op_id]
        logic = self.logics[op_id]
        ports = [MAX_WATERMARK if port in idle else wm for port, wm in enumerate(self.in_wm[op_id])]
        low = logic.input_watermark(ports)
        if low >= MAX_WATERMARK and idle:
            return  # what it waits for is idle, not finished: the operator waits too
        if low <= self.combined[op_id]:
            return
        self.combined[op_id] = low
        for out in self._evaluate(op_id, logic.on_watermark, low):
            if out.num_rows:
                self._push(op_id, out)
        self._advance(op_id, logic.output_watermark(low))

    def _set_idle(self, op_id: int, idle: bool) -> None:
        """An input went idle (or came back): consumers stop (or resume) waiting for it."""
        for child, port in self.children[op_id]:
            if child == OUTPUT:
                continue
            ports = self.idle_ports[child]
            was_idle = len(ports) == len(self.in_wm[child])
            if idle:
                ports.add(port)
            else:
                ports.discard(port)
            now_idle = len(ports) == len(self.in_wm[child])
            if now_idle != was_idle:
                self._set_idle(child, now_idle)
            self._combine(child)

    def _check_idle(self) -> None:
        for op_id, source in self.sources:
            if not isinstance(source, SourceLogic) or not source.spec.idle_timeout_us:
                continue
            idle = source.idle
            if idle:
                # What its consumers pass while it is idle is lost to it: its events behind that are late.
                passed = [self.combined[c] for c, _ in self.children[op_id] if c != OUTPUT]
                source.floor.value = max([source.floor.value, *passed])
            if idle != self.source_idle.get(op_id, False):
                if idle and getattr(source, "partitioned", False):
                    self._advance(op_id, source.watermark)  # what its partitions with data reached, first
                self.source_idle[op_id] = idle
                self._set_idle(op_id, idle)

    def fail(self, error: BaseException) -> None:
        super().fail(error)
        for _, source in self.sources:  # a failed job reads no more: shared logs need not wait for it
            release = getattr(getattr(source, "reader", None), "release", None)
            if release is not None:
                release()

    def close(self) -> None:
        """Release the job's DuckDB connection, its open source files and operators' connections."""
        for logic in self.logics.values():
            release = getattr(logic, "close", None)
            if release is not None:  # a lookup join's connection to its database
                release()
        self.env.duck.close()
        for _, source in self.sources:
            reader = getattr(source, "reader", None)
            if reader is not None:
                reader.close()

    # -- inspection ---------------------------------------------------------------

    def stats(self) -> JobStats:
        rows: dict[str, int] = {}
        skipped: dict[str, int] = {}
        for _, s in self.sources:
            rows[s.name] = max(rows.get(s.name, 0), s.rows_read)
            n = getattr(getattr(s, "reader", None), "skipped", 0)
            if n:
                skipped[s.name] = max(skipped.get(s.name, 0), n)
        return JobStats(
            route=self.route, status=self.status, watermark=self.watermark, rows_in=self.rows_in,
            rows_out=self.metrics.rows_out, events_per_s=self.metrics.meter.rate() if self.runnable else 0.0,
            late=self.late, state_rows=self.env.state.rows(), state_bytes=self.env.state.nbytes(),
            sources=rows, skipped=skipped, error=self.error,
            open_watermarks=tuple(s.watermark for _, s in self.sources if not s.finished))

    def progress(self) -> list[dict]:
        return job_progress(self)

    # -- checkpoints ----------------------------------------------------------------

    def snapshot(self) -> Checkpoint:
        """The operators' state, each source's position and the watermarks (call it between turns)."""
        sources = {}
        for op_id, s in self.sources:
            reader = _reader(s)
            sources[str(op_id)] = {"position": reader.position, "rows_read": s.rows_read, "late": s.late,
                                   "finished": s.finished}
            if s.finished and getattr(reader, "read_to_end", None) is not None:
                sources[str(op_id)]["read_to_end"] = reader.read_to_end  # checked again on a restart
        meta = {
            "route": self.route,
            "sources": sources,
            "in_wm": {str(k): v for k, v in self.in_wm.items()},
            "combined": {str(k): v for k, v in self.combined.items()},
            "out_wm": {str(k): v for k, v in self.out_wm.items()},
            "output_watermark": self.output_watermark,
            "rows_out": self.metrics.rows_out,
            "done": self.done,
            "plan": plan_fingerprint(self.plan),
            "backfill": "pending" if self.backfill is not None else None,  # not yet: it runs again after a restart
        }
        output, contents = self.output.checkpoint()
        return Checkpoint(meta, self.env.state.snapshot(), output, contents)

    def restore(self, ckpt: Checkpoint) -> None:
        meta = ckpt.check(plan_fingerprint(self.plan))
        if meta.get("backfill") != "pending":
            self.backfill = None  # the history was backfilled before this checkpoint
        self.env.state.restore(ckpt.state)
        for op_id, s in self.sources:
            saved = meta["sources"].get(str(op_id))
            if saved is not None:
                _restore_source(s, saved)
        self.in_wm = {int(k): list(v) for k, v in meta["in_wm"].items()}
        self.combined = {int(k): v for k, v in meta["combined"].items()}
        self.out_wm = {int(k): v for k, v in meta["out_wm"].items()}
        self.output_watermark = meta["output_watermark"]
        self._root_wm = [self.output_watermark] * len(self._root_wm)
        self.metrics.rows_out = int(meta["rows_out"])
        self.done = bool(meta["done"])

    # -- inspection ---------------------------------------------------------------

    @property
    def rows_in(self) -> int:
        return sum(s.rows_read for _, s in self.sources)

    @property
    def late(self) -> dict[str, int]:
        """Late events dropped: by each source (under operators that do not judge lateness per window) by
        name, and by each operator that judges them (``#id Kind``)."""
        out = {s.name: s.late for _, s in self.sources if isinstance(s, SourceLogic)}
        out.update(self.late_by_operator)
        return out

    def backlog(self) -> dict[str, tuple[int, str]]:
        """How far each source's reader is behind the head of its input, where the reader can tell cheaply
        (a Kafka consumer's lag in messages, the bytes left of the file being read): name -> (amount, unit)."""
        out = {}
        for _, s in self.sources:
            measure = getattr(_reader(s), "backlog", None)
            amount = measure() if measure is not None else None
            if amount is not None:
                out[s.name] = amount
        return out

    @property
    def late_by_operator(self) -> dict[str, int]:
        """``#id Kind`` -> late events that operator dropped, for the operators that drop late events."""
        return {f"#{op_id} {operator_kind(self.plan.op(op_id).label)}": logic.late_dropped
                for op_id, logic in self.logics.items() if hasattr(type(logic), "count_late")}

    @property
    def state_rows(self) -> int:
        return sum(logic.state_rows for logic in self.logics.values())

    @property
    def watermark(self) -> int:
        return self.output_watermark


def operator_kind(label: str) -> str:
    """The operator's kind from its EXPLAIN label: ``WindowAggregate`` of ``WindowAggregate(TUMBLE(...))``."""
    return label.split("(", 1)[0].split("[", 1)[0].strip()


def _restore_source(source, saved: dict) -> None:
    """A source where a checkpoint left it (``saved``: what ``Job.snapshot`` wrote of it)."""
    reader = _reader(source)
    if saved["finished"]:
        source.finished = True  # it had been read to its end: its files must still hold just what was read
        if "read_to_end" in saved:
            check_read_to_end(source.name, reader.files, saved["read_to_end"])
            reader.restore_read_to_end(saved["read_to_end"])
    else:
        reader.seek(saved["position"])
    source.rows_read, source.late = int(saved["rows_read"]), int(saved["late"])


def _reader(source):
    """What knows a source's position: its reader (VALUES keep their own)."""
    return source if isinstance(source, ValuesSource) else source.reader
