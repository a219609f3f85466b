"""The relations a half-typed statement's FROM and JOIN clauses name, read from the shell's tokens.

Completion offers a relation's columns after its alias (``c.``) and every
column in scope where an expression starts, so it needs the FROM list before
the statement parses: this reads it from tokens, tolerating what is not
typed yet (an unclosed ``TABLE(TUMBLE(...``, a missing alias).
"""

from __future__ import annotations

from dataclasses import dataclass

from dsms.planner.windows import WINDOW_KINDS

from .tokens import Token

WINDOW_TVFS = tuple(WINDOW_KINDS)
WINDOW_COLUMNS = ("window_start", "window_end", "window_time")
# After these a word is a clause keyword, not an alias.
_NOT_ALIAS = {"WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "JOIN", "LEFT", "RIGHT", "FULL", "INNER", "CROSS", "ON",
              "UNION", "EMIT", "ALLOWED", "WINDOW", "FOR", "USING", "OUTER"}


@dataclass(frozen=True)
class Relation:
    """A relation a query names, under its alias (or its own name)."""

    alias: str
    name: str
    columns: tuple[str, ...]


def relations(stmt: list[Token], catalog) -> list[Relation]:
    """The relations a statement's FROM and JOIN clauses name, with their aliases.

    A window TVF adds ``window_start``, ``window_end`` and ``window_time`` to
    its table's columns; a subquery's alias has no known columns.
    """
    found: list[Relation] = []
    i = 0
    while i < len(stmt):
        if stmt[i].upper in ("FROM", "JOIN"):
            i = _read_relation(stmt, i + 1, catalog, found)
            while i < len(stmt) and stmt[i].text == ",":
                i = _read_relation(stmt, i + 1, catalog, found)
        else:
            i += 1
    return found


def _read_relation(ts: list[Token], i: int, catalog, found: list[Relation]) -> int:
    """Read one relation of a FROM list at ``ts[i]`` into ``found``; the index after it."""
    if i >= len(ts):
        return i
    head = _relation_head(ts, i)
    if head is None:
        return i
    name, extra, i = head
    alias, i = _alias(ts, i)
    obj = catalog.get(name) if name else None
    columns = tuple(f.name for f in obj.schema) + extra if obj is not None else ()
    if name or alias:
        found.append(Relation(alias or name, obj.name if obj is not None else (name or ""), columns))
    return i


def _relation_head(ts: list[Token], i: int) -> tuple[str | None, tuple[str, ...], int] | None:
    """What a relation reads (a name, and the columns a window TVF adds) and where its alias would be."""
    if ts[i].upper == "TABLE" and i + 1 < len(ts) and ts[i + 1].text == "(":
        end = _matching(ts, i + 1)
        inner = ts[i + 2:end]  # TUMBLE ( TABLE name , DESCRIPTOR ( ts ) , ... )
        if len(inner) > 3 and inner[2].upper == "TABLE":
            return inner[3].name, WINDOW_COLUMNS if inner[0].upper in WINDOW_TVFS else (), end + 1
        return None, (), end + 1
    if ts[i].text == "(":
        return None, (), _matching(ts, i) + 1  # a subquery
    if ts[i].kind not in ("word", "quoted") and ts[i].upper != "LATE":
        return None
    if ts[i].upper == "LATE" and i + 2 < len(ts) and ts[i + 1].text == "(":
        name, i = ts[i + 2].name, _matching(ts, i + 1) + 1  # LATE(s): the late events of s
    else:
        name, i = ts[i].name, i + 1
    if i < len(ts) and ts[i].text == "[":
        i = _matching(ts, i, "[", "]") + 1  # a CQL window: s [RANGE ...]
    if i + 4 < len(ts) and ts[i].upper == "FOR" and ts[i + 1].upper == "SYSTEM_TIME":
        i += 5  # FOR SYSTEM_TIME AS OF <column>, maybe qualified
        while i + 1 < len(ts) and ts[i].text == ".":
            i += 2
    return name, (), i


def _alias(ts: list[Token], i: int) -> tuple[str | None, int]:
    """A relation's alias at ``ts[i]`` (``AS a`` or ``a``), and the index after it."""
    if i < len(ts) and ts[i].upper == "AS" and i + 1 < len(ts) and ts[i + 1].kind in ("word", "quoted"):
        return ts[i + 1].name, i + 2
    if i < len(ts) and ts[i].kind in ("word", "quoted") and ts[i].upper not in _NOT_ALIAS:
        return ts[i].name, i + 1
    return None, i


def _matching(ts: list[Token], i: int, open_: str = "(", close: str = ")") -> int:
    """The index of the bracket that closes ``ts[i]`` (the last token if it is not closed yet)."""
    depth = 0
    for j in range(i, len(ts)):
        if ts[j].text == open_:
            depth += 1
        elif ts[j].text == close:
            depth -= 1
            if depth == 0:
                return j
    return len(ts) - 1
