"""File sinks: JSON lines (plain, changelog, Debezium), CSV and Parquet.

Opening a sink creates the file (and its parent directories) or truncates
an existing one: a sink holds exactly the output of the query that opened
it. To continue after a crash, open it with ``position`` (from a
checkpoint) instead: the file is kept and cut back to that position.

* ``json``: one object per row, keys in column order. Append-only results
  only (an updating result is refused when the sink is opened).
* ``changelog-json`` / ``debezium-json``: any result; see ``encode.py``.
* ``csv``: a header line when the file is created, then one line per row;
  append-only only. Quoting only where needed; NULL is an empty field; an
  empty string is ``""``; NaN and infinities are written as ``nan``,
  ``inf``, ``-inf`` (CSV has no rule against them; the CSV source reads
  them back).
* ``parquet``: append-only only; each ``write`` becomes row groups. A
  Parquet file is readable only once its footer is written, at ``close``,
  so ``flush`` cannot make the rows visible before that. Integer, date and
  timestamp columns are written with DELTA_BINARY_PACKED instead of
  dictionary encoding: ids and times are mostly distinct, and for them it
  is 2-8x faster to write and smaller (other columns: dictionary, snappy).

Positions: ``{"bytes": n}`` for the text formats (the header included),
``{"rows": n}`` for Parquet. ``truncate`` for Parquet rewrites the file's
first rows, so it is slower (used only on restore).
"""

from __future__ import annotations

import csv
import io
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from ..changelog import INSERT, OP, with_op
from .base import SinkError
from .encode import Renderer, csv_columns_sql, json_lines_sql, text_bytes

JSON_FORMATS = ("json", "changelog-json", "debezium-json")


class LineSink:
    """A SinkWriter for the JSON-lines formats and CSV.

    Args:
        path: the output file.
        schema: the result's columns (without ``__op``).
        fmt: ``json``, ``changelog-json``, ``debezium-json`` or ``csv``.
        delimiter: the CSV field separator.
        position: continue an existing file from this position instead of starting afresh.
    """

    def __init__(self, path: str, schema: pa.Schema, fmt: str, *, delimiter: str = ",",
                 position: dict | None = None):
        self.path, self.schema, self.fmt, self.delimiter = path, schema, fmt, delimiter
        self._renderer = Renderer()
        self._sql = csv_columns_sql(schema) if fmt == "csv" else json_lines_sql(schema, fmt)
        self._header = _csv_header(schema, delimiter) if fmt == "csv" else b""
        _make_parent(path)
        if position is None:
            self._file = open(path, "wb")
            self._bytes = 0
            self._start()
        else:
            self._file = open(path, "r+b" if os.path.exists(path) else "w+b")
            self._bytes = os.path.getsize(path)
            self.truncate(position)

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        table = _prepare(table, self.schema, keep_op=self.fmt in ("changelog-json", "debezium-json"), fmt=self.fmt)
        rendered = self._renderer.run(self._sql, table)
        if self.fmt == "csv":
            buf = io.BytesIO()
            pcsv.write_csv(rendered, buf, write_options=pcsv.WriteOptions(
                include_header=False, delimiter=self.delimiter, quoting_style="needed"))
            pieces = [buf.getbuffer()]
        else:
            pieces = text_bytes(rendered.column(0))
        for piece in pieces:
            self._file.write(piece)
            self._bytes += len(piece)
        self._file.flush()  # visible to readers of the file at once (made durable by a checkpoint's fsync)

    def flush(self) -> None:
        self._file.flush()
        os.fsync(self._file.fileno())

    @property
    def position(self) -> dict:
        return {"bytes": self._bytes}

    def truncate(self, position: dict) -> None:
        size = int(position.get("bytes", 0))
        if size > self._bytes:
            raise SinkError(f"cannot truncate {self.path} to {size} bytes: it holds only {self._bytes}")
        self._file.flush()
        self._file.truncate(size)
        self._file.seek(size)
        self._bytes = size
        if size < len(self._header):
            # Cut into (or before) the header: start the file again.
            self._file.truncate(0)
            self._file.seek(0)
            self._bytes = 0
            self._start()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
        self._renderer.close()

    def _start(self) -> None:
        if self._header:
            self._file.write(self._header)
            self._bytes += len(self._header)


