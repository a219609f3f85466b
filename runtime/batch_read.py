"""Scan relations for the batch routes, read by dsms's own file readers.

A batch route reads each scan of a lowered statement (``planner/lower/scan.py``)
with the readers the runtime uses, so a value parses to the same thing, a
bad row stops the run with the same file and line (or goes to the same
dead-letter file under ``on_error = 'skip'``), and computed columns are
computed by the same per-batch SQL. Each batch gets the columns the
lowered SQL needs to judge late events exactly as the runtime does:
``__file`` (the file's place in the source), ``__row`` (the row's place in
the file) and ``__mx`` (the largest event time before the row: over the
whole source when it is read in one pass, within the file when each file
is read on its own, as Spark's tasks do).

:class:`ReadPlan` is a small picklable description, so Spark's Python
workers can read files with it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..planner.lower.scan import ScanSpec
from ..planner.lower.sql import OP
from .connectors import open_file_source
from .connectors.base import ReadRequest, SourceError
from .connectors.files import FileSet
from .connectors.read_to_end import check_read_to_end
from .duck import Duck, conform
from .errors import RouteError  # noqa: F401 - (routes take it from here)
from .operators.base import MIN_WATERMARK
from .operators.source import event_times, running_max_before

BATCH_ROWS = 256 * 1024
_ERROR_MARK = "DSMS_SOURCE_ERROR"


@dataclass(frozen=True)
class ReadPlan:
    """How to read one scan relation (picklable: plain values and Arrow schemas)."""

    name: str  # the source's name
    options: dict
    path: str
    read_schema: pa.Schema  # the physical columns read
    not_null: tuple[str, ...]
    changes: str  # append | upsert | debezium
    computed_sql: str | None
    value_schema: pa.Schema  # the columns after computed ones are added (with __op for a table)
    relation_schema: pa.Schema
    time_column: str | None
    batch_rows: int = BATCH_ROWS

    @staticmethod
    def of(spec: ScanSpec, batch_rows: int = BATCH_ROWS) -> "ReadPlan":
        src = spec.source
        read = pa.schema([pa.field(c, src.schema.find(c).type) for c in spec.columns])
        # As the runtime: a table's deletes carry only the key (and a versioned table's time).
        not_null = tuple(c for c in spec.columns if c == spec.time_column or (
            not src.schema.find(c).nullable and (src.kind != "table" or c in src.primary_key)))
        values = spec.value_schema
        if src.kind == "table":
            values = values.append(pa.field(OP, pa.int8()))
        # Each read is bounded: a watched source (the continuous Spark route) is read a whole file at a time.
        options = {k: v for k, v in src.options.items() if k != "watch"}
        return ReadPlan(src.name, options, src.path, read, not_null, spec.changes, spec.computed_sql,
                        values, spec.relation_schema, spec.time_column, batch_rows)

    # -- files -------------------------------------------------------------------------------

    def file_set(self) -> FileSet:
        return FileSet.open(self.name, self.path, str(self.options.get("format", "")).lower())

    def dead_letter_path(self) -> str | None:
        """Where the runtime would put rejected rows (None: bad rows stop the run)."""
        if str(self.options.get("on_error", "fail")).lower() != "skip":
            return None
        return self.options.get("dead_letter") or self.file_set().default_dead_letter()

    def files(self) -> list[tuple[str, str]]:
        """The source's files in reading order: (name in positions, path as the runtime names it)."""
        files = self.file_set()
        dead = self.dead_letter_path()
        if dead:
            files = files.excluding(dead)
        return [(name, files.full(name)) for name in files.list()]

    def open(self, path: str | None = None, dead_letter: str | None = None):
        """A runtime reader over the whole source, or over one of its files (``path``)."""
        options = dict(self.options)
        if dead_letter is not None:
            options["dead_letter"] = dead_letter
        return open_file_source(ReadRequest(self.name, options, path or self.path, self.read_schema,
                                            self.not_null, self.batch_rows, self.changes))


class ScanStats:
    """What reading a scan saw, for the run's summary (``late`` is None where it is not counted).

    ``files``: per file read, its largest event time (None: no rows) and
    the reader's position at its end; ``end``: the position after the last
    file (where a runtime reader continues after a backfill);
    ``read_to_end``: the files as the reader finished them
    (``connectors/read_to_end.py``), once the whole source is read.
    """

    def __init__(self, name: str):
        self.name = name
        self.rows_read = 0
        self.skipped = 0
        self.late: int | None = 0
        self.files: dict[str, tuple[int | None, dict]] = {}
        self.end: dict | None = None
        self.read_to_end: dict[str, dict] | None = None  # once read to its end: each file's size and fingerprint

    def file_read(self, name: str, top: int, position: dict) -> None:
        old = self.files.get(name, (None, None))[0]
        top = None if top <= MIN_WATERMARK else top
        self.files[name] = (top if old is None else old if top is None else max(old, top), position)


class RunStats:
    """What a batch run did: per scan, the rows read; the rows out; the time, Spark's start-up apart."""

    def __init__(self, scans: list[ScanStats]):
        self.scans = scans
        self.rows_out = 0
        self.seconds = 0.0
        self.startup_seconds = 0.0


