"""COPY name [(columns)] FROM STDIN: CSV or PostgreSQL's text format into a memory stream or table.

The client's CopyData is gathered and parsed by pyarrow's CSV reader in
one go, with the target's column types, then handed to ``engine.insert``:
no per-row Python.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import DsmsError
from ..planner.catalog import SourceDef


@dataclass(frozen=True)
class CopyFormat:
    csv: bool
    header: bool
    delimiter: str
    null: str


def copy_format(options: str) -> CopyFormat:
    """The options after FROM STDIN: ``WITH (FORMAT csv, HEADER true, DELIMITER ',', NULL '')`` or ``CSV HEADER``."""
    text = options.strip().rstrip(";")
    words = text.lower()
    csv = bool(re.search(r"\bformat\s*'?csv\b|\bcsv\b", words))
    header = bool(re.search(r"\bheader\b(?!\s*(false|off|0)\b)", words))
    delim = re.search(r"\bdelimiter\s*(?:as\s*)?'([^']+)'", text, re.I)
    null = re.search(r"\bnull\s*(?:as\s*)?'([^']*)'", text, re.I)
    return CopyFormat(csv, header, delim.group(1) if delim else ("," if csv else "\t"),
                      null.group(1) if null else ("" if csv else "\\N"))


def target_columns(source: SourceDef, columns: list[str] | None) -> pa.Schema:
    """The Arrow types of the columns a COPY fills (all physical columns unless a list is given)."""
    arrow = source.schema.to_arrow()
    names = columns or list(source.physical)
    fields = []
    for name in names:
        index = arrow.get_field_index(name) if name in arrow.names else \
            next((i for i, n in enumerate(arrow.names) if n.lower() == name.lower()), -1)
        if index < 0 or arrow.names[index] not in source.physical:
            raise DsmsError(f"'{source.name}' has no column '{name}' to copy into; its columns are "
                            + ", ".join(source.physical))
        fields.append(arrow.field(index))
    return pa.schema(fields)


def parse_copy(data: bytes, schema: pa.Schema, fmt: CopyFormat, name: str) -> pa.Table:
    """Parse the copied bytes into a table of ``schema``; a bad row is named by its line."""
    if data.endswith(b"\\.\n"):  # the end marker older clients send
        data = data[:-3]
    if not data.strip():
        return schema.empty_table()
    read = pacsv.ReadOptions(column_names=schema.names, skip_rows=1 if fmt.header else 0)
    parse = pacsv.ParseOptions(delimiter=fmt.delimiter, quote_char='"' if fmt.csv else False,
                               escape_char=False if fmt.csv else "\\")
    convert = pacsv.ConvertOptions(column_types=schema, null_values=[fmt.null], strings_can_be_null=True,
                                   quoted_strings_can_be_null=False, timestamp_parsers=["%Y-%m-%d %H:%M:%S",
                                                                                         pacsv.ISO8601])
    try:
        return pacsv.read_csv(io.BytesIO(data), read, parse, convert)
    except pa.ArrowInvalid as e:
        raise DsmsError(f"COPY {name}: {str(e).splitlines()[0]}") from None
