"""One client connection after startup: the message loop, the simple query protocol, and what each
statement is routed to.

Statements run on the engine thread (host.py), pull queries on reader
threads (pulls.py); this module only talks to the client. The extended
protocol is ``extended.py``, sending results and streaming feeds
``results.py``, cursors ``cursors.py``.
"""

from __future__ import annotations

import asyncio
import logging

import pyarrow as pa

from ..errors import DsmsError
from ..planner.bind.time_zone import ZONE_SETTING, is_zone, session_zone
from . import wire
from .catalog import answer_catalog
from .copy_in import copy_format, parse_copy
from .cursors import Cursors
from .errors import INTERNAL_ERROR, PROTOCOL_VIOLATION, WireError, to_wire
from .extended import ExtendedQuery
from .inbox import Inbox
from .pulls import PULL_START, Bound
from .results import Disconnected, Results
from .sqltext import split_statements, strip_comments
from .statements import (
    CLIENT_RESET,
    CLIENT_SET,
    CLIENT_SET_TZ,
    CLIENT_SHOW,
    CLOSE,
    COPY_IN,
    COPY_SUBSCRIBE,
    DECLARE,
    DISCARD,
    DSMS_SHOW_WORDS,
    FETCH,
    FLUSH,
    SUBSCRIBE,
    TRANSACTION,
    Outcome,
    SchemaOnly,
    copy_target,
    dry_run,
    is_catalog_query,
    is_constants_select,
    is_dsms_setting,
    run_flush,
    run_statement,
    run_subscribe,
    unquote,
)
from .users import USER_DDL

log = logging.getLogger("dsms.server")

# Settings the server reports to every client at startup and when they change (ParameterStatus).
REPORTED = ("application_name", "client_encoding", "DateStyle", "IntervalStyle", "TimeZone", "integer_datetimes",
            "is_superuser", "server_encoding", "server_version", "session_authorization",
            "standard_conforming_strings")
SERVER_VERSION = "16.0"


def client_parameters(user: str, startup: dict) -> dict[str, str]:
    params = {"application_name": startup.get("application_name", ""), "client_encoding": "UTF8",
              "DateStyle": "ISO, MDY", "IntervalStyle": "postgres", "TimeZone": "UTC", "integer_datetimes": "on",
              "is_superuser": "on", "server_encoding": "UTF8", "server_version": SERVER_VERSION,
              "session_authorization": user, "standard_conforming_strings": "on", "search_path": "public",
              "extra_float_digits": "1", "transaction_isolation": "read committed", "max_identifier_length": "63"}
    for key, value in startup.items():
        if key not in ("user", "database", "options", "replication"):
            params[_canonical(params, key)] = value
    return params


def _canonical(params: dict, key: str) -> str:
    return next((k for k in params if k.lower() == key.lower()), key.lower())


