"""Drive one runtime operator (a ``*Logic``) directly, with batches written as small text tables.

A batch is a table of ``|``-separated cells; the first line names the
columns, and an ``op`` column gives each row's kind (``+I``, ``-U``,
``+U``, ``-D``; it becomes the int8 ``__op`` column)::

    op | id | k | v
    +I | 1  | a | 10
    -D | 1  | a | 10

Cells are read as the column's type: numbers, ``null``, strings as they
stand, and timestamps as ``HH:MM:SS[.ffffff]`` on 1970-01-01 (so ``00:00:10``
is 10 s after the epoch), or a full ``YYYY-MM-DD HH:MM:SS``. Watermarks
are written the same way. :class:`OperatorDriver` plans a query, takes the
one operator of the asked kind out of its physical plan, and feeds it
batches and watermarks as the job would; what it returns is compared with
an expected text table (:func:`assert_rows`).
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from dsms.planner import declare, plan_query
from dsms.planner.vocabulary import OP, ChangeOp
from dsms.runtime.duck import Duck
from dsms.runtime.job import _LOGICS
from dsms.runtime.operators.base import Env, Logic

EPOCH = dt.datetime(1970, 1, 1)
CODES = {op.short: int(op) for op in ChangeOp}


def us(text: str) -> int:
    """A time written as ``HH:MM:SS[.f]`` (on 1970-01-01) or ``YYYY-MM-DD HH:MM:SS[.f]``, in epoch microseconds."""
    t = _timestamp(text)
    return (t - EPOCH) // dt.timedelta(microseconds=1)


def _timestamp(text: str) -> dt.datetime:
    text = text.strip()
    if len(text) <= 15:  # a time of day on the epoch's date
        text = "1970-01-01 " + text
    return dt.datetime.fromisoformat(text)


def _cell(text: str, t: pa.DataType):
    text = text.strip()
    if text.lower() == "null":
        return None
    if pa.types.is_timestamp(t):
        return _timestamp(text)
    if pa.types.is_integer(t):
        return int(text)
    if pa.types.is_floating(t) or pa.types.is_decimal(t):
        return float(text)
    if pa.types.is_boolean(t):
        return text.lower() == "true"
    return text


def _lines(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.strip().splitlines()
            if line.strip() and not set(line.strip()) <= set("-|+ ")]


def parse(text: str, schema: pa.Schema) -> pa.Table:
    """A text table as an Arrow table of ``schema`` (its ``op`` column as ``__op``), in ``schema``'s column order."""
    header, *body = _lines(text)
    for name in header:
        if name != "op" and name not in schema.names:
            raise AssertionError(f"column {name!r} is not among {schema.names}")
    columns = {}
    for f in schema:
        name = "op" if f.name == OP else f.name
        if name not in header:
            raise AssertionError(f"the text table has no column {name!r} (columns: {schema.names})")
        i = header.index(name)
        cells = [row[i] for row in body]
        if f.name == OP:
            columns[f.name] = pa.array([CODES[c] for c in cells], pa.int8())
        else:
            columns[f.name] = pa.array([_cell(c, f.type) for c in cells], f.type)
    return pa.table(columns, schema=schema)


def show_value(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, dt.datetime):
        text = v.isoformat(sep=" ")
        return text[len("1970-01-01 "):] if text.startswith("1970-01-01 ") else text
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def text_rows(table: pa.Table | None, columns: list[str]) -> list[tuple[str, ...]]:
    """The rows of ``table`` as tuples of cell texts, in order (``op`` from ``__op``)."""
    if table is None or table.num_rows == 0:
        return []
    names = [OP if c == "op" else c for c in columns]
    data = table.select(names).to_pydict()
    out = []
    for i in range(table.num_rows):
        row = []
        for name in names:
            v = data[name][i]
            row.append(ChangeOp(v).short if name == OP else show_value(v))
        out.append(tuple(row))
    return out


def expected_rows(text: str) -> tuple[list[str], list[tuple[str, ...]]]:
    header, *body = _lines(text)
    return header, [tuple(show_value(_normal(c)) for c in row) for row in body]


def _normal(cell: str):
    """A cell as :func:`show_value` writes it (``1.0`` and ``1`` alike, times without the epoch's date)."""
    try:
        return float(cell) if "." in cell or "e" in cell.lower() else int(cell)
    except ValueError:
        pass
    try:
        return _timestamp(cell)
    except ValueError:
        return cell


def assert_rows(got: pa.Table | None, expected: str, *, ordered: bool = True) -> None:
    """``got`` has exactly the rows of the text table ``expected`` (in its columns; in order unless not ``ordered``)."""
    header, want = expected_rows(expected) if expected.strip() else ([], [])
    if not header:
        assert got is None or got.num_rows == 0, f"expected no rows, got {text_rows(got, got.column_names)}"
        return
    have = text_rows(got, header)
    if not ordered:
        have, want = sorted(have), sorted(want)
    assert have == want, "\n".join(["rows differ", "  got:", *map(str, have), "  want:", *map(str, want)])


class OperatorDriver:
    """One operator of a planned query, run alone: batches in on its ports, watermarks, output back.

    Args:
        ddl: statements declaring the streams and tables the query reads.
        sql: the query.
        logic_type: the ``*Logic`` class to drive; the query's physical plan must have exactly one
            operator that the runtime runs with it.
    """

    def __init__(self, ddl: str, sql: str, logic_type: type[Logic]):
        plan = plan_query(sql, declare(ddl)).physical
        found = [op for op in plan.ops if _LOGICS.get(type(op)) is logic_type]
        assert len(found) == 1, f"expected one operator run by {logic_type.__name__} in the plan, found {len(found)}"
        self.spec = found[0]
        self.input_schemas = [plan.op(i).schema for i in self.spec.inputs]
        self.env = Env(Duck())
        self.logic = logic_type(self.spec, self.env)

    def batch(self, text: str, port: int = 0) -> pa.Table | None:
        """Feed a text table on ``port``; what the operator returned, as one table (None: nothing)."""
        return _one(self.logic.on_batch(port, parse(text, self.input_schemas[port])))

    def watermark(self, time: str) -> pa.Table | None:
        """Advance the input watermark to ``time``; the rows it released, as one table (None: nothing)."""
        return _one(self.logic.on_watermark(us(time)))


def _one(tables: list[pa.Table]) -> pa.Table | None:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else None
