"""Statement text as the wire sees it: splitting a query string, binding $n parameters.

Both walk the text with one scanner that knows string literals, quoted
names and comments, so a ';' or a '$1' inside a string is never touched.
Parameters are replaced by literals (pgtypes.sql_literal), never pasted
as raw text.
"""

from __future__ import annotations

import functools
import re

_PARAM = re.compile(r"\$(\d+)")
_SPECIAL = re.compile(r"['\"]|--|/\*")  # where a literal or a comment starts


@functools.lru_cache(maxsize=1024)
def _segments(text: str) -> tuple[tuple[int, int, bool], ...]:
    """(start, end, is_code) runs of ``text``: code, or a literal/comment to leave alone.

    Kept per text: a prepared statement's text is scanned once, not at every Bind and Execute.
    """
    runs, i, n, start = [], 0, len(text), 0
    while True:
        found = _SPECIAL.search(text, i)
        if found is None:
            break
        i = found.start()
        c = found.group()
        runs.append((start, i, True))
        if c in "'\"":
            j = i + 1
            while j < n:
                if text[j] == c:
                    if j + 1 < n and text[j + 1] == c:
                        j += 2
                        continue
                    break
                j += 1
            j = min(j + 1, n)
        elif c == "--":
            j = text.find("\n", i)
            j = n if j < 0 else j
        else:
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        runs.append((i, j, False))
        i = start = j
    runs.append((start, n, True))
    return tuple(runs)


def split_statements(text: str) -> list[tuple[int, str]]:
    """The statements of a simple Query message with their offsets; blank ones are left out."""
    out, begin = [], 0
    for start, end, code in _segments(text):
        if not code:
            continue
        pos = text.find(";", start, end)
        while pos >= 0:
            out.append((begin, text[begin:pos]))
            begin = pos + 1
            pos = text.find(";", begin, end)
    out.append((begin, text[begin:]))
    return [(off, s) for off, s in out if strip_comments(s).strip()]


def strip_comments(text: str) -> str:
    return "".join(text[s:e] if code or text[s] in "'\"" else " " for s, e, code in _segments(text))


def parameter_count(text: str) -> int:
    """The highest $n the statement uses."""
    found = [int(m.group(1)) for s, e, code in _segments(text) if code for m in _PARAM.finditer(text, s, e)]
    return max(found, default=0)


def bind_parameters(text: str, literals: list[str]) -> str:
    """``text`` with each $n outside literals and comments replaced by ``literals[n-1]``."""
    parts = []
    for s, e, code in _segments(text):
        if code:
            parts.append(_PARAM.sub(lambda m: _literal(literals, int(m.group(1))), text[s:e]))
        else:
            parts.append(text[s:e])
    return "".join(parts)


def _literal(literals: list[str], n: int) -> str:
    if not 1 <= n <= len(literals):
        raise ValueError(f"there is no parameter ${n} ({len(literals)} given)")
    return literals[n - 1]
