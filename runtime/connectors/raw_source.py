"""The ``raw`` format: each line of a file is one value of the source's single STRING column.

As Flink's ``raw`` format, nothing is parsed: a message whose shape varies
(JSON with optional or nested fields, say) arrives whole, and the query
takes it apart with the JSON functions (``JSON_VALUE(line, '$.user.id')``).
A line ends at ``\\n`` (a ``\\r`` before it is dropped); empty lines give no
row. Lines are split vectorized over the whole block; a line that is not
valid UTF-8 is a bad line (``on_error``).

Example:
    >>> codec = RawCodec("events", pa.schema([("line", pa.string())]))
    >>> codec.decode(b'{"a": 1}\\r\\n\\nnot json\\n').column("line").to_pylist()
    ['{"a": 1}', 'not json']
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from .base import SourceError
from .line_source import LineCodec
from .salvage import BadInput


class RawCodec(LineCodec):
    """Lines -> the one STRING column of the source.

    Args:
        source: the source's name, for messages.
        schema: the columns to read: exactly one, of type STRING.
        not_null: columns that must not be NULL (a line is never NULL).
    """

    one_row_rule = "a line gives one row"

    def __init__(self, source: str, schema: pa.Schema, not_null: tuple[str, ...] = ()):
        if len(schema) != 1 or not pa.types.is_string(schema.field(0).type):
            columns = ", ".join(f"{f.name} {f.type}" for f in schema)
            raise SourceError(f"format 'raw' reads each line into one STRING column, but the source reads "
                              f"({columns}); declare one column, e.g. (line STRING)", source=source)
        self.schema = schema
        self.not_null = tuple(not_null)

    def is_blank(self, line: bytes) -> bool:
        return line in (b"", b"\r")

    def parse(self, data: bytes, record_errors: list | None = None) -> pa.Table:
        lines = pc.list_flatten(pc.split_pattern(pa.array([data], pa.large_binary()), b"\n"))
        lines = pc.replace_substring_regex(lines, rb"\r$", b"")
        lines = lines.filter(pc.not_equal(pc.binary_length(lines), 0))
        try:
            text = lines.cast(pa.large_string()).cast(pa.string())
        except pa.ArrowInvalid as e:
            raise BadInput(str(e)) from None
        return pa.table({self.schema.field(0).name: text})

    def convert(self, raw: pa.Table) -> pa.Table:
        return raw  # parse already gave the declared column

    def check(self, line: bytes) -> tuple[str | None, str, bool] | None:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as e:
            return None, f"the line is not valid UTF-8 (byte {e.start + 1})", True
        return None

    def convert_rows(self, raw: pa.Table) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
        return self.convert(raw), {}
