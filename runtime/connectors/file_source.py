"""What the file readers share (``LineSource``, ``ParquetSource``): the files, and what a bad row does.

``on_error = 'fail'``: the rows before the bad one are handed on and the
error is raised at the next read, with the position left at the bad row
(so the output does not depend on where batches are cut).
``on_error = 'skip'``: the bad rows go to the dead letter and are counted.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod

import pyarrow as pa

from .base import ReadRequest, SourceError
from .dead_letter import DeadLetter
from .files import FileSet
from .read_to_end import identity


class FileSource(ABC):
    """A SourceReader over files, but for the reading itself (:meth:`_read`, in the subclass).

    Args:
        req: the columns wanted and the batch size.
        files: the input files.
        watch: keep reading as files grow and appear.
        skip: ``on_error = 'skip'`` (else fail at the first bad row).
        dead_letter: where skipped rows go (needed when ``skip``).
    """

    def __init__(self, req: ReadRequest, files: FileSet, *, watch: bool, skip: bool,
                 dead_letter: DeadLetter | None):
        self.req = req
        self.files = files
        self.watch = watch
        self.skip = skip
        self.dead_letter = dead_letter
        self._listing = None if watch else files.list()  # a bounded source reads what was there at the start
        self._name: str | None = None  # the file being read (or last read), relative to the file set
        self._error: SourceError | None = None  # a bad row found after handing on the rows before it
        self._skipped = 0
        self._read_to_end: dict[str, dict] = {}  # the files read to their end: what a restart checks

    def read(self) -> pa.Table | None:
        if self._error is not None:
            raise self._error
        return self._read()

    @property
    def skipped(self) -> int:
        return self._skipped

    @property
    def read_to_end(self) -> dict[str, dict]:
        """Each file read to its end, by name: its size then and a fingerprint (``read_to_end.identity``)."""
        return dict(self._read_to_end)

    def restore_read_to_end(self, read: dict[str, dict]) -> None:
        """After a restart: the files a finished read had read, for the checkpoints to keep."""
        self._read_to_end = dict(read)

    def close(self) -> None:
        self._close_file()
        if self.dead_letter is not None:
            self.dead_letter.close()

    @abstractmethod
    def _read(self) -> pa.Table | None:
        """The next batch (see ``SourceReader.read``)."""

    def _close_file(self) -> None:  # noqa: B027 - a hook: a source that holds no open file has nothing to do
        """Let go of the file being read."""

    def _file_read(self, size: int | None = None) -> None:
        """The file being read has been read to its end (``size`` bytes; None: all it holds now)."""
        path = self._path()
        if size is None:
            try:
                size = os.path.getsize(path)
            except OSError:
                return  # gone already: nothing to check after a restart
        self._read_to_end[self._name] = identity(path, size)

    def _path(self, name: str | None = None) -> str:
        return self.files.full(name or self._name)

    def _no_more(self) -> pa.Table | None:
        """What a read returns when no file has more rows: an empty batch when watching, else None (the end)."""
        return self.req.schema.empty_table() if self.watch else None

    def _fail_at(self, line: int, column: str | None, message: str, before: pa.Table) -> pa.Table:
        """``on_error = 'fail'`` at a bad row (``line`` in the file): hand on the rows ``before`` it now and
        raise at the next read, or raise now if there are none. The caller has left the position at the row."""
        self._error = SourceError(message, source=self.req.name, file=self._path(), line=line, column=column)
        if not before.num_rows:
            raise self._error
        return before

    def _dead_letter(self, records: list[dict]) -> None:
        """``on_error = 'skip'``: write the bad rows (file, line, column, error, raw) to the dead letter."""
        self.dead_letter.write(records)
        self._skipped += len(records)
