"""The file connector (``connector = 'file'``, or Flink's name ``filesystem``): local files.

The runtime half is ``runtime/connectors/filesystem.py``; docs/connectors.md
describes the formats, bad input, watch mode and directory sinks.
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Format, Option


def _bounded(options) -> bool:
    return options.get("watch", "false").lower() != "true"


DESCRIPTOR = ConnectorDescriptor(
    name="file",
    aliases=("filesystem",),
    help="local files: a file, a directory of files or a glob; JSON lines, CSV, Parquet, raw lines",
    module="dsms.runtime.connectors.filesystem",
    source=True, sink=True, tables=True,
    formats=(Format("json"), Format("csv"), Format("parquet"), Format("raw", sink=False),
             Format("debezium-json", changelog=True), Format("changelog-json", source=False, changelog=True)),
    options=(
        Option("path", required=True, help="a file, a directory (sinks: ending in '/') or (sources) a glob"),
        Option("watch", "bool", "false", help="keep reading as files grow and appear (unbounded)", scope="source"),
        Option("on_error", "enum", "fail", values=("fail", "skip"),
               help="what a bad row does: stop the source, or go to the dead letter", scope="source"),
        Option("dead_letter", help="where skipped rows go (default: beside the input)", scope="source"),
        Option("batch.size", "int", help="rows per batch (default: the engine's batch size)", scope="source"),
        Option("csv.delimiter", default=",", help="the CSV field separator, one character ('\\t' for a tab)"),
        Option("sink.mode", "enum", "error", values=("error", "overwrite", "append"),
               help="an existing non-empty output file: refuse it, replace it, or write after it", scope="sink"),
    ),
    bounded=_bounded, bounded_note="unless watch = 'true'",
    batch_readable=True,
    replayable=True,
)
