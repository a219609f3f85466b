"""PostgreSQL wire protocol v3: reading frontend messages, building backend ones.

Only the framing lives here (a type byte, a 4-byte length, a body); what a
message means is the session's business (session.py). Reference: the
PostgreSQL documentation, "Frontend/Backend Protocol", "Message Formats".
"""

from __future__ import annotations

import asyncio
import struct

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
MAX_MESSAGE = 1 << 30  # a frontend message longer than this is refused (PostgreSQL's own limit)


class ProtocolError(Exception):
    """The client sent something the protocol does not allow; the connection is closed."""


async def read_startup(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The first message of a connection (no type byte): its code and the rest of the body."""
    (length,) = struct.unpack("!I", await reader.readexactly(4))
    if not 8 <= length <= 10000:
        raise ProtocolError(f"invalid startup packet length {length}")
    body = await reader.readexactly(length - 4)
    return struct.unpack("!I", body[:4])[0], body[4:]


async def read_message(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """One frontend message after startup: its type byte and body."""
    head = await reader.readexactly(5)
    kind, length = head[:1], struct.unpack("!I", head[1:])[0]
    if not 4 <= length <= MAX_MESSAGE:
        raise ProtocolError(f"invalid message length {length}")
    return kind, await reader.readexactly(length - 4)


def startup_params(body: bytes) -> dict[str, str]:
    """The key/value pairs of a StartupMessage (user, database, options, application_name...)."""
    parts = body.split(b"\0")
    return {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 1, 2) if parts[i]}


class Reader:
    """Reads the fields of one message body in order."""

    def __init__(self, body: bytes):
        self.body, self.pos = body, 0

    def cstring(self) -> str:
        end = self.body.index(b"\0", self.pos)
        text = self.body[self.pos:end].decode()
        self.pos = end + 1
        return text

    def int16(self) -> int:
        (v,) = struct.unpack_from("!h", self.body, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        (v,) = struct.unpack_from("!i", self.body, self.pos)
        self.pos += 4
        return v

    def bytes(self, n: int) -> bytes:
        v = self.body[self.pos:self.pos + n]
        self.pos += n
        return v


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!I", len(body) + 4) + body


def cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def auth_ok() -> bytes:
    return message(b"R", struct.pack("!I", 0))


def auth_sasl(mechanisms: list[str]) -> bytes:
    return message(b"R", struct.pack("!I", 10) + b"".join(cstr(m) for m in mechanisms) + b"\0")


def auth_sasl_continue(data: bytes) -> bytes:
    return message(b"R", struct.pack("!I", 11) + data)


def auth_sasl_final(data: bytes) -> bytes:
    return message(b"R", struct.pack("!I", 12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack("!ii", pid, secret))


def ready(status: str) -> bytes:
    return message(b"Z", status.encode())


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def empty_query() -> bytes:
    return message(b"I")


def parse_complete() -> bytes:
    return message(b"1")


def bind_complete() -> bytes:
    return message(b"2")


def close_complete() -> bytes:
    return message(b"3")


def no_data() -> bytes:
    return message(b"n")


def portal_suspended() -> bytes:
    return message(b"s")


def parameter_description(oids: list[int]) -> bytes:
    return message(b"t", struct.pack("!h", len(oids)) + b"".join(struct.pack("!I", o) for o in oids))


def row_description(fields: list[tuple[str, int, int, int]]) -> bytes:
    """``fields``: (name, type oid, type size, format code) per column."""
    body = [struct.pack("!h", len(fields))]
    for name, oid, size, fmt in fields:
        body.append(cstr(name) + struct.pack("!IhIhih", 0, 0, oid, size, -1, fmt))
    return message(b"T", b"".join(body))


def data_row(values: list[bytes | None]) -> bytes:
    parts = [struct.pack("!h", len(values))]
    for v in values:
        parts.append(b"\xff\xff\xff\xff" if v is None else struct.pack("!I", len(v)) + v)
    return message(b"D", b"".join(parts))


def copy_in_response(columns: int) -> bytes:
    return message(b"G", struct.pack("!bh", 0, columns) + struct.pack("!h", 0) * columns)


def copy_out_response(columns: int) -> bytes:
    return message(b"H", struct.pack("!bh", 0, columns) + struct.pack("!h", 0) * columns)


def copy_data(data: bytes) -> bytes:
    return message(b"d", data)


def copy_done() -> bytes:
    return message(b"c")


def _fields(severity: str, code: str, text: str, position: int | None, detail: str | None,
            hint: str | None) -> bytes:
    parts = [b"S" + cstr(severity), b"V" + cstr(severity), b"C" + cstr(code), b"M" + cstr(text)]
    if detail:
        parts.append(b"D" + cstr(detail))
    if hint:
        parts.append(b"H" + cstr(hint))
    if position is not None:
        parts.append(b"P" + cstr(str(position)))
    return b"".join(parts) + b"\0"


def error_response(code: str, text: str, position: int | None = None, detail: str | None = None,
                   hint: str | None = None, severity: str = "ERROR") -> bytes:
    return message(b"E", _fields(severity, code, text, position, detail, hint))


def notice_response(text: str, code: str = "00000", severity: str = "NOTICE") -> bytes:
    return message(b"N", _fields(severity, code, text, None, None, None))
