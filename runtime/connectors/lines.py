"""Reading a text file as chunks of whole lines, tracking byte offsets and line numbers.

The JSON and CSV sources parse many lines per call, so they need the file cut
at newlines, not row by row. A :class:`LineReader` reads large blocks,
cuts them after the last complete line (or after the N-th line when a batch
is full) and counts newlines vectorized with numpy; the exact byte offset and
line count of what was consumed make the reader's position.

``peek`` and ``consume`` are separate so a caller can take fewer lines than
it looked at (a batch stopped by a bad line).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

_BOM = b"\xef\xbb\xbf"
_MIN_READ = 1 << 16
_MAX_READ = 1 << 26  # bytes per read, and per batch unless a single line is longer


@dataclass(frozen=True)
class Chunk:
    """Whole lines peeked from a file.

    Attributes:
        data: the lines, each ending in ``\\n`` (one is appended to an
            unterminated last line of a finished file).
        first_line: the 1-based number of the first line.
        n_lines: how many lines ``data`` holds.
        size: how many bytes of the file the chunk covers (``len(data)``
            unless a newline was appended).
    """

    data: bytes
    first_line: int
    n_lines: int
    size: int

    def lines(self) -> list[bytes]:
        """The lines without their newlines (only for the error path: a Python list)."""
        return self.data.split(b"\n")[:-1]


class LineReader:
    """Whole lines of one file, from a byte offset on.

    Args:
        path: the file.
        offset: where to start, in bytes (just past a newline).
        line: how many lines precede ``offset``.
    """

    def __init__(self, path: str, offset: int = 0, line: int = 0):
        self.path = path
        # Unbuffered: the reader keeps its own buffer, and a read at end of
        # file must go to the OS every time so that appended bytes are seen.
        self._file = open(path, "rb", buffering=0)
        self.offset = offset
        self.line = line
        self._buf = b""
        self._newlines = 0  # newlines in _buf, kept up to date so the buffer is scanned once
        self._bytes_per_line = 128.0
        if offset:
            self._file.seek(offset)

    def peek(self, max_lines: int, final: bool) -> Chunk | None:
        """Up to ``max_lines`` whole lines after the consumed ones, without consuming them.

        Args:
            max_lines: the most lines to return.
            final: the file will not grow any more, so an unterminated last
                line counts as a line; otherwise it waits for its newline.

        Returns:
            The chunk, or None when no whole line is available.
        """
        self._fill(max_lines)
        buf = self._buf
        if self.offset == 0 and buf.startswith(_BOM):
            # A byte-order mark is not part of the first line; drop it for good.
            self._buf = buf = buf[len(_BOM):]
            self.offset = len(_BOM)
        n = self._newlines
        if n > max_lines:
            end = _nth_newline(buf, max_lines) + 1
            data, lines, size = buf[:end], max_lines, end
        elif n:
            end = buf.rfind(b"\n") + 1
            data, lines, size = buf[:end], n, end
        else:
            data, lines, size = b"", 0, 0
        if final and lines < max_lines and size < len(buf):
            # The unterminated tail of a finished file is its last line.
            data, lines, size = buf + b"\n", lines + 1, len(buf)
        if not lines:
            return None
        return Chunk(data, self.line + 1, lines, size)

    def consume(self, size: int, lines: int) -> None:
        """Mark ``size`` bytes holding ``lines`` lines as read (from a peeked chunk)."""
        self._newlines = 0 if size >= len(self._buf) else self._newlines - lines
        self._buf = self._buf[size:]
        self.offset += size
        self.line += lines
        if lines:
            self._bytes_per_line = 0.5 * self._bytes_per_line + 0.5 * (size / lines)

    def read_first_line(self) -> bytes | None:
        """The file's first line without its newline, or None if it is not complete yet.

        Reads from the start of the file without moving the reader (the CSV
        header, needed again after a seek).
        """
        data = b""
        while True:
            block = os.pread(self._file.fileno(), _MIN_READ, len(data))
            if not block:
                return None
            data += block
            end = data.find(b"\n")
            if end >= 0:
                line = data[:end]
                return line[len(_BOM):] if line.startswith(_BOM) else line

    def size(self) -> int:
        """The file's current size in bytes."""
        return os.fstat(self._file.fileno()).st_size

    def pending(self) -> int:
        """Bytes in the file (as far as read) after the consumed ones."""
        return len(self._buf)

    def close(self) -> None:
        self._file.close()

    def _fill(self, max_lines: int) -> None:
        """Read until the buffer holds ``max_lines`` newlines or the file ends."""
        while True:
            have = self._newlines
            if have >= max_lines or (have and len(self._buf) >= _MAX_READ):
                return  # enough lines, or enough bytes for one batch (very long lines)
            # Size the read from the lines seen so far, so that a batch usually
            # takes one read; a leftover tail is kept for the next batch.
            want = int((max_lines - have) * self._bytes_per_line * 1.1)
            block = self._file.read(min(max(want, _MIN_READ), _MAX_READ))
            if not block:
                return
            self._buf += block
            self._newlines += int(np.count_nonzero(np.frombuffer(block, np.uint8) == 10))  # 2x bytes.count


def _nth_newline(buf: bytes, n: int) -> int:
    """The index of the ``n``-th (1-based) newline in ``buf`` (which has more than ``n``)."""
    # Vectorized: one comparison over the buffer instead of n calls to find().
    return int(np.flatnonzero(np.frombuffer(buf, np.uint8) == 10)[n - 1])
