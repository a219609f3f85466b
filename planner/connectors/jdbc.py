"""The jdbc connector (Flink's JDBC options, PostgreSQL only): a sink, and a lookup table read by key.

The runtime half is ``runtime/connectors/jdbc.py`` (``open_sink``, ``open_lookup``).
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Option

DESCRIPTOR = ConnectorDescriptor(
    name="jdbc",
    help="a PostgreSQL table: results inserted or upserted exactly once; rows looked up by key in lookup joins",
    module="dsms.runtime.connectors.jdbc",
    sink=True, lookup=True, tables=True, streams=False,
    options=(
        Option("url", required=True, help="jdbc:postgresql://host:port/database"),
        Option("table-name", required=True, help="the table (table or schema.table); it must exist"),
        Option("username", help="the user (or user=... in the url)"),
        Option("password", help="the user's password"),
        Option("lookup.cache.max-rows", "int", scope="source",
               help="lookup tables: how many fetched rows to keep (unset: no cache)"),
        Option("lookup.cache.ttl", "duration", scope="source", help="lookup tables: how long a fetched row is used"),
    ),
)
