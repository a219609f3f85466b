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

Example:
    >>> import os, tempfile, pyarrow as pa
    >>> path = os.path.join(tempfile.mkdtemp(), "s.log")
    >>> j = Journal(path); j.append(pa.table({"x": [1, 2]}), tag=4); j.append_end(); j.close()
    >>> tables, ended, tags = Journal(path).load()
    >>> [t.to_pylist() for t in tables], ended, tags
    ([[{'x': 1}, {'x': 2}]], True, [4])
"""

from __future__ import annotations

import json
import os
import struct

import pyarrow as pa


class Journal:
    def __init__(self, path: str):
        self.path = path
        self._file = None

    def load(self) -> tuple[list[pa.Table], bool, list]:
        """The tables appended so far, whether the stream was ended, and the tags of the row frames.

        A torn last frame (a crash while it was written) is cut off the file.
        """
        tables, tags, ended, good = [], [], False, 0
        if not os.path.exists(self.path):
            return tables, ended, tags
        with open(self.path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            frame = _frame_at(data, pos)
            if frame is None:
                break
            header, body, pos = frame
            if header.get("kind") == "end":
                ended = True
            else:
                tables.append(pa.ipc.open_stream(body).read_all())
                tags.append(header.get("tag"))
            good = pos
        if good < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good)
        return tables, ended, tags

    def append(self, table: pa.Table, tag=None) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        self._write({"kind": "rows", "tag": tag}, sink.getvalue().to_pybytes())

    def append_end(self) -> None:
        self._write({"kind": "end"}, b"")

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

    def _write(self, header: dict, body: bytes) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._file = open(self.path, "ab")
        head = json.dumps(header).encode()
        self._file.write(struct.pack("<I", len(head)) + head + struct.pack("<Q", len(body)) + body)
        self._file.flush()


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
