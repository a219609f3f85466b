"""JSON lines: one object per line, parsed by ``pyarrow.json`` a block at a time.

Keys are matched to columns exactly (case-sensitive); other keys are
ignored; an absent key or ``null`` is NULL (an error for a NOT NULL
column). Numbers must be JSON numbers for numeric columns (a quoted
``"12"`` is not a BIGINT), DECIMAL also takes strings, DATE takes
``"YYYY-MM-DD"``, VARBINARY takes base64 strings, TIMESTAMP takes strings
or epoch milliseconds (see ``convert.py``). A line holding bytes that are
not UTF-8, ``NaN`` or ``Infinity`` (not JSON numbers), or a number beyond
a double (``1e400``) is a bad line, blamed on the key that holds it.

A ROW column takes a JSON object (its fields by name, other keys ignored),
an ARRAY column a JSON array and a MAP column a JSON object (its members;
read by DuckDB: ``json_maps.py``), nested to any depth; a value of another
shape is a bad line blamed on its column.

``pyarrow.json`` insists on one JSON type per column, but a timestamp
column may hold strings on some lines and numbers on others. The codec
reads timestamp columns in one of three modes and remembers the last that
worked:

* ``text``: as strings (digit strings count as epoch milliseconds);
* ``epoch``: as integers (epoch milliseconds);
* ``mixed``: a regular expression first quotes the integer values of the
  timestamp keys in the raw bytes (``"ts": 1700000000000`` becomes
  ``"ts": "1700000000000"``), then as ``text``. Slower (~0.6 s per 100 MB),
  so only used when a block really mixes the two forms. The pattern needs a
  key in quotes followed by ``:``; that byte sequence cannot occur inside
  a JSON string, where quotes are escaped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Callable

import pyarrow as pa
import pyarrow.json as pj

from ...planner.types import sql_name
from .convert import conform_table, convert_rows
from .json_maps import has_map, map_problem, read_map_columns
from .line_source import LineCodec
from .salvage import BadInput

_MODES = ("text", "epoch", "mixed")
_BLOCK = 1 << 20


class JsonCodec(LineCodec):
    """Parses blocks of JSON lines into the requested columns.

    Args:
        schema: the columns to read, with their declared types.
        not_null: columns that must not be NULL.
    """

    one_row_rule = "a line must hold exactly one JSON object"

    def __init__(self, schema: pa.Schema, not_null: tuple[str, ...] = ()):
        self.schema = schema
        self.not_null = tuple(not_null)
        self.blocks = JsonBlocks(schema)

    def parse(self, data: bytes, record_errors: list | None = None) -> pa.Table:
        """The structural step: lines -> a table of raw columns (timestamps as text or integers).

        Raises:
            BadInput: a line is malformed, or a value has the wrong JSON type.
        """
        return self.blocks.parse(data)

    def convert(self, raw: pa.Table) -> pa.Table:
        """The value step: raw columns -> the declared types (element-wise; raises BadInput)."""
        return conform_table(raw, self.schema, self.not_null)

    def convert_rows(self, raw: pa.Table) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
        """Convert, leaving out the rows that do not convert: (good rows, {row: (column, message)})."""
        return convert_rows(raw, self.schema, self.not_null, _show, "null value for a NOT NULL column")

    def check(self, line: bytes) -> tuple[str | None, str, bool] | None:
        """A quick look at one line in Python, on the error path only.

        Returns:
            None if nothing is visibly wrong, else (column, message, sure).
            ``sure`` when ``pyarrow.json`` is certain to reject the line too
            (a value of the wrong JSON type, a NULL in a NOT NULL column), so
            it need not be parsed alone to confirm; otherwise (malformed
            JSON: Python's and pyarrow's parsers may disagree on details)
            the caller confirms and words it with :meth:`diagnose`.
        """
        if not line.strip():
            return None
        value = json_object(line)
        if value is None:
            return None, "", False
        keys = [k for k, _ in value]
        obj = dict(value)
        for field in self.schema:
            problem = value_problem(obj.get(field.name), field.type)
            if problem is not None:
                return field.name, problem, True
        if _bad_utf8(line.decode("utf-8", errors="surrogateescape")):
            return None, "the line is not valid UTF-8", True
        for field in self.schema:
            if keys.count(field.name) > 1:
                return field.name, f"key '{field.name}' appears more than once", True
            v = obj.get(field.name)
            if v is None:
                if field.name in self.not_null:
                    return field.name, f"{'null' if field.name in obj else 'missing'} value for a NOT NULL column", True
            elif has_map(field.type):  # read by DuckDB: judged by the same SQL
                if map_problem(line, field) is not None:
                    return field.name, f"cannot convert {_show(v)} to {sql_name(field.type)}", True
            elif not _json_kind_fits(v, field.type):
                return field.name, f"cannot convert {_show(v)} to {sql_name(field.type)}", True
        return None

    def diagnose_text(self, text: str, line: bytes) -> tuple[str | None, str] | None:
        """What is wrong with a line: not JSON, not an object, or a key's value (by the key, in schema order)."""
        try:
            value = loads(text)
        except ValueError as e:
            return None, f"malformed JSON: {getattr(e, 'msg', str(e))} at character {getattr(e, 'pos', 0) + 1}"
        if not isinstance(value, _Pairs):
            return None, f"expected a JSON object, found {_kind(value)}"
        keys = [k for k, _ in value]
        obj = dict(value)
        for field in self.schema:
            problem = value_problem(obj.get(field.name), field.type)
            if problem is not None:
                return field.name, problem
        for field in self.schema:
            if keys.count(field.name) > 1:
                return field.name, f"key '{field.name}' appears more than once"
            v = obj.get(field.name)
            if v is None:
                if field.name in self.not_null:
                    what = "null" if field.name in obj else "missing"
                    return field.name, f"{what} value for a NOT NULL column"
                continue
            try:
                JsonCodec(pa.schema([field])).decode(line + b"\n")
            except BadInput:
                return field.name, f"cannot convert {_show(v)} to {sql_name(field.type)}"
        return None


