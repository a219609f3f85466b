"""The JDBC sink to PostgreSQL (``connector = 'jdbc'``): inserts, or upserts and deletes by primary key.

An append-only result is inserted; an updating result is applied to the
table by its primary key, as Flink's JDBC upsert sink does: of each key's
changes in a batch the last one counts, ``+I``/``+U`` upsert it
(``INSERT ... ON CONFLICT (key) DO UPDATE``), ``-U``/``-D`` delete it.
Rows travel by ``COPY ... FROM STDIN`` (Arrow's CSV writer) into the table
or into a temporary staging table, never as a statement per row.

Exactly-once, with a state directory (a write-ahead sink, as Flink's
``GenericWriteAheadSink``)::

    between checkpoints   results are kept in memory
    checkpoint n          they are sealed as epoch n and saved *in* the checkpoint
    checkpoint n on disk  one transaction: the rows + dsms_sink_progress(run) = n
    restart from n        progress < n: commit epoch n's rows now; progress = n: they are in

``run`` identifies one standing query across restarts (it is part of the
checkpoint). A crash before the checkpoint is on disk replays the input
from checkpoint n-1 and rebuilds the same rows; a crash after it finds
either the rows committed or the epoch in the checkpoint, never both and
never neither. Without a state directory there are no checkpoints: each
batch is committed as it comes (nothing to recover after a crash).
"""

from __future__ import annotations

import io
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ...planner.physical.specs import OP
from .base import SinkError
from .postgres_common import (
    arrow_to_text_input,
    connection_message,
    error_text,
    qualified,
    quote_ident,
    server_from_jdbc_url,
    split_table_name,
)

PROGRESS_TABLE = "dsms_sink_progress"
_SEQ = "__seq"
_CSV = pacsv.WriteOptions(include_header=False, quoting_style="needed")


def open_jdbc_sink(name: str, options: dict, schema: pa.Schema, updating: bool, *,
                   position: dict | None = None, pending: pa.Table | None = None, durable: bool = False) -> JdbcSink:
    """Open a jdbc sink: connect, check the table, and finish an epoch a crash left in a checkpoint.

    Args:
        name: the sink's name, for messages.
        options: ``url``, ``table-name`` (``schema.table`` or ``table``), ``username``, ``password``.
        schema: the result's columns (``__op`` if updating).
        updating: whether the result has retractions.
        position: the sink's position in the checkpoint restored from (None: a fresh start).
        pending: the rows of that checkpoint's epoch (None: none).
        durable: checkpoints are taken (a state directory): rows wait for them; otherwise each batch
            is committed as it comes.

    Raises:
        SinkError: the server cannot be reached, the table is missing or does not fit the result.
    """
    return JdbcSink(name, options, schema, updating, position, pending, durable or position is not None)


