"""Result rows as protocol messages: DataRow per row (text or binary per column), or COPY text lines."""

from __future__ import annotations

import pyarrow as pa

from . import wire
from .pgarrays import column_binary, column_text


def is_binary(formats: list[int], i: int) -> bool:
    if not formats:
        return False
    return (formats[0] if len(formats) == 1 else formats[i] if i < len(formats) else 0) == 1


def encode_rows(table: pa.Table, formats: list[int], arrays: bool = True) -> bytes:
    """DataRow messages for every row, each column encoded in one go (``arrays``: see ``pgarrays``)."""
    if table.num_rows == 0:
        return b""
    columns = [column_binary(table.column(i), arrays) if is_binary(formats, i)
               else column_text(table.column(i), arrays)
               for i in range(table.num_columns)]
    return b"".join(wire.data_row(list(values)) for values in zip(*columns))


def encode_copy_lines(table: pa.Table) -> bytes:
    """CopyData messages in COPY's text format (tab-separated, \\N for NULL)."""
    if table.num_rows == 0:
        return b""
    columns = [column_text(table.column(i)) for i in range(table.num_columns)]
    escape = {ord("\\"): "\\\\", ord("\t"): "\\t", ord("\n"): "\\n", ord("\r"): "\\r"}
    lines = []
    for values in zip(*columns):
        lines.append(b"\t".join(b"\\N" if v is None else v.decode().translate(escape).encode() for v in values))
    return b"".join(wire.copy_data(line + b"\n") for line in lines)
