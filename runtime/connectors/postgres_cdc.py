"""The PostgreSQL CDC source (``connector = 'postgres-cdc'``): a snapshot, then the replication stream.

A TABLE with a primary key, read as *changes by key* (``__op``; see
pgoutput.py), which the runtime normalizes into a changelog::

    fresh start   CREATE PUBLICATION (if missing) -> CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT
                  -> initial:       the table in that snapshot, in pieces of batch.size rows (+I)
                  -> latest-offset: no snapshot
                  -> START_REPLICATION from the slot's consistent point
    restart       START_REPLICATION from the checkpoint's LSN (the slot must still exist)
    restart in    the rest of the table after the checkpoint's last key, in a snapshot of its own,
    the snapshot  then START_REPLICATION from the slot's consistent point

The position is ``{"lsn": end LSN of the last transaction handed on}``
(``None`` before the first read). The slot's confirmed position moves only
in :meth:`checkpoint_complete`, i.e. once a checkpoint holding that LSN is
on disk: the server keeps everything after it, so a restart from the
checkpoint re-reads exactly the transactions after it (transactions that
committed before the requested LSN are skipped, by the server and again
here), neither losing nor repeating a change.

Why psycopg2's replication connection and not SQL functions: psycopg (3)
has no replication protocol. ``pg_logical_slot_peek_binary_changes`` always
decodes from the slot's confirmed position, so between two checkpoints
every poll would decode all unconfirmed changes again (quadratic), and
``pg_logical_slot_get_binary_changes`` confirms changes before they are in
a checkpoint (a crash would lose them). The streaming protocol decodes
each change once and takes the confirmed position from our feedback.

The snapshot is read a piece at a time (``postgres_snapshot.py``: keyset
pages over the primary key, each one ``COPY``), all in one transaction
that imported the slot's exported snapshot, so memory stays bounded on a
large table and every piece sees the table as of the slot's consistent
point. Streaming starts when the last piece is read. A checkpoint between
pieces records the consistent point and the last key read
(``{"lsn": None, "snapshot": {"lsn": ..., "after": [...]}}``); the
exported snapshot does not outlive the process, so a restore reads the
keys after that one in a snapshot of its own, taken later, and then
streams from the consistent point (the slot is not confirmed before the
snapshot ends, so the server still has every change since). A key read
in the later snapshot may then see changes it already holds again; the
changes are rows by key (an upsert or a delete of the key's row), so
applying one again leaves the same row, and once the stream passes the
later snapshot's point the table is exact again. A run without a restore
mid-snapshot sees exactly the consistent snapshot and then each change
once. Text is parsed by Arrow's CSV reader; the stream's values are
gathered column by column and converted with Arrow kernels, as the
snapshot's are.
"""

from __future__ import annotations

import bisect
import os
import time

import numpy as np
import pyarrow as pa

from ...planner.physical.specs import OP
from ..changelog import INSERT
from .base import ReadRequest, SourceContext, SourceError
from .convert import convert_rows
from .dead_letter import DeadLetter
from .pgoutput import ChangeDecoder, DecodeError, lsn_text, parse_lsn
from .postgres_common import (
    PgServer,
    connection_message,
    error_text,
    qualified,
    quote_ident,
    server_from_options,
    text_to_arrow_input,
)
from .postgres_snapshot import SnapshotPieces

STARTUP_MODES = ("initial", "latest-offset")
_READ_BUDGET_S = 0.2  # hand on what arrived within this long, so the job stays responsive
_SLOT_RELEASE_S = 10.0
_RECONNECT_S = 30.0


def open_source(req: ReadRequest, ctx: SourceContext) -> PostgresCdcReader:
    """The connector's entry point (``planner/connectors/postgres_cdc.py``)."""
    return open_postgres_cdc(req, ctx.source.primary_key, ctx.source.base_dir)


def open_postgres_cdc(req: ReadRequest, key: tuple[str, ...], base_dir: str | None = None) -> PostgresCdcReader:
    """Open a postgres-cdc source (connects on the first read).

    Args:
        req: the source's name, options and wanted columns (``changelog`` must be a table's).
        key: the declared primary key.
        base_dir: where a relative ``dead_letter`` path is.

    Raises:
        SourceError: a missing or invalid option.
    """
    return PostgresCdcReader(req, key, base_dir)


