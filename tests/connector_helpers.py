"""Helpers shared by the connector tests (named test_connectors_* to sit with them; holds no tests)."""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa

from dsms.runtime.connectors import ReadRequest, open_file_source

TS = pa.timestamp("us")


def request(path, schema, fmt="json", not_null=(), batch_rows=65536, name="src", **options) -> ReadRequest:
    return ReadRequest(name, {"format": fmt, **options}, str(path), schema, tuple(not_null), batch_rows)


def read_all(reader) -> list[dict]:
    """Every row of a bounded reader, checking each batch's schema on the way."""
    rows = []
    while (batch := reader.read()) is not None:
        assert batch.schema == reader.req.schema
        rows += batch.to_pylist()
    return rows


def read_rows(path, schema, fmt="json", **kw) -> list[dict]:
    reader = open_file_source(request(path, schema, fmt, **kw))
    try:
        return read_all(reader)
    finally:
        reader.close()


def dt(text: str) -> datetime:
    return datetime.fromisoformat(text)


def write_lines(path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def jsonl(rows: list[dict]) -> list[str]:
    return [json.dumps(r) for r in rows]


def dead_letters(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def place(position: dict) -> dict:
    """A source position without the fingerprint of the file it is in (what identifies the file, not where)."""
    return {k: v for k, v in position.items() if k not in ("fingerprint", "size")}