class Session:
    def __init__(self, server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, user: str,
                 database: str, params: dict, settings: dict, pid: int):
        self.server, self.host = server, server.host
        self.inbox = Inbox(reader)
        self.writer = writer
        self.user, self.database, self.params, self.settings, self.pid = user, database, params, settings, pid
        self.out = bytearray()
        self.extended = ExtendedQuery(self)
        self.results = Results(self)
        self.cursors = Cursors(self)
        self.transaction = "I"  # I idle, T in a block, E in a failed block
        self.skip_to_sync = False
        self.cancelled = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.written = 0  # the engine's write count after this client's last write (pulls read their writes)

    # -- output -----------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self.out += data

    async def flush(self) -> None:
        if self.out:
            self.writer.write(bytes(self.out))
            self.out.clear()
        await self.writer.drain()

    def send_error(self, error: BaseException, offset: int = 0) -> None:
        e = to_wire(error, offset)
        if e.code == INTERNAL_ERROR:  # not a user's mistake: worth a line in the log
            log.error("client %d: %s", self.pid, e.message)
        else:
            log.debug("client %d: %s %s", self.pid, e.code, e.message)
        self.send(wire.error_response(e.code, e.message, e.position, e.detail, e.hint))

    # -- the message loop -------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while True:
                kind, body = await self.inbox.read()
                if kind == b"X":
                    return
                if self.skip_to_sync and kind != b"S":
                    continue
                try:
                    await self.dispatch(kind, body)
                except (Disconnected, ConnectionError):
                    raise
                except Exception as e:
                    self.send_error(e)
                    self._fail_transaction()
                    if kind != b"Q":
                        self.skip_to_sync = True
                    else:
                        self.send(wire.ready(self.transaction))
                    await self.flush()
        except (asyncio.IncompleteReadError, ConnectionError, Disconnected):
            return
        finally:
            await self.close_feeds()

    async def dispatch(self, kind: bytes, body: bytes) -> None:
        if kind == b"Q":
            await self.simple_query(wire.Reader(body).cstring())
        elif kind == b"P":
            self.extended.parse(wire.Reader(body))
        elif kind == b"B":
            self.extended.bind(wire.Reader(body))
        elif kind == b"D":
            await self.extended.describe(wire.Reader(body))
        elif kind == b"E":
            await self.extended.execute(wire.Reader(body))
        elif kind == b"S":
            self.skip_to_sync = False
            self.send(wire.ready(self.transaction))
            await self.flush()
        elif kind == b"H":
            await self.flush()
        elif kind == b"C":
            self.extended.close(wire.Reader(body))
        elif kind in (b"d", b"c", b"f"):
            pass  # CopyData/CopyDone/CopyFail after a COPY that already failed: PostgreSQL ignores them too
        else:
            raise WireError(PROTOCOL_VIOLATION, f"unexpected message type {kind!r}")

    # -- simple query -----------------------------------------------------------------------

    async def simple_query(self, text: str) -> None:
        statements = split_statements(text)
        if not statements:
            self.send(wire.empty_query())
        for offset, stmt in statements:
            try:
                outcome = await self.execute(stmt, offset, text)
                await self.results.send_outcome(outcome, [], describe=True, max_rows=0)
            except (Disconnected, ConnectionError):
                raise
            except Exception as e:
                self.send_error(e, offset)
                self._fail_transaction()
                break
        self.send(wire.ready(self.transaction))
        await self.flush()

    # -- executing one statement ------------------------------------------------------------

    async def call(self, fn):
        """Run a command that may write on the engine thread, noting it for this client's later pulls."""
        try:
            return await self.host.call(fn)
        finally:
            self.written = self.host.writes

    async def execute(self, text: str, offset: int, source: str, dry: bool = False,
                      bound: Bound | None = None) -> Outcome:
        """Run one statement (``dry``: only find out what columns it returns; ``bound``: the prepared
        statement and values ``text`` was bound from)."""
        body = strip_comments(text).strip()
        if self.transaction == "E" and not TRANSACTION.match(body):
            raise WireError("25P02", "current transaction is aborted, commands ignored until end of transaction block")
        outcome = self._client_command(body)
        if outcome is None:
            outcome = await self._stream_command(body, text, offset, source, dry)
        if outcome is None and USER_DDL.match(body) and not dry:
            outcome = await asyncio.to_thread(self.server.users.run, body)
        if outcome is None and is_catalog_query(body):
            outcome = await self._catalog_query(body)
        if outcome is not None:
            return outcome
        return await self._engine_statement(body, text, offset, source, dry, bound)

    def _client_command(self, body: str) -> Outcome | None:
        """What a PostgreSQL client says about its session (transactions, SET/SHOW/RESET of its parameters)."""
        if match := TRANSACTION.match(body):
            return self._transaction(match.group(1).upper().split()[0])
        if match := CLIENT_SET_TZ.match(body):
            return self._set_client("TimeZone", match.group(1))
        if (match := CLIENT_SET.match(body)) and not is_dsms_setting(match.group(1)):
            return self._set_client(match.group(1), match.group(2))
        if (match := CLIENT_SHOW.match(body)) and match.group(1).lower() not in DSMS_SHOW_WORDS:
            key = _canonical(self.params, match.group(1))
            return Outcome("SHOW", pa.table({match.group(1).lower(): [self.params.get(key, "")]}))
        if (match := CLIENT_RESET.match(body)) and not is_dsms_setting(match.group(1)):
            return Outcome("RESET")
        if DISCARD.match(body):
            return Outcome("DISCARD ALL")
        return None

    async def _stream_command(self, body: str, text: str, offset: int, source: str, dry: bool) -> Outcome | None:
        """FLUSH, SUBSCRIBE, COPY and cursors: the commands that move rows in or out over time."""
        if FLUSH.match(body):
            return await self.call(run_flush)
        if match := SUBSCRIBE.match(body):
            return await self._subscribe(unquote(match.group(1)), (match.group(2) or "true").lower() == "true",
                                         offset, source, dry)
        if match := COPY_SUBSCRIBE.match(body):
            inner = await self.execute(match.group(1), offset + text.find(match.group(1)), source, dry)
            if inner.feed is None:
                raise WireError("0A000", "COPY (…) TO STDOUT takes a SUBSCRIBE or a SELECT … EMIT CHANGES")
            return Outcome("COPY", feed=inner.feed, notices=["copy"])
        if match := COPY_IN.match(body):
            return await self.copy_in(unquote(match.group(1)), match.group(3), match.group(4))
        if match := DECLARE.match(body):
            return await self.cursors.declare(unquote(match.group(1)), match.group(2), offset + body.find(match.group(2)),
                                              source)
        if match := FETCH.match(body):
            return await self.cursors.fetch(unquote(match.group(2)), match.group(1), match.group(3))
        if match := CLOSE.match(body):
            return await self.cursors.close(unquote(match.group(1)))
        return None

    async def _subscribe(self, name: str, snapshot: bool, offset: int, source: str, dry: bool) -> Outcome:
        if dry:
            return await self.host.call(lambda e: Outcome("SUBSCRIBE", feed=SchemaOnly(
                e.queries.get(name).planned.schema.to_arrow())), reads_only=True)
        return await self.host.call(lambda e: run_subscribe(e, name, snapshot, self.results.feed_factory, source,
                                                            offset), reads_only=True)

    async def _catalog_query(self, body: str) -> Outcome | None:
        """A client's question about the catalog (pg_catalog, information_schema), answered from the engine's;
        None for a SELECT of constants that only the engine can evaluate."""
        roles = tuple(self.server.users.names())
        try:
            table = await self.host.call(lambda e: answer_catalog(e, body, self.params, self.user,
                                                                  self.database, roles), reads_only=True)
            return Outcome(f"SELECT {table.num_rows}", table)
        except DsmsError:
            if not is_constants_select(body):
                raise
            return None  # e.g. a Python function or TIMESTAMP_LTZ: the engine evaluates it

    async def _engine_statement(self, body: str, text: str, offset: int, source: str, dry: bool,
                                bound: Bound | None) -> Outcome:
        """A dsms statement, run by the engine (a pull query answered from a view where it can be)."""
        if dry:
            return await self.host.call(lambda e: dry_run(e, body, self.settings), reads_only=True)
        server = self.server

        def run(engine) -> Outcome:
            return run_statement(engine, text, offset, source, self.settings, server.data_root, server.data_roots,
                                 self.results.feed_factory, server.private_paths, server.config.python_functions)

        if PULL_START.match(body):
            return await server.pulls.answer(self, text, bound, run)
        zone = session_zone(self.settings)
        outcome = await self.call(run)
        if session_zone(self.settings) != zone:  # SET 'table.local-time-zone': drivers show instants in it
            self._set_client("TimeZone", session_zone(self.settings))
        return outcome

    def _transaction(self, word: str) -> Outcome:
        if word in ("BEGIN", "START"):
            self.transaction = "T"
            return Outcome("BEGIN")
        failed = self.transaction == "E"
        self.transaction = "I"
        return Outcome("ROLLBACK" if word in ("ROLLBACK", "ABORT") or failed else "COMMIT")

    def _fail_transaction(self) -> None:
        if self.transaction == "T":
            self.transaction = "E"

    def _set_client(self, key: str, value: str) -> Outcome:
        value = value.strip().rstrip(";").strip()
        if value[:1] in "'\"" and value[-1:] == value[:1]:
            value = value[1:-1]
        name = _canonical(self.params, key)
        if name.lower() == "timezone" and value.upper() in ("LOCAL", "DEFAULT"):
            value = "UTC"
        if name.lower() == "timezone" and is_zone(value):  # an IANA zone: TIMESTAMP_LTZ values are shown in it
            self.settings[ZONE_SETTING] = value
        self.params[name] = value
        if name in REPORTED:
            self.send(wire.parameter_status(name, value))
        return Outcome("SET")

    # -- COPY FROM STDIN ----------------------------------------------------------------------

    async def copy_in(self, name: str, columns: str | None, options: str) -> Outcome:
        fmt = copy_format(options)
        names = [unquote(c.strip()) for c in columns.split(",")] if columns else None
        source, schema = await self.host.call(lambda e: copy_target(e, name, names), reads_only=True)
        self.send(wire.copy_in_response(len(schema)))
        await self.flush()
        chunks, failed = [], None
        while True:
            kind, body = await self.inbox.read()
            if kind == b"d":
                chunks.append(body)
            elif kind == b"c":
                break
            elif kind == b"f":
                failed = wire.Reader(body).cstring()
                break
            elif kind in (b"H", b"S"):
                continue
            else:
                raise WireError(PROTOCOL_VIOLATION, f"unexpected message type {kind!r} during COPY")
        if failed is not None:
            raise WireError("57014", f"COPY from stdin failed: {failed}")
        table = await asyncio.to_thread(parse_copy, b"".join(chunks), schema, fmt, source)
        count = await self.call(lambda e: e.insert(source, table, columns=table.column_names))
        self.server.metrics.copied(count)
        return Outcome(f"COPY {count}")

    async def close_feeds(self) -> None:
        self.cursors.clear()
        await self.results.close_feeds()
