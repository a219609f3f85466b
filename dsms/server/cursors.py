"""DECLARE c CURSOR FOR …, FETCH [n | ALL] c [WITH (timeout = …)], CLOSE c: a feed read in pieces.

A cursor over SUBSCRIBE or SELECT … EMIT CHANGES is a feed: FETCH takes
what has arrived, or waits for the next change (until the timeout, or a
cancel request). A cursor over any other query holds its rows, computed
when it is declared.
"""

from __future__ import annotations

import asyncio
import re

import pyarrow as pa

from .errors import INVALID_CURSOR, QUERY_CANCELED, WireError
from .feeds import Feed
from .statements import Outcome


class Cursors:
    """The cursors of one session, by name."""

    def __init__(self, session):
        self.session = session
        self.feeds: dict[str, Feed] = {}

    def get(self, name: str) -> Feed | None:
        return self.feeds.get(name)

    def clear(self) -> None:
        self.feeds.clear()

    async def declare(self, name: str, query: str, offset: int, source: str) -> Outcome:
        if name in self.feeds:
            raise WireError("42P03", f"cursor \"{name}\" already exists")
        outcome = await self.session.execute(query, offset, source)
        if outcome.feed is not None:
            self.feeds[name] = outcome.feed
            return Outcome("DECLARE CURSOR")
        table = outcome.table if outcome.table is not None else pa.table({})
        feed = Feed(self.session.loop, name, pa.schema([]), 1 << 62)
        feed.schema = table.schema
        if table.num_rows:
            feed.batches.append(table)
            feed.pending_rows = table.num_rows
        feed.finite = True  # rows already computed: FETCH never waits
        self.feeds[name] = feed
        return Outcome("DECLARE CURSOR")

    async def fetch(self, name: str, count: str | None, timeout: str | None) -> Outcome:
        feed = self.feeds.get(name)
        if feed is None:
            raise WireError(INVALID_CURSOR, f"cursor \"{name}\" does not exist")
        limit = None if count is not None and count.upper() == "ALL" else int(count or 1)
        if feed.finite or feed.batches:
            table = feed.take(limit)
        else:
            table = await self._wait_rows(feed, limit, _seconds(timeout) if timeout else None)
        return Outcome(f"FETCH {table.num_rows}", table)

    async def _wait_rows(self, feed: Feed, limit: int | None, seconds: float | None) -> pa.Table:
        cancelled = self.session.cancelled
        cancelled.clear()
        waiting = asyncio.ensure_future(feed.next_rows(limit))
        cancel = asyncio.ensure_future(cancelled.wait())
        try:
            done, _ = await asyncio.wait({waiting, cancel}, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
            if waiting in done:
                return waiting.result()
            if cancel in done:
                raise WireError(QUERY_CANCELED, "canceling statement due to user request")
            return feed.schema.empty_table()
        finally:
            for task in (waiting, cancel):
                task.cancel()

    async def close(self, name: str) -> Outcome:
        names = list(self.feeds) if name.upper() == "ALL" else [name]
        for n in names:
            feed = self.feeds.pop(n, None)
            if feed is None:
                raise WireError(INVALID_CURSOR, f"cursor \"{n}\" does not exist")
            await self.session.results.end_feed(feed)
        return Outcome("CLOSE CURSOR")


def _seconds(text: str) -> float:
    match = re.match(r"^\s*([\d.]+)\s*(ms|s|m)?\s*$", text)
    if not match:
        raise WireError("22023", f"invalid timeout '{text}' (e.g. '1s', '500ms')")
    value = float(match.group(1))
    return value / 1000 if match.group(2) == "ms" else value * 60 if match.group(2) == "m" else value
