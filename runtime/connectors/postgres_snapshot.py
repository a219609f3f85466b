"""The snapshot of a postgres-cdc source, read in pieces of at most ``batch_rows`` rows.

The pieces are read in one REPEATABLE READ transaction that imported the
replication slot's exported snapshot (``SET TRANSACTION SNAPSHOT``), so
every piece sees the table exactly as it was at the slot's consistent
point, however long the reading takes and whatever commits meanwhile:
the snapshot plus the stream from that point is the table, each change
once. A piece is one ``COPY (SELECT ... WHERE key > last key ORDER BY key
LIMIT n) TO STDOUT`` (keyset pagination over the primary key's index), so
neither dsms nor the server holds more than a piece::

    piece 1   WHERE true          ORDER BY id LIMIT 3   ->  1 2 3
    piece 2   WHERE (id) > (3)    ORDER BY id LIMIT 3   ->  4 5 7
    piece 3   WHERE (id) > (7)    ORDER BY id LIMIT 3   ->  9        (short: the snapshot is done)

Each piece's rows come back as text columns (Arrow's CSV reader parses
the COPY output); the last row's key, as text, is where the next piece
starts, and what a checkpoint taken between pieces records
(``postgres_cdc.py`` says how a restore continues from it).
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pacsv

from .postgres_common import qualified, quote_ident

_KEY = "__snapshot_key_"


class SnapshotPieces:
    """Reads a table in key order, a piece at a time, in one transaction.

    Args:
        conn: a psycopg connection (not autocommit) that this object owns from now on.
        schema_name, table_name: the table.
        columns: the columns to read, in order.
        key: the primary key's columns.
        snapshot_name: the exported snapshot to read in; None: a snapshot of its own (its start).
        after: the key (as text) of the last row read before, or None to read from the first key.
    """

    def __init__(self, conn, schema_name: str, table_name: str, columns: list[str], key: tuple[str, ...],
                 snapshot_name: str | None, after: list[str] | None = None):
        from psycopg import sql

        self.conn, self.columns, self.key = conn, columns, key
        self.after = after
        self.done = False
        self.table = qualified(schema_name, table_name)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        if snapshot_name is not None:
            conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot_name)))
        types = dict(conn.execute("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                                  "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped",
                                  (self.table,)).fetchall())
        self.key_types = [types[k] for k in key]

    def next_piece(self, rows: int) -> dict[str, pa.Array] | None:
        """The next at most ``rows`` rows as text columns (None after the last piece)."""
        from psycopg import sql

        if self.done:
            return None
        keys = ", ".join(quote_ident(k) for k in self.key)
        where = "true"
        if self.after is not None:
            bounds = ", ".join(sql.Literal(v).as_string(self.conn) + f"::{t}" for v, t in zip(self.after, self.key_types))
            where = f"({keys}) > ({bounds})"
        select = ", ".join([quote_ident(c) for c in self.columns] +
                           [f"{quote_ident(k)}::text AS {_KEY}{i}" for i, k in enumerate(self.key)])
        buffer = io.BytesIO()
        with self.conn.cursor().copy(f"COPY (SELECT {select} FROM {self.table} WHERE {where} ORDER BY {keys} "
                                     f"LIMIT {int(rows)}) TO STDOUT (FORMAT csv)") as copy:
            for block in copy:
                buffer.write(block)
        names = self.columns + [f"{_KEY}{i}" for i in range(len(self.key))]
        data = buffer.getvalue()
        if not data:
            self.finish()
            return {c: pa.array([], pa.string()) for c in self.columns}
        raw = pacsv.read_csv(io.BytesIO(data), read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
                             convert_options=pacsv.ConvertOptions(
                                 column_types={c: pa.string() for c in names}, null_values=[""],
                                 strings_can_be_null=True, quoted_strings_can_be_null=False))
        self.after = [raw.column(f"{_KEY}{i}")[-1].as_py() for i in range(len(self.key))]
        if raw.num_rows < rows:
            self.finish()
        return {c: raw.column(c).combine_chunks() for c in self.columns}

    def finish(self) -> None:
        """End the transaction and the connection (the snapshot is read, or abandoned)."""
        self.done = True
        if not self.conn.closed:
            try:
                self.conn.execute("COMMIT")
            finally:
                self.conn.close()
