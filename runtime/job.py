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
from dataclasses import dataclass, field
from typing import Callable, Protocol

import pyarrow as pa

from ..planner.physical import CalcOp, GroupAggOp, PhysicalPlan, SourceOp, UnionOp, ValuesOp, WindowAggOp
from .connectors.base import SourceReader
from .operators.base import MAX_WATERMARK, MIN_WATERMARK, Env, Logic
from .operators.calc import CalcLogic, UnionLogic
from .operators.group_agg import GroupAggLogic
from .operators.registry_joins import JOIN_LOGICS
from .operators.source import SourceLogic
from .operators.window_agg import WindowAggLogic

OUTPUT = -1  # the pseudo operator that receives the root's output

_LOGICS = {CalcOp: CalcLogic, GroupAggOp: GroupAggLogic, UnionOp: UnionLogic, WindowAggOp: WindowAggLogic,
           **JOIN_LOGICS}


class Output(Protocol):
    def write(self, table: pa.Table) -> None: ...

    def close(self) -> None: ...


class ValuesSource:
    """A bounded source of literal rows (VALUES, SELECT without FROM)."""

    def __init__(self, spec: ValuesOp, env: Env):
        self.spec, self.duck = spec, env.duck
        self.finished = False
        self.rows_read = self.late = 0
        self._done = False

    name = "values"

    @property
    def watermark(self) -> int:
        return MAX_WATERMARK if self.finished else MIN_WATERMARK

    def poll(self):
        if self._done:
            self.finished = True
            return None
        self._done = True
        table = self.duck.query(self.spec.sql)
        self.rows_read = table.num_rows
        return table


@dataclass
class JobMetrics:
    started: float = field(default_factory=time.time)
    finished: float | None = None
    rows_out: int = 0
    busy_s: float = 0.0


class Job:
    def __init__(self, plan: PhysicalPlan, output: Output, env: Env,
                 open_reader: Callable[[SourceOp], SourceReader], late_log: Callable[[SourceOp], object] | None = None):
        self.plan = plan
        self.output = output
        self.env = env
        self.logics: dict[int, Logic] = {}
        self.sources: list[tuple[int, SourceLogic | ValuesSource]] = []
        for op in plan.ops:
            if isinstance(op, SourceOp):
                logic = SourceLogic(op, open_reader(op), env, late_log(op) if late_log else None)
                self.sources.append((op.id, logic))
            elif isinstance(op, ValuesOp):
                self.sources.append((op.id, ValuesSource(op, env)))
            else:
                self.logics[op.id] = _LOGICS[type(op)](op, env)
        self.children: dict[int, list[tuple[int, int]]] = {op.id: [] for op in plan.ops}
        for op in plan.ops:
            for port, parent in enumerate(op.inputs):
                self.children[parent].append((op.id, port))
        self.children[plan.output].append((OUTPUT, 0))
        self.in_wm = {op.id: [MIN_WATERMARK] * len(op.inputs) for op in plan.ops}
        self.combined = {op.id: MIN_WATERMARK for op in plan.ops}
        self.out_wm = {op.id: MIN_WATERMARK for op in plan.ops}
        self.output_watermark = MIN_WATERMARK
        self.metrics = JobMetrics()
        self.done = False

    # -- driving --------------------------------------------------------------------

    def step(self) -> bool:
        """Process one source batch (or finish the job). Returns whether anything happened."""
        if self.done:
            return False
        began = time.perf_counter()
        try:
            active = [(op_id, s) for op_id, s in self.sources if not s.finished]
            if not active:
                self._finish()
                return True
            # Lowest watermark first; on a tie, tables (reference data) before streams.
            for op_id, source in sorted(active, key=lambda item: (item[1].watermark,
                                                                  not getattr(item[1], "is_table", False))):
                before = source.rows_read
                table = source.poll()
                if table is None:
                    self._advance(op_id, MAX_WATERMARK)
                    return True
                if table.num_rows:
                    self._push(op_id, table)
                if source.rows_read != before:
                    self._advance(op_id, source.watermark)
                    return True
            return False
        finally:
            self.metrics.busy_s += time.perf_counter() - began

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
                self.output.write(table)
                continue
            for out in self.logics[child].on_batch(port, table):
                if out.num_rows:
                    self._push(child, out)

    def _advance(self, op_id: int, watermark: int) -> None:
        if watermark <= self.out_wm[op_id]:
            return
        self.out_wm[op_id] = watermark
        for child, port in self.children[op_id]:
            if child == OUTPUT:
                self.output_watermark = watermark
                continue
            ports = self.in_wm[child]
            ports[port] = watermark
            logic = self.logics[child]
            low = logic.input_watermark(ports)
            if low <= self.combined[child]:
                continue
            self.combined[child] = low
            for out in logic.on_watermark(low):
                if out.num_rows:
                    self._push(child, out)
            self._advance(child, logic.output_watermark(low))

    # -- inspection ---------------------------------------------------------------

    @property
    def rows_in(self) -> int:
        return sum(s.rows_read for _, s in self.sources)

    @property
    def late(self) -> dict[str, int]:
        return {s.name: s.late for _, s in self.sources if isinstance(s, SourceLogic)}

    @property
    def state_rows(self) -> int:
        return sum(logic.state_rows for logic in self.logics.values())

    @property
    def watermark(self) -> int:
        return self.output_watermark