def check_scans_read_to_end(scans: tuple[ScanSpec, ...], read: dict[str, dict[str, dict]]) -> None:
    """Raise SourceError if the files of a finished statement's scans are not those it read
    (``read``: per source, what ``ScanStats.read_to_end`` held; ``connectors/read_to_end.py``)."""
    for spec in scans:
        files = read.get(spec.source.name)
        if files is None:
            continue
        plan = ReadPlan.of(spec)
        try:
            file_set = plan.file_set()
        except SourceError:
            continue  # the input is gone: what it held was read
        dead = plan.dead_letter_path()
        check_read_to_end(plan.name, file_set.excluding(dead) if dead else file_set, files)


def read_scan(plan: ReadPlan, stats: ScanStats | None = None) -> Iterator[pa.RecordBatch]:
    """The whole source in one pass, in order: ``__mx`` is the running maximum over all of it."""
    files = {name: i for i, (name, _) in enumerate(plan.files())}
    reader = plan.open()
    duck = Duck(threads=1) if plan.computed_sql else None
    top = MIN_WATERMARK
    rows = {}
    try:
        while True:
            raw = reader.read()
            if raw is None:
                break
            if raw.num_rows == 0:
                continue
            name = reader.position.get("file")
            index = files[name]
            table, top, batch_top = _with_order(plan, raw, duck, index, rows.get(index, 0), top)
            rows[index] = rows.get(index, 0) + raw.num_rows
            if stats is not None:
                stats.rows_read += raw.num_rows
                stats.file_read(name, batch_top, reader.position)
            yield from table.to_batches()
        if stats is not None:
            stats.end = reader.position
            stats.read_to_end = getattr(reader, "read_to_end", None)
    finally:
        if stats is not None:
            stats.skipped = reader.skipped
        reader.close()
        if duck is not None:
            duck.close()


def read_files(plan: ReadPlan, files: list[tuple[int, str]], dead_letters: str | None,
               report=None) -> Iterator[pa.RecordBatch]:
    """Some files of a source, each on its own: ``__mx`` is the running maximum within each file.

    ``files``: (place in the source, path). Rejected rows of file ``i`` go to
    ``<dead_letters>/<i>.jsonl`` (merged in file order by :func:`merge_dead_letters`).
    A bad row raises an error whose text carries the SourceError's fields.
    ``report(name, largest time, position)`` is told each file's end.
    """
    duck = Duck(threads=1) if plan.computed_sql else None
    try:
        for index, path in files:
            dead = os.path.join(dead_letters, f"{index:08d}.jsonl") if dead_letters else None
            reader = plan.open(path, dead)
            top, row = MIN_WATERMARK, 0
            try:
                while True:
                    raw = reader.read()
                    if raw is None:
                        break
                    if raw.num_rows == 0:
                        continue
                    table, top, _ = _with_order(plan, raw, duck, index, row, top)
                    row += raw.num_rows
                    yield from table.to_batches()
                if report is not None:
                    report(reader.position.get("file"), top, reader.position)
            except SourceError as e:
                fields = {"message": e.reason, "source": e.source, "file": e.file, "line": e.line, "column": e.column}
                raise RuntimeError(_ERROR_MARK + json.dumps(fields) + _ERROR_MARK) from None
            finally:
                reader.close()
    finally:
        if duck is not None:
            duck.close()


def source_error_in(text: str) -> SourceError | None:
    """The SourceError a worker reported inside an engine's error text, if there is one."""
    start = text.find(_ERROR_MARK)
    if start < 0:
        return None
    end = text.find(_ERROR_MARK, start + len(_ERROR_MARK))
    fields = json.loads(text[start + len(_ERROR_MARK):end])
    return SourceError(fields.pop("message"), **fields)


def merge_dead_letters(folder: str, target: str) -> int:
    """Move the per-file dead letters in ``folder`` to the end of ``target``, in file order; the rows moved."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".jsonl")) if os.path.isdir(folder) else []
    moved = 0
    if not names:
        return 0
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    with open(target, "a", encoding="utf-8") as out:
        for n in names:
            with open(os.path.join(folder, n), encoding="utf-8") as f:
                for line in f:
                    out.write(line)
                    moved += 1
            os.remove(os.path.join(folder, n))
    return moved


def _with_order(plan: ReadPlan, raw: pa.Table, duck: Duck | None, index: int, first_row: int, top: int):
    """A batch with its computed columns and ``__file``, ``__row``, ``__mx``; the new running maximum, and
    the batch's largest time."""
    table = conform(duck.run(plan.computed_sql, raw), plan.value_schema) if plan.computed_sql else raw
    n = table.num_rows
    batch_top = MIN_WATERMARK
    if plan.time_column is not None:
        ts, _ = event_times(table, plan.time_column, plan.name)
        before, top = running_max_before(ts, top)
        max_before = pa.array(before, pa.int64(), mask=before == MIN_WATERMARK)
        batch_top = int(ts.max()) if n else MIN_WATERMARK
    else:
        max_before = pa.nulls(n, pa.int64())
    columns = [table.column(f.name) for f in plan.value_schema] + [
        pa.array(np.full(n, index, dtype=np.int32)), pa.array(np.arange(first_row, first_row + n, dtype=np.int64)),
        max_before]
    return pa.Table.from_arrays(columns, schema=plan.relation_schema), top, batch_top
