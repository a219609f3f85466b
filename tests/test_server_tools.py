"""The catalog queries Grafana's PostgreSQL data source and DBeaver send, replayed with psycopg.

The statements are those of grafana/grafana ``public/app/plugins/datasource/grafana-postgresql-datasource/
postgresMetaQuery.ts`` (version check, table list, column list of the query builder) and of DBeaver's
PostgreSQL plugin (``PostgreDataSource``: version, database list; ``PostgreDatabase``: database lookup,
schema cache; ``PostgreSchema``: table cache, column cache, constraint cache, index cache; data types),
with their parameters bound as the JDBC driver binds them (``$1``). Oracle: the dsms catalog the test
created (names, kinds and column types written out by hand).
"""

from __future__ import annotations

import psycopg
import pytest

from server_helpers import DsmsServer

DDL = ["CREATE STREAM orders (shop VARCHAR, amount DOUBLE, ts TIMESTAMP(3), "
       "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')",
       "CREATE MATERIALIZED VIEW per_minute AS SELECT window_start, shop, SUM(amount) AS total "
       "FROM TUMBLE(orders, ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end, shop",
       "CREATE VIEW big AS SELECT shop, amount FROM orders WHERE amount > 100"]

# -- Grafana (postgresMetaQuery.ts) ---------------------------------------------------------

GRAFANA_VERSION = "SELECT current_setting('server_version_num')::int/100 as version"
GRAFANA_TIMESCALE = "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
_SEARCH_PATH = """
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"""
GRAFANA_TABLES = f"""SELECT
    CASE WHEN {_SEARCH_PATH}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN {_SEARCH_PATH} THEN 0 ELSE 1 END, 1"""
GRAFANA_COLUMNS = f"""SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('per_minute'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('per_minute'))[1]
          AND quote_ident(table_name) = (parse_ident('per_minute'))[2]
        ELSE quote_ident(table_name) = 'per_minute'
          AND {_SEARCH_PATH}
      END"""
GRAFANA_SCHEMAS = """SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
    ORDER BY schema_name"""
# A time-series panel: $__timeFilter(window_start) as Grafana expands it for PostgreSQL.
GRAFANA_PANEL = ("SELECT window_start AS \"time\", shop, total FROM per_minute "
                 "WHERE window_start BETWEEN '2024-05-01T09:00:00Z' AND '2024-05-01T09:05:00Z' ORDER BY 1, 2")

# -- DBeaver (PostgreSQL plugin) -------------------------------------------------------------

DBEAVER_DATABASES = ("SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE 1 = 1 AND datallowconn AND NOT "
                     "datistemplate \nORDER BY db.datname")
DBEAVER_DATABASE = "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname=%s"
DBEAVER_SCHEMAS = ("SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n\n"
                   "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND d.objsubid=0 AND "
                   "d.classoid='pg_namespace'::regclass\n ORDER BY nspname")
DBEAVER_TABLES = ("SELECT c.oid,c.*,d.description,pg_catalog.pg_get_expr(c.relpartbound, c.oid) as partition_expr,  "
                  "pg_catalog.pg_get_partkeydef(c.oid) as partition_key \nFROM pg_catalog.pg_class c\n"
                  "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND "
                  "d.classoid='pg_class'::regclass\nWHERE c.relnamespace=%s AND c.relkind not in ('i','I','c')")
DBEAVER_COLUMNS = ("SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as def_value,"
                   "dsc.description,dep.objid\nFROM pg_catalog.pg_attribute a\n"
                   "INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid)\n"
                   "LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid AND a.attnum = ad.adnum)\n"
                   "LEFT OUTER JOIN pg_catalog.pg_description dsc ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid)\n"
                   "LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND dep.deptype = 'i' and "
                   "dep.refobjsubid = a.attnum and dep.classid = dep.refclassid\n"
                   "WHERE NOT a.attisdropped AND c.relkind not in ('i','I','c') AND c.oid=%s\nORDER BY a.attnum")
DBEAVER_CONSTRAINTS = ("SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,d.description, "
                       "case when c.contype='c' then \"substring\"(pg_get_constraintdef(c.oid), 7) else null end "
                       "consrc_copy\nFROM pg_catalog.pg_constraint c\nINNER JOIN pg_catalog.pg_class t ON "
                       "t.oid=c.conrelid\nLEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid\n"
                       "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND d.objsubid=0 AND "
                       "d.classoid='pg_constraint'::regclass\nWHERE c.conrelid=%s\nORDER BY c.oid")
