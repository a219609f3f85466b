"""Why a window has not closed: per operator of a job, its watermarks and what holds them back.

An operator's input watermark is the minimum over its inputs that are not
idle; following the lowest input down the DAG ends at the source that
holds it back. Together with the next window end an operator will fire
at, that answers "why has my window not closed?": the window fires when
the watermark reaches its end, and the named source is the one whose
events (or lack of them, and whether it is idle) keep the watermark below.

Values are raw (watermarks in epoch microseconds); the facade formats them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .operators.base import MAX_WATERMARK
from .operators.source import SourceLogic

if TYPE_CHECKING:
    from .job import Job


def job_progress(job: "Job") -> list[dict]:
    """One dict per operator of ``job``, sources first, in plan order."""
    sources = dict(job.sources)
    rows = []
    for op in job.plan.ops:
        row = {"op_id": op.id, "operator": op.label, "has_watermark": op.watermark is not None,
               "state_rows": job.env.state.rows(op.id),
               "state_bytes": job.env.state.nbytes(op.id)}
        if op.id in sources:
            source = sources[op.id]
            row.update(kind="source", source=source.name, watermark=job.out_wm[op.id] if source.finished
                       else source.watermark, inputs=[], idle=_source_idle(job, op.id, source),
                       finished=source.finished, late=source.late, rows_read=source.rows_read,
                       position=getattr(getattr(source, "reader", None), "position", None),
                       held_back_by=None, next_fire=None)
        else:
            idle = job.idle_ports[op.id]
            inputs = [{"op_id": parent, "watermark": wm, "idle": port in idle}
                      for port, (parent, wm) in enumerate(zip(op.inputs, job.in_wm[op.id]))]
            logic = job.logics[op.id]
            row.update(kind="operator", source=None, watermark=job.combined[op.id], inputs=inputs,
                       idle=bool(inputs) and all(i["idle"] for i in inputs), finished=False,
                       late=logic.late_dropped, rows_read=None, position=None,
                       held_back_by=None if job.combined[op.id] >= MAX_WATERMARK or op.watermark is None
                       else _holder(job, op.id, sources),
                       next_fire=logic.next_fire_time())
        rows.append(row)
    for row in rows:
        holder = row["held_back_by"]
        if holder is not None:
            source = sources[holder]
            row["held_back_by"] = {"source": source.name, "op_id": holder, "watermark": source.watermark,
                                   "idle": _source_idle(job, holder, source), "rows_read": source.rows_read}
    return rows


def _source_idle(job: "Job", op_id: int, source) -> bool:
    return bool(job.source_idle.get(op_id)) or (isinstance(source, SourceLogic) and source.idle)


def _holder(job: "Job", op_id: int, sources: dict) -> int | None:
    """The source at the end of the lowest-watermark path below ``op_id`` (None: every input is idle)."""
    while op_id not in sources:
        op = job.plan.op(op_id)
        idle = job.idle_ports[op_id]
        ports = [(wm, port) for port, wm in enumerate(job.in_wm[op_id]) if port not in idle]
        if not ports:
            return None
        _, port = min(ports)
        op_id = op.inputs[port]
    return None if sources[op_id].finished else op_id
