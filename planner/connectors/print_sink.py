"""The print sink (Flink's ``print``): every change to stdout as ``+I[1, a]``.

The runtime half is ``runtime/connectors/print_sink.py``.
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Option

DESCRIPTOR = ConnectorDescriptor(
    name="print",
    help="a sink that prints each change to stdout, as Flink's: +I[1, a]",
    module="dsms.runtime.connectors.print_sink",
    sink=True,
    options=(
        Option("print-identifier", help="printed before each row: 'id> +I[1, a]'", scope="sink"),
        Option("standard-error", "bool", "false", help="print to stderr instead of stdout", scope="sink"),
    ),
)
