"""dsms errors as PostgreSQL ErrorResponse fields: SQLSTATE, message, position, detail, hint.

The position is 1-based in characters of the query string the client
sent, which is what psql needs to draw its caret.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DsmsError, RowError, SqlError, SqlSyntaxError, UnsupportedPlan
from .pgtypes import ParameterError

SYNTAX_ERROR, UNDEFINED_COLUMN, UNDEFINED_TABLE, DUPLICATE_OBJECT = "42601", "42703", "42P01", "42710"
FEATURE_NOT_SUPPORTED, DATA_EXCEPTION, INVALID_PARAMETER = "0A000", "22000", "22023"
QUERY_CANCELED, PROTOCOL_VIOLATION, INTERNAL_ERROR, INSUFFICIENT_RESOURCES = "57014", "08P01", "XX000", "53000"
INVALID_PASSWORD, INVALID_CURSOR, INSUFFICIENT_PRIVILEGE, ADMIN_SHUTDOWN = "28P01", "34000", "42501", "57P01"


@dataclass
class WireError(Exception):
    """An error to send to a client as it is."""

    code: str
    message: str
    position: int | None = None
    detail: str | None = None
    hint: str | None = None


def _sql_code(message: str) -> str:
    text = message.lower()
    if "unknown column" in text or "no column" in text:
        return UNDEFINED_COLUMN
    if text.startswith(("unknown stream", "unknown table", "unknown view", "unknown relation", "no stream",
                        "no table", "no query", "no sink", "no materialized view", "unknown object")):
        return UNDEFINED_TABLE
    if "already exists" in text:
        return DUPLICATE_OBJECT
    if any(phrase in text for phrase in ("outside the server's data roots", "the server's own files",
                                         "clients may do only when the server allows it",
                                         "would load or run code in the server's process")):
        return INSUFFICIENT_PRIVILEGE
    return "42000"


def to_wire(error: BaseException, offset: int = 0) -> WireError:
    """The ErrorResponse for ``error``; ``offset`` is where the statement starts in the query string."""
    if isinstance(error, WireError):
        return error
    if isinstance(error, SqlError):
        diag = error.diagnostic
        position = offset + diag.span.start + 1 if diag.span is not None and diag.source is not None else None
        code = SYNTAX_ERROR if isinstance(error, SqlSyntaxError) else _sql_code(diag.message)
        return WireError(code, diag.message, position, "\n".join(diag.notes) or None, diag.help)
    if isinstance(error, UnsupportedPlan):
        return WireError(FEATURE_NOT_SUPPORTED, str(error))
    if isinstance(error, (RowError, ParameterError)):
        return WireError(DATA_EXCEPTION if isinstance(error, RowError) else INVALID_PARAMETER, str(error))
    if isinstance(error, DsmsError):
        message = str(error)
        return WireError(_sql_code(message) if message.lower().startswith(("no ", "unknown")) else "XX000", message)
    return WireError(INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}")
