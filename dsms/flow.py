"""Flow control between a program that inserts and the queries that read: backpressure and retention.

``Engine.insert`` appends to a memory stream's log, which every query over
the stream reads at its own pace. If the program inserts faster than the
queries keep up (or nothing gives the engine turns), the log would grow
without end. So before an insert the engine looks at how far the slowest
reader of the stream is behind; beyond ``SET 'insert.max_pending'``
(bytes, default 64 MB) it either

* ``'insert.backpressure' = 'block'`` (the default): gives the queries
  turns itself, on the inserting thread, and waits while another thread
  drives the engine, until they are back within the limit — or raises
  ``BackpressureError`` after ``'insert.timeout'`` (a paused query, say);
* ``'error'``: raises ``BackpressureError`` at once, so the program can
  shed or buffer the rows itself.

``'memory.retention'`` (bytes) is how much a log keeps of what every reader
has read, for queries started later (``runtime/memory.py``).

Example:
    >>> import dsms
    >>> engine = dsms.Engine()
    >>> _ = engine.execute('''CREATE STREAM s (x BIGINT) WITH (connector = 'memory');
    ...   CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM s;
    ...   SET 'insert.max_pending' = '1KB'; SET 'insert.backpressure' = 'error';''')
    >>> _ = engine.insert("s", [(i,) for i in range(1000)])   # 8 KB the query has not read yet
    >>> try:
    ...     engine.insert("s", [(1,)])
    ... except dsms.BackpressureError as e:
    ...     print(e)
    the queries reading 's' are 7.8 KiB behind (more than 'insert.max_pending' = 1KB); give the engine turns ...
    >>> engine.run_until_idle(); engine.insert("s", [(1,)])
    1
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from .errors import BackpressureError
from .planner.analysis.routing import format_size, parse_size
from .planner.timeutil import parse_duration

if TYPE_CHECKING:
    from .engine import Engine
    from .runtime.memory import MemoryLog


def apply_settings(engine: "Engine") -> None:
    """Hand the runtime the settings it keeps itself (after SET, RESET or a restore)."""
    engine.scheduler.retain(parse_size(engine.catalog.setting("memory.retention")))


def admit(engine: "Engine", log: "MemoryLog", name: str) -> None:
    """Return once the readers of ``log`` are within 'insert.max_pending', or raise BackpressureError."""
    limit = parse_size(engine.catalog.setting("insert.max_pending"))
    pending = log.pending_bytes()
    if pending <= limit:
        return
    if engine.catalog.setting("insert.backpressure") == "error":
        raise _behind(name, pending, engine, "give the engine turns (run_until_idle, or step from a thread) "
                      "before inserting more, or SET 'insert.backpressure' = 'block'")
    deadline = time.monotonic() + parse_duration(engine.catalog.setting("insert.timeout")) / 1e6
    while pending > limit:
        if not engine.step():  # nothing to do here: a paused query, or another thread is driving
            if time.monotonic() >= deadline:
                raise _behind(name, pending, engine, "a query reading it may be paused (SHOW QUERIES); resume or "
                              f"drop it, or raise 'insert.timeout' ({engine.catalog.setting('insert.timeout')})")
            time.sleep(0.005)
        pending = log.pending_bytes()


def _behind(name: str, pending: int, engine: "Engine", help: str) -> BackpressureError:
    return BackpressureError(f"the queries reading '{name}' are {format_size(pending)} behind (more than "
                             f"'insert.max_pending' = {engine.catalog.setting('insert.max_pending')}); {help}")
