"""The types of a prepared statement's $n parameters, for drivers that ask (asyncpg encodes by them).

PostgreSQL infers them while planning; here they are read off the
statement's shape: a value of ``INSERT INTO t [(cols)] VALUES ($1, …)``
takes its column's type, ``col <op> $n`` (or ``$n <op> col``) the type of
that column in the catalog, ``LIMIT $n`` bigint; anything else is text,
which the statement then reads as a string literal.
"""

from __future__ import annotations

import re

from .pgtypes import INT8, TEXT, type_oid
from .sqltext import parameter_count, strip_comments

_NAME = r'(?:"[^"]+"|[A-Za-z_][A-Za-z0-9_$]*)'
_INSERT = re.compile(rf"^\s*INSERT\s+INTO\s+({_NAME})\s*(?:\(([^)]*)\))?\s*VALUES\s*\((.*)\)\s*;?\s*$", re.I | re.S)
_COMPARE_LEFT = re.compile(rf"({_NAME})\s*(?:=|<>|!=|<=|>=|<|>)\s*\$(\d+)")
_COMPARE_RIGHT = re.compile(rf"\$(\d+)\s*(?:=|<>|!=|<=|>=|<|>)\s*(?:{_NAME}\.)?({_NAME})")
_LIMIT = re.compile(r"\b(?:LIMIT|OFFSET)\s+\$(\d+)", re.I)


def _bare(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name


def infer_parameter_types(catalog, text: str, declared: list[int]) -> list[int]:
    """One type OID per parameter; ``declared`` (from Parse) wins where it is not 0."""
    body = strip_comments(text)
    count = parameter_count(body)
    types = [TEXT] * count
    columns: dict[str, set[int]] = {}
    for obj in catalog.objects.values():
        for f in getattr(obj, "schema", ()):
            columns.setdefault(f.name.lower(), set()).add(type_oid(f.type))

    def column_type(name: str) -> int | None:
        found = columns.get(_bare(name).lower(), set())
        return next(iter(found)) if len(found) == 1 else None

    insert = _INSERT.match(body)
    if insert:
        target = catalog.get(_bare(insert.group(1)))
        if target is not None:
            names = [_bare(c.strip()) for c in insert.group(2).split(",")] if insert.group(2) \
                else [f.name for f in target.schema]
            values = [v.strip() for v in insert.group(3).split(",")]
            for name, value in zip(names, values):
                field = target.schema.find(name)
                if field is not None and re.fullmatch(r"\$\d+", value):
                    types[int(value[1:]) - 1] = type_oid(field.type)
    for match in _COMPARE_LEFT.finditer(body):
        found = column_type(match.group(1))
        if found is not None:
            types[int(match.group(2)) - 1] = found
    for match in _COMPARE_RIGHT.finditer(body):
        found = column_type(match.group(2))
        if found is not None:
            types[int(match.group(1)) - 1] = found
    for match in _LIMIT.finditer(body):
        types[int(match.group(1)) - 1] = INT8
    return [declared[i] if i < len(declared) and declared[i] else t for i, t in enumerate(types)]
