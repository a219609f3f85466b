"""Which files a client may name: a connector path must lie inside the server's data roots.

A client of the server is not the user who started it, so a
``connector = 'file'`` path (a source read, or a sink written) is resolved
against the first data root, symlinks followed, and refused unless it
lies inside one of the roots (``dsms server --data-root``).
"""

from __future__ import annotations

import os

from ..errors import Diagnostic, Span, SqlError


def inside(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def check_paths(stmt, data_root: str, roots: list[str]) -> None:
    """Refuse a CREATE STREAM/TABLE/SINK whose ``path`` option leaves the data roots."""
    path = stmt.options.get("path")
    if path is None:
        return
    full = path if os.path.isabs(path) else os.path.join(data_root, path)
    if not inside(full, roots):
        text = stmt.text
        at = text.find(path)
        span = stmt.name.span if at < 0 else Span(stmt.span.start + at, stmt.span.start + at + len(path))
        raise SqlError(Diagnostic(f"path '{path}' is outside the server's data roots", span, stmt.source,
                                  help="use a path under " + ", ".join(roots)
                                       + " (dsms server --data-root adds one)"))
