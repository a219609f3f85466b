"""A memory stream's log on disk: every table appended to it, so queries see them after a restart.

The file is a sequence of frames, one per append::

    [4 bytes: header length][header: JSON][8 bytes: body length][body: one Arrow IPC stream]

The header says what the frame is (``{"kind": "rows"}``, or ``{"kind":
"end"}`` when the stream was ended) and carries an optional ``tag`` that
the caller chooses (the script statement that inserted the rows). A frame
is written whole and flushed to the operating system before the rows are
visible to queries, so a killed process loses nothing that a query read. A
crash in the middle of a write leaves a torn last frame, which loading
cuts off. ``sync()`` (before a checkpoint) makes the frames survive a
crash of the machine too.

Trimming: once every reader's checkpoint lies past the first frames,
``trim(upto)`` drops them. The file is rewritten (to a temporary name,
synced, renamed) starting with a ``{"kind": "base", "offset": n}`` frame
— the number of row frames dropped before it, so offsets that checkpoints
hold stay valid — followed by the frames kept. It is rewritten only when
the dropped part is at least ``rewrite_bytes`` and at least as large as
what is kept, so each byte is copied a bounded number of times.

Example:
    >>> import os, tempfile, pyarrow as pa
    >>> path = os.path.join(tempfile.mkdtemp(), "s.log")
    >>> j = Journal(path); j.append(pa.table({"x": [1, 2]}), tag=4); j.append_end(); j.close()
    >>> tables, ended, tags = Journal(path).load()
    >>> [t.to_pylist() for t in tables], ended, tags
    ([[{'x': 1}, {'x': 2}]], True, [4])
    >>> j = Journal(path, rewrite_bytes=0); _ = j.load(); j.append(pa.table({"x": [3]}), tag=5)
    >>> j.trim(1, last_tag=4)
    True
    >>> j.close()
    >>> j = Journal(path); tables, ended, tags = j.load()
    >>> j.base, j.trimmed_tag, [t.to_pylist() for t in tables], tags
    (1, 4, [[{'x': 3}]], [5])
"""

from __future__ import annotations

import json
import os
import struct

import pyarrow as pa

# Rewrite the file only when this much (and at least as much as is kept) can be dropped.
REWRITE_BYTES = 1 << 20


class Journal:
    def __init__(self, path: str, rewrite_bytes: int | None = None):
        self.path = path
        self.rewrite_bytes = REWRITE_BYTES if rewrite_bytes is None else rewrite_bytes
        self._file = None
        self.base = 0  # how many row frames were trimmed off the front of the file
        self.trimmed_tag = None  # the largest tag of the trimmed frames
        self._starts: list[int] = []  # where each row frame in the file starts
        self._end = 0  # the file's length

    def load(self) -> tuple[list[pa.Table], bool, list]:
        """The tables appended so far (from ``base`` on), whether the stream was ended, and the tags of
        the row frames.

        A torn last frame (a crash while it was written) is cut off the file.
        """
        tables, tags, ended, good = [], [], False, 0
        self._starts = []
        if not os.path.exists(self.path):
            return tables, ended, tags
        with open(self.path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            frame = _frame_at(data, pos)
            if frame is None:
                break
            header, body, end = frame
            kind = header.get("kind")
            if kind == "end":
                ended = True
            elif kind == "base":
                self.base, self.trimmed_tag = int(header["offset"]), header.get("tag")
            else:
                tables.append(pa.ipc.open_stream(body).read_all())
                tags.append(header.get("tag"))
                self._starts.append(pos)
            pos = good = end
        if good < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good)
        self._end = good
        return tables, ended, tags

    def append(self, table: pa.Table, tag=None) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        self._starts.append(self._write({"kind": "rows", "tag": tag}, sink.getvalue().to_pybytes()))

    def append_end(self) -> None:
        self._write({"kind": "end"}, b"")

    def trim(self, upto: int, last_tag=None) -> bool:
        """Drop the row frames before offset ``upto`` (``last_tag``: the largest tag dropped so far), if
        enough can be dropped to be worth rewriting the file. True if it was rewritten.
        """
        drop = min(upto - self.base, len(self._starts))
        if drop <= 0:
            return False
        cut = self._starts[drop] if drop < len(self._starts) else self._end
        if cut < self.rewrite_bytes or cut < self._end - cut:
            return False
        self.close()
        tmp = self.path + ".tmp"
        try:
            with open(self.path, "rb") as src, open(tmp, "wb") as dst:
                head = _frame({"kind": "base", "offset": self.base + drop, "tag": last_tag}, b"")
                dst.write(head)
                src.seek(cut)
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.path)
            _sync_dir(os.path.dirname(os.path.abspath(self.path)))
        except OSError:  # a full disk, say: the old file is whole; trimming is tried again later
            if os.path.exists(tmp):
                os.remove(tmp)
            return False
        shift = cut - len(head)
        self._starts = [s - shift for s in self._starts[drop:]]
        self._end -= shift
        self.base += drop
        self.trimmed_tag = last_tag
        return True

    @property
    def size(self) -> int:
        """The file's length in bytes."""
        return self._end

    def sync(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def delete(self) -> None:
        self.close()
        if os.path.exists(self.path):
            os.remove(self.path)

    def _write(self, header: dict, body: bytes) -> int:
        """Append a frame; where it starts in the file."""
        if self._file is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._file = open(self.path, "ab")
            self._end = self._file.tell()
        start = self._end
        frame = _frame(header, body)
        self._file.write(frame)
        self._file.flush()
        self._end += len(frame)
        return start


def _frame(header: dict, body: bytes) -> bytes:
    head = json.dumps(header).encode()
    return struct.pack("<I", len(head)) + head + struct.pack("<Q", len(body)) + body


def _sync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _frame_at(data: bytes, pos: int) -> tuple[dict, bytes, int] | None:
    """The frame starting at ``pos``: (header, body, the position after it), or None if it is torn."""
    if pos + 4 > len(data):
        return None
    (head_len,) = struct.unpack_from("<I", data, pos)
    pos += 4
    if pos + head_len + 8 > len(data):
        return None
    try:
        header = json.loads(data[pos:pos + head_len])
    except ValueError:
        return None
    pos += head_len
    (body_len,) = struct.unpack_from("<Q", data, pos)
    pos += 8
    if pos + body_len > len(data):
        return None
    return header, data[pos:pos + body_len], pos + body_len
