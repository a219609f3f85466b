"""Rows of a PostgreSQL table fetched by key, for lookup joins (``connector = 'jdbc'`` on a TABLE).

A batch of events needs the rows of its distinct keys: they travel to the
server by ``COPY`` into a temporary table and come back by one ``COPY
(SELECT ... JOIN ...) TO STDOUT``, parsed by Arrow's CSV reader and
converted a column at a time, never a query per key. The join keeps what
it fetched as its cache (``runtime/operators/lookup_join.py``).
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.csv as pacsv

from ..errors import LookupTableError
from .convert import conform_table
from .postgres_common import (
    connection_message,
    error_text,
    qualified,
    quote_ident,
    server_from_jdbc_url,
    split_table_name,
    text_to_arrow_input,
)
from .salvage import BadInput

_CSV = pacsv.WriteOptions(include_header=False, quoting_style="needed")


class JdbcLookup:
    """Fetches the rows of given keys from one table.

    Args:
        options: the table's WITH (...) options (``url``, ``table-name``, ``username``, ``password``).
        columns: (name, Arrow type) of the columns to fetch.
        keys: the columns the keys are matched on.
    """

    def __init__(self, options: dict, columns: list[tuple[str, pa.DataType]], keys: tuple[str, ...]):
        import psycopg

        options = {k.lower(): v for k, v in options.items()}
        self.server = server_from_jdbc_url(options, self._fail)
        self.schema_name, self.table_name = split_table_name(options.get("table-name", ""))
        self.target = qualified(self.schema_name, self.table_name)
        self.schema = pa.schema(columns)
        self.keys = keys
        try:
            self.conn = psycopg.connect(self.server.conninfo())
        except psycopg.OperationalError as e:
            self._fail(connection_message(self.server, e))
        try:
            with self.conn.transaction():
                found = dict(self.conn.execute(
                    "SELECT attname, atttypid::int FROM pg_attribute WHERE attrelid = to_regclass(%s) AND "
                    "attnum > 0 AND NOT attisdropped", (f"{self.schema_name}.{self.table_name}",)).fetchall())
                if not found:
                    self._fail(f"there is no table {self.schema_name}.{self.table_name} in {self.server.label}")
                missing = [c for c in self.schema.names if c not in found]
                if missing:
                    self._fail(f"table {self.schema_name}.{self.table_name} has no column "
                               f"{', '.join(repr(c) for c in missing)}")
                self.types = found
                names = ", ".join(quote_ident(k) for k in keys)
                self.conn.execute(f"CREATE TEMP TABLE dsms_lookup_keys ON COMMIT DELETE ROWS AS SELECT {names} "
                                  f"FROM {self.target} WITH NO DATA")
        except psycopg.Error as e:
            self._fail(f"cannot read table {self.schema_name}.{self.table_name}: {error_text(e)}")

    def _fail(self, message: str):
        raise LookupTableError(f"lookup table: {message}")

    def fetch(self, keys: pa.Table) -> pa.Table:
        """The rows whose key columns equal a row of ``keys`` (columns named as ``self.keys``)."""
        import psycopg

        out = io.BytesIO()
        pacsv.write_csv(keys.select(list(self.keys)), out, _CSV)
        columns = ", ".join(f"t.{quote_ident(c)}" for c in self.schema.names)
        match = " AND ".join(f"t.{quote_ident(k)} = k.{quote_ident(k)}" for k in self.keys)
        data = io.BytesIO()
        try:
            with self.conn.transaction():
                cur = self.conn.cursor()
                with cur.copy(f"COPY dsms_lookup_keys ({', '.join(quote_ident(k) for k in self.keys)}) "
                              "FROM STDIN (FORMAT csv)") as copy:
                    copy.write(out.getbuffer())
                with cur.copy(f"COPY (SELECT {columns} FROM {self.target} t JOIN dsms_lookup_keys k ON {match}) "
                              "TO STDOUT (FORMAT csv)") as copy:
                    for block in copy:
                        data.write(block)
        except psycopg.Error as e:
            self._fail(f"cannot look up keys in {self.schema_name}.{self.table_name}: {error_text(e)}")
        if not data.getbuffer().nbytes:
            return self.schema.empty_table()
        names = self.schema.names
        raw = pacsv.read_csv(io.BytesIO(data.getvalue()), read_options=pacsv.ReadOptions(column_names=names),
                             convert_options=pacsv.ConvertOptions(
                                 column_types={c: pa.string() for c in names}, null_values=[""],
                                 strings_can_be_null=True, quoted_strings_can_be_null=False))
        text = pa.table({f.name: text_to_arrow_input(raw.column(f.name).combine_chunks(), self.types[f.name], f.type)
                         for f in self.schema})
        try:
            return conform_table(text, self.schema)
        except BadInput as e:
            self._fail(f"a value of {self.schema_name}.{self.table_name} does not fit its declared type: {e}")

    def close(self) -> None:
        if not self.conn.closed:
            self.conn.close()
