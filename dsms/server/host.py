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
        self.checkpoint_observer = checkpoint_observer
        self.step_error: BaseException | None = None

    def start(self) -> None:
        self.thread.start()

    def submit(self, fn: Callable) -> concurrent.futures.Future:
        """Run ``fn(engine)`` on the engine thread; the future holds its result or its error."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.stopping.is_set():
            future.set_exception(RuntimeError("the server is shutting down"))
            return future
        self.commands.put((fn, future))
        return future

    async def call(self, fn: Callable):
        return await asyncio.wrap_future(self.submit(fn))

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
            if not moved and not ran:
                self._run_commands(block=True)

    def _run_commands(self, block: bool) -> bool:
        ran = False
        while True:
            try:
                fn, future = self.commands.get(timeout=IDLE_WAIT_S) if block and not ran else self.commands.get_nowait()
            except queue.Empty:
                return ran
            ran = True
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(self.engine))
            except BaseException as e:  # the client gets the error; the engine goes on
                future.set_exception(e)

    def _log_statuses(self) -> None:
        """One log line when a query starts, fails, finishes or is dropped."""
        running = self.engine.queries.running
        for key, query in running.items():
            status = query.job.status
            if self.statuses.get(key) != status:
                if status == "failed":
                    log.error("query %s failed: %s", query.id, query.job.error)
                elif key in self.statuses or status != "running":
                    log.info("query %s is %s", query.id, status)
                self.statuses[key] = status
        for key in [k for k in self.statuses if k not in running]:
            log.info("query %s dropped", key)
            del self.statuses[key]

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
