"""Which files a client may name: a connector path must lie inside the server's data roots.

A client of the server is not the user who started it, so a
``connector = 'file'`` path (a source read, or a sink written), a
``dead_letter`` file and a Kafka client's file settings are resolved against the first data root, symlinks
followed, and refused unless they lie inside one of the roots
(``dsms server --data-root``). The server's own files (its state
directory, ``--users`` file, TLS certificate and key, log file) are never
a client's, even inside a data root: no path may point into them, no
folder source may hold one of them, and no glob may range over a folder
that holds them.
"""

from __future__ import annotations

import os

from ..errors import Diagnostic, Span, SqlError

_WILDCARDS = "*?["

PATH_OPTIONS = ("path", "dead_letter")
# Kafka client settings (librdkafka, passed on from properties.*) that name files the client reads
_PATH_PROPERTY_ENDS = (".location", ".keytab")
# ... and those that load or run code in the server's process: never a client's to set
_CODE_PROPERTIES = ("properties.plugin.library.paths", "properties.sasl.kerberos.kinit.cmd",
                    "properties.ssl.engine.location")


def inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def _reaches_private(full: str, raw: str, private: list[str]) -> bool:
    """Could reading or writing ``full`` (as the client wrote it: ``raw``) touch one of the server's files?"""
    if inside(full, private):
        return True
    if any(c in raw for c in _WILDCARDS):  # any file under the pattern's fixed folder may match
        cut = min(full.find(c) for c in _WILDCARDS if c in full)
        folder = os.path.realpath(os.path.dirname(full[:cut]) or os.sep)
        return any(inside(p, [folder]) for p in private)
    if os.path.isdir(full):  # a folder source reads the files directly in it
        real = os.path.realpath(full)
        return any(os.path.dirname(p) == real for p in private)
    return False


def check_paths(stmt, data_root: str, roots: list[str], private: list[str] = ()) -> None:
    """Refuse a CREATE STREAM/TABLE/SINK whose ``path``, ``dead_letter`` or Kafka file setting
    (``properties.ssl.ca.location`` and the like) leaves the data roots or reaches the server's own files
    (``private``: real paths), or that sets a Kafka client setting which loads or runs code."""
    for key, path in stmt.options.items():
        key = key.lower()
        if key in _CODE_PROPERTIES:
            _refuse(stmt, path, f"option '{key}' would load or run code in the server's process",
                    "leave it out; clients of the server may not set it")
        if not (key in PATH_OPTIONS or key.startswith("properties.") and key.endswith(_PATH_PROPERTY_ENDS)):
            continue
        path = str(path)
        full = path if os.path.isabs(path) else os.path.join(data_root, path)
        if not inside(full, roots):
            _refuse(stmt, path, f"path '{path}' is outside the server's data roots",
                    "use a path under " + ", ".join(roots) + " (dsms server --data-root adds one)")
        if _reaches_private(full, path, list(private)):
            _refuse(stmt, path, f"path '{path}' reaches the server's own files (its state directory, users, TLS "
                                "key or log)", "use a folder of the data roots that holds only data")


def _refuse(stmt, path: str, message: str, help: str) -> None:
    text = stmt.text
    at = text.find(path)
    span = stmt.name.span if at < 0 else Span(stmt.span.start + at, stmt.span.start + at + len(path))
    raise SqlError(Diagnostic(message, span, stmt.source, help=help))
