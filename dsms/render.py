"""Plain-text rendering of results for the terminal (CLI and REPL)."""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pyarrow as pa

from .runtime.operators.base import MIN_WATERMARK


def format_value(value) -> str:
    """One value as the shell and ``dsms run`` print it.

    Doubles print at full precision, as the shortest text that reads back
    as the same number (``5993790.5``, not ``5.99379e+06``).

    Example:
        >>> [format_value(v) for v in (5993790.5, 0.1, 1e20, float("nan"), None)]
        ['5993790.5', '0.1', '1e+20', 'nan', 'NULL']
    """
    if value is None:
        return "NULL"
    if isinstance(value, _dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.") + f"{value.microsecond // 1000:03d}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_nested(value, dtype: pa.DataType) -> str:
    """A ROW, ARRAY or MAP value as Flink prints it: ``(1, x)``, ``[1, 2]``, ``{k=5}``.

    Example:
        >>> t = pa.struct([("a", pa.int32()), ("tags", pa.list_(pa.string()))])
        >>> format_nested({"a": 1, "tags": ["x", None]}, t)
        '(1, [x, NULL])'
        >>> format_nested([("k", 5)], pa.map_(pa.string(), pa.int64()))
        '{k=5}'
    """
    if value is None:
        return "NULL"
    if pa.types.is_struct(dtype):
        return "(" + ", ".join(format_nested(value.get(f.name), f.type) for f in dtype) + ")"
    if pa.types.is_map(dtype):
        return "{" + ", ".join(f"{format_nested(k, dtype.key_type)}={format_nested(v, dtype.item_type)}"
                               for k, v in value) + "}"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return "[" + ", ".join(format_nested(v, dtype.value_type) for v in value) + "]"
    return format_value(value)


def _column_cells(column: pa.ChunkedArray) -> list[str]:
    if pa.types.is_float32(column.type):  # a FLOAT at its own precision: 0.1, not 0.10000000149011612
        return ["NULL" if v is None else str(np.float32(v)) for v in column.to_pylist()]
    if pa.types.is_nested(column.type):
        return [format_nested(v, column.type) for v in column.to_pylist()]
    return [format_value(v) for v in column.to_pylist()]


def format_watermark(wm: int) -> str:
    """A watermark (epoch microseconds) as a timestamp, or '-' before the first one."""
    if wm <= MIN_WATERMARK:
        return "-"
    return format_value(_dt.datetime(1970, 1, 1) + _dt.timedelta(microseconds=wm))


def format_rows(table: pa.Table, widths: list[int] | None = None) -> tuple[list[str], list[int]]:
    """Rows as aligned text lines; returns the lines and the column widths used."""
    names = table.column_names
    cells = [_column_cells(table.column(i)) for i in range(table.num_columns)]
    if widths is None:
        widths = [max([len(n)] + [len(c) for c in col]) for n, col in zip(names, cells)]
    lines = []
    for r in range(table.num_rows):
        lines.append(" | ".join(cells[c][r].ljust(widths[c]) for c in range(len(names))).rstrip())
    return lines, widths


def format_header(names: list[str], widths: list[int]) -> list[str]:
    head = " | ".join(n.ljust(w) for n, w in zip(names, widths)).rstrip()
    rule = "-+-".join("-" * w for w in widths)
    return [head, rule]


def format_expanded(table: pa.Table) -> str:
    """Rows as ``column | value`` blocks, one per row (the shell's ``\\x``), for wide results.

    Example:
        >>> print(format_expanded(pa.table({"id": [1], "name": ["ann"]})))
        -[ RECORD 1 ]-
        id   | 1
        name | ann
        (1 row)
    """
    names = table.column_names
    cells = [_column_cells(table.column(i)) for i in range(table.num_columns)]
    width = max([len(n) for n in names], default=0)
    out = []
    for r in range(table.num_rows):
        out.append(f"-[ RECORD {r + 1} ]-")
        out += [f"{n.ljust(width)} | {cells[c][r]}".rstrip() for c, n in enumerate(names)]
    out.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(out)


def format_table(table: pa.Table) -> str:
    lines, widths = format_rows(table)
    out = format_header(table.column_names, widths) + lines
    out.append(f"({table.num_rows} row{'s' if table.num_rows != 1 else ''})")
    return "\n".join(out)
