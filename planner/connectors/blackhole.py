"""The blackhole sink (Flink's ``blackhole``): takes every row and keeps none, e.g. to measure a query.

The runtime half is ``runtime/connectors/blackhole.py``.
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor

DESCRIPTOR = ConnectorDescriptor(
    name="blackhole",
    help="a sink that discards every row (to measure or test a query)",
    module="dsms.runtime.connectors.blackhole",
    sink=True,
)
