"""A client's feed of changes (SUBSCRIBE, SELECT … EMIT CHANGES, a cursor over either).

The engine thread hands each batch of changes to the feed without ever
waiting: the batch is posted to the client's event loop, where it joins a
bounded buffer. A client that reads too slowly lets the buffer fill; past
its limit the feed is *overrun*: the subscription ends, the client is told
why, and neither the engine nor any other client has waited for it.
"""

from __future__ import annotations

import asyncio
import logging

import pyarrow as pa

log = logging.getLogger("dsms.server")

DEFAULT_LIMIT_ROWS = 100_000


class Overrun(Exception):
    """A subscriber fell further behind than its buffer allows."""


class Feed:
    """Batches of changes (a leading ``op`` column) waiting for one client."""

    def __init__(self, loop: asyncio.AbstractEventLoop, query_id: str, schema: pa.Schema, limit_rows: int,
                 stop=None):
        self.loop = loop
        self.query_id = query_id
        self.schema = pa.schema([pa.field("op", pa.string())] + list(schema))
        self.limit_rows = limit_rows
        self.batches: list[pa.Table] = []
        self.pending_rows = 0
        self.arrived = asyncio.Event()
        self.overrun = False
        self.subscription = None
        self._stop = stop  # what ends the query behind the feed (a SELECT … EMIT CHANGES), if anything
        self.finite = False  # True: a cursor over rows already there, nothing more will come
        self.on_overrun = None  # called once on the loop when the buffer overflows (the session drops the client)

    # -- engine thread -----------------------------------------------------------------

    def attach(self, engine, snapshot: bool) -> None:
        self.subscription = engine.subscribe(self.query_id, self.post, snapshot=snapshot)

    def post(self, batch: pa.Table) -> None:
        """The subscription's callback: never blocks the engine."""
        if batch.num_rows:
            self.loop.call_soon_threadsafe(self._add, batch)

    def detach(self, engine) -> None:
        if self.subscription is not None:
            self.subscription.cancel()
            self.subscription = None
        if self._stop is not None:
            self._stop()
            self._stop = None

    # -- event loop --------------------------------------------------------------------

    def _add(self, batch: pa.Table) -> None:
        if self.overrun:
            return
        if self.pending_rows > self.limit_rows:  # what it has not taken yet is past the limit: it is behind
            self.overrun = True
            log.warning("a subscriber of %s fell %d rows behind and was dropped", self.query_id,
                        self.pending_rows + batch.num_rows)
            self.batches.clear()
            if self.on_overrun is not None:
                self.on_overrun(self)
        else:
            self.batches.append(batch)
            self.pending_rows += batch.num_rows
        self.arrived.set()

    async def next_rows(self, max_rows: int | None = None) -> pa.Table:
        """Wait for changes, then take up to ``max_rows`` of them (all, if None)."""
        while not self.batches:
            if self.overrun:
                raise Overrun(f"the subscription to '{self.query_id}' fell more than {self.limit_rows} rows "
                              "behind the engine and was ended; read faster, or subscribe again")
            self.arrived.clear()
            await self.arrived.wait()
        return self.take(max_rows)

    def take(self, max_rows: int | None = None) -> pa.Table:
        table = pa.concat_tables(self.batches) if len(self.batches) > 1 else self.batches[0] if self.batches \
            else self.schema.empty_table()
        if max_rows is not None and table.num_rows > max_rows:
            rest = table.slice(max_rows)
            table = table.slice(0, max_rows)
            self.batches = [rest]
        else:
            self.batches = []
        self.pending_rows -= table.num_rows
        return table
