"""What the PostgreSQL connectors share: where the server is, and PostgreSQL's text values as Arrow.

Both the CDC source (``postgres-cdc``) and the JDBC sink and lookup
(``jdbc``) name a server: the source with Flink CDC's ``hostname``,
``port``, ``username``, ``password`` and ``database-name``, the sink with
a JDBC URL (``jdbc:postgresql://host:port/db``). :class:`PgServer` is
either, as a psycopg connection string.

PostgreSQL sends values as text (the snapshot's COPY and pgoutput's tuples
alike). :func:`text_columns_to_arrow` turns whole columns of text into the
declared Arrow types with Arrow kernels; sessions run with ``TimeZone =
UTC`` and ``DateStyle = ISO`` so every timestamp reads the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

# PostgreSQL type OIDs whose text form needs more than Arrow's cast.
BOOL, BYTEA, TIMESTAMPTZ = 16, 17, 1184
SESSION_SETTINGS = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3"


@dataclass(frozen=True)
class PgServer:
    """A PostgreSQL database to connect to."""

    host: str
    port: int
    user: str
    password: str | None
    dbname: str

    @property
    def label(self) -> str:
        """For messages: ``postgresql://user@host:port/db`` (never the password)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}"

    def conninfo(self, **extra) -> str:
        from psycopg.conninfo import make_conninfo

        params = dict(host=self.host, port=self.port, user=self.user, dbname=self.dbname,
                      options=SESSION_SETTINGS, connect_timeout=10, application_name="dsms", **extra)
        if self.password is not None:
            params["password"] = self.password
        return make_conninfo(**params)


def server_from_options(options: dict, fail) -> PgServer:
    """The server of a postgres-cdc source: Flink CDC's option names.

    ``fail(message)`` raises the connector's error.
    """
    missing = [k for k in ("hostname", "username", "database-name") if not options.get(k)]
    if missing:
        fail(f"postgres-cdc needs {', '.join(repr(k) for k in missing)}")
    return PgServer(options["hostname"], _port(options.get("port", "5432"), fail), options["username"],
                    options.get("password"), options["database-name"])


def server_from_jdbc_url(options: dict, fail) -> PgServer:
    """The server of a jdbc sink or lookup table: ``url = 'jdbc:postgresql://host[:port]/db[?user=..]'``."""
    url = options.get("url") or ""
    if not url.lower().startswith("jdbc:postgresql://"):
        fail(f"the jdbc connector needs url = 'jdbc:postgresql://host:port/database', not '{url}' "
             "(only PostgreSQL is supported)")
    parts = urlsplit(url[len("jdbc:"):])
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    dbname = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not dbname:
        fail(f"the jdbc url '{url}' names no host or no database (jdbc:postgresql://host:port/database)")
    user = options.get("username") or query.get("user")
    if not user:
        fail("the jdbc connector needs 'username' (or user=... in the url)")
    try:
        port = parts.port or 5432
    except ValueError:
        fail(f"the jdbc url '{url}' has a bad port")
    return PgServer(parts.hostname, port, user, options.get("password", query.get("password")), dbname)


def _port(text: str, fail) -> int:
    if not str(text).isdigit():
        fail(f"option 'port' must be a port number, not '{text}'")
    return int(text)


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, quoted (names are used as declared, case and all)."""
    return '"' + name.replace('"', '""') + '"'


def qualified(schema: str, table: str) -> str:
    return f"{quote_ident(schema)}.{quote_ident(table)}"


def split_table_name(name: str) -> tuple[str, str]:
    """``'schema.table'`` or ``'table'`` (schema ``public``), as the jdbc sink's ``table-name`` is written."""
    schema, _, table = name.rpartition(".")
    return (schema or "public"), table


def connection_message(server: PgServer, error: Exception) -> str:
    """Why a connection failed, in one line, naming the server."""
    text = " ".join(str(error).split())
    return f"cannot connect to PostgreSQL at {server.label}: {text}"


def error_text(error: Exception) -> str:
    """PostgreSQL's message for an error, in one line (its primary message, without the context lines)."""
    diag = getattr(error, "diag", None)
    primary = getattr(diag, "message_primary", None) if diag is not None else None
    return primary or " ".join(str(error).split())


# -- text values -> Arrow ------------------------------------------------------------------------------

_TZ_SUFFIX = re.compile(r"[+-]\d\d(:\d\d)?$").pattern


def text_to_arrow_input(values: pa.Array, pg_type: int, target: pa.DataType) -> pa.Array:
    """PostgreSQL text values of one column in a form :func:`conform_column` converts to ``target``.

    Booleans come as ``t``/``f``, ``timestamptz`` with a ``+00`` offset
    (sessions run in UTC), ``bytea`` as ``\\x`` and hex digits.
    """
    if pg_type == BOOL and pa.types.is_boolean(target):
        return pc.if_else(pc.is_null(values), pa.scalar(None, pa.bool_()), pc.equal(values, "t"))
    if pg_type == TIMESTAMPTZ and pa.types.is_timestamp(target):
        return pc.replace_substring_regex(values, _TZ_SUFFIX, "")
    if pg_type == BYTEA and pa.types.is_binary(target):
        with duckdb.connect() as con:  # Arrow has no hex kernel
            con.register("v", pa.table({"v": values}))
            return con.sql("SELECT unhex(substr(v, 3)) AS v FROM v").to_arrow_table().column("v").combine_chunks()
    return values


def arrow_to_text_input(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A column as PostgreSQL's COPY reads it: only VARBINARY needs rewriting (``\\x`` and hex)."""
    if not pa.types.is_binary(column.type):
        return column
    with duckdb.connect() as con:
        con.register("v", pa.table({"v": column}))
        return con.sql("SELECT '\\x' || hex(v) AS v FROM v").to_arrow_table().column("v")
