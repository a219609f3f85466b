"""Tables with a primary key: files read as changes by key, with an ``__op`` column.

Two formats (``ReadRequest.changelog``):

* ``upsert`` (``format = 'json'``, ``'csv'`` or ``'parquet'`` on a TABLE):
  each row is the new row of its key (op 0, ``+I``). In JSON lines, a line
  with ``"__deleted": true`` deletes its key (op 3, ``-D``): the marker
  Debezium's new-record-state extraction writes for deletes
  (``delete.handling.mode = rewrite``); only the key columns (and the time
  column of a versioned table) need values on such a line.
* ``debezium`` (``format = 'debezium-json'``): one envelope per line,
  ``{"op": "c"|"r"|"u"|"d", "before": {...}|null, "after": {...}|null}``
  (other keys, such as ``source`` and ``ts_ms``, are ignored). ``c`` and
  ``r`` give ``+I`` of ``after``; ``u`` gives ``-U`` of ``before`` (when
  present) and ``+U`` of ``after``; ``d`` gives ``-D`` of ``before``.

Either way the runtime normalizes the changes by key downstream
(ChangelogNormalize), so a repeated row, an update whose ``before`` is
missing, or a delete of an unknown key all come out as a valid changelog.

Envelopes are parsed with ``pyarrow.json`` into nested columns, a block of
lines at a time, converted with the same code as plain JSON, and expanded
into changelog rows with numpy index arithmetic (no Python per row).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...planner.physical.specs import OP
from ..changelog import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from .base import ReaderWrapper, ReadRequest
from .convert import conform_table
from .json_source import JsonBlocks, JsonCodec, _Pairs, _plain, _show, json_object
from .line_source import LineCodec
from .salvage import BadInput

DELETED = "__deleted"  # the delete marker of upsert JSON lines
_DBZ_OP = "__dbz_op"  # per line: 0 c/r, 2 u, 3 d
_HAS_BEFORE = "__dbz_before"
_OPS = {"c": INSERT, "r": INSERT, "u": UPDATE_AFTER, "d": DELETE}


# -- upsert ---------------------------------------------------------------------------------

def upsert_request(req: ReadRequest, fmt: str) -> ReadRequest:
    """What to ask the plain reader for: JSON lines also read the delete marker."""
    if fmt != "json":
        return req
    return ReadRequest(req.name, req.options, req.path, req.schema.append(pa.field(DELETED, pa.bool_())),
                       req.not_null, req.batch_rows)


class UpsertReader(ReaderWrapper):
    """Rows as upserts by key (op 0); JSON lines marked ``"__deleted": true`` as deletes (op 3)."""

    def read(self) -> pa.Table | None:
        table = self.inner.read()
        if table is None:
            return None
        if DELETED in table.column_names:
            deleted = pc.fill_null(table.column(DELETED), False)
            ops = pc.if_else(deleted, pa.scalar(DELETE, pa.int8()), pa.scalar(INSERT, pa.int8()))
            return table.drop_columns([DELETED]).append_column(OP, ops)
        return table.append_column(OP, pa.array(np.full(table.num_rows, INSERT, np.int8)))



# -- debezium -------------------------------------------------------------------------------

def flat_schema(schema: pa.Schema) -> pa.Schema:
    """One row per envelope line: its op, whether it has ``before``, then both images' columns."""
    fields = [pa.field(_DBZ_OP, pa.int8()), pa.field(_HAS_BEFORE, pa.bool_())]
    fields += [pa.field(f"before.{f.name}", f.type) for f in schema]
    fields += [pa.field(f"after.{f.name}", f.type) for f in schema]
    return pa.schema(fields)


def debezium_request(req: ReadRequest) -> ReadRequest:
    return ReadRequest(req.name, req.options, req.path, flat_schema(req.schema), (), req.batch_rows)


