"""What a bounded file source read to its end, and whether its files still hold just that.

A query that has finished reading its files is not read again after a
restart, so a file that changed meanwhile would be silently left out. A
bounded reader therefore notes each file as it finishes it: ``{name:
{"size": bytes, "fingerprint": CRCs of the first and last 256 bytes}}``.
A checkpoint of a finished query keeps that, and restoring it checks the
files again (:func:`check_read_to_end`):

* a file that is shorter, or whose first ``size`` bytes differ, was
  replaced or rotated under the same name: the query's result does not
  hold for it;
* a file that grew, or a file that appeared, holds rows the finished query
  will not read.

Either is a :class:`SourceError` naming the file and what to do, so the
query is listed as failed with that error instead of quietly reporting 0
events. A file that is gone is not an error: what it held was read.
"""

from __future__ import annotations

import os
import zlib

from .base import SourceError
from .files import FileSet

_PRINT = 256  # bytes at each end of the read part that a fingerprint covers


def fingerprint(path: str, offset: int) -> str | None:
    """A CRC of the first and the last ``_PRINT`` bytes before ``offset`` (None if unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(min(offset, _PRINT))
            f.seek(max(0, offset - _PRINT))
            tail = f.read(min(offset, _PRINT))
    except OSError:
        return None
    return f"{zlib.crc32(head):08x}{zlib.crc32(tail):08x}"


def identity(path: str, size: int) -> dict:
    """What a restart compares: the bytes read of the file at ``path`` (its first ``size``)."""
    return {"size": size, "fingerprint": fingerprint(path, size)}


def check_read_to_end(source: str, files: FileSet, read: dict[str, dict]) -> None:
    """Raise SourceError if the files of ``files`` are not those a finished read saw (``read``).

    Lines can be appended to a JSON or CSV file; a Parquet file that grew was
    rewritten, so it counts as replaced.
    """
    appendable = files.fmt != "parquet"
    try:
        names = files.list()
    except SourceError:
        return  # the input is gone: what it held was read
    for name in names:
        path = files.full(name)
        saved = read.get(name)
        if saved is None:
            raise SourceError(
                "this file appeared after the query had read its source to the end and finished; a finished "
                "query does not read again, so its rows would be left out: run the query with a new "
                "--state-dir (or give the source watch = 'true', so that its query keeps reading)",
                source=source, file=path)
        try:
            size = os.path.getsize(path)
        except OSError:
            continue
        if size < saved["size"] or fingerprint(path, saved["size"]) != saved["fingerprint"] or (
                size > saved["size"] and not appendable):
            raise SourceError(
                f"the file is not the one the query read to its end ({saved['size']} bytes) before it finished: "
                f"it was replaced or rotated (same name, other content, now {size} bytes), so the query's result "
                "does not hold for it; restore the original file, or start over with a new --state-dir",
                source=source, file=path)
        if size > saved["size"]:
            raise SourceError(
                f"the file has grown by {size - saved['size']} bytes since the query read it to its end "
                f"({saved['size']} bytes) and finished; a finished query does not read again, so those rows "
                "would be left out: run the query with a new --state-dir (or give the source watch = 'true', "
                "so that its query keeps reading)", source=source, file=path)
