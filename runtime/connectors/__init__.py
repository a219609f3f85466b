"""Connectors: reading sources into Arrow tables and writing results out.

Each connector's runtime half is one module here, named by its descriptor
(``planner/connectors/``) and opened through ``factory.py``. The file
connector (``connector = 'file'``, ``filesystem.py``) is built on two functions:

* :func:`open_file_source` reads JSON lines, CSV or Parquet from a file, a
  directory or a glob pattern, bounded or (``watch = 'true'``) unbounded;
* :func:`open_file_sink` writes JSON lines (plain, changelog, Debezium), CSV
  or Parquet.

The contract with the runtime is in ``base.py``; docs/connectors.md is the
user-facing description.
"""

from __future__ import annotations

import os

import pyarrow as pa

from ...planner.connectors.filesystem import DESCRIPTOR as FILE
from ..changelog import OP
from .base import ReadRequest, SinkError, SinkWriter, SourceError, SourceReader
from .changelog_source import DebeziumCodec, DebeziumReader, UpsertReader, debezium_request, upsert_request
from .csv_source import CsvCodec
from .dead_letter import DeadLetter
from .dir_sink import DirectorySink, is_directory_sink
from .file_sink import LineSink, ParquetSink
from .files import FileSet
from .json_source import JsonCodec
from .line_source import LineSource
from .parquet_source import ParquetSource
from .raw_source import RawCodec

SOURCE_FORMATS = FILE.format_names("source")
SINK_FORMATS = FILE.format_names("sink")
APPEND_ONLY_FORMATS = tuple(f.name for f in FILE.formats if f.sink and not f.changelog)

__all__ = ["ReadRequest", "SinkError", "SinkWriter", "SourceError", "SourceReader", "open_file_sink",
           "open_file_source"]


def open_file_source(req: ReadRequest) -> SourceReader:
    """Open a file source.

    Options (``req.options``): ``format`` (``json``, ``csv``, ``parquet``),
    ``watch`` (``'true'``: unbounded), ``on_error`` (``'fail'`` or
    ``'skip'``), ``dead_letter`` (path), ``csv.delimiter``.

    Args:
        req: the source's name, options, path and wanted columns.

    Returns:
        A reader whose batches have exactly ``req.schema``.

    Raises:
        SourceError: unknown format or option value, or the path is missing.

    Example:
        >>> import pyarrow as pa, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "bid.jsonl")
        >>> _ = open(path, "w").write('{"id": 1, "ts": "2024-01-01 10:00:00.5"}\\n')
        >>> schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us"))])
        >>> reader = open_file_source(ReadRequest("bid", {"format": "json"}, path, schema))
        >>> reader.read().to_pylist()
        [{'id': 1, 'ts': datetime.datetime(2024, 1, 1, 10, 0, 0, 500000)}]
        >>> reader.read() is None
        True
    """
    options = {k.lower(): v for k, v in (req.options or {}).items()}
    fmt = str(options.get("format", "")).lower()
    if fmt not in SOURCE_FORMATS:
        raise SourceError(f"the file source cannot read format '{fmt}' (use one of: {', '.join(SOURCE_FORMATS)})",
                          source=req.name)
    if (fmt == "debezium-json") != (req.changelog == "debezium"):
        raise SourceError("format 'debezium-json' is read only as a table with a primary key"
                          if fmt == "debezium-json" else f"format '{fmt}' is not a Debezium changelog",
                          source=req.name)
    watch = _flag(options, "watch", req.name)
    on_error = str(options.get("on_error", "fail")).lower()
    if on_error not in ("fail", "skip"):
        raise SourceError(f"invalid value '{on_error}' for option 'on_error' (use 'fail' or 'skip')",
                          source=req.name)
    if req.batch_rows < 1:
        raise SourceError(f"the batch size must be positive, not {req.batch_rows}", source=req.name)
    files = FileSet.open(req.name, req.path, fmt, must_exist=not watch)
    dead_letter = None
    if on_error == "skip":
        path = options.get("dead_letter") or files.default_dead_letter()
        files = files.excluding(path)
        dead_letter = DeadLetter(path, req.name)
    skip = on_error == "skip"
    if req.changelog == "debezium":
        codec = DebeziumCodec(req.schema, req.not_null)
        return DebeziumReader(LineSource(debezium_request(req), files, codec, watch=watch, skip=skip,
                                         dead_letter=dead_letter), req.schema)
    if req.changelog == "upsert":
        inner = upsert_request(req, fmt)
        return UpsertReader(_plain_reader(inner, fmt, files, options, watch, skip, dead_letter))
    return _plain_reader(req, fmt, files, options, watch, skip, dead_letter)