class JsonBlocks:
    """Blocks of JSON lines through ``pyarrow.json``, the timestamp columns read in the mode that last worked.

    Args:
        schema: the declared columns, which each line holds (or each image of an envelope).
        envelope: the shape of a line around those columns (default: a line is those columns).
    """

    def __init__(self, schema: pa.Schema, envelope: Callable[[pa.Schema], pa.Schema] = lambda columns: columns):
        self.timestamps = [f.name for f in schema if pa.types.is_timestamp(f.type)]
        self.mode = "text"
        # Columns holding a MAP are read by DuckDB (json_maps.py; the DDL allows them without an envelope).
        self.maps = [f for f in schema if has_map(f.type)]
        plain = pa.schema([f for f in schema if not has_map(f.type)])
        self.schemas = {mode: envelope(_read_schema(plain, mode)) for mode in _MODES}
        if self.timestamps:
            keys = b"|".join(re.escape(json.dumps(n, ensure_ascii=False)[1:-1].encode()) for n in self.timestamps)
            self._quote_ints = re.compile(rb'("(?:' + keys + rb')"\s*:\s*)(-?[0-9]+)(?=\s*[,}])')

    def parse(self, data: bytes) -> pa.Table:
        """Whole lines -> a table of raw columns (timestamps as text or integers).

        Raises:
            BadInput: a line is malformed, or a value has the wrong JSON type.
        """
        if not data or data.isspace():
            empty = self.schemas[self.mode].empty_table()
            for f in self.maps:
                empty = empty.append_column(f.name, pa.array([], f.type))
            return empty
        _check_text(data)
        modes = [self.mode] + [m for m in _MODES if m != self.mode] if self.timestamps else ["text"]
        for mode in modes:
            try:
                raw = self._parse(data, mode)
            except (pa.ArrowInvalid, UnicodeError) as e:
                # Only a type clash can be cured by another timestamp mode.
                if mode == modes[-1] or not self._clash(str(e)):
                    raise BadInput(str(e)) from None
                continue
            self.mode = mode
            if self.maps:
                for name, column in read_map_columns(data, self.maps, raw.num_rows).items():
                    raw = raw.append_column(name, column)
            return raw
        raise AssertionError("unreachable")

    def _clash(self, message: str) -> bool:
        """Whether pyarrow failed because a timestamp column held another JSON type.

        The message names the column by its JSON pointer (``Column(/ts)``, in an envelope
        ``Column(/after/ts)``): its last part is the timestamp's key.
        """
        return "changed from" in message and any(
            f"/{n.replace('~', '~0').replace('/', '~1')})" in message for n in self.timestamps)

    def _parse(self, data: bytes, mode: str) -> pa.Table:
        if mode == "mixed":
            data = self._quote_ints.sub(rb'\1"\2"', data)
        parse = pj.ParseOptions(explicit_schema=self.schemas[mode], unexpected_field_behavior="ignore",
                                newlines_in_values=False)
        try:
            return pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(block_size=_BLOCK),
                                parse_options=parse)
        except pa.ArrowInvalid as e:
            if "straddl" not in str(e):
                raise
            # A line longer than a block: parse the chunk as a single block.
            return pj.read_json(pa.py_buffer(data), read_options=pj.ReadOptions(block_size=len(data) + 1),
                                parse_options=parse)


