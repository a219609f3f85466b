"""The engine on its own thread: it steps the queries and runs the clients' commands in turn.

The engine is not thread-safe, so one thread owns it. Client sessions live
on the asyncio loop and hand the engine work as commands (plain functions
of the engine) through a queue; each returns through a future. Between
commands the thread steps every query, so processing goes on while
clients wait on their sockets, and a slow socket never holds the engine.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from typing import Callable

log = logging.getLogger("dsms.server")

IDLE_WAIT_S = 0.02  # when nothing moved: how long to wait for a command before stepping again


class EngineHost:
    """Runs ``engine.step()`` in a loop on one thread and the commands submitted to it in between."""

    def __init__(self, engine, checkpoint_observer: Callable[[float], None] | None = None):
        self.engine = engine
        self.commands: queue.SimpleQueue = queue.SimpleQueue()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="dsms-engine", daemon=True)
        self.statuses: dict[str, str] = {}
        self.checkpoints: dict[str, int] = {}  # the checkpoint each query was at, to log new ones
        self.checkpoint_observer = checkpoint_observer
        self.step_error: BaseException | None = None
        # Read by reader threads: the rows of each watched materialized view as of the last step (published
        # whole, so a reader sees every view as it was between two steps), and how many write commands had
        # been processed when they were published.
        self.watched: dict[int, object] = {}
        self.published: dict[int, tuple[int, object]] = {}
        self.writes = 0
        self.settled = 0

    def start(self) -> None:
        self.thread.start()

    def submit(self, fn: Callable, reads_only: bool = False) -> concurrent.futures.Future:
        """Run ``fn(engine)`` on the engine thread; the future holds its result or its error.

        ``reads_only``: the command changes no data (a pull query's plan, a
        catalog query), so a pull that follows need not wait for it.
        """
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.stopping.is_set():
            future.set_exception(RuntimeError("the server is shutting down"))
            return future
        self.commands.put((fn, future, reads_only))
        return future

    async def call(self, fn: Callable, reads_only: bool = False):
        return await asyncio.wrap_future(self.submit(fn, reads_only))

    # -- snapshots of materialized views for readers on other threads -----------------------

    def watch(self, query) -> None:
        """Publish ``query``'s rows after every step from now on (engine thread)."""
        if id(query) not in self.watched:
            self.watched[id(query)] = query
            self._publish()

    def rows_of(self, query):
        """The rows of a watched view as of the engine's last step (any thread), or None."""
        entry = self.published.get(id(query))
        return None if entry is None else entry[1]

    def settle(self, engine) -> int:
        """Process everything received, publish, and say how many writes that covers (engine thread)."""
        while engine.step():
            pass
        self._publish()
        self.settled = self.writes
        return self.settled

    def _publish(self) -> None:
        running = {id(q): q for q in self.engine.queries.running.values()}
        for key in [k for k in self.watched if k not in running]:
            del self.watched[key]
            self.published.pop(key, None)
        for key, query in self.watched.items():
            seen = self.published.get(key)
            if seen is None or seen[0] != query.output.rows:
                self.published[key] = (query.output.rows, query.handle.snapshot())

    def stop(self, timeout: float = 30.0) -> None:
        """Stop stepping, then checkpoint and close the engine (on its own thread)."""
        done = self.submit(lambda engine: None)
        self.stopping.set()
        try:
            done.result(timeout)
        except (RuntimeError, concurrent.futures.TimeoutError):
            pass
        self.thread.join(timeout)

    def _loop(self) -> None:
        engine = self.engine
        while True:
            ran = self._run_commands(block=False)
            if self.stopping.is_set():
                self._run_commands(block=False)
                self._close()
                return
            try:
                moved = engine.step()
            except Exception as e:  # step marks failed queries itself; anything else is logged, not fatal
                if self.step_error is None or str(e) != str(self.step_error):
                    log.error("engine step failed: %s", e)
                self.step_error, moved = e, False
            self._log_statuses()
            if self.watched:
                self._publish()  # cheap when nothing changed: it compares row counts
            if not moved:  # nothing left to process: every write so far is in the views
                self.settled = self.writes
            if not moved and not ran:
                self._run_commands(block=True)

    def _run_commands(self, block: bool) -> bool:
        ran = False
        while True:
            try:
                fn, future, reads_only = (self.commands.get(timeout=IDLE_WAIT_S) if block and not ran
                                          else self.commands.get_nowait())
            except queue.Empty:
                return ran
            ran = True
            if not future.set_running_or_notify_cancel():
                continue
            self.writes += not reads_only  # before its client hears back, so the client's count covers it
            try:
                future.set_result(fn(self.engine))
            except BaseException as e:  # the client gets the error; the engine goes on
                future.set_exception(e)

    def _log_statuses(self) -> None:
        """One log line when a query starts, fails, finishes, is dropped or checkpointed."""
        running = self.engine.queries.running
        for key, query in running.items():
            status = query.job.status
            if self.statuses.get(key) != status:
                if status == "failed":
                    log.error("query %s failed: %s", query.id, query.job.error)
                elif key in self.statuses or status != "running":
                    log.info("query %s is %s", query.id, status)
                else:
                    log.info("query %s started (%s)", query.id, query.kind)
                self.statuses[key] = status
            if self.checkpoints.setdefault(key, query.checkpoint_seq) != query.checkpoint_seq:
                self.checkpoints[key] = query.checkpoint_seq
                log.info("query %s checkpoint %d taken in %.3f s", query.id, query.checkpoint_seq,
                         query.checkpoint_seconds or 0.0)
        for key in [k for k in self.statuses if k not in running]:
            log.info("query %s dropped", key)
            del self.statuses[key]
            self.checkpoints.pop(key, None)

    def _close(self) -> None:
        started = time.perf_counter()
        try:
            self.engine.close()  # checkpoints every standing query first
            elapsed = time.perf_counter() - started
            if self.engine.state_dir:
                log.info("final checkpoint taken in %.3f s", elapsed)
                if self.checkpoint_observer is not None:
                    self.checkpoint_observer(elapsed)
        except Exception as e:
            log.error("closing the engine failed: %s", e)
