"""Processing time, injected: the system clock, or a virtual one that tests advance."""

from __future__ import annotations

import threading
import time


class SystemClock:
    """Wall-clock processing time in epoch microseconds."""

    def now_us(self) -> int:
        return time.time_ns() // 1_000


class VirtualClock:
    """A clock that only moves when told to, for deterministic tests.

    Example:
        >>> clock = VirtualClock(start_us=1_000)
        >>> clock.advance(500); clock.now_us()
        1500
    """

    def __init__(self, start_us: int = 0):
        self._now = start_us
        self._lock = threading.Lock()

    def now_us(self) -> int:
        return self._now

    def advance(self, micros: int) -> None:
        with self._lock:
            self._now += micros

    def set(self, now_us: int) -> None:
        with self._lock:
            self._now = max(self._now, now_us)