class JdbcSink:
    def __init__(self, name: str, options: dict, schema: pa.Schema, updating: bool, position: dict | None,
                 pending: pa.Table | None, transactional: bool):
        import psycopg

        options = {k.lower(): v for k, v in options.items()}
        self.name = name
        self.server = server_from_jdbc_url(options, self._fail)
        if not options.get("table-name"):
            self._fail("the jdbc sink needs 'table-name'")
        self.schema_name, self.table_name = split_table_name(options["table-name"])
        self.target = qualified(self.schema_name, self.table_name)
        self.updating = updating
        self.columns = [f.name for f in schema if f.name != OP]
        try:
            self.conn = psycopg.connect(self.server.conninfo())
        except psycopg.OperationalError as e:
            self._fail(connection_message(self.server, e))
        self.key = self._inspect()
        self.run = position["run"] if position else uuid.uuid4().hex
        self.epoch = int(position["epoch"]) if position else 0
        self.transactional = transactional  # checkpoints decide when rows are committed
        self.buffer: list[pa.Table] = []
        self.pending: pa.Table | None = None  # sealed as epoch self.epoch, not yet committed
        self._staged = False
        self._progress_ready = False
        self._closing = False
        if position is not None:
            self._recover(pending)

    def _fail(self, message: str):
        raise SinkError(f"sink '{self.name}': {message}")

    # -- opening --------------------------------------------------------------------------------------------

    def _inspect(self) -> tuple[str, ...]:
        """The target table's primary key; checks that it exists and has the result's columns."""
        import psycopg

        try:
            with self.conn.transaction():
                row = self.conn.execute(
                    "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                    "AND c.relname = %s AND c.relkind IN ('r', 'p')", (self.schema_name, self.table_name)).fetchone()
                if row is None:
                    self._fail(f"there is no table {self.schema_name}.{self.table_name} in {self.server.label}; "
                               "create it first (with a PRIMARY KEY if the query's result is updating)")
                columns = [r[0] for r in self.conn.execute(
                    "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped",
                    (row[0],)).fetchall()]
                key = self.conn.execute(
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND "
                    "a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND i.indisprimary ORDER BY a.attnum",
                    (row[0],)).fetchall()
        except psycopg.Error as e:
            self._fail(f"cannot read table {self.schema_name}.{self.table_name}: {error_text(e)}")
        missing = [c for c in self.columns if c not in columns]
        if missing:
            self._fail(f"table {self.schema_name}.{self.table_name} has no column "
                       f"{', '.join(repr(c) for c in missing)} for the query's result (it has {', '.join(columns)})")
        key = tuple(r[0] for r in key)
        if self.updating:
            if not key:
                self._fail(f"the query's result is updating (rows are retracted and replaced), so table "
                           f"{self.schema_name}.{self.table_name} needs a PRIMARY KEY to upsert and delete by; "
                           "ALTER TABLE ... ADD PRIMARY KEY (...), or make the query append-only")
            absent = [k for k in key if k not in self.columns]
            if absent:
                self._fail(f"the query's result has no column {', '.join(absent)} of the primary key of "
                           f"{self.schema_name}.{self.table_name}")
        return key

    def _recover(self, pending: pa.Table | None) -> None:
        """After a restart: commit the checkpoint's epoch unless a commit before the crash got it in."""
        if pending is None:
            return
        committed = self._committed_epoch()
        if committed < self.epoch:
            self.pending = pending
            self._commit(pending, self.epoch)
            self.pending = None

    # -- the writer protocol ------------------------------------------------------------------------------

    @property
    def position(self) -> dict:
        return {"run": self.run, "epoch": self.epoch}

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if self.transactional:
            self.buffer.append(table)
        else:
            self._commit(self._reduce([table]), None)

    def flush(self) -> None:
        """Nothing to do: rows are committed per batch, or at checkpoints (``checkpoint_complete``)."""

    def prepare_checkpoint(self) -> tuple[dict, pa.Table | None]:
        """Seal the rows since the last checkpoint as the next epoch; they go into the checkpoint."""
        if self.buffer:
            tables = ([self.pending] if self.pending is not None else []) + self.buffer
            self.pending, self.buffer = self._reduce(tables), []
            self.epoch += 1
        return self.position, self.pending

    def checkpoint_complete(self, position: dict | None) -> None:
        """The checkpoint holding epoch ``position['epoch']`` is on disk: commit it."""
        if self.pending is None or position is None or int(position["epoch"]) != self.epoch:
            return
        self._commit(self.pending, self.epoch)
        self.pending = None
        if self._closing and not self.buffer:
            self.conn.close()

    def close(self) -> None:
        """Without checkpoints everything is committed already; with them, a final checkpoint commits the
        rest, or the replay after a restart rebuilds it."""
        self._closing = True
        if self.transactional and (self.buffer or self.pending is not None):
            return  # the checkpoint that follows the end of the query needs the connection
        if not self.conn.closed:
            self.conn.close()

    # -- writing ------------------------------------------------------------------------------------------

    def _reduce(self, tables: list[pa.Table]) -> pa.Table:
        """One table of the changes to apply: all rows (append-only), or each key's last change."""
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        if not self.updating:
            return table.select(self.columns)
        if OP not in table.column_names:
            table = table.append_column(OP, pa.array(np.zeros(table.num_rows, dtype=np.int8)))
        table = table.append_column(_SEQ, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        last = table.group_by(list(self.key), use_threads=False).aggregate([(_SEQ, "max")])
        last_rows = last.column(f"{_SEQ}_max")
        return table.take(last_rows.take(pc.sort_indices(last_rows))).select(self.columns + [OP])

    def _commit(self, table: pa.Table, epoch: int | None) -> None:
        """Apply ``table`` (and record ``epoch`` as committed) in one transaction."""
        import psycopg

        if self.conn.closed:
            try:
                self.conn = psycopg.connect(self.server.conninfo())
            except psycopg.OperationalError as e:
                self._fail(connection_message(self.server, e))
            self._staged = False
        try:
            with self.conn.transaction():
                if epoch is not None:
                    self._ensure_progress_table()
                if not self.updating:
                    self._copy(self.target, self.columns, table)
                else:
                    self._apply(table)
                if epoch is not None:
                    self.conn.execute(
                        f"INSERT INTO {self._progress()} (run, sink, target, epoch, committed_at) "
                        "VALUES (%s, %s, %s, %s, now()) ON CONFLICT (run) DO UPDATE SET epoch = EXCLUDED.epoch, "
                        "committed_at = EXCLUDED.committed_at",
                        (self.run, self.name, f"{self.schema_name}.{self.table_name}", epoch))
        except psycopg.OperationalError as e:
            self._fail(f"lost the connection to {self.server.label} while writing: {error_text(e)}")
        except psycopg.Error as e:
            self._fail(f"PostgreSQL refused rows for table {self.schema_name}.{self.table_name}: {error_text(e)}")

    def _apply(self, table: pa.Table) -> None:
        ops = table.column(OP)
        upserts = table.filter(pc.is_in(ops, pa.array([0, 2], pa.int8())))
        deletes = table.filter(pc.is_in(ops, pa.array([1, 3], pa.int8())))
        self._stage()
        if upserts.num_rows:
            self._copy("dsms_upserts", self.columns, upserts)
            names = ", ".join(quote_ident(c) for c in self.columns)
            others = [c for c in self.columns if c not in self.key]
            action = ("DO UPDATE SET " + ", ".join(f"{quote_ident(c)} = EXCLUDED.{quote_ident(c)}" for c in others)
                      if others else "DO NOTHING")
            self.conn.execute(f"INSERT INTO {self.target} ({names}) SELECT {names} FROM dsms_upserts "
                              f"ON CONFLICT ({', '.join(quote_ident(k) for k in self.key)}) {action}")
        if deletes.num_rows:
            self._copy("dsms_deletes", list(self.key), deletes)
            match = " AND ".join(f"t.{quote_ident(k)} = d.{quote_ident(k)}" for k in self.key)
            self.conn.execute(f"DELETE FROM {self.target} t USING dsms_deletes d WHERE {match}")

    def _stage(self) -> None:
        """Temporary staging tables shaped like the target's columns, emptied at each commit."""
        if self._staged:
            return
        names = ", ".join(quote_ident(c) for c in self.columns)
        keys = ", ".join(quote_ident(k) for k in self.key)
        self.conn.execute(f"CREATE TEMP TABLE dsms_upserts ON COMMIT DELETE ROWS AS SELECT {names} FROM "
                          f"{self.target} WITH NO DATA")
        self.conn.execute(f"CREATE TEMP TABLE dsms_deletes ON COMMIT DELETE ROWS AS SELECT {keys} FROM "
                          f"{self.target} WITH NO DATA")
        self._staged = True

    def _copy(self, relation: str, columns: list[str], table: pa.Table) -> None:
        if not table.num_rows:
            return
        data = pa.table({c: arrow_to_text_input(table.column(c)) for c in columns})
        buffer = io.BytesIO()
        pacsv.write_csv(data, buffer, _CSV)
        names = ", ".join(quote_ident(c) for c in columns)
        with self.conn.cursor().copy(f"COPY {relation} ({names}) FROM STDIN (FORMAT csv)") as copy:
            copy.write(buffer.getbuffer())

    # -- progress -----------------------------------------------------------------------------------------

    def _progress(self) -> str:
        return qualified(self.schema_name, PROGRESS_TABLE)

    def _ensure_progress_table(self) -> None:
        if not self._progress_ready:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {self._progress()} (run text PRIMARY KEY, sink text, "
                              "target text, epoch bigint NOT NULL, committed_at timestamptz)")
            self._progress_ready = True

    def _committed_epoch(self) -> int:
        import psycopg

        try:
            with self.conn.transaction():
                exists = self.conn.execute("SELECT to_regclass(%s)", (f"{self.schema_name}.{PROGRESS_TABLE}",)
                                           ).fetchone()[0]
                if exists is None:
                    return 0
                row = self.conn.execute(f"SELECT epoch FROM {self._progress()} WHERE run = %s",
                                        (self.run,)).fetchone()
        except psycopg.Error as e:
            self._fail(f"cannot read {self.schema_name}.{PROGRESS_TABLE}: {error_text(e)}")
        return 0 if row is None else int(row[0])
