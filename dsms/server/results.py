"""Sending a statement's outcome to the client: a command tag, rows, or a feed of changes streamed until
the client cancels or leaves.

A feed's changes arrive from the engine thread into a bounded buffer
(``feeds.py``); a subscriber further behind than that is dropped with an
error saying so, and neither the engine nor any other client waits for it.
"""

from __future__ import annotations

import asyncio

import pyarrow as pa

from ..planner.bind.time_zone import session_zone
from ..query import in_zone
from . import wire
from .encode import encode_copy_lines, encode_rows, is_binary
from .errors import INSUFFICIENT_RESOURCES, QUERY_CANCELED, WireError
from .feeds import Feed, Overrun
from .pgarrays import field_description
from .statements import Outcome


class Disconnected(Exception):
    """The client went away."""


class Results:
    """What one session sends back, and the feeds it streams."""

    def __init__(self, session):
        self.session = session
        self.feeds: set[Feed] = set()

    def _local(self, table: pa.Table) -> pa.Table:
        """TIMESTAMP_LTZ values shown in this connection's session zone ('table.local-time-zone')."""
        return in_zone(table, session_zone(self.session.settings))

    def row_description(self, schema: pa.Schema, formats: list[int], arrays: bool = True) -> bytes:
        return wire.row_description([field_description(f.name, f.type, is_binary(formats, i), arrays)
                                     for i, f in enumerate(schema)])

    async def send_outcome(self, outcome: Outcome, formats: list[int], describe: bool, max_rows: int,
                           portal=None) -> None:
        send = self.session.send
        arrays = portal.arrays if portal is not None else True
        for notice in outcome.notices:
            if notice != "copy":
                send(wire.notice_response(notice))
        if outcome.feed is not None:
            if "copy" in outcome.notices:
                send(wire.copy_out_response(len(outcome.feed.schema)))
                await self._stream(outcome.feed, lambda t: encode_copy_lines(self._local(t)))  # printed as they arrive
            else:
                if describe:
                    send(self.row_description(outcome.feed.schema, formats, arrays))
                await self._stream(outcome.feed, lambda t: encode_rows(self._local(t), formats, arrays))
            return
        if outcome.tag == "EMPTY":
            send(wire.empty_query())
            return
        table = outcome.table
        if table is not None:
            if describe:
                send(self.row_description(table.schema, formats, arrays))
            start = portal.sent if portal is not None else 0
            end = table.num_rows if max_rows <= 0 else min(table.num_rows, start + max_rows)
            send(encode_rows(self._local(table.slice(start, end - start)), formats, arrays))
            if portal is not None:
                portal.sent = end
                if end < table.num_rows:
                    send(wire.portal_suspended())
                    return
        send(wire.command_complete(outcome.tag))

    # -- feeds ------------------------------------------------------------------------------

    def feed_factory(self, engine, query_id: str, schema: pa.Schema, stop, snapshot: bool) -> Feed:
        """Make and attach a feed (engine thread)."""
        session = self.session
        feed = Feed(session.loop, query_id, schema, session.server.subscriber_buffer, stop)
        feed.on_overrun = self._drop_slow
        feed.attach(engine, snapshot)
        session.loop.call_soon_threadsafe(self.feeds.add, feed)
        session.server.metrics.subscribers(+1)
        return feed

    def _drop_slow(self, feed: Feed) -> None:
        """A subscriber too far behind: tell it why (if its socket still takes bytes) and close the connection."""
        session = self.session
        session.server.metrics.dropped.inc()
        try:
            session.writer.write(wire.error_response(INSUFFICIENT_RESOURCES, f"the subscription to '{feed.query_id}' "
                                                     f"fell more than {feed.limit_rows} rows behind and was dropped",
                                                     severity="FATAL"))
        finally:
            session.writer.transport.abort()

    async def _stream(self, feed: Feed, encode) -> None:
        """Send each change until the client cancels or leaves (or the feed is overrun)."""
        session = self.session
        session.cancelled.clear()
        await session.flush()
        cancel = asyncio.ensure_future(session.cancelled.wait())
        watch = session.inbox.watch()
        try:
            while True:
                waiting = asyncio.ensure_future(feed.next_rows())
                wait_for = {waiting, cancel} | ({watch} if not watch.done() else set())
                done, _ = await asyncio.wait(wait_for, return_when=asyncio.FIRST_COMPLETED)
                if waiting in done:
                    try:
                        table = waiting.result()
                    except Overrun as e:
                        raise WireError(INSUFFICIENT_RESOURCES, str(e)) from None
                    session.send(encode(table))
                    session.server.metrics.streamed(table.num_rows)
                    await session.flush()
                    continue
                waiting.cancel()
                if cancel in done:
                    raise WireError(QUERY_CANCELED, "canceling statement due to user request")
                if watch in done and not watch.result():
                    raise Disconnected()
        finally:
            cancel.cancel()
            await self.end_feed(feed)

    async def end_feed(self, feed: Feed) -> None:
        if feed in self.feeds:
            self.feeds.discard(feed)
            self.session.server.metrics.subscribers(-1)
            try:
                await self.session.host.call(feed.detach, reads_only=True)
            except RuntimeError:
                pass  # the server is stopping: the engine is closing anyway

    async def close_feeds(self) -> None:
        for feed in list(self.feeds):
            await self.end_feed(feed)
