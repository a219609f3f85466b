"""A connection's incoming messages, and a watch for the client going away while it is being sent rows.

While a feed streams changes the session is not reading; ``watch()``
reads one byte in the background so a closed connection is noticed at
once (and the subscription ended), and keeps any byte it reads for the
next message.
"""

from __future__ import annotations

import asyncio

from .wire import read_message


class _Prefixed:
    """A StreamReader with bytes put back in front."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader
        self.prefix = b""

    async def readexactly(self, n: int) -> bytes:
        if self.prefix:
            head, self.prefix = self.prefix[:n], self.prefix[n:]
            if len(head) == n:
                return head
            return head + await self.reader.readexactly(n - len(head))
        return await self.reader.readexactly(n)


class Inbox:
    def __init__(self, reader: asyncio.StreamReader):
        self.source = _Prefixed(reader)
        self._watch: asyncio.Task | None = None

    async def read(self) -> tuple[bytes, bytes]:
        await self._settle()
        return await read_message(self.source)

    def watch(self) -> asyncio.Task:
        """A task that ends when the client sends something or closes (its result: the byte, or b'' at EOF)."""
        if self._watch is None:
            self._watch = asyncio.ensure_future(self._peek())
        return self._watch

    async def _peek(self) -> bytes:
        data = await self.source.reader.read(1)
        self.source.prefix += data
        return data

    async def _settle(self) -> None:
        if self._watch is not None:
            if not self._watch.done():
                self._watch.cancel()
                try:
                    await self._watch
                except asyncio.CancelledError:
                    pass
            self._watch = None
