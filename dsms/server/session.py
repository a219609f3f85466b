"""One client connection after startup: the simple and extended query protocols, COPY and feeds.

Statements run on the engine thread (host.py); this module only talks to
the client. In the extended protocol a portal is executed when it is
first described or executed, and its rows are kept until sent, so
Describe always tells the truth about what Execute returns.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pyarrow as pa

from . import wire
from .catalog import answer_catalog
from .copy_in import copy_format, parse_copy
from .cursors import Cursors
from .encode import encode_copy_lines, encode_rows, is_binary
from .errors import (
    INSUFFICIENT_RESOURCES,
    INTERNAL_ERROR,
    INVALID_CURSOR,
    PROTOCOL_VIOLATION,
    QUERY_CANCELED,
    WireError,
    to_wire,
)
from .feeds import Feed, Overrun
from .inbox import Inbox
from .param_types import infer_parameter_types
from .pgtypes import decode_parameter, field_description, sql_literal
from .sqltext import bind_parameters, parameter_count, split_statements, strip_comments
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
    FETCH,
    FLUSH,
    SUBSCRIBE,
    TRANSACTION,
    Outcome,
    SchemaOnly,
    copy_target,
    dry_run,
    is_catalog_query,
    is_dsms_setting,
    result_columns,
    run_flush,
    run_statement,
    run_subscribe,
    unquote,
)

log = logging.getLogger("dsms.server")

# Settings the server reports to every client at startup and when they change (ParameterStatus).
REPORTED = ("application_name", "client_encoding", "DateStyle", "IntervalStyle", "TimeZone", "integer_datetimes",
            "is_superuser", "server_encoding", "server_version", "session_authorization",
            "standard_conforming_strings")
SERVER_VERSION = "16.0"
_DSMS_SHOW_WORDS = {"streams", "tables", "views", "sinks", "queries", "functions", "progress", "materialized"}


class Disconnected(Exception):
    """The client went away."""


@dataclass
class Prepared:
    text: str
    param_types: list[int]


@dataclass
class Portal:
    text: str
    formats: list[int]
    outcome: Outcome | None = None
    sent: int = 0
    described: bool = False
    error: BaseException | None = None


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
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.cursors = Cursors(self)
        self.transaction = "I"  # I idle, T in a block, E in a failed block
        self.skip_to_sync = False
        self.cancelled = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.feeds: set[Feed] = set()

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
            r = wire.Reader(body)
            name, text = r.cstring(), r.cstring()
            types = [r.int32() for _ in range(r.int16())]
            self.prepared[name] = Prepared(text, types)
            self.send(wire.parse_complete())
        elif kind == b"B":
            self.bind(wire.Reader(body))
            self.send(wire.bind_complete())
        elif kind == b"D":
            r = wire.Reader(body)
            what, name = r.bytes(1), r.cstring()
            await (self.describe_statement(name) if what == b"S" else self.describe_portal(name))
        elif kind == b"E":
            r = wire.Reader(body)
            name = r.cstring()
            await self.execute_portal(name, r.int32())
        elif kind == b"S":
            self.skip_to_sync = False
            self.send(wire.ready(self.transaction))
            await self.flush()
        elif kind == b"H":
            await self.flush()
        elif kind == b"C":
            r = wire.Reader(body)
            what, name = r.bytes(1), r.cstring()
            (self.prepared if what == b"S" else self.portals).pop(name, None)
            self.send(wire.close_complete())
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
                await self.send_outcome(outcome, [], describe=True, max_rows=0, portal=None)
            except (Disconnected, ConnectionError):
                raise
            except Exception as e:
                self.send_error(e, offset)
                self._fail_transaction()
                break
        self.send(wire.ready(self.transaction))
        await self.flush()

    # -- extended query ---------------------------------------------------------------------

    def bind(self, r: wire.Reader) -> None:
        portal, name = r.cstring(), r.cstring()
        prepared = self.prepared.get(name)
        if prepared is None:
            raise WireError("26000", f"prepared statement \"{name}\" does not exist")
        formats = [r.int16() for _ in range(r.int16())]
        values = []
        for _ in range(r.int16()):
            size = r.int32()
            values.append(None if size < 0 else r.bytes(size))
        result_formats = [r.int16() for _ in range(r.int16())]
        literals = []
        for i, value in enumerate(values):
            oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
            fmt = formats[i] if len(formats) > 1 else (formats[0] if formats else 0)
            literals.append(sql_literal(decode_parameter(value, oid, fmt == 1), oid))
        text = bind_parameters(prepared.text, literals) if literals else prepared.text
        self.portals[portal] = Portal(text, result_formats)

    async def describe_statement(self, name: str) -> None:
        prepared = self.prepared.get(name)
        if prepared is None:
            raise WireError("26000", f"prepared statement \"{name}\" does not exist")
        count = parameter_count(prepared.text)
        types = await self.host.call(lambda e: infer_parameter_types(e.catalog, prepared.text, prepared.param_types))
        prepared.param_types = types  # Bind decodes binary values by the types the client was told
        self.send(wire.parameter_description(types))
        schema = await self.result_schema(bind_parameters(prepared.text, ["NULL"] * count) if count
                                          else prepared.text)
        self.send(wire.no_data() if schema is None else
                  wire.row_description([field_description(f.name, f.type, False) for f in schema]))

    async def describe_portal(self, name: str) -> None:
        portal = self._portal(name)
        await self._start(portal)
        outcome = portal.outcome
        schema = result_columns(outcome)
        portal.described = True
        self.send(wire.no_data() if schema is None else self._row_description(schema, portal.formats))

    async def execute_portal(self, name: str, max_rows: int) -> None:
        portal = self._portal(name)
        await self._start(portal)
        await self.send_outcome(portal.outcome, portal.formats, describe=False, max_rows=max_rows, portal=portal)

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise WireError(INVALID_CURSOR, f"portal \"{name}\" does not exist")
        return portal

    async def _start(self, portal: Portal) -> None:
        if portal.outcome is None:
            statements = split_statements(portal.text)
            if len(statements) > 1:
                raise WireError("42601", "cannot insert multiple commands into a prepared statement")
            offset, text = statements[0] if statements else (0, "")
            portal.outcome = await self.execute(text, offset, portal.text) if text else Outcome("EMPTY")

    async def result_schema(self, text: str) -> pa.Schema | None:
        """The columns a statement would return, without running anything that changes state."""
        body = strip_comments(text).strip()
        first = body.split(None, 1)[0].upper() if body else ""
        if first not in ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "SUBSCRIBE", "VALUES", "FETCH", "TABLE"):
            return None
        if first == "FETCH":
            match = FETCH.match(body)
            cursor = self.cursors.get(unquote(match.group(2))) if match else None
            return cursor.schema if cursor else None
        if CLIENT_SHOW.match(body) and CLIENT_SHOW.match(body).group(1).lower() not in _DSMS_SHOW_WORDS:
            return pa.schema([(CLIENT_SHOW.match(body).group(1).lower(), pa.string())])
        outcome = await self.execute(body, 0, body, dry=True)
        return result_columns(outcome)

    # -- executing one statement ------------------------------------------------------------

    async def execute(self, text: str, offset: int, source: str, dry: bool = False) -> Outcome:
        """Run one statement (``dry``: only find out what columns it returns)."""
        body = strip_comments(text).strip()
        if self.transaction == "E" and not TRANSACTION.match(body):
            raise WireError("25P02", "current transaction is aborted, commands ignored until end of transaction block")
        if match := TRANSACTION.match(body):
            return self._transaction(match.group(1).upper().split()[0])
        if match := CLIENT_SET_TZ.match(body):
            return self._set_client("TimeZone", match.group(1))
        if (match := CLIENT_SET.match(body)) and not is_dsms_setting(match.group(1)):
            return self._set_client(match.group(1), match.group(2))
        if (match := CLIENT_SHOW.match(body)) and match.group(1).lower() not in _DSMS_SHOW_WORDS:
            key = _canonical(self.params, match.group(1))
            return Outcome("SHOW", pa.table({match.group(1).lower(): [self.params.get(key, "")]}))
        if (match := CLIENT_RESET.match(body)) and not is_dsms_setting(match.group(1)):
            return Outcome("RESET")
        if DISCARD.match(body):
            return Outcome("DISCARD ALL")
        if FLUSH.match(body):
            return await self.host.call(run_flush)
        if match := SUBSCRIBE.match(body):
            snapshot = (match.group(2) or "true").lower() == "true"
            name = unquote(match.group(1))
            if dry:
                return await self.host.call(lambda e: Outcome("SUBSCRIBE", feed=SchemaOnly(
                    e.queries.get(name).planned.schema.to_arrow())))
            return await self.host.call(lambda e: run_subscribe(e, name, snapshot, self.feed_factory, source, offset))
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
        if is_catalog_query(body):
            table = await self.host.call(lambda e: answer_catalog(e, body, self.params, self.user, self.database))
            return Outcome(f"SELECT {table.num_rows}", table)
        if dry:
            return await self.host.call(lambda e: dry_run(e, body, self.settings))
        server = self.server
        return await self.host.call(lambda e: run_statement(e, text, offset, source, self.settings, server.data_root,
                                                            server.data_roots, self.feed_factory))

    def feed_factory(self, engine, query_id: str, schema: pa.Schema, stop, snapshot: bool) -> Feed:
        """Make and attach a feed (engine thread)."""
        feed = Feed(self.loop, query_id, schema, self.server.subscriber_buffer, stop)
        feed.on_overrun = self._drop_slow
        feed.attach(engine, snapshot)
        self.loop.call_soon_threadsafe(self.feeds.add, feed)
        self.server.metrics.subscribers(+1)
        return feed

    def _drop_slow(self, feed: Feed) -> None:
        """A subscriber too far behind: tell it why (if its socket still takes bytes) and close the connection."""
        self.server.metrics.dropped.inc()
        try:
            self.writer.write(wire.error_response(INSUFFICIENT_RESOURCES, f"the subscription to '{feed.query_id}' "
                                                  f"fell more than {feed.limit_rows} rows behind and was dropped",
                                                  severity="FATAL"))
        finally:
            self.writer.transport.abort()

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
        self.params[name] = value
        if name in REPORTED:
            self.send(wire.parameter_status(name, value))
        return Outcome("SET")

    # -- COPY FROM STDIN ----------------------------------------------------------------------

    async def copy_in(self, name: str, columns: str | None, options: str) -> Outcome:
        fmt = copy_format(options)
        names = [unquote(c.strip()) for c in columns.split(",")] if columns else None
        source, schema = await self.host.call(lambda e: copy_target(e, name, names))
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
        count = await self.host.call(lambda e: e.insert(source, table, columns=table.column_names))
        self.server.metrics.copied(count)
        return Outcome(f"COPY {count}")

    # -- sending results --------------------------------------------------------------------

    def _row_description(self, schema: pa.Schema, formats: list[int]) -> bytes:
        return wire.row_description([field_description(f.name, f.type, is_binary(formats, i))
                                     for i, f in enumerate(schema)])

    async def send_outcome(self, outcome: Outcome, formats: list[int], describe: bool, max_rows: int,
                           portal: Portal | None) -> None:
        for notice in outcome.notices:
            if notice != "copy":
                self.send(wire.notice_response(notice))
        if outcome.feed is not None:
            if "copy" in outcome.notices:
                await self.stream_copy(outcome.feed)
            else:
                if describe:
                    self.send(self._row_description(outcome.feed.schema, formats))
                await self.stream(outcome.feed, formats)
            return
        if outcome.tag == "EMPTY":
            self.send(wire.empty_query())
            return
        table = outcome.table
        if table is not None:
            if describe:
                self.send(self._row_description(table.schema, formats))
            start = portal.sent if portal is not None else 0
            end = table.num_rows if max_rows <= 0 else min(table.num_rows, start + max_rows)
            self.send(encode_rows(table.slice(start, end - start), formats))
            if portal is not None:
                portal.sent = end
                if end < table.num_rows:
                    self.send(wire.portal_suspended())
                    return
        self.send(wire.command_complete(outcome.tag))

    async def stream(self, feed: Feed, formats: list[int]) -> None:
        """Send each change as a DataRow until the client cancels or leaves (or the feed is overrun)."""
        await self._stream(feed, lambda t: encode_rows(t, formats))

    async def stream_copy(self, feed: Feed) -> None:
        """COPY (SUBSCRIBE …) TO STDOUT: each change as a line of text (what psql shows as it arrives)."""
        self.send(wire.copy_out_response(len(feed.schema)))
        await self._stream(feed, encode_copy_lines)

    async def _stream(self, feed: Feed, encode) -> None:
        self.cancelled.clear()
        await self.flush()
        cancel = asyncio.ensure_future(self.cancelled.wait())
        watch = self.inbox.watch()
        try:
            while True:
                waiting = asyncio.ensure_future(feed.next_rows())
                wait_for = {waiting, cancel} | ({watch} if not watch.done() else set())
                done, _ = await asyncio.wait(wait_for, return_when=asyncio.FIRST_COMPLETED)
                if waiting in done:
                    try:
                        table = waiting.result()
                    except Overrun as e:
                        raise WireError(INSUFFICIENT_RESOURCES, str(e)) from None
                    self.send(encode(table))
                    self.server.metrics.streamed(table.num_rows)
                    await self.flush()
                    continue
                waiting.cancel()
                if cancel in done:
                    raise WireError(QUERY_CANCELED, "canceling statement due to user request")
                if watch in done and not watch.result():
                    raise Disconnected()
        finally:
            cancel.cancel()
            await self.end_feed(feed)

    async def end_feed(self, feed: Feed) -> None:
        if feed in self.feeds:
            self.feeds.discard(feed)
            self.server.metrics.subscribers(-1)
            try:
                await self.host.call(feed.detach)
            except RuntimeError:
                pass  # the server is stopping: the engine is closing anyway

    async def close_feeds(self) -> None:
        self.cursors.clear()
        for feed in list(self.feeds):
            await self.end_feed(feed)
