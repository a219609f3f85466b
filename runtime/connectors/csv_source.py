"""CSV: a header row, then one record per line, parsed by ``pyarrow.csv`` a block at a time.

Each file starts with a header naming its fields; columns are found by
name (exactly, after trimming spaces around the header names), so files may
order fields differently and carry extra ones. The delimiter is option
``csv.delimiter`` (one character; ``\\t`` for a tab), default ``,``.

Values: an empty field is NULL, except in a VARCHAR column, where it is the
empty string (as Flink's CSV format without a null literal); ``"..."``
quoting with ``""`` for a quote inside; BOOLEAN takes
``true``/``false``/``1``/``0``; TIMESTAMP takes the same forms as JSON
(``convert.py``); VARBINARY is base64. A quoted field cannot span lines:
every record is one line (a quoted newline is reported as a bad line).
"""

from __future__ import annotations

import csv

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from ...planner.types import sql_name
from .base import SourceError
from .convert import conform_table, convert_rows
from .line_source import LineCodec
from .lines import LineReader
from .salvage import BadInput

_BLOCK = 1 << 22


class CsvCodec(LineCodec):
    """Parses blocks of CSV lines into the requested columns.

    Args:
        source: the source's name, for messages.
        schema: the columns to read, with their declared types.
        not_null: columns that must not be NULL.
        delimiter: the field separator.
    """

    one_row_rule = "a record must be exactly one line"

    def __init__(self, source: str, schema: pa.Schema, not_null: tuple[str, ...] = (), delimiter: str = ","):
        self.source = source
        self.schema = schema
        self.not_null = tuple(not_null)
        self.delimiter = delimiter
        self.header: list[str] = []
        # Every column is parsed as text and converted afterwards by convert.py, so a
        # bad value is found row by row in the parsed table, without parsing again.
        self._parse_options = pcsv.ParseOptions(delimiter=delimiter, newlines_in_values=False)
        self._convert_options = pcsv.ConvertOptions(
            column_types={f.name: pa.string() for f in schema}, include_columns=[f.name for f in schema],
            strings_can_be_null=False, quoted_strings_can_be_null=False)

    def start_file(self, path: str, reader: LineReader, final: bool) -> bool:
        """Read the header: from the reader at the start of a file, else from the file's first line."""
        if reader.offset == 0:
            chunk = reader.peek(1, final)
            if chunk is None:
                return False
            line = chunk.data[:-1]
            reader.consume(chunk.size, 1)
        else:
            line = reader.read_first_line()
            if line is None:
                raise SourceError("the CSV header is missing", source=self.source, file=path, line=1)
        self._set_header(line, path)
        return True

    def is_blank(self, line: bytes) -> bool:
        return line in (b"", b"\r")

    def parse(self, data: bytes, record_errors: list | None = None) -> pa.Table:
        """The structural step: lines -> a table of text columns.

        Args:
            data: whole lines.
            record_errors: if given, records with the wrong number of fields are
                left out and listed here as (record index, message) instead of
                failing the block (pyarrow's ``invalid_row_handler``; error path).

        Raises:
            BadInput: the block cannot be split into records.
        """
        if not data or data.isspace():
            return pa.schema([(f.name, pa.string()) for f in self.schema]).empty_table()
        parse_options, threads = self._parse_options, True
        if record_errors is not None:
            def invalid(row) -> str:
                if row.number is None:
                    raise BadInput("a record could not be placed")
                record_errors.append((row.number - 1, f"expected {row.expected_columns} fields (as in the header), "
                                                      f"found {row.actual_columns}"))
                return "skip"
            parse_options = pcsv.ParseOptions(delimiter=self.delimiter, newlines_in_values=False,
                                              invalid_row_handler=invalid)
            threads = False  # row numbers are only known when parsing in one thread
        try:
            return pcsv.read_csv(pa.py_buffer(data),
                                 read_options=pcsv.ReadOptions(column_names=self.header, block_size=_BLOCK,
                                                               use_threads=threads),
                                 parse_options=parse_options, convert_options=self._convert_options)
        except (pa.ArrowInvalid, UnicodeError) as e:
            raise BadInput(str(e)) from None

    def convert(self, raw: pa.Table) -> pa.Table:
        """The value step: text columns -> the declared types (element-wise; raises BadInput)."""
        return conform_table(self._empty_as_null(raw), self.schema, self.not_null)

    def convert_rows(self, raw: pa.Table) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
        """Convert, leaving out the rows that do not convert: (good rows, {row: (column, message)})."""
        return convert_rows(self._empty_as_null(raw), self.schema, self.not_null, _quote,
                            "empty value for a NOT NULL column")

    def _empty_as_null(self, raw: pa.Table) -> pa.Table:
        """An empty field is NULL, except in a VARCHAR column."""
        if not self.schema:
            return raw
        columns = [raw.column(f.name) if pa.types.is_string(f.type)
                   else pc.if_else(pc.equal(raw.column(f.name), ""), None, raw.column(f.name)) for f in self.schema]
        return pa.Table.from_arrays(columns, names=self.schema.names)

    def check(self, line: bytes) -> None:
        """Nothing to look at in Python: pyarrow reports bad records itself (see :meth:`parse`)."""
        return None

    def diagnose_text(self, text: str, line: bytes) -> tuple[str | None, str] | None:
        """What is wrong with a line: not CSV, the wrong number of fields, or a field's value (in schema order)."""
        try:
            fields = next(csv.reader([text.rstrip("\r")], delimiter=self.delimiter, strict=True), [])
        except csv.Error as e:
            return None, f"malformed CSV: {e}"
        if len(fields) != len(self.header):
            return None, f"expected {len(self.header)} fields (as in the header), found {len(fields)}"
        for field in self.schema:
            value = fields[self.header.index(field.name)]
            if value == "" and field.name in self.not_null and not pa.types.is_string(field.type):
                return field.name, "empty value for a NOT NULL column"
            single = CsvCodec(self.source, pa.schema([field]), (), self.delimiter)
            single.header = self.header
            try:
                single.decode(line + b"\n")
            except BadInput:
                shown = value if len(value) <= 60 else value[:57] + "..."
                return field.name, f"cannot convert '{shown}' to {sql_name(field.type)}"
        return None

    def _set_header(self, line: bytes, path: str) -> None:
        try:
            text = line.decode("utf-8").rstrip("\r")
            names = next(csv.reader([text], delimiter=self.delimiter), [])
        except (UnicodeDecodeError, csv.Error) as e:
            raise SourceError(f"cannot read the CSV header: {e}", source=self.source, file=path, line=1) from None
        self.header = [n.strip() for n in names]
        for field in self.schema:
            if self.header.count(field.name) > 1:
                raise SourceError(f"column '{field.name}' appears more than once in the CSV header",
                                  source=self.source, file=path, line=1, column=field.name)
            if field.name not in self.header:
                raise SourceError(f"column '{field.name}' is not in the CSV header "
                                  f"(which has: {', '.join(self.header)})",
                                  source=self.source, file=path, line=1, column=field.name)


def _quote(value) -> str:
    text = "" if value is None else str(value)
    return "'" + (text if len(text) <= 60 else text[:57] + "...") + "'"