class PostgresCdcReader:
    def __init__(self, req: ReadRequest, key: tuple[str, ...], base_dir: str | None):
        self.name = req.name
        options = {k.lower(): v for k, v in req.options.items()}
        self.server: PgServer = server_from_options(options, self._fail)
        for needed in ("table-name", "slot.name"):
            if not options.get(needed):
                self._fail(f"postgres-cdc needs '{needed}'")
        self.schema_name = options.get("schema-name", "public")
        self.table_name = options["table-name"]
        self.slot = options["slot.name"]
        plugin = options.get("decoding.plugin.name", "pgoutput").lower()
        if plugin != "pgoutput":
            self._fail(f"decoding.plugin.name '{plugin}' is not supported: dsms decodes 'pgoutput', which is "
                       "built into PostgreSQL 10 and later (decoderbufs and wal2json need server extensions)")
        self.mode = options.get("scan.startup.mode", "initial").lower()
        if self.mode not in STARTUP_MODES:
            self._fail(f"invalid value '{self.mode}' for option 'scan.startup.mode' (use 'initial' or "
                       "'latest-offset')")
        self.publication = options.get("debezium.publication.name") or f"{self.slot}_publication"
        on_error = options.get("on_error", "fail").lower()
        if on_error not in ("fail", "skip"):
            self._fail(f"invalid value '{on_error}' for option 'on_error' (use 'fail' or 'skip')")
        self.skip = on_error == "skip"
        self.dead_letter = None
        if self.skip:
            path = options.get("dead_letter") or f"{req.name}.dead-letter.jsonl"
            self.dead_letter = DeadLetter(path if os.path.isabs(path) else os.path.join(base_dir or ".", path),
                                          req.name)
        if not key:
            self._fail("postgres-cdc reads a table's changes by primary key: declare it as a TABLE with "
                       "PRIMARY KEY (...) NOT ENFORCED")
        self.key = key
        self.schema = req.schema
        self.not_null = req.not_null
        self.batch_rows = req.batch_rows
        self.columns = req.schema.names
        self.out_schema = req.schema.append(pa.field(OP, pa.int8()))  # changes by key
        self.types: dict[str, int] = {}
        self.lsn: int | None = None  # the position: end of the last transaction handed on
        self._confirm: int | None = None  # confirmed by a checkpoint, not yet sent
        self._conn = self._cursor = self._decoder = None
        self._pieces: SnapshotPieces | None = None  # the snapshot, while it is being read
        self._consistent: int | None = None  # the slot's consistent point (where streaming starts after it)
        self._resume: dict | None = None  # a checkpoint's place inside the snapshot (seek)
        self._skipped = 0
        self._reconnected_at = 0.0  # once in 5 s at most: a connection that keeps breaking fails the source

    def _fail(self, message: str):
        raise SourceError(message, source=self.name)

    @property
    def where(self) -> str:
        return f"{self.server.label} table {self.schema_name}.{self.table_name}"

    # -- the reader protocol --------------------------------------------------------------------------------

    @property
    def position(self) -> dict:
        if self._pieces is not None:
            return {"lsn": None, "snapshot": {"lsn": self._consistent, "after": self._pieces.after}}
        if self._resume is not None and self._cursor is None:
            return {"lsn": None, "snapshot": self._resume}
        return {"lsn": self.lsn}

    def seek(self, position: dict) -> None:
        self.lsn = position.get("lsn")
        self._resume = position.get("snapshot") if self.lsn is None else None

    @property
    def skipped(self) -> int:
        return self._skipped

    def read(self) -> pa.Table:
        if self._cursor is None:
            return self._start()
        if self._pieces is not None:
            return self._next_piece()
        return self._stream()

    def checkpoint_complete(self, position: dict) -> None:
        """A checkpoint holding ``position`` is on disk: the server may forget what came before it."""
        lsn = position.get("lsn")
        if lsn is None:
            return
        self._confirm = lsn
        if self._cursor is not None:
            self._send_confirm()

    def close(self) -> None:
        self._disconnect()
        if self.dead_letter is not None:
            self.dead_letter.close()

    def _disconnect(self) -> None:
        if self._pieces is not None:
            self._pieces.finish()
            self._pieces = None
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = self._cursor = None

    # -- starting --------------------------------------------------------------------------------------------

    def _start(self) -> pa.Table:
        import psycopg
        import psycopg2

        try:
            with psycopg.connect(self.server.conninfo(), autocommit=True) as meta:
                self._inspect(meta)
                self._ensure_publication(meta)
                if self.lsn is None and self._resume is None:
                    self._drop_stale_slot(meta)
                    self._connect_replication()
                    self._consistent, snapshot_name = self._create_slot()
                    if self.mode == "initial":
                        self._open_pieces(snapshot_name, None)
                    else:
                        self.lsn = self._consistent
                else:
                    self._check_slot(meta)
                    self._connect_replication()
                    if self._resume is not None:  # the checkpoint fell inside the snapshot
                        self._consistent = self._resume["lsn"]
                        self._open_pieces(None, self._resume.get("after"))
        except SourceError:
            self.close()
            raise
        except psycopg.OperationalError as e:
            self.close()
            self._fail(connection_message(self.server, e))
        except (psycopg.Error, psycopg2.Error) as e:  # e.g. no REPLICATION attribute, no free slot
            self.close()
            self._fail(f"PostgreSQL refused to read {self.where}: {error_text(e)}")
        if self._pieces is not None:
            return self._next_piece()
        self._start_replication()
        return self._empty()

    def _inspect(self, meta) -> None:
        """Check what the server and the table must offer, and learn the columns' types."""
        wal_level = meta.execute("SHOW wal_level").fetchone()[0]
        if wal_level != "logical":
            self._fail(f"the server at {self.server.label} has wal_level = {wal_level}; logical replication "
                       "needs wal_level = logical (ALTER SYSTEM SET wal_level = logical, then restart it)")
        row = meta.execute("SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n ON n.oid = "
                           "c.relnamespace WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
                           (self.schema_name, self.table_name)).fetchone()
        if row is None:
            self._fail(f"there is no table {self.schema_name}.{self.table_name} in {self.server.label}")
        oid, identity = row
        types = dict(meta.execute("SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = %s AND "
                                  "attnum > 0 AND NOT attisdropped", (oid,)).fetchall())
        missing = [c for c in self.columns if c not in types]
        if missing:
            self._fail(f"table {self.schema_name}.{self.table_name} has no column "
                       f"{', '.join(repr(c) for c in missing)} (it has {', '.join(types)})")
        self.types = types
        if identity == "n":
            self._fail(f"table {self.schema_name}.{self.table_name} has REPLICA IDENTITY NOTHING, so its deletes "
                       "do not say which row went; ALTER TABLE ... REPLICA IDENTITY DEFAULT (its primary key) or FULL")
        if identity in ("d", "i"):
            flag = "indisprimary" if identity == "d" else "indisreplident"
            found = meta.execute(f"SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_index i JOIN "
                                 f"pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                                 f"WHERE i.indrelid = %s AND i.{flag}", (oid,)).fetchone()[0]
            if not found:
                self._fail(f"table {self.schema_name}.{self.table_name} has no primary key, so its updates and "
                           "deletes do not say which row changed; add one, or ALTER TABLE ... REPLICA IDENTITY FULL")
            if sorted(found) != sorted(self.key):
                self._fail(f"the declared PRIMARY KEY ({', '.join(self.key)}) is not the key PostgreSQL sends "
                           f"with updates and deletes of {self.schema_name}.{self.table_name} "
                           f"({', '.join(found)}); declare that key, or ALTER TABLE ... REPLICA IDENTITY FULL")

    def _ensure_publication(self, meta) -> None:
        exists = meta.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (self.publication,)).fetchone()
        if exists is None:
            # Before the slot: a slot decodes with the catalog as of each change, where it must already exist.
            meta.execute(f"CREATE PUBLICATION {quote_ident(self.publication)} FOR TABLE "
                         f"{qualified(self.schema_name, self.table_name)}")
            return
        covered = meta.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s AND "
                               "tablename = %s", (self.publication, self.schema_name, self.table_name)).fetchone()
        if covered is None:
            self._fail(f"publication '{self.publication}' does not include {self.schema_name}.{self.table_name}; "
                       f"ALTER PUBLICATION {self.publication} ADD TABLE {self.schema_name}.{self.table_name}")

    def _slot_row(self, meta):
        """The slot's (active, plugin, database), or None; waits a while for a slot in use to be let go
        (the server notices a killed reader's connection is gone only after a moment)."""
        deadline = time.monotonic() + _SLOT_RELEASE_S
        while True:
            row = meta.execute("SELECT active, plugin, database FROM pg_replication_slots WHERE slot_name = %s",
                               (self.slot,)).fetchone()
            if row is None or not row[0] or time.monotonic() > deadline:
                return row
            time.sleep(0.1)

    def _drop_stale_slot(self, meta) -> None:
        """A fresh start (no checkpoint) begins from a new slot: an old one's position means nothing here."""
        row = self._slot_row(meta)
        if row is None:
            return
        if row[0]:
            self._fail(f"replication slot '{self.slot}' is in use by another connection; give each source its "
                       "own slot.name")
        meta.execute("SELECT pg_drop_replication_slot(%s)", (self.slot,))

    def _check_slot(self, meta) -> None:
        row = self._slot_row(meta)
        if row is not None and row[0]:
            self._fail(f"replication slot '{self.slot}' is in use by another connection; give each source its "
                       "own slot.name")
        if row is None:
            self._fail(f"replication slot '{self.slot}' is gone, so the changes after the checkpoint "
                       f"(LSN {lsn_text(self.lsn)}) cannot be read; start the query again without its state")
        if row[1] != "pgoutput":
            self._fail(f"replication slot '{self.slot}' decodes with '{row[1]}', not pgoutput")

    def _connect_replication(self) -> None:
        import psycopg2
        import psycopg2.extras

        try:
            self._conn = psycopg2.connect(self.server.conninfo(),
                                          connection_factory=psycopg2.extras.LogicalReplicationConnection)
        except psycopg2.OperationalError as e:
            hint = (f"; ALTER ROLE {self.server.user} REPLICATION lets the user stream changes"
                    if "replication" in str(e) else "")
            self._fail(connection_message(self.server, e) + hint)
        self._cursor = self._conn.cursor()

    def _create_slot(self) -> tuple[int, str | None]:
        export = "EXPORT_SNAPSHOT" if self.mode == "initial" else "NOEXPORT_SNAPSHOT"
        self._cursor.execute(f"CREATE_REPLICATION_SLOT {quote_ident(self.slot)} LOGICAL pgoutput {export}")
        _, consistent, snapshot_name, _ = self._cursor.fetchone()
        return parse_lsn(consistent), snapshot_name

    def _open_pieces(self, snapshot_name: str | None, after: list[str] | None) -> None:
        import psycopg

        self._pieces = SnapshotPieces(psycopg.connect(self.server.conninfo(), autocommit=True), self.schema_name,
                                      self.table_name, list(self.columns), self.key, snapshot_name, after)

    def _next_piece(self) -> pa.Table:
        """The next piece of the snapshot (+I by key); after the last one, streaming starts."""
        import psycopg

        try:
            piece = self._pieces.next_piece(self.batch_rows)
        except psycopg.Error as e:
            self.close()
            self._fail(f"cannot read the snapshot of {self.where}: {error_text(e)}")
        if self._pieces.done:
            self._pieces = None
            self._resume = None
            self.lsn = self._consistent
            self._start_replication()
        rows = len(piece[self.columns[0]]) if piece else 0
        if not rows:
            return self._empty()
        ops = pa.array(np.full(rows, INSERT, dtype=np.int8))
        return self._convert([piece[c] for c in self.columns], ops, [(rows, self._consistent or 0)], snapshot=True)

    def _start_replication(self) -> None:
        import psycopg2

        self._decoder = ChangeDecoder(self.schema_name, self.table_name, self.columns, self.key, since=self.lsn)
        try:
            self._cursor.start_replication(slot_name=self.slot, decode=False, start_lsn=lsn_text(self.lsn),
                                           options={"proto_version": "1", "publication_names": self.publication},
                                           status_interval=10)
        except psycopg2.Error as e:
            self.close()
            self._fail(f"cannot stream changes of {self.where} from slot '{self.slot}': {error_text(e)}")
        if self._confirm is not None:
            self._send_confirm()

    def _send_confirm(self) -> None:
        import psycopg2

        try:
            self._cursor.send_feedback(write_lsn=self._confirm, flush_lsn=self._confirm, force=True)
        except psycopg2.Error:
            pass  # the connection broke: the next read reconnects and confirms again

    # -- streaming -------------------------------------------------------------------------------------------

    def _stream(self) -> pa.Table:
        import psycopg2

        decoder = self._decoder
        deadline = time.monotonic() + _READ_BUDGET_S
        try:
            # Committed rows count: a transaction larger than a batch is read whole (it is handed on whole).
            while decoder.committed_rows < self.batch_rows and time.monotonic() < deadline:
                message = self._cursor.read_message()
                if message is None:
                    if not decoder.in_transaction and not decoder.ops:
                        # Everything the server sent is read: its WAL position up to here holds nothing for us.
                        decoder.position = max(decoder.position, self._cursor.wal_end or 0)
                    break
                decoder.feed(message.payload)
        except DecodeError as e:
            self._fail(f"{e} ({self.where})")
        except psycopg2.Error as e:
            self._reconnect(e)
            return self._empty()
        ops, values, commits = decoder.take()
        if not ops:
            self.lsn = max(self.lsn or 0, decoder.position)
            return self._empty()
        columns = [pa.array(v, pa.binary()).cast(pa.string()) for v in values]
        table = self._convert(columns, pa.array(ops, pa.int8()), commits)
        self.lsn = decoder.position
        return table

    def _reconnect(self, error: Exception) -> None:
        """The replication connection broke (its backend was terminated, the server restarted, a timeout):
        stream again from our position, the end of the last transaction handed on (a transaction cut off
        half-way is dropped and comes again whole). The server may take a moment to let the slot go, or
        to come back: retried for ``_RECONNECT_S``; a connection that breaks again within 5 s of the
        last reconnect fails the source."""
        import psycopg

        if self._reconnected_at > time.monotonic() - 5:
            self._fail(f"lost the replication connection to {self.server.label}: {error_text(error)}")
        self._disconnect()  # (the dead-letter file stays open)
        deadline = time.monotonic() + _RECONNECT_S
        while True:
            try:
                with psycopg.connect(self.server.conninfo(), autocommit=True) as meta:
                    self._check_slot(meta)  # waits for the broken connection's hold on the slot to go
                self._connect_replication()
                break
            except (psycopg.OperationalError, SourceError) as e:
                if time.monotonic() > deadline:
                    detail = str(e) if isinstance(e, SourceError) else connection_message(self.server, e)
                    self._fail(f"lost the replication connection to {self.server.label} and could not "
                               f"reconnect within {_RECONNECT_S:.0f} s: {detail}")
                time.sleep(0.5)
        self._reconnected_at = time.monotonic()
        self._start_replication()

    # -- text -> Arrow ---------------------------------------------------------------------------------------

    def _empty(self) -> pa.Table:
        return self.out_schema.empty_table()

    def _convert(self, columns: list[pa.Array], ops: pa.Array, commits: list[tuple[int, int]],
                 snapshot: bool = False) -> pa.Table:
        """Columns of text -> the declared types; a value that does not convert fails the source or, with
        on_error = 'skip', is dead-lettered with the LSN of its transaction."""
        fields = {f.name: f for f in self.schema}
        raw = pa.table({c: text_to_arrow_input(col, self.types[c], fields[c].type)
                        for c, col in zip(self.columns, columns)})
        converted, bad = convert_rows(raw, pa.schema([fields[c] for c in self.columns]), self.not_null,
                                      show=lambda v: repr(v), null_message="NULL in a NOT NULL column")
        if bad:
            ends = [end for end, _ in commits]

            def where(row: int) -> str:
                return "the snapshot" if snapshot else f"LSN {lsn_text(commits[bisect.bisect_right(ends, row)][1])}"

            if not self.skip:
                row, (column, message) = min(bad.items())
                raise SourceError(f"{message} (a change of {self.schema_name}.{self.table_name} at {where(row)})",
                                  source=self.name, column=column)
            self._skipped += len(bad)
            self.dead_letter.write([
                {"file": f"{self.where}", "line": where(row), "column": column, "error": message,
                 "raw": {c: raw.column(c)[row].as_py() for c in self.columns}}
                for row, (column, message) in sorted(bad.items())])
            keep = np.ones(len(ops), dtype=bool)
            keep[list(bad)] = False
            ops = ops.filter(pa.array(keep))
        return converted.append_column(OP, ops)