def _plain_reader(req: ReadRequest, fmt: str, files: FileSet, options: dict, watch: bool, skip: bool,
                  dead_letter) -> SourceReader:
    if fmt == "parquet":
        return ParquetSource(req, files, watch=watch, skip=skip, dead_letter=dead_letter)
    if fmt == "json":
        codec = JsonCodec(req.schema, req.not_null)
    elif fmt == "raw":
        codec = RawCodec(req.name, req.schema, req.not_null)
    else:
        codec = CsvCodec(req.name, req.schema, req.not_null, _delimiter(options, req.name))
    return LineSource(req, files, codec, watch=watch, skip=skip, dead_letter=dead_letter)


def open_file_sink(options: dict, path: str, schema: pa.Schema, updating: bool, *,
                   position: dict | None = None) -> SinkWriter:
    """Open a file sink.

    The file is created (with its parent directories). An existing
    non-empty file is refused unless ``'sink.mode'`` says what to do with it:
    ``'overwrite'`` (truncate it) or ``'append'`` (keep it and write after
    it). With ``position`` (restoring from a checkpoint after a crash) the
    existing file is kept and cut back to it: only what the sink wrote goes.

    Args:
        options: the WITH (...) options; ``format`` is one of ``json``,
            ``changelog-json``, ``debezium-json``, ``csv``, ``parquet``.
        path: the output file, or a directory (``out/``): part files (``dir_sink.py``).
        schema: the result's columns (an ``__op`` field, if present, is ignored).
        updating: whether the result has retractions (batches carry ``__op``).
        position: a sink position to continue from.

    Raises:
        SinkError: unknown format, or an updating result for an append-only format.

    Example:
        >>> import pyarrow as pa, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "out.jsonl")
        >>> sink = open_file_sink({"format": "json"}, path, pa.schema([("n", pa.int64())]), False)
        >>> sink.write(pa.table({"n": [1, 2]})); sink.close()
        >>> open(path).read()
        '{"n":1}\\n{"n":2}\\n'
    """
    options = {k.lower(): v for k, v in (options or {}).items()}
    fmt = str(options.get("format", "")).lower()
    if fmt not in SINK_FORMATS:
        raise SinkError(f"the file sink cannot write format '{fmt}' (use one of: {', '.join(SINK_FORMATS)})")
    if not path:
        raise SinkError("the file sink needs a 'path'")
    if updating and fmt in APPEND_ONLY_FORMATS:
        raise SinkError(f"format '{fmt}' needs an append-only result, but this query's result is updating "
                        "(it retracts or updates rows); use format = 'changelog-json' or 'debezium-json'")
    if OP in schema.names:
        schema = schema.remove(schema.get_field_index(OP))
    mode = str(options.get("sink.mode", "error")).lower()
    if mode == "append" and (fmt == "parquet" or is_directory_sink(path)):
        raise SinkError(f"'sink.mode' = 'append' needs a JSON-lines or CSV file; {path} is "
                        + ("a directory of part files" if is_directory_sink(path) else "Parquet, which cannot grow")
                        + " (use 'overwrite', or another path)")
    try:
        if position is None and mode == "error":
            refuse_existing_output(path)
        if is_directory_sink(path):  # part files (Spark writes them from its executors)
            return DirectorySink(path, schema, fmt, _delimiter(options, None), updating, position=position)
        if fmt == "parquet":
            return ParquetSink(path, schema, position=position)
        return LineSink(path, schema, fmt, delimiter=_delimiter(options, None), position=position,
                        append=mode == "append")
    except OSError as e:
        raise SinkError(f"cannot open {path} for writing: {e.strerror or e}") from None


def refuse_existing_output(path: str) -> None:
    """A sink never destroys data it did not write: an existing non-empty output file is an error.

    A directory sink (``out/``) only ever replaces the ``part-*`` files of
    its naming; other files in the directory are left alone.
    """
    if is_directory_sink(path) or not os.path.exists(path):
        return
    if os.path.isdir(path) or os.path.getsize(path) > 0:
        raise SinkError(f"{path} already exists and is not empty, and a sink does not destroy data it did not "
                        "write: add 'sink.mode' = 'overwrite' (replace it) or 'append' (write after it) to the "
                        "sink's WITH (...), or choose another path")


def _flag(options: dict, key: str, source: str) -> bool:
    value = str(options.get(key, "false")).lower()
    if value not in ("true", "false"):
        raise SourceError(f"invalid value '{value}' for option '{key}' (use 'true' or 'false')", source=source)
    return value == "true"


def _delimiter(options: dict, source: str | None) -> str:
    value = options.get("csv.delimiter", ",")
    value = {"\\t": "\t", "tab": "\t"}.get(value, value)
    if len(value) != 1:
        message = f"option 'csv.delimiter' must be one character, not '{value}'"
        raise SourceError(message, source=source) if source is not None else SinkError(message)
    return value
