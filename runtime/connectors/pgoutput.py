"""Decoding PostgreSQL's logical replication messages (the ``pgoutput`` plugin, protocol version 1).

The server streams, per transaction::

    B  Begin      final (commit) LSN, commit time, xid
    R  Relation   relation id, schema, name, replica identity, columns (name, type OID)
    I  Insert     relation id, N + new tuple
    U  Update     relation id, [K + old key | O + old row], N + new tuple
    D  Delete     relation id, K + old key | O + old row
    T  Truncate   relation ids
    C  Commit     flags, commit LSN, end LSN, commit time

A tuple is a column count and, per column, ``n`` (NULL), ``u`` (an
unchanged TOASTed value, not sent) or ``t`` + length + text.

:class:`ChangeDecoder` keeps the changes of one table as *changes by key*,
column by column (lists of raw text values): an insert is ``+I`` of the new
row, an update ``+U`` of the new row (``-D`` of the old key first when the
key changed), a delete ``-D`` of the old key or row. The runtime keeps the
current row per key (ChangelogNormalize), so the full before-image is not
needed: REPLICA IDENTITY DEFAULT (the primary key) suffices. Rows become
visible only when their transaction commits, so a batch never ends inside a
transaction and a position is always a commit boundary.

Decoding a message is the only per-row Python work; the text values are
converted to Arrow types a whole column at a time (postgres_common.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from struct import Struct

from ..changelog import DELETE, INSERT, UPDATE_AFTER

_I16, _I32, _I64 = Struct(">h"), Struct(">i"), Struct(">q")
_BEGIN = Struct(">qqi")
_COMMIT = Struct(">bqqq")
UNCHANGED = object()  # an unchanged TOASTed value: the server did not send it


class DecodeError(Exception):
    """A change the source cannot turn into rows (the reader reports it with the source's name)."""


@dataclass
class Relation:
    relid: int
    schema: str
    name: str
    identity: str  # d (default: primary key), f (full), i (index), n (nothing)
    columns: list[str]
    types: list[int]


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it: ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def _cstring(buf: bytes, off: int) -> tuple[str, int]:
    end = buf.index(b"\0", off)
    return buf[off:end].decode(), end + 1


def read_tuple(buf: bytes, off: int) -> tuple[list, int]:
    """One TupleData: the column values (bytes, None or UNCHANGED) and the offset after it."""
    (count,) = _I16.unpack_from(buf, off)
    off += 2
    values = []
    append = values.append
    for _ in range(count):
        kind = buf[off]
        off += 1
        if kind == 116:  # 't'
            (length,) = _I32.unpack_from(buf, off)
            off += 4
            append(buf[off:off + length])
            off += length
        elif kind == 110:  # 'n'
            append(None)
        elif kind == 117:  # 'u'
            append(UNCHANGED)
        else:
            raise DecodeError(f"tuple value kind {chr(kind)!r} is not supported (binary transfer is not used)")
    return values, off


class ChangeDecoder:
    """Turns the messages of a replication stream into column buffers of one table's changes by key.

    Args:
        schema, table: the table whose changes are kept (others are skipped).
        columns: the declared columns, in order (a subset of the table's).
        key: the primary key columns.
        since: skip transactions that committed before this LSN (already read before a restart).
    """

    def __init__(self, schema: str, table: str, columns: list[str], key: tuple[str, ...], since: int = 0):
        self.schema, self.table = schema, table
        self.columns = columns
        self.key = key
        self.since = since
        self.relation: Relation | None = None
        self._positions: list[int] = []  # per declared column, its place in the table's tuples
        self._key_positions: list[int] = []
        self.ops: list[int] = []
        self.values: list[list] = [[] for _ in columns]
        self._appends = [column.append for column in self.values]
        self.commit_rows: list[tuple[int, int]] = []  # (rows so far, commit LSN) at each commit
        self.committed_rows = 0  # rows of committed transactions (the rest belong to an open one)
        self.position = since  # the end LSN of the last committed transaction
        self.in_transaction = False
        self._skip = False
        self._commit_lsn = 0
        self._txn_start = 0

    # -- messages ----------------------------------------------------------------------------

    def feed(self, payload: bytes) -> None:
        """Decode one message."""
        kind = payload[0]
        if kind == 66:  # B
            final_lsn, _, _ = _BEGIN.unpack_from(payload, 1)
            self.in_transaction, self._commit_lsn = True, final_lsn
            self._skip = final_lsn < self.since
            self._txn_start = len(self.ops)
        elif kind == 67:  # C
            _, commit_lsn, end_lsn, _ = _COMMIT.unpack_from(payload, 1)
            self.in_transaction = False
            if not self._skip:
                self.committed_rows = len(self.ops)
                if self.committed_rows > self._txn_start:
                    self.commit_rows.append((self.committed_rows, commit_lsn))
                self.position = max(self.position, end_lsn)
        elif kind == 82:  # R
            self._relation(payload)
        elif self._skip:
            return
        elif kind == 73:  # I
            if self._ours(payload):
                values, _ = read_tuple(payload, 6)
                self._row(INSERT, values)
        elif kind == 85:  # U
            if self._ours(payload):
                self._update(payload)
        elif kind == 68:  # D
            if self._ours(payload):
                old, _ = read_tuple(payload, 6)
                self._row(DELETE, old, key_only=payload[5] == 75)
        elif kind == 84:  # T
            self._truncate(payload)
        # Y (type), O (origin) and M (message) carry no rows

    def _relation(self, payload: bytes) -> None:
        (relid,) = _I32.unpack_from(payload, 1)
        schema, off = _cstring(payload, 5)
        name, off = _cstring(payload, off)
        identity = chr(payload[off])
        (count,) = _I16.unpack_from(payload, off + 1)
        off += 3
        columns, types = [], []
        for _ in range(count):
            off += 1  # flags (part of the key)
            column, off = _cstring(payload, off)
            (oid,) = _I32.unpack_from(payload, off)
            off += 8  # type OID, type modifier
            columns.append(column)
            types.append(oid)
        if (schema, name) != (self.schema, self.table):
            return
        missing = [c for c in self.columns if c not in columns]
        if missing:
            raise DecodeError(f"table {schema}.{name} has no column {', '.join(missing)} any more "
                              "(it was altered while dsms read it)")
        self.relation = Relation(relid, schema, name, identity, columns, types)
        self._positions = [columns.index(c) for c in self.columns]
        self._key_positions = [columns.index(c) for c in self.key]

    def _ours(self, payload: bytes) -> bool:
        (relid,) = _I32.unpack_from(payload, 1)
        return self.relation is not None and relid == self.relation.relid

    def _update(self, payload: bytes) -> None:
        marker = payload[5]
        old = None
        off = 5
        if marker in (75, 79):  # K (old key) or O (old row)
            old, off = read_tuple(payload, 6)
        new, _ = read_tuple(payload, off + 1)
        if old is not None and any(new[p] is UNCHANGED for p in self._positions):
            new = [o if n is UNCHANGED else n for n, o in zip(new, old)]  # FULL identity: the old row has it
        if old is not None and [old[p] for p in self._key_positions] != [new[p] for p in self._key_positions]:
            self._row(DELETE, old, key_only=marker == 75)  # the key changed: the old key is gone
            self._row(INSERT, new)
        else:
            self._row(UPDATE_AFTER, new)

    def _row(self, op: int, values: list, key_only: bool = False) -> None:
        if key_only:  # an old key tuple holds only the key columns (others are NULL)
            keys = set(self._key_positions)
            values = [v if i in keys else None for i, v in enumerate(values)]
        row = [values[p] for p in self._positions]
        if UNCHANGED in row:
            column = self.columns[row.index(UNCHANGED)]
            raise DecodeError(f"an update did not carry column '{column}' (a large value stored out of line "
                              f"that did not change); ALTER TABLE {self.schema}.{self.table} REPLICA IDENTITY "
                              "FULL makes PostgreSQL send it")
        self.ops.append(op)
        for append, value in zip(self._appends, row):
            append(value)

    def _truncate(self, payload: bytes) -> None:
        (count,) = _I32.unpack_from(payload, 1)
        relids = [_I32.unpack_from(payload, 6 + 4 * i)[0] for i in range(count)]
        if self.relation is not None and self.relation.relid in relids:
            raise DecodeError(f"table {self.schema}.{self.table} was truncated; TRUNCATE is not a change dsms "
                              "can follow (its rows cannot be retracted one by one): use DELETE, or start the "
                              "source again from a new snapshot")

    # -- taking the committed changes ----------------------------------------------------------------

    def take(self) -> tuple[list[int], list[list], list[tuple[int, int]]]:
        """The changes of committed transactions (ops, per-column values, (row end, commit LSN) per
        transaction), removed from the buffers; an open transaction's changes stay."""
        n = self.committed_rows
        ops, self.ops = self.ops[:n], self.ops[n:]
        values = [column[:n] for column in self.values]
        self.values = [column[n:] for column in self.values]
        self._appends = [column.append for column in self.values]
        commits, self.commit_rows = self.commit_rows, []
        self.committed_rows = 0
        self._txn_start = max(0, self._txn_start - n)
        return ops, values, commits