class DebeziumCodec(LineCodec):
    """A line codec for Debezium envelopes: one flat row per line."""

    def __init__(self, schema: pa.Schema, not_null: tuple[str, ...] = ()):
        self.schema = schema
        self.not_null = tuple(not_null)
        self.row = JsonCodec(schema)  # the images: per-line checks
        self.blocks = JsonBlocks(schema, _envelope)
        self.out = flat_schema(schema)

    def parse(self, data: bytes, record_errors: list | None = None) -> pa.Table:
        return self.blocks.parse(data)

    def convert(self, raw: pa.Table) -> pa.Table:
        ops = raw.column("op")
        codes = pc.fill_null(_op_codes(ops), -1)
        if pc.any(pc.equal(codes, -1)).as_py():
            raise BadInput("an envelope's op is not c, r, u or d")
        before, after = raw.column("before"), raw.column("after")
        has_before, has_after = pc.is_valid(before), pc.is_valid(after)
        needs_after = pc.not_equal(codes, DELETE)
        if pc.any(pc.and_(needs_after, pc.invert(has_after))).as_py():
            raise BadInput("a c, r or u envelope has no 'after'")
        if pc.any(pc.and_(pc.invert(needs_after), pc.invert(has_before))).as_py():
            raise BadInput("a d envelope has no 'before'")
        images = {}
        for name, column, present in (("before", before, has_before), ("after", after, has_after)):
            flat = pa.Table.from_struct_array(column.combine_chunks() if isinstance(column, pa.ChunkedArray)
                                              else column)
            converted = conform_table(flat, self.schema)
            for c in self.not_null:
                if pc.any(pc.and_(present, pc.is_null(converted.column(c)))).as_py():
                    raise BadInput(f"NULL in NOT NULL column '{c}'")
            images[name] = converted
        columns = [codes.cast(pa.int8()), has_before]
        columns += [images["before"].column(f.name) for f in self.schema]
        columns += [images["after"].column(f.name) for f in self.schema]
        return pa.Table.from_arrays(columns, schema=self.out)

    def convert_rows(self, raw: pa.Table) -> tuple[pa.Table, dict[int, tuple[str, str]]]:
        """The error path: each envelope converted alone."""
        good, bad = [], {}
        for i in range(raw.num_rows):
            try:
                good.append(self.convert(raw.slice(i, 1)))
            except BadInput as e:
                bad[i] = (None, str(e))
        return (pa.concat_tables(good) if good else self.out.empty_table()), bad

    def check(self, line: bytes) -> tuple[str | None, str, bool] | None:
        if not line.strip():
            return None
        value = json_object(line)
        if value is None:
            return None, "", False
        obj = dict(value)
        op = obj.get("op")
        if op not in _OPS:
            return None, f"an envelope's op must be c, r, u or d, not {_show(op)}", True
        for image in ("before", "after"):
            v = obj.get(image)
            needed = image == "after" if op != "d" else image == "before"
            if v is None:
                if needed:
                    return None, f"a '{op}' envelope needs '{image}'", True
                continue
            if not isinstance(v, _Pairs):
                return image, f"'{image}' must be an object, not {_show(v)}", True
            verdict = self.row.check(json.dumps(_plain(v)).encode())
            if verdict is not None:
                column, message, sure = verdict
                return (f"{image}.{column}" if column else image), message, sure
            if needed:
                for c in self.not_null:
                    if dict(v).get(c) is None:
                        return f"{image}.{c}", "null value for a NOT NULL column", True
        return None

    def diagnose(self, line: bytes) -> tuple[str | None, str]:
        verdict = self.check(line)
        if verdict is not None and verdict[1]:
            return verdict[0], verdict[1]
        column, message = self.row.diagnose(line)
        if message.startswith("expected a JSON object") or message.startswith("malformed") or \
                message.startswith("the line is not"):
            return column, message
        return None, "cannot read the envelope"


def _envelope(image: pa.Schema) -> pa.Schema:
    """A Debezium line around the columns of a row: its op, the row before and the row after."""
    return pa.schema([("op", pa.string()), ("before", pa.struct(list(image))), ("after", pa.struct(list(image)))])


def _op_codes(ops: pa.ChunkedArray | pa.Array) -> pa.Array:
    keys = pa.array(list(_OPS))
    index = pc.index_in(ops, value_set=keys)
    return pc.take(pa.array(list(_OPS.values()), pa.int8()), index)


class DebeziumReader(ReaderWrapper):
    """Expands the flat envelope rows of a line reader into changelog rows (before images first)."""

    def __init__(self, inner, schema: pa.Schema):
        super().__init__(inner)
        self.schema = schema

    def read(self) -> pa.Table | None:
        flat = self.inner.read()
        if flat is None:
            return None
        n = flat.num_rows
        names = self.schema.names
        if n == 0:
            return self.schema.empty_table().append_column(OP, pa.array([], pa.int8()))
        codes = flat.column(_DBZ_OP).to_numpy()
        has_before = flat.column(_HAS_BEFORE).to_numpy(zero_copy_only=False)
        lines = np.arange(n, dtype=np.int64)
        take_before = lines[(codes == DELETE) | ((codes == UPDATE_AFTER) & has_before)]
        take_after = lines[codes != DELETE]
        before = flat.select([f"before.{c}" for c in names]).take(take_before).rename_columns(names)
        after = flat.select([f"after.{c}" for c in names]).take(take_after).rename_columns(names)
        before_ops = np.where(codes[take_before] == DELETE, DELETE, UPDATE_BEFORE).astype(np.int8)
        after_ops = codes[take_after].astype(np.int8)
        table = pa.concat_tables([before.append_column(OP, pa.array(before_ops)),
                                  after.append_column(OP, pa.array(after_ops))])
        # In line order, a line's before image ahead of its after image.
        order = np.argsort(np.concatenate([take_before * 2, take_after * 2 + 1]), kind="stable")
        return table.take(pa.array(order))