DBEAVER_INDEXES = ("SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,"
                   "tc.relname as tabrelname,dsc.description,pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,"
                   "pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,pg_catalog.pg_relation_size("
                   "i.indexrelid) as index_rel_size,pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans"
                   "\nFROM pg_catalog.pg_index i\nINNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid\n"
                   "INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid\nLEFT OUTER JOIN pg_catalog.pg_description "
                   "dsc ON i.indexrelid=dsc.objoid\nWHERE  i.indrelid=%s ORDER BY c.relname")
DBEAVER_TYPES = ("SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), t.typtypmod) as base_type_name, "
                 "d.description\nFROM pg_catalog.pg_type t\nLEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem\n"
                 "LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid\nLEFT OUTER JOIN pg_catalog.pg_description "
                 "d ON t.oid=d.objoid\nWHERE t.typname IS NOT NULL\nAND (c.relkind IS NULL OR c.relkind = 'c') AND "
                 "(et.typcategory IS NULL OR et.typcategory <> 'C')")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tools")
    with DsmsServer(str(folder)) as s:
        with psycopg.connect(s.url(), autocommit=True) as c:
            for statement in DDL:
                c.execute(statement)
            c.execute("INSERT INTO orders VALUES ('north', 12.5, TIMESTAMP '2024-05-01 09:00:10'), "
                      "('south', 3.0, TIMESTAMP '2024-05-01 09:00:40'), ('north', 1.0, TIMESTAMP '2024-05-01 09:01:30'), "
                      "('north', 9.0, TIMESTAMP '2024-05-01 09:07:00')")
        yield s


def _dicts(cur) -> list[dict]:
    names = [d.name for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def test_grafana_data_source_introspection_and_a_time_series_panel(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        assert c.execute(GRAFANA_VERSION).fetchall() == [(1600,)]
        assert c.execute(GRAFANA_TIMESCALE).fetchall() == []
        assert c.execute(GRAFANA_SCHEMAS).fetchall() == [("public",)]
        assert [r[0] for r in c.execute(GRAFANA_TABLES).fetchall()] == ["big", "orders", "per_minute"]
        assert sorted(c.execute(GRAFANA_COLUMNS).fetchall()) == [("shop", "text"), ("total", "double precision"),
                                                                 ("window_start", "timestamp without time zone")]
        c.execute("FLUSH")
        rows = c.execute(GRAFANA_PANEL).fetchall()  # windows the watermark (09:06) has closed
    assert [(t.isoformat(), shop, total) for t, shop, total in rows] == [
        ("2024-05-01T09:00:00", "north", 12.5), ("2024-05-01T09:00:00", "south", 3.0),
        ("2024-05-01T09:01:00", "north", 1.0)]


def test_dbeaver_navigator_introspection(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        assert c.execute("SELECT version()").fetchone()[0].startswith("PostgreSQL 16")
        assert [d["datname"] for d in _dicts(c.execute(DBEAVER_DATABASES))] == ["dsms"]
        assert [d["datname"] for d in _dicts(c.execute(DBEAVER_DATABASE, ("dsms",)))] == ["dsms"]
        schemas = {d["nspname"]: d["oid"] for d in _dicts(c.execute(DBEAVER_SCHEMAS))}
        assert "public" in schemas and "pg_catalog" in schemas
        tables = {d["relname"]: d for d in _dicts(c.execute(DBEAVER_TABLES, (schemas["public"],)))}
        assert {name: d["relkind"] for name, d in tables.items()} == {"orders": "r", "per_minute": "m", "big": "v"}
        columns = _dicts(c.execute(DBEAVER_COLUMNS, (tables["orders"]["oid"],)))
        assert [(d["attname"], d["attnum"], d["atttypid"]) for d in columns] == [
            ("shop", 1, 25), ("amount", 2, 701), ("ts", 3, 1114)]
        assert c.execute(DBEAVER_CONSTRAINTS, (tables["orders"]["oid"],)).fetchall() == []
        assert c.execute(DBEAVER_INDEXES, (tables["orders"]["oid"],)).fetchall() == []
        types = {d["typname"]: d["oid"] for d in _dicts(c.execute(DBEAVER_TYPES))}
        assert types["int8"] == 20 and types["varchar"] == 1043 and types["timestamp"] == 1114
