"""What every job has, whatever its route: its life (running, paused, finished, failed or cancelled) and
its metrics (rows out, busy time, events per second). The runtime's job and the batch routes' jobs share them.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable


class RateMeter:
    """Events per second over the last few seconds of wall time (one bucket per second, not per row)."""

    def __init__(self, window_s: int = 5):
        self.window_s = window_s
        self.started = time.monotonic()
        self._buckets: deque[list[int]] = deque()

    def mark(self, n: int) -> None:
        second = int(time.monotonic())
        if self._buckets and self._buckets[-1][0] == second:
            self._buckets[-1][1] += n
        else:
            self._buckets.append([second, n])
            while self._buckets[0][0] <= second - self.window_s:
                self._buckets.popleft()

    def rate(self) -> float:
        now = time.monotonic()
        recent = sum(n for second, n in self._buckets if second > now - self.window_s)
        return recent / max(min(self.window_s, now - self.started), 1e-3)


@dataclass
class JobMetrics:
    started: float = field(default_factory=time.time)
    finished: float | None = None
    rows_out: int = 0
    busy_s: float = 0.0
    meter: RateMeter = field(default_factory=RateMeter)


class Lifecycle:
    """A job's life as the engine manages it: running, paused, finished, failed or cancelled.

    Subclasses set ``done``, ``paused``, ``cancelled``, ``error`` and ``metrics``.
    """

    done: bool
    paused: bool  # a paused job is not given turns: its sources are not read
    cancelled: bool  # stopped for good by the program (DROP QUERY, cancel())
    error: BaseException | None  # why the job failed (it is not given turns either)
    metrics: JobMetrics

    def fail(self, error: BaseException) -> None:
        """Stop the job for good: bad input, a sink that cannot be written. Other jobs go on."""
        self.error = error
        self.metrics.finished = time.time()

    @property
    def status(self) -> str:
        """running, paused, finished, failed or cancelled."""
        if self.error is not None:
            return "failed"
        if self.done:
            return "finished"
        if self.cancelled:
            return "cancelled"
        return "paused" if self.paused else "running"

    @property
    def runnable(self) -> bool:
        return not (self.done or self.paused or self.cancelled or self.error is not None)

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def cancel(self) -> None:
        self.cancelled = True

    def keep_checkpoints(self, folder: str, take: Callable[[], None]) -> None:
        """Jobs whose state the engine's checkpoints hold in full keep nothing of their own."""
