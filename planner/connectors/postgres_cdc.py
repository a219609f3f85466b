"""The postgres-cdc connector (Flink CDC's option names): a PostgreSQL table's snapshot, then its changes.

The runtime half is ``runtime/connectors/postgres_cdc.py``; docs/connectors.md
says how to set PostgreSQL up (wal_level, REPLICA IDENTITY, publication, slot).
"""

from __future__ import annotations

from .descriptor import ConnectorDescriptor, Option, OptionError


def _check(options, schema, role) -> None:
    plugin = options.get("decoding.plugin.name", "pgoutput").lower()
    if plugin != "pgoutput":
        raise OptionError(f"decoding.plugin.name '{plugin}' is not supported",
                          help="use 'pgoutput' (built into PostgreSQL 10 and later; decoderbufs and wal2json need "
                               "server extensions dsms does not decode)")


DESCRIPTOR = ConnectorDescriptor(
    name="postgres-cdc",
    help="a PostgreSQL table: a consistent snapshot, then its changes from logical replication (pgoutput)",
    module="dsms.runtime.connectors.postgres_cdc",
    source=True, tables=True, streams=False,
    options=(
        Option("hostname", required=True, help="the PostgreSQL server"),
        Option("port", "int", "5432", help="its port"),
        Option("username", required=True, help="a user with the REPLICATION attribute"),
        Option("password", help="the user's password"),
        Option("database-name", required=True, help="the database"),
        Option("schema-name", default="public", help="the table's schema"),
        Option("table-name", required=True, help="the table"),
        Option("slot.name", required=True, help="the logical replication slot this source owns"),
        Option("decoding.plugin.name", default="pgoutput", help="the logical decoding plugin: pgoutput"),
        Option("scan.startup.mode", "enum", "initial", values=("initial", "latest-offset"),
               help="initial: a snapshot of the table, then its changes; latest-offset: only changes from now"),
        Option("debezium.publication.name", help="the publication to stream (default <slot.name>_publication, "
                                                 "created for the table when missing)"),
        Option("on_error", "enum", "fail", values=("fail", "skip"),
               help="a value that does not convert: stop (fail) or dead-letter the change (skip)"),
        Option("dead_letter", help="where skipped changes go (default <name>.dead-letter.jsonl)"),
        Option("batch.size", "int", help="at most this many changes per batch (and snapshot rows per piece)"),
    ),
    check=_check,
)