def _read_schema(schema: pa.Schema, mode: str) -> pa.Schema:
    """The types to ask ``pyarrow.json`` for (conversion to the declared types follows)."""
    fields = []
    for f in schema:
        t = f.type
        if pa.types.is_timestamp(t):
            t = pa.int64() if mode == "epoch" else pa.string()
        elif pa.types.is_date(t) or pa.types.is_binary(t):
            t = pa.string()  # pyarrow.json has no date parser; binary is base64 text
        fields.append(pa.field(f.name, t))
    return pa.schema(fields)


def json_object(line: bytes) -> _Pairs | None:
    """The line's JSON object as its (key, value) pairs; None if the line is not valid JSON or not an object.

    Bytes that are not UTF-8 are kept as surrogates (``_bad_utf8`` finds them
    in a value); NaN, Infinity and numbers beyond a double come back as
    :class:`_NotANumber`, so that the column holding them is blamed.
    """
    try:
        value = loads(line.decode("utf-8", errors="surrogateescape"))
    except ValueError:
        return None
    return value if isinstance(value, _Pairs) else None


def loads(text: str):
    """``json.loads`` keeping key order and duplicates, with NaN, Infinity and 1e400 marked."""
    return json.loads(text, object_pairs_hook=_Pairs, parse_constant=_NotANumber, parse_float=_float)


class _NotANumber(str):
    """``NaN``, ``Infinity`` or a number a double cannot hold, as written: JSON numbers are finite."""


def _float(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NotANumber(text)


def _bad_utf8(value) -> bool:
    return isinstance(value, str) and any("\udc80" <= c <= "\udcff" for c in value)


def value_problem(value, dtype: pa.DataType) -> str | None:
    """What makes a parsed JSON value unreadable whatever its column converts it to, if anything."""
    if isinstance(value, _NotANumber):
        if value in ("NaN", "Infinity", "-Infinity"):
            return f"{value} is not a JSON number (write null, or a number)"
        return f"number {value} is out of range for {sql_name(dtype)}"
    if _bad_utf8(value):
        return "the string is not valid UTF-8"
    return None


# A NaN or Infinity token (JSON has neither; pyarrow.json would read it as null).
_NON_NUMBER = re.compile(rb"(?<![\w\"])-?(?:NaN|Infinity)(?![\w\"])")


def _check_text(data: bytes) -> None:
    """Refuse a block holding bytes that are not UTF-8, or NaN/Infinity outside strings.

    pyarrow.json passes both through (invalid UTF-8 into string columns, whose
    JSON sinks would then write invalid JSON; NaN as null); the lines are then
    found one by one on the error path.
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput("the text is not valid UTF-8") from None
    if _NON_NUMBER.search(data) is None:
        return
    for line in data.split(b"\n"):
        if _NON_NUMBER.search(line) is not None:
            try:
                json.loads(line, parse_constant=_refuse_constant)
            except ValueError:
                raise BadInput("NaN or Infinity is not a JSON number") from None


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _json_kind_fits(value, dtype: pa.DataType) -> bool:
    """Whether ``pyarrow.json`` could read a JSON value of this kind into a column of ``dtype``.

    Only the JSON kind is judged (string, number, boolean, ...); whether the
    value then converts is left to the vectorized path.
    """
    if value is None:
        return True
    if pa.types.is_struct(dtype):  # a JSON object onto a ROW: each of its fields (others are ignored)
        if not isinstance(value, _Pairs):
            return False
        obj = dict(value)
        return all(_json_kind_fits(obj.get(f.name), f.type) for f in dtype)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return isinstance(value, list) and not isinstance(value, _Pairs) and all(
            _json_kind_fits(v, dtype.value_type) for v in value)
    if isinstance(value, bool):
        return pa.types.is_boolean(dtype)
    if isinstance(value, (list, dict)):
        return False
    if pa.types.is_boolean(dtype):
        return False
    if isinstance(value, str):
        return not (pa.types.is_integer(dtype) or pa.types.is_floating(dtype))
    if pa.types.is_integer(dtype):
        # A JSON number Python reads as a float has a '.' or an exponent, which
        # Arrow's integer parser refuses, as it refuses values out of range.
        return isinstance(value, int) and _int_range(dtype)[0] <= value <= _int_range(dtype)[1]
    if pa.types.is_timestamp(dtype):
        return isinstance(value, int)  # epoch milliseconds; a fraction is never a timestamp
    return pa.types.is_floating(dtype) or pa.types.is_decimal(dtype)


def _int_range(dtype: pa.DataType) -> tuple[int, int]:
    bits = dtype.bit_width
    if pa.types.is_signed_integer(dtype):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


class _Pairs(list):
    """A JSON object as its (key, value) pairs, so that duplicate keys can be seen."""


def _plain(v):
    if isinstance(v, _Pairs):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _show(v) -> str:
    text = json.dumps(_plain(v), ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(v) -> str:
    if isinstance(v, list):
        return "an array"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, bool):
        return "a boolean"
    if v is None:
        return "null"
    return "a number"
