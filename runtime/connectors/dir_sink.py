"""Directory sinks: a sink whose ``path`` is a directory holds its rows in part files.

``CREATE SINK out WITH (connector = 'file', path = 'out/', format = 'json')``
(a path ending in ``/``, or an existing directory) writes the same lines as
a file sink (``file_sink.py``, the same encoders), cut into part files that
the file sources read back as one source (in name order):

* the runtime and DuckDB write ``part-00000.<ext>`` from the process that
  runs the query, as a file sink would;
* Spark writes from its executors, one part per task (its share of the
  result, already in event-time order across parts):
  ``part-<batch>-<task>.<ext>``, where ``batch`` is 000000 for a batch
  statement and the micro-batch's id on the continuous route. A task
  writes a hidden file (``.part-...``) that the driver renames into place
  once the statement (or micro-batch) has succeeded, so a retried or
  failed task leaves nothing behind; the rows never pass through the
  driver, which is what lets the result outgrow it. On a cluster the
  directory must be on storage every executor and the driver share.

Opening a directory sink afresh removes the part files of an earlier run
(a sink holds exactly its query's output; other files are left alone). Its
position (for checkpoints) is the driver's part's position and the last
batch of executor parts committed; cutting back to it truncates the one
and removes later parts.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..changelog import OP
from .base import SinkError

EXTENSIONS = {"json": "jsonl", "changelog-json": "jsonl", "debezium-json": "jsonl", "csv": "csv",
              "parquet": "parquet"}
DRIVER_PART = "part-00000"


def is_directory_sink(path: str) -> bool:
    return path.endswith(("/", os.sep)) or os.path.isdir(path)


@dataclass(frozen=True)
class PartSpec:
    """What an executor needs to write a part (picklable)."""

    directory: str
    schema: pa.Schema  # the result's columns, without __op
    fmt: str
    delimiter: str
    updating: bool  # a batch route's final rows of an updating result: written as +I changes

    @property
    def ext(self) -> str:
        return EXTENSIONS[self.fmt]

    def part(self, batch: int, task: int) -> str:
        return f"part-{batch:06d}-{task:05d}.{self.ext}"


class DirectorySink:
    """A SinkWriter over a directory (see the module docstring)."""

    def __init__(self, path: str, schema: pa.Schema, fmt: str, delimiter: str, updating: bool,
                 position: dict | None = None):
        self.spec = PartSpec(os.path.abspath(path), schema, fmt, delimiter, updating)
        os.makedirs(self.spec.directory, exist_ok=True)
        self._driver = None  # the writer of part-00000, opened at the first row
        self.batch = -1  # the last batch of executor parts committed
        self._driver_position: dict | None = None
        if position is None:
            self._remove(lambda name: True)
        else:
            self.truncate(position)

    @property
    def driver_path(self) -> str:
        return os.path.join(self.spec.directory, f"{DRIVER_PART}.{self.spec.ext}")

    def write(self, table: pa.Table) -> None:
        if not table.num_rows:
            return
        if self._driver is None:
            self._driver = _open_part(self.spec, self.driver_path, self._driver_position)
        self._driver.write(table)

    def flush(self) -> None:
        if self._driver is not None:
            self._driver.flush()

    @property
    def position(self) -> dict:
        driver = self._driver.position if self._driver is not None else self._driver_position
        return {"driver": driver, "batch": self.batch}

    def truncate(self, position: dict) -> None:
        driver = position.get("driver")
        if self._driver is not None:
            self._driver.close()
            self._driver = None
        if driver is None:
            if os.path.exists(self.driver_path):
                os.remove(self.driver_path)
        elif os.path.exists(self.driver_path):
            self._driver = _open_part(self.spec, self.driver_path, driver)
        self._driver_position = driver
        self.batch = int(position.get("batch", -1))
        self._remove(lambda name: _batch_of(name) is not None and _batch_of(name) > self.batch)

    def close(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # -- parts written by executors ------------------------------------------------------

    def commit(self, batch: int, written: list[tuple[str, str]]) -> int:
        """Move a batch's parts into place (``written``: hidden name, final name); drop what else its tasks
        left (failed attempts). Returns how many parts there are."""
        for hidden, final in written:
            os.replace(os.path.join(self.spec.directory, hidden), os.path.join(self.spec.directory, final))
        self._remove(lambda name: name.startswith(f".part-{batch:06d}-"))
        self.batch = batch
        return len(written)

    def _remove(self, which) -> None:
        for path in glob.glob(os.path.join(self.spec.directory, "part-*")) + \
                glob.glob(os.path.join(self.spec.directory, ".part-*")):
            name = os.path.basename(path)
            if name.endswith(self.spec.ext) and which(name):
                os.remove(path)


def _batch_of(name: str) -> int | None:
    """The batch of an executor part (``part-000003-00001.jsonl`` or its hidden form), None for the driver's."""
    parts = name.lstrip(".").split("-")
    if len(parts) < 3 or not parts[1].isdigit() or len(parts[1]) != 6:
        return None
    return int(parts[1])


def _open_part(spec: PartSpec, path: str, position: dict | None):
    from .file_sink import LineSink, ParquetSink

    try:
        if spec.fmt == "parquet":
            return ParquetSink(path, spec.schema, position=position)
        return LineSink(path, spec.schema, spec.fmt, delimiter=spec.delimiter, position=position)
    except OSError as e:
        raise SinkError(f"cannot open {path} for writing: {e.strerror or e}") from None


def write_part(spec: PartSpec, batch: int, task: int, attempt: int, batches) -> tuple[str, str, int] | None:
    """An executor's share of a result written as one hidden part (None: it had no rows).

    Returns (hidden name, final name, rows) for the driver to commit.
    """
    hidden = f".part-{batch:06d}-{task:05d}-{attempt}.{spec.ext}"
    writer, rows = None, 0
    try:
        for b in batches:
            if not b.num_rows:
                continue
            table = pa.Table.from_batches([b])
            if spec.updating:
                table = table.append_column(OP, pa.array(np.zeros(table.num_rows, dtype=np.int8)))
            if writer is None:
                writer = _open_part(spec, os.path.join(spec.directory, hidden), None)
            writer.write(table)
            rows += table.num_rows
    finally:
        if writer is not None:
            writer.flush()
            writer.close()
    return (hidden, spec.part(batch, task), rows) if writer is not None else None
