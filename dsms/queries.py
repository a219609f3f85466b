"""The queries an engine runs, and how they are managed.

A *standing* query is the query of a ``CREATE SINK … AS SELECT`` or a
``CREATE MATERIALIZED VIEW … AS SELECT``: its id is the sink's or the
view's name, it runs in the background as statements keep coming, and
with a state directory it is checkpointed and comes back after a
restart. A continuous ``SELECT`` also runs as a query (``query_<n>``),
for as long as the program holds it, and is not saved.

Each query is ``running``, ``paused`` (its sources are not read; what
arrives in memory streams waits for it), ``finished`` (every input ended
and every result is out) or ``failed`` (it stopped at bad input; the
message says where; other queries go on). ``SHOW QUERIES`` lists them
with their numbers, ``SHOW PROGRESS`` says per operator what they wait
for, and ``subscribe`` hands a program each batch of changes.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

from .grammar import Diagnostic, DsmsError, Name, SqlError
from .grammar.diagnostics import did_you_mean
from .planner import PlannedQuery
from .planner.catalog import SinkDef
from .planner.timeutil import parse_duration
from .query import QueryHandle, job_stats, public_changes
from .render import format_value
from .runtime.operators.base import MAX_WATERMARK, MIN_WATERMARK
from .runtime.output import ClosedOutput, CollectOutput
from .runtime.routes import FailedJob, Job

if TYPE_CHECKING:
    from .engine import Engine

SHOW_QUERIES_COLUMNS = ["id", "kind", "status", "watermark", "rows_in", "rows_out", "events_per_s", "late",
                        "state_rows", "state_bytes", "error"]
SHOW_PROGRESS_COLUMNS = ["query", "operator", "input_watermarks", "watermark", "held_back_by", "idle",
                         "next_fire", "late", "state_rows", "state_bytes"]


class RunningQuery:
    """A query the engine runs: its job, its output, and what a checkpoint of it needs."""

    def __init__(self, qid: str, kind: str, job: Job, output, planned: PlannedQuery,
                 handle: QueryHandle | None, uid: str | None):
        self.id, self.kind, self.job, self.output, self.planned = qid, kind, job, output, planned
        self.handle = handle
        self.uid = uid  # its folder in the state directory (None: not saved)
        self.subscriptions: list[Subscription] = []
        self.checkpoint_seq = 0
        self.checkpoint_at: int | None = None  # processing time of the last checkpoint
        self.checkpoint_seconds: float | None = None  # wall time the last checkpoint took
        self.checkpointed: tuple | None = None  # what the job had done at the last checkpoint

    def progress_marker(self) -> tuple:
        """What the job has done (cheap to read after every turn): unchanged, no new checkpoint is needed."""
        job = self.job
        return job.rows_in, job.metrics.rows_out, job.output_watermark, job.done

    def stats(self) -> dict:
        return job_stats(self.job, self.id, self.kind)


class Subscription:
    """Hands each batch of changes of a query to a callback (after the query's turn, on the driving thread)."""

    def __init__(self, query: RunningQuery, callback: Callable, fmt: str):
        self.query, self.callback, self.format = query, callback, fmt
        self.queue: list[pa.Table] = []
        query.output.listeners.append(self.queue)
        query.subscriptions.append(self)

    def deliver(self) -> None:
        while self.queue:
            batch = public_changes(self.queue.pop(0))
            self.callback(batch.to_pandas() if self.format == "pandas" else batch)

    def cancel(self) -> None:
        """Stop the callbacks."""
        if self.queue in self.query.output.listeners:
            self.query.output.listeners.remove(self.queue)
        if self in self.query.subscriptions:
            self.query.subscriptions.remove(self)
        self.queue.clear()


class Queries:
    """The running queries of one engine, by lower-cased id."""

    def __init__(self, engine: "Engine"):
        self.engine = engine
        self.session = engine.session
        self.scheduler = engine.session.scheduler
        self.running: dict[str, RunningQuery] = {}
        self._failures_seen = 0
        self._failures_raised = 0

    # -- starting and stopping ----------------------------------------------------------

    def start(self, qid: str, kind: str, planned: PlannedQuery, sink: SinkDef | None = None,
              uid: str | None = None, restore: bool = False, open_output=None,
              engine: str | None = None) -> RunningQuery:
        """Start a query; with ``restore``, from the newest checkpoint in its folder of the state directory.

        ``open_output(saved)``: where its results go, when not a sink or a collector (a continuous INSERT's);
        ``engine``: the route it must take, whatever SET 'engine' says (a statement set's: the runtime).
        """
        saved = found = None
        if restore and uid is not None:
            found = self.session.latest_checkpoint(self.engine.durable.checkpoint_dir(uid))
            saved = found[1] if found else None
        output = open_output(saved) if open_output is not None else \
            self.session.open_output(kind, planned, sink, saved, durable=self.engine.durable is not None)
        # A restored query stays on the route its checkpoint was taken on.
        settings = self.engine.catalog.settings
        job = self.session.start(qid, planned, {**settings, "engine": engine} if engine else settings, output, saved)
        handle = QueryHandle(self.engine, qid, job, output, planned.changelog, planned.warnings) \
            if isinstance(output, CollectOutput) else None
        query = RunningQuery(qid, kind, job, output, planned, handle, uid)
        if uid is not None and self.engine.durable is not None:  # (a new query gets its uid after it starts)
            job.keep_checkpoints(self.engine.durable.checkpoint_dir(uid), lambda: self.checkpoint(query))
        if saved is not None:
            query.checkpoint_seq = found[0]
            query.checkpointed = query.progress_marker()
        query.checkpoint_at = self.scheduler.clock.now_us()
        self.running[qid.lower()] = query
        return query

    def restore(self, qid: str, kind: str, planned: PlannedQuery, sink: SinkDef | None, uid: str,
                open_output=None, engine: str | None = None) -> RunningQuery:
        """A saved sink's or materialized view's query again, from its newest checkpoint, paused or failed as it was."""
        status = self.engine.durable.query(uid)
        try:
            query = self.start(qid, kind, planned, sink, uid=uid, restore=True, open_output=open_output,
                               engine=engine)
        except DsmsError as e:  # e.g. an input file gone: the query is failed, the engine starts
            # (a query that had failed keeps its own error: what it read may be gone since)
            return self.start_failed(qid, kind, planned, uid, DsmsError(status["failed"]) if status["failed"] else e)
        if status["paused"]:
            query.job.pause()
        if status["failed"]:
            query.job.fail(DsmsError(status["failed"]))
        return query

    def subscribe(self, name: str, callback, snapshot: bool, fmt: str) -> "Subscription":
        """``Engine.subscribe``: the rows held now first (with ``snapshot``), then each batch of changes."""
        if fmt not in ("arrow", "pandas"):
            raise DsmsError(f"subscribe() gives 'arrow' or 'pandas' tables, not '{fmt}'")
        query = self.get(name)
        sub = Subscription(query, callback, fmt)
        if snapshot and query.handle is not None:
            current = query.handle.snapshot()
            if current.num_rows:
                sub.queue.append(current)
        return sub

    def start_failed(self, qid: str, kind: str, planned: PlannedQuery, uid: str, error: Exception) -> RunningQuery:
        """A saved query that could not be started again (an input gone): listed as failed, with why."""
        query = RunningQuery(qid, kind, FailedJob(error), ClosedOutput(), planned, None, uid)
        self.running[qid.lower()] = query
        return query

    def get(self, name: str | Name, source: str | None = None) -> RunningQuery:
        text = name.value if isinstance(name, Name) else name
        query = self.running.get(text.lower())
        if query is None:
            span = name.span if isinstance(name, Name) else None
            raise SqlError(Diagnostic(f"no query '{text}'", span, source,
                                      help=did_you_mean(text, [q.id for q in self.running.values()])
                                      or "SHOW QUERIES lists them"))
        return query

    def pause(self, query: RunningQuery) -> str:
        if query.job.status in ("finished", "failed"):
            return f"Query {query.id} has {query.job.status}; nothing to pause"
        query.job.pause()
        self._save_status(query)
        return f"Paused query {query.id}"

    def resume(self, query: RunningQuery) -> str:
        if query.job.status == "failed":
            raise SqlError(Diagnostic(f"query '{query.id}' failed and cannot be resumed: {query.job.error}"))
        if not query.job.paused:
            return f"Query {query.id} is not paused"
        query.job.resume()
        self._save_status(query)
        return f"Resumed query {query.id}"

    def _save_status(self, query: RunningQuery) -> None:
        """A standing query stays paused (or running) after a restart."""
        if self.engine.durable is not None and query.uid is not None:
            self.engine.durable.set_query(query.uid, paused=query.job.paused)

    def drop(self, qid: str) -> RunningQuery | None:
        """Stop a query and forget it (a sink's file is flushed and closed as it is)."""
        query = self.running.pop(qid.lower(), None)
        if query is None:
            return None
        self.session.stop(query.id, query.job, query.output)
        for sub in list(query.subscriptions):
            sub.cancel()
        return query

    def close(self) -> None:
        """Checkpoint (with a state directory) and stop every query; sinks are flushed."""
        self.checkpoint_all(force=True)
        for query in list(self.running.values()):
            self.drop(query.id)

    # -- after each turn ----------------------------------------------------------------

    def after_step(self) -> None:
        """Hand changes to subscribers, note failures, take checkpoints that are due."""
        for query in list(self.running.values()):
            for sub in list(query.subscriptions):
                sub.deliver()
        failures = self.scheduler.failures
        while self._failures_seen < len(failures):
            name, job = failures[self._failures_seen]
            self._failures_seen += 1
            query = self.running.get(name.lower())
            if query is not None and query.uid is not None:
                self.engine.durable.set_query(query.uid, failed=str(job.error))
        self.checkpoint_all()

    def raise_new_failure(self) -> None:
        """Raise the error of the first query that failed since the last call (run_until_idle reports it)."""
        failures = self.scheduler.failures
        if self._failures_raised < len(failures):
            _, job = failures[self._failures_raised]
            self._failures_raised = len(failures)
            raise job.error

    # -- checkpoints --------------------------------------------------------------------

    def checkpoint_all(self, force: bool = False) -> None:
        if self.engine.durable is None:
            return
        now = self.scheduler.clock.now_us()
        interval = parse_duration(self.engine.catalog.setting("checkpoint.interval"))
        due = [q for q in self.running.values() if q.uid is not None and q.job.error is None
               and q.progress_marker() != q.checkpointed
               and (force or q.job.done or now - (q.checkpoint_at or 0) >= interval)]
        if not due:
            return
        self.session.sync_inputs()  # what the checkpoints' offsets point at is on disk first
        for query in due:
            self.checkpoint(query, now)

    def checkpoint(self, query: RunningQuery, now: int | None = None) -> None:
        query.checkpoint_seq += 1
        started = time.perf_counter()
        self.session.checkpoint(query.job, self.engine.durable.checkpoint_dir(query.uid), query.checkpoint_seq,
                                lambda: self.checkpoint(query))
        query.checkpoint_seconds = time.perf_counter() - started
        query.checkpoint_at = self.scheduler.clock.now_us() if now is None else now
        query.checkpointed = query.progress_marker()

    # -- inspection ---------------------------------------------------------------------

    def show(self) -> pa.Table:
        rows = []
        for query in self.running.values():
            stats = query.stats()
            stats["watermark"] = format_watermark(stats["watermark"])
            stats["events_per_s"] = round(stats["events_per_s"])
            stats["error"] = stats["error"] or ""
            rows.append(stats)
        return rows_table(rows, SHOW_QUERIES_COLUMNS)

    def progress(self, query: RunningQuery | None = None) -> pa.Table:
        rows = []
        for q in [query] if query is not None else self.running.values():
            for r in q.job.progress():
                holder = r["held_back_by"]
                rows.append({
                    "query": q.id,
                    "operator": r["operator"] if r["op_id"] is None else f"#{r['op_id']} {r['operator']}",
                    "input_watermarks": ", ".join(f"#{i['op_id']} {format_watermark(i['watermark'])}"
                                                  + (" (idle)" if i["idle"] else "") for i in r["inputs"]),
                    "watermark": format_watermark(r["watermark"]) if r["has_watermark"] else "none",
                    "held_back_by": "" if holder is None else (
                        f"{holder['source']} at {format_watermark(holder['watermark'])}"
                        + (" (idle)" if holder["idle"] else "")
                        + (" (no events yet)" if not holder["rows_read"] else "")),
                    "idle": "yes" if r["idle"] else "no",
                    "next_fire": "" if r["next_fire"] is None else format_watermark(r["next_fire"]),
                    "late": r["late"], "state_rows": r["state_rows"], "state_bytes": r["state_bytes"]})
        return rows_table(rows, SHOW_PROGRESS_COLUMNS)


def format_watermark(wm: int | None) -> str:
    """A watermark for people: a timestamp, ``-`` before the first one, ``end`` after the input ended."""
    if wm is None or wm <= MIN_WATERMARK:
        return "-"
    if wm >= MAX_WATERMARK:
        return "end"
    return format_value(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=wm))


def rows_table(rows: list[dict], columns: list[str]) -> pa.Table:
    if not rows:
        return pa.table({c: pa.array([], pa.string()) for c in columns})
    return pa.Table.from_pylist(rows).select(columns)
