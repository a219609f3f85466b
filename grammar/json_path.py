"""Flink JSON paths (``'strict $.a[0].b'``), checked and rewritten for DuckDB.

Flink evaluates paths with Jayway JsonPath: an optional mode (``strict``, the
default, or ``lax``), then ``$`` followed by ``.key``, ``['key']``,
``["key"]`` (also written ``.['key']``), ``[n]`` and the wildcards ``[*]`` and
``.*``. DuckDB's ``json_extract`` reads the same steps as ``$."key"``,
``[n]``, ``[*]`` and ``.*``, so a path is parsed once when the query is
planned and written in DuckDB's spelling, with every key quoted (a key may
hold dots or spaces). Filters, slices, negative indices and deep scans
(``..``) are refused with the reason.

Example:
    >>> p = parse_json_path("lax $.['a b'][0].c")
    >>> p.mode, p.duckdb, p.definite
    ('lax', '$."a b"[0]."c"', True)
    >>> parse_json_path("$.a[*]").definite
    False
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MODE = re.compile(r"^\s*(strict|lax)\s+(.+)$", re.IGNORECASE | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$\-]*")
_QUOTED = re.compile(r"""\[\s*(?:'([^']*)'|"([^"]*)")\s*\]""")
_INDEX = re.compile(r"\[\s*(\d+)\s*\]")
_WILD = re.compile(r"\[\s*\*\s*\]")


class JsonPathError(ValueError):
    """A path dsms cannot evaluate; the message says why."""


@dataclass(frozen=True)
class JsonPath:
    """A parsed path: its mode, its DuckDB spelling, and whether it names one value."""

    mode: str
    duckdb: str
    definite: bool


def _key(name: str) -> str:
    if '"' in name or "\\" in name:
        raise JsonPathError(f"a key with a quote or backslash ({name!r}) cannot be used in a JSON path")
    return f'."{name}"'


def parse_json_path(text: str) -> JsonPath:
    """Parse a Flink path; raise :class:`JsonPathError` for what DuckDB cannot follow."""
    m = _MODE.match(text)
    mode, body = (m.group(1).lower(), m.group(2).strip()) if m else ("strict", text.strip())
    if not body.startswith("$"):
        raise JsonPathError(f"JSON path '{text}' must start with '$' (optionally after 'strict' or 'lax')")
    out, definite, i = ["$"], True, 1
    while i < len(body):
        rest = body[i:]
        if rest.startswith(".."):
            raise JsonPathError(f"JSON path '{text}': deep scan ('..') is not supported")
        if rest.startswith(".*"):
            out.append(".*")
            definite, i = False, i + 2
            continue
        if rest.startswith(".["):  # Flink's documented '$.["a.b"]' spelling
            i += 1
            continue
        if rest.startswith("."):
            name = _NAME.match(body, i + 1)
            if name is None:
                raise JsonPathError(f"JSON path '{text}': expected a key after '.' at position {i + 1}")
            out.append(_key(name.group()))
            i = name.end()
            continue
        for pattern in (_QUOTED, _INDEX, _WILD):
            step = pattern.match(body, i)
            if step is None:
                continue
            if pattern is _QUOTED:
                out.append(_key(step.group(1) if step.group(1) is not None else step.group(2)))
            elif pattern is _INDEX:
                out.append(f"[{step.group(1)}]")
            else:
                out.append("[*]")
                definite = False
            i = step.end()
            break
        else:
            raise JsonPathError(f"JSON path '{text}': cannot read '{rest}' (supported steps: .key, ['key'], "
                                "[n], [*], .*; no filters, slices or negative indices)")
    return JsonPath(mode, "".join(out), definite)
