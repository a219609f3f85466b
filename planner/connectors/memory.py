"""The memory connector: streams and tables fed from Python or INSERT INTO, sinks kept in the engine.

The runtime half is ``runtime/connectors/memory.py`` (a reader of the
engine's shared in-memory logs, ``runtime/memory.py``).
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Option

DESCRIPTOR = ConnectorDescriptor(
    name="memory",
    help="rows inserted from Python or INSERT INTO; a sink's results kept in the engine",
    module="dsms.runtime.connectors.memory",
    source=True, sink=True, tables=True,
    options=(
        Option("scan.startup.mode", "enum", "earliest-offset", values=("earliest-offset", "latest-offset"),
               help="read what was inserted before the query started, or only what comes after",
               scope="source"),
    ),
    insertable=True, collects=True,
)
