"""``dsms server``: the engine as a service over the PostgreSQL wire protocol.

One process owns a state directory: at start the engine restores the
catalog and every standing query from it; clients come and go over
TCP (TLS when given a certificate); SIGTERM or SIGINT stops it with a
final checkpoint. Connection startup (SSL negotiation, cancel requests,
authentication) is handled here; a connected client is a Session.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import logging
import os
import secrets
import signal
import ssl
import sys
from dataclasses import dataclass, field

from ..engine import Engine
from ..errors import DsmsError
from . import wire
from .auth import ScramExchange
from .errors import ADMIN_SHUTDOWN, INVALID_PASSWORD, PROTOCOL_VIOLATION
from .feeds import DEFAULT_LIMIT_ROWS
from .host import EngineHost
from .metrics import Metrics, serve_http
from .pulls import PullReader
from .session import REPORTED, Session, client_parameters
from .users import Users

log = logging.getLogger("dsms.server")

DEFAULT_PORT = 6875


@dataclass
class ServerConfig:
    state_dir: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    metrics_port: int | None = None
    users_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    data_roots: list[str] = field(default_factory=list)
    subscriber_buffer: int = DEFAULT_LIMIT_ROWS
    log_file: str | None = None
    python_functions: bool = False  # clients may CREATE FUNCTION (Python code in this process)


class Server:
    def __init__(self, config: ServerConfig):
        self.config = config
        roots = config.data_roots or [os.getcwd()]
        self.data_roots = [os.path.realpath(r) for r in roots]
        self.data_root = self.data_roots[0]
        # the server's own files: no client's connector path may reach them, even inside a data root
        self.private_paths = [os.path.realpath(p) for p in (config.state_dir, config.users_file, config.tls_cert,
                                                            config.tls_key, config.log_file) if p]
        self.subscriber_buffer = config.subscriber_buffer
        self.users = Users(config.users_file, config.state_dir)
        self.tls = _tls_context(config.tls_cert, config.tls_key)
        self.metrics = Metrics()
        self.host: EngineHost | None = None
        self.pulls: PullReader | None = None
        self.sessions: dict[int, tuple[int, Session]] = {}
        self.writers: set[asyncio.StreamWriter] = set()
        self.ready = False
        self._pids = itertools.count(1000)
        self._listeners: list[asyncio.AbstractServer] = []
        self.port = config.port
        self.metrics_port = config.metrics_port

    async def start(self) -> None:
        engine = await asyncio.to_thread(Engine, state_dir=self.config.state_dir, base_dir=self.data_root)
        restored = list(engine.queries.running.values())
        for query in restored:
            log.info("restored %s %s (%s)", query.kind, query.id, query.job.status)
        self.host = EngineHost(engine, self.metrics.checkpoint_seconds.set)
        self.host.statuses = {k: q.job.status for k, q in engine.queries.running.items()}
        self.host.start()
        self.pulls = PullReader(self.host, self.metrics)
        listener = await asyncio.start_server(self.connection, self.config.host, self.config.port)
        self.port = listener.sockets[0].getsockname()[1]
        self._listeners.append(listener)
        if self.config.metrics_port is not None:
            http = await serve_http(self, self.config.host, self.config.metrics_port)
            self.metrics_port = http.sockets[0].getsockname()[1]
            self._listeners.append(http)
            log.info("metrics on http://%s:%d/metrics", self.config.host, self.metrics_port)
        self.ready = True
        log.info("dsms server listening on postgresql://%s:%d (state dir %s, data roots %s%s%s)", self.config.host,
                 self.port, self.config.state_dir, ", ".join(self.data_roots),
                 ", password authentication" if self.users.required else "", ", TLS" if self.tls else "")

    async def stop(self) -> None:
        self.ready = False
        for listener in self._listeners:
            listener.close()
        for writer in list(self.writers):
            try:
                writer.write(wire.error_response(ADMIN_SHUTDOWN, "terminating connection: the dsms server is "
                                                 "shutting down", severity="FATAL"))
                writer.close()
            except (ConnectionError, RuntimeError):
                pass
        if self.pulls is not None:
            self.pulls.close()
        if self.host is not None:
            await asyncio.to_thread(self.host.stop)
        log.info("dsms server stopped")

    # -- a connection ----------------------------------------------------------------------

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        self.writers.add(writer)
        pid = None
        try:
            startup = await self._startup(reader, writer)
            if startup is None:
                return
            params = startup
            user = params.get("user", "dsms")
            database = params.get("database", user)
            if not await self._authenticate(reader, writer, user):
                log.warning("client %s: password authentication failed for user %s", peer, user)
                return
            pid, secret = next(self._pids), secrets.randbits(31)
            settings = await self.host.call(lambda e: dict(e.catalog.settings), reads_only=True)
            session = Session(self, reader, writer, user, database, client_parameters(user, params), settings, pid)
            self.sessions[pid] = (secret, session)
            writer.write(wire.auth_ok() + b"".join(wire.parameter_status(k, session.params[k]) for k in REPORTED)
                         + wire.backend_key(pid, secret) + wire.ready("I"))
            await writer.drain()
            self.metrics.clients.inc()
            log.info("client %d connected from %s:%s as %s", pid, *(peer or ("?", "?"))[:2], user)
            try:
                await session.run()
            finally:
                self.metrics.clients.dec()
                log.info("client %d disconnected", pid)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        except wire.ProtocolError as e:
            log.warning("client %s: %s", peer, e)
            writer.write(wire.error_response(PROTOCOL_VIOLATION, str(e), severity="FATAL"))
        except RuntimeError as e:  # the engine stopped under a client
            log.debug("client %s: %s", peer, e)
        finally:
            if pid is not None:
                self.sessions.pop(pid, None)
            self.writers.discard(writer)
            try:
                writer.close()
            except RuntimeError:
                pass

    async def _startup(self, reader, writer) -> dict | None:
        """SSL/GSS negotiation, then the StartupMessage; a CancelRequest is served and ends the connection."""
        while True:
            code, body = await wire.read_startup(reader)
            if code == wire.SSL_REQUEST:
                if self.tls is None:
                    writer.write(b"N")
                    await writer.drain()
                    continue
                writer.write(b"S")
                await writer.drain()
                await writer.start_tls(self.tls)
                continue
            if code == wire.GSSENC_REQUEST:
                writer.write(b"N")
                await writer.drain()
                continue
            if code == wire.CANCEL_REQUEST:
                pid, secret = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
                entry = self.sessions.get(pid)
                if entry is not None and entry[0] == secret:
                    log.info("client %d: cancel request", pid)
                    entry[1].cancelled.set()
                return None
            if code != wire.PROTOCOL_3:
                raise wire.ProtocolError(f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}")
            return wire.startup_params(body)

    async def _authenticate(self, reader, writer, user: str) -> bool:
        if not self.users.required:
            return True
        exchange = ScramExchange(self.users.get(user))
        writer.write(wire.auth_sasl(["SCRAM-SHA-256"]))
        await writer.drain()
        failed = wire.error_response(INVALID_PASSWORD, f'password authentication failed for user "{user}"',
                                     severity="FATAL")
        try:
            kind, body = await wire.read_message(reader)
            r = wire.Reader(body)
            if kind != b"p" or r.cstring() != "SCRAM-SHA-256":
                raise ValueError("expected a SCRAM-SHA-256 SASLInitialResponse")
            writer.write(wire.auth_sasl_continue(exchange.first(r.bytes(r.int32()).decode()).encode()))
            await writer.drain()
            kind, body = await wire.read_message(reader)
            final = exchange.final(body.decode()) if kind == b"p" else None
        except (ValueError, KeyError, IndexError, UnicodeDecodeError):
            final = None
        if final is None:
            writer.write(failed)
            await writer.drain()
            return False
        writer.write(wire.auth_sasl_final(final.encode()))
        return True


def _tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if not cert and not key:
        return None
    if not (cert and key):
        raise DsmsError("TLS needs both --tls-cert and --tls-key")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise DsmsError(f"cannot load the TLS certificate {cert} and key {key}: {e}") from None
    return context


def tune_for_latency() -> None:
    """Keep a pull's wait short while the engine's thread works.

    The event loop and the engine share the GIL: by default a thread that
    wants it waits up to 5 ms, which is a pull's whole budget; 1 ms keeps
    the engine's batches fast and a pull's tail low. The objects made at
    start (catalog, restored state) are moved out of the collector's way,
    so a full collection does not walk them on a client's time.
    """
    sys.setswitchinterval(0.001)
    gc.freeze()


async def serve(config: ServerConfig) -> None:
    """Run the server until SIGTERM or SIGINT."""
    server = Server(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    tune_for_latency()
    try:
        await stop.wait()
        log.info("stopping: final checkpoint")
    finally:
        await server.stop()


def run_server(config: ServerConfig, log_file: str | None = None, verbose: bool = False) -> int:
    """The ``dsms server`` command: logs to stderr (or ``log_file``), runs until stopped; 0 on a clean stop."""
    handler = logging.FileHandler(log_file) if log_file else logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("dsms")
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    try:
        asyncio.run(serve(config))
    except DsmsError as e:
        log.error("%s", e)
        return 1
    except OSError as e:
        log.error("cannot listen on %s:%s: %s", config.host, config.port, e.strerror or e)
        return 1
    return 0
