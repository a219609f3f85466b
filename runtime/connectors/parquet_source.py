"""Parquet files: read with ``pyarrow.parquet``, only the requested columns, batch by batch.

Columns are found by name (exactly); a declared column missing from a
file is an error naming the file and the column. Values are converted to
the declared types as for the other formats (``convert.py``): timestamps
of any unit and time zone become naive microseconds (UTC wall clock),
integer columns read as TIMESTAMP are epoch milliseconds.

The position is ``{"file": name, "row": rows read from that file}``; a
seek starts at the row group holding that row. Bad values are reported
with the 1-based row number in the file (Parquet has no lines).

Watch mode: Parquet files are complete only when closed, so new files are
picked up but a file is never re-read for appended rows. A newest file
that cannot be opened yet (still being written) is retried on the next
read; write files under a hidden name (``.part.parquet``) and rename them
when done to avoid that window.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq

from .base import ReadRequest, SourceError
from .convert import conform_table, convert_rows
from .dead_letter import DeadLetter
from .file_source import FileSource
from .files import FileSet
from .salvage import BadInput


class ParquetSource(FileSource):
    """A SourceReader over Parquet files.

    Args:
        req: the columns wanted and the batch size.
        files: the input files.
        watch: keep looking for new files.
        skip: ``on_error = 'skip'`` (else fail at the first bad row).
        dead_letter: where skipped rows go (needed when ``skip``).
    """

    def __init__(self, req: ReadRequest, files: FileSet, *, watch: bool, skip: bool,
                 dead_letter: DeadLetter | None):
        super().__init__(req, files, watch=watch, skip=skip, dead_letter=dead_letter)
        self._row = 0
        self._batches = None
        self._resume = False  # after seek: reopen ``_name`` at ``_row``
        self._size: int | None = None  # after seek: the size the file had at the saved position

    def _read(self) -> pa.Table | None:
        while True:
            if self._batches is None and not self._open_next():
                return self._no_more()
            try:
                batch = next(self._batches)
            except StopIteration:
                self._batches = None
                self._file_read()
                continue
            table = self._conform(pa.Table.from_batches([batch]))
            if table.num_rows:
                return table

    @property
    def position(self) -> dict:
        position = {"file": self._name, "row": self._row}
        if self._name is not None and self._row:
            try:  # a Parquet file is written once: its size tells a replaced one apart
                position["size"] = os.path.getsize(self._path())
            except OSError:
                pass
        return position

    def seek(self, position: dict) -> None:
        self._batches, self._error = None, None
        self._name, self._row = position.get("file"), int(position.get("row", 0))
        self._resume = self._name is not None
        self._size = position.get("size")

    def _close_file(self) -> None:
        self._batches = None

    def _open_next(self) -> bool:
        """Open the file to read next; False if there is none (yet)."""
        if self._resume and os.path.isfile(self._path()):
            name, row = self._name, self._row
        else:
            name, row = self.files.next_after(self._name, self._listing), 0
        if name is None:
            return False
        path = self._path(name)
        try:
            reader = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as e:
            if self.watch and self.files.next_after(name) is None:
                return False  # the newest file may still be being written: try again later
            raise SourceError(f"cannot read the Parquet file: {e}", source=self.req.name, file=path) from None
        names = reader.schema_arrow.names
        for field in self.req.schema:
            if field.name not in names:
                raise SourceError(f"column '{field.name}' is not in the Parquet file (which has: {', '.join(names)})",
                                  source=self.req.name, file=path, column=field.name)
        if row and name == self._name and self._size not in (None, os.path.getsize(path)):
            raise SourceError(f"the file is not the one read before the checkpoint (it had {self._size} bytes, "
                              f"now {os.path.getsize(path)}): it was replaced, so the saved position means nothing "
                              "in it; restore the original file, or start over with a new --state-dir",
                              source=self.req.name, file=path)
        if row > reader.metadata.num_rows:
            raise SourceError(f"the file has {reader.metadata.num_rows} rows, fewer than the saved position ({row})",
                              source=self.req.name, file=path)
        self._name, self._row, self._resume = name, row, False
        self._batches = self._iterate(reader, row, names)
        return True

    def _iterate(self, reader: pq.ParquetFile, row: int, names: list[str]):
        """Batches from ``row`` on, starting at the row group that holds it."""
        columns = [f.name for f in self.req.schema] or names[:1]  # no columns: still count the rows
        meta = reader.metadata
        group, first = 0, 0
        while group < meta.num_row_groups and first + meta.row_group(group).num_rows <= row:
            first += meta.row_group(group).num_rows
            group += 1
        if group == meta.num_row_groups:
            return
        skip = row - first
        for batch in reader.iter_batches(batch_size=self.req.batch_rows, row_groups=range(group, meta.num_row_groups),
                                         columns=columns):
            if skip:
                cut = min(skip, batch.num_rows)
                batch, skip = batch.slice(cut), skip - cut
            if batch.num_rows:
                yield batch if self.req.schema.names else batch.select([])

    def _conform(self, table: pa.Table) -> pa.Table:
        """Convert a batch to the declared types; on failure, find the bad rows (vectorized)."""
        start = self._row
        try:
            out = conform_table(table, self.req.schema, self.req.not_null)
            self._row += table.num_rows
            return out
        except BadInput:
            pass
        good, bad = convert_rows(table, self.req.schema, self.req.not_null, lambda v: repr(v)[:60],
                                 "null value for a NOT NULL column")
        if not self.skip:
            first = min(bad)
            column, message = bad[first]
            self._row = start + first  # the position: at the bad row
            return self._fail_at(start + first + 1, column, message,
                                 conform_table(table.slice(0, first), self.req.schema, self.req.not_null))
        self._dead_letter([
            {"file": self._path(), "line": start + i + 1, "column": column, "error": message,
             "raw": json.dumps(table.slice(i, 1).to_pylist()[0], ensure_ascii=False, default=str)}
            for i, (column, message) in sorted(bad.items())])
        self._row += table.num_rows
        return good