class ParquetSink:
    """A SinkWriter for Parquet.

    Args:
        path: the output file.
        schema: the result's columns.
        position: continue an existing (closed, valid) file from this row count.
    """

    def __init__(self, path: str, schema: pa.Schema, *, position: dict | None = None):
        self.path, self.schema = path, schema
        _make_parent(path)
        keep = None
        if position is not None and int(position.get("rows", 0)):
            try:
                keep = pq.read_table(path).select(schema.names)
            except (pa.ArrowException, OSError) as e:
                raise SinkError(f"cannot continue the Parquet sink {path}: the file is not readable "
                                f"(a Parquet file is complete only when closed): {e}") from None
        self._writer = _parquet_writer(path, schema)
        self._rows = 0
        if keep is not None:
            self._rewrite(keep, int(position["rows"]))

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        table = _prepare(table, self.schema, keep_op=False, fmt="parquet")
        self._writer.write_table(table)
        self._rows += table.num_rows

    def flush(self) -> None:
        """Nothing to do: Parquet rows become readable when the file is closed."""

    @property
    def position(self) -> dict:
        return {"rows": self._rows}

    def truncate(self, position: dict) -> None:
        rows = int(position.get("rows", 0))
        if rows > self._rows:
            raise SinkError(f"cannot truncate {self.path} to {rows} rows: it holds only {self._rows}")
        self._writer.close()
        keep = pq.read_table(self.path) if rows else None
        self._writer = _parquet_writer(self.path, self.schema)
        self._rows = 0
        if keep is not None:
            self._rewrite(keep, rows)

    def close(self) -> None:
        self._writer.close()

    def _rewrite(self, table: pa.Table, rows: int) -> None:
        if rows > table.num_rows:
            raise SinkError(f"cannot truncate {self.path} to {rows} rows: it holds only {table.num_rows}")
        self._writer.write_table(table.slice(0, rows).cast(self.schema))
        self._rows = rows


def _parquet_writer(path: str, schema: pa.Schema) -> pq.ParquetWriter:
    delta = [f.name for f in schema
             if pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type) or pa.types.is_date(f.type)]
    return pq.ParquetWriter(path, schema, use_dictionary=[f.name for f in schema if f.name not in delta],
                            column_encoding={name: "DELTA_BINARY_PACKED" for name in delta})


def _prepare(table: pa.Table, schema: pa.Schema, *, keep_op: bool, fmt: str) -> pa.Table:
    """The schema's columns (cast to its types), with ``__op`` for the changelog formats."""
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise SinkError(f"the rows to write lack column(s) {', '.join(missing)}")
    if not keep_op and OP in table.column_names:
        ops = table.column(OP)
        if pc.any(pc.not_equal(ops, INSERT)).as_py():
            raise SinkError(f"format '{fmt}' can only write inserts, but the result holds updates or deletes; "
                            "use format = 'changelog-json' or 'debezium-json'")
    columns = [table.column(f.name) if table.column(f.name).type == f.type else table.column(f.name).cast(f.type)
               for f in schema]
    out = pa.Table.from_arrays(columns, schema=schema)
    if keep_op:
        out = out.append_column(OP, table.column(OP).cast(pa.int8())) if OP in table.column_names \
            else with_op(out, INSERT)
    return out


def _csv_header(schema: pa.Schema, delimiter: str) -> bytes:
    buf = io.StringIO()
    # The header is one line: the standard library's quoting rules are enough.
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerow(schema.names)
    return buf.getvalue().encode()


def _make_parent(path: str) -> None:
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
