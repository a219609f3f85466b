"""``SET 'state.ttl'`` at run time: stamp a batch with the processing time, expire what is too old.

An operator with a state time-to-live (its spec has ``ttl_us``, ``expire``
and ``oldest``; the SQL is planner/lower/sqlgen_ttl.py) calls :meth:`StateTtl.before_batch`
before its statements run: it sets the operator's ``now`` variable from the
injected clock (its statements stamp what the batch touches with it) and,
when the oldest stamp held is at least ``ttl_us`` old, runs the DELETEs that
drop every key last touched at or before ``now - ttl_us``. ``on_tick``
expires too, so idle keys go even when no batch comes. Expiry emits nothing.

    ttl 10 s    key a touched at 0 s and 4 s, key b at 2 s
    now 13 s    the cut is 3 s: b (2 s) expires, a (4 s) stays
    now 14 s    a expires too; a row of a after that starts it afresh
"""

from __future__ import annotations

from ...planner.lower.sqlgen_ttl import now_variable
from .base import MAX_WATERMARK


class StateTtl:
    def __init__(self, spec, con, clock):
        self.spec, self.con, self.clock = spec, con, clock
        self.oldest: int | None = None  # a lower bound of the oldest stamp held; None: not known yet

    def before_batch(self) -> bool:
        """Set ``now`` for the batch's statements; expire what has outlived the TTL. Whether it expired any."""
        expired = self.expire()
        self.oldest = min(self.oldest, self.now)  # the batch writes stamps of now
        return expired

    def expire(self) -> bool:
        """Drop the keys last touched at or before now - ttl (when the oldest stamp says there are any).
        Whether it ran the expiry."""
        self.now = self.clock.now_us()
        self.con.execute(f"SET VARIABLE {now_variable(self.spec.id)} = CAST({int(self.now)} AS BIGINT)")
        if self.oldest is None:
            self.oldest = self._oldest()
        if self.oldest > self.now - self.spec.ttl_us:
            return False
        for stmt in self.spec.expire:
            self.con.execute(stmt)
        self.oldest = self._oldest()
        return True

    def _oldest(self) -> int:
        value = self.con.execute(self.spec.oldest).fetchall()[0][0]
        return MAX_WATERMARK if value is None else int(value)
