"""The dead-letter file: where ``on_error = 'skip'`` puts the rows it rejects.

One JSON object per line::

    {"source": "bid", "file": "/data/bid.jsonl", "line": 7, "column": "price",
     "error": "cannot convert \\"abc\\" to BIGINT", "raw": "{\\"price\\": \\"abc\\"}"}

``line`` is the 1-based line (JSON, CSV) or row (Parquet) number, ``column``
is null when the row as a whole is bad (malformed JSON, wrong field count),
and ``raw`` is the original line text (for Parquet, the row's values as a
JSON object). The file is appended to, never truncated, and is created only
when the first row is rejected. It is flushed before the rows of the same
batch are handed on, so a row is never both lost and unrecorded; after a
restore from a checkpoint the rows read again are recorded again (the
dead letter is at-least-once).
"""

from __future__ import annotations

import json
import os


class DeadLetter:
    """Appends rejected rows to a JSON-lines file.

    Args:
        path: the dead-letter file.
        source: the source's name, written into every record.
    """

    def __init__(self, path: str, source: str):
        self.path = path
        self.source = source
        self._file = None

    def write(self, records: list[dict]) -> None:
        """Append records with ``file``, ``line``, ``column``, ``error`` and ``raw``, then flush."""
        if not records:
            return
        if self._file is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        # Rejected rows are few and already on the slow path: plain json.dumps is fine.
        text = "".join(
            json.dumps({"source": self.source, "file": r["file"], "line": r["line"], "column": r.get("column"),
                        "error": r["error"], "raw": r["raw"]}, ensure_ascii=False, default=str) + "\n"
            for r in records)
        self._file.write(text)
        self._file.flush()

    def write_records(self, records: list[dict]) -> None:
        """Append records of any shape (a Kafka message's topic, partition and offset), then flush."""
        if not records:
            return
        if self._file is None:
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write("".join(json.dumps({"source": self.source, **r}, ensure_ascii=False, default=str) + "\n"
                                 for r in records))
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
