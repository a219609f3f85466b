"""Checkpoints of a job: its state, how far it read and how far its output got, on disk.

A checkpoint is taken between two turns of a job, when no batch is in
flight, so it is a consistent cut: the operators' state store, each
source's position (a file offset, a memory-log offset) and watermark
bookkeeping, and the output's position (a file sink's length, flushed to
disk first) or contents (a materialized view's rows). Restoring all of it
into a new job of the same plan continues as if nothing happened: the
sink is cut back to the checkpoint, the sources re-read what came after it
and the operators recompute the same output (MillWheel's exactly-once by
replay, with a deterministic job).

On disk a checkpoint is a directory ``ckpt-<n>`` holding ``meta.json``
and one Arrow IPC file per state table. It is written as ``ckpt-<n>.tmp``,
synced, and renamed, so a crash leaves either the old checkpoint or the
new one, never half of one; older checkpoints are removed after the rename.

What goes into a checkpoint is the job's to say (``Job.snapshot`` and
``Job.restore`` of each route's job); this module keeps it on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..grammar import DsmsError
from ..planner.physical.specs import PhysicalPlan

_PREFIX = "ckpt-"


@dataclass
class Checkpoint:
    job: dict  # source positions and counters, watermarks, metrics, done
    state: dict[str, Any]  # StateStore.snapshot()
    output: dict = field(default_factory=dict)  # the output's position or row count
    contents: pa.Table | None = None  # what a collecting output holds

    @property
    def route(self) -> str:
        """The engine the job ran on (a restored query stays on it)."""
        return self.job.get("route", "runtime")

    def check(self, fingerprint: str) -> dict:
        """The job's part, after checking it was taken of a job planned as ``fingerprint``."""
        if self.job.get("plan") != fingerprint:
            raise DsmsError("the query is planned differently from when its checkpoint was taken (another version "
                            "of dsms?), so its state does not fit; drop it and create it again")
        return self.job


def complete(job, taken: Checkpoint) -> None:
    """Checkpoint ``taken`` of ``job`` is on disk: sources and sinks that wait for that may act on it (a
    replication slot confirms the checkpoint's LSN, a write-ahead sink commits the checkpoint's rows)."""
    saved_sources = taken.job.get("sources") or {}
    for op_id, source in getattr(job, "sources", ()):  # a runtime job's sources and their readers
        confirm = getattr(getattr(source, "reader", None), "checkpoint_complete", None)
        saved = saved_sources.get(str(op_id))
        if confirm is not None and saved is not None:
            confirm(saved["position"])
    commit = getattr(job.output, "checkpoint_complete", None)
    if commit is not None:
        commit(taken.output)


def plan_fingerprint(plan: PhysicalPlan) -> str:
    """What a checkpoint's state is laid out for: the operators, their inputs and schemas."""
    ops = [(type(op).__name__, op.inputs, op.label, op.changelog, str(op.schema)) for op in plan.ops]
    return hashlib.sha256(repr((ops, plan.output)).encode()).hexdigest()[:16]


# -- on disk --------------------------------------------------------------------------------


def save(directory: str, seq: int, ckpt: Checkpoint) -> str:
    """Write ``ckpt`` atomically as ``directory/ckpt-<seq>``; older checkpoints are removed.

    Raises:
        DsmsError: the checkpoint cannot be written (a full disk, no permission); the
            last good checkpoint is kept, and the half-written one removed.
    """
    tmp = os.path.join(directory, f"{_PREFIX}{seq:08d}.tmp")
    try:
        return _save(directory, seq, ckpt)
    except (OSError, pa.ArrowException) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        where = getattr(e, "filename", None) or tmp
        raise DsmsError(f"cannot write the checkpoint {where}: {getattr(e, 'strerror', None) or e} "
                        "(the previous checkpoint is kept; free disk space or fix the state directory's "
                        "permissions)") from None


def latest(directory: str) -> tuple[int, Checkpoint] | None:
    """The newest complete checkpoint in ``directory`` and its number, or None.

    Raises:
        DsmsError: the checkpoint cannot be read (damaged, truncated, unreadable), naming its file.
    """
    try:
        return _latest(directory)
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as e:
        where = getattr(e, "filename", None) or os.path.join(directory, _newest(directory) or "", "meta.json")
        raise DsmsError(f"the checkpoint {where} cannot be read ({type(e).__name__}: {e}); it is damaged: "
                        "move the query's folder away to start it over, or restore the folder from a backup") from None


def _save(directory: str, seq: int, ckpt: Checkpoint) -> str:
    final = os.path.join(directory, f"{_PREFIX}{seq:08d}")
    tmp = final + ".tmp"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    os.makedirs(tmp)
    files = iter(range(1_000_000))

    def table_file(table: pa.Table) -> str:
        name = f"t{next(files)}.arrow"
        _write_table(os.path.join(tmp, name), table)
        return name

    state = {}
    for key, (kind, data) in ckpt.state.items():
        if kind == "value":
            state[key] = {"kind": kind, "value": data}
        elif kind == "panes":
            state[key] = {"kind": kind, "file": None if data is None else table_file(data)}
        else:
            state[key] = {"kind": kind, "files": {name: table_file(t) for name, t in data.items()}}
    meta = {"version": 1, "job": ckpt.job, "state": state, "output": ckpt.output,
            "contents": None if ckpt.contents is None else table_file(ckpt.contents)}
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())
    _sync_dir(tmp)
    os.rename(tmp, final)
    _sync_dir(directory)
    for name in os.listdir(directory):
        if name.startswith(_PREFIX) and os.path.join(directory, name) != final:
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
    return final


def _newest(directory: str) -> str | None:
    done = sorted(n for n in os.listdir(directory) if n.startswith(_PREFIX) and not n.endswith(".tmp"))
    return done[-1] if done else None


def _latest(directory: str) -> tuple[int, Checkpoint] | None:
    if not os.path.isdir(directory):
        return None
    newest = _newest(directory)
    if newest is None:
        return None
    path = os.path.join(directory, newest)
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)

    def table(name):
        return None if name is None else _read_table(os.path.join(path, name))

    state = {}
    for key, entry in meta["state"].items():
        kind = entry["kind"]
        if kind == "value":
            state[key] = (kind, entry["value"])
        elif kind == "panes":
            state[key] = (kind, table(entry["file"]))
        else:
            state[key] = (kind, {name: table(f) for name, f in entry["files"].items()})
    seq = int(newest[len(_PREFIX):])
    return seq, Checkpoint(meta["job"], state, meta["output"], table(meta["contents"]))


def _write_table(path: str, table: pa.Table) -> None:
    with pa.OSFile(path, "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_table(path: str) -> pa.Table:
    with pa.OSFile(path, "rb") as source:  # read into memory: the file goes with the next checkpoint
        return pa.ipc.open_file(source).read_all()


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
