"""pg_catalog and information_schema, emulated on an in-memory DuckDB from the dsms catalog.

psql's ``\\d``, drivers and tools (Grafana, DBeaver) ask PostgreSQL's
system catalogs about tables and columns. Rather than recognising each
query, the server runs them on DuckDB over tables shaped like the
pg_catalog tables those queries read (pg_class, pg_attribute, pg_type,
pg_namespace, ...), filled from the dsms catalog: streams and tables as
relations (relkind 'r'), views 'v', materialized views 'm', sinks 'r'.
information_schema comes from DuckDB itself, over one empty DuckDB
table per dsms object in schema ``public``. PostgreSQL-only syntax
(``OPERATOR(pg_catalog.~)``, ``::regclass``, ``COLLATE pg_catalog.default``)
is rewritten to DuckDB's first; functions psql calls are macros.
``pg_proc`` (psql's ``\\df``) is in ``catalog_functions.py``.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from .. import __version__
from ..errors import DsmsError
from ..grammar.dialect import Dsms
from .catalog_functions import TABLES as FUNCTION_TABLES
from .catalog_functions import fill_functions, functions_fingerprint
from .catalog_functions import fill_static as fill_function_namespace
from .errors import INSUFFICIENT_PRIVILEGE, WireError
from .pgarrays import array_type_rows, column_oid
from .pgtypes import TYPE_NAMES, TYPE_SIZES

FIRST_OID = 16384
NAMESPACE_PUBLIC, NAMESPACE_PG = 2200, 11
_RELKIND = {"stream": "r", "table": "r", "sink": "r", "view": "v", "materialized view": "m"}
_DUCK_TYPES = {16: "BOOLEAN", 20: "BIGINT", 21: "SMALLINT", 23: "INTEGER", 25: "VARCHAR", 114: "JSON",
               700: "REAL", 701: "DOUBLE", 1043: "VARCHAR", 1082: "DATE", 1083: "TIME", 1114: "TIMESTAMP",
               1184: "TIMESTAMPTZ", 1186: "INTERVAL", 1700: "DECIMAL(38,10)", 17: "BLOB"}

_TABLES = """
CREATE TABLE pg_namespace (oid BIGINT, nspname VARCHAR, nspowner BIGINT, nspacl VARCHAR[]);
CREATE TABLE pg_class (oid BIGINT, relname VARCHAR, relnamespace BIGINT, relkind VARCHAR, relowner BIGINT,
  relam BIGINT, reltuples DOUBLE, relpages BIGINT, relchecks INTEGER, relhasindex BOOLEAN, relhasrules BOOLEAN,
  relhastriggers BOOLEAN, relrowsecurity BOOLEAN, relforcerowsecurity BOOLEAN, relispartition BOOLEAN,
  reloptions VARCHAR[], reltablespace BIGINT, reloftype BIGINT, relpersistence VARCHAR, relreplident VARCHAR,
  reltoastrelid BIGINT, relpartbound VARCHAR, relacl VARCHAR[], relnatts INTEGER, reltype BIGINT,
  relhassubclass BOOLEAN, relisshared BOOLEAN, relfilenode BIGINT);
CREATE TABLE pg_attribute (attrelid BIGINT, attname VARCHAR, atttypid BIGINT, atttypmod INTEGER, attnum INTEGER,
  attnotnull BOOLEAN, attisdropped BOOLEAN, atthasdef BOOLEAN, attcollation BIGINT, attidentity VARCHAR,
  attgenerated VARCHAR, attlen INTEGER, attstattarget INTEGER, attstorage VARCHAR, attcompression VARCHAR,
  attndims INTEGER, attislocal BOOLEAN, attinhcount INTEGER, attacl VARCHAR[], attoptions VARCHAR[],
  attfdwoptions VARCHAR[]);
CREATE TABLE pg_type (oid BIGINT, typname VARCHAR, typnamespace BIGINT, typowner BIGINT, typlen INTEGER,
  typbyval BOOLEAN, typtype VARCHAR, typcategory VARCHAR, typisdefined BOOLEAN, typdelim VARCHAR, typrelid BIGINT,
  typelem BIGINT, typarray BIGINT, typinput VARCHAR, typoutput VARCHAR, typreceive VARCHAR, typbasetype BIGINT,
  typtypmod INTEGER, typnotnull BOOLEAN, typcollation BIGINT, typndims INTEGER, typdefault VARCHAR);
CREATE TABLE pg_database (oid BIGINT, datname VARCHAR, datdba BIGINT, encoding INTEGER, datcollate VARCHAR,
  datctype VARCHAR, datistemplate BOOLEAN, datallowconn BOOLEAN, datconnlimit INTEGER, dattablespace BIGINT,
  datacl VARCHAR[], datlocprovider VARCHAR, daticulocale VARCHAR, daticurules VARCHAR, datcollversion VARCHAR);
CREATE TABLE pg_auth_members (oid BIGINT, roleid BIGINT, member BIGINT, grantor BIGINT, admin_option BOOLEAN,
  inherit_option BOOLEAN, set_option BOOLEAN);
CREATE TABLE pg_roles (oid BIGINT, rolname VARCHAR, rolsuper BOOLEAN, rolinherit BOOLEAN, rolcreaterole BOOLEAN,
  rolcreatedb BOOLEAN, rolcanlogin BOOLEAN, rolreplication BOOLEAN, rolconnlimit INTEGER, rolvaliduntil VARCHAR,
  rolbypassrls BOOLEAN, rolconfig VARCHAR[]);
CREATE TABLE pg_description (objoid BIGINT, classoid BIGINT, objsubid INTEGER, description VARCHAR);
CREATE TABLE pg_settings (name VARCHAR, setting VARCHAR, unit VARCHAR, category VARCHAR, short_desc VARCHAR);
CREATE TABLE pg_am (oid BIGINT, amname VARCHAR, amtype VARCHAR);
CREATE TABLE pg_attrdef (oid BIGINT, adrelid BIGINT, adnum INTEGER, adbin VARCHAR);
CREATE TABLE pg_collation (oid BIGINT, collname VARCHAR, collnamespace BIGINT);
CREATE TABLE pg_index (indexrelid BIGINT, indrelid BIGINT, indisprimary BOOLEAN, indisunique BOOLEAN,
  indisclustered BOOLEAN, indisvalid BOOLEAN, indisreplident BOOLEAN, indkey INTEGER[], indnatts INTEGER,
  indexprs VARCHAR, indpred VARCHAR, indnullsnotdistinct BOOLEAN);
CREATE TABLE pg_constraint (oid BIGINT, conname VARCHAR, connamespace BIGINT, contype VARCHAR, conrelid BIGINT,
  confrelid BIGINT, conindid BIGINT, conkey INTEGER[], confkey INTEGER[], condeferrable BOOLEAN,
  condeferred BOOLEAN, convalidated BOOLEAN, conislocal BOOLEAN, conparentid BIGINT, contypid BIGINT);
CREATE TABLE pg_trigger (oid BIGINT, tgrelid BIGINT, tgname VARCHAR, tgisinternal BOOLEAN, tgenabled VARCHAR,
  tgparentid BIGINT);
CREATE TABLE pg_policy (oid BIGINT, polname VARCHAR, polrelid BIGINT, polcmd VARCHAR, polpermissive BOOLEAN,
  polroles BIGINT[], polqual VARCHAR, polwithcheck VARCHAR);
CREATE TABLE pg_inherits (inhrelid BIGINT, inhparent BIGINT, inhseqno INTEGER, inhdetachpending BOOLEAN);
CREATE TABLE pg_statistic_ext (oid BIGINT, stxrelid BIGINT, stxname VARCHAR, stxnamespace BIGINT,
  stxkeys INTEGER[], stxkind VARCHAR[], stxstattarget INTEGER);
CREATE TABLE pg_publication (oid BIGINT, pubname VARCHAR, puballtables BOOLEAN, pubviaroot BOOLEAN);
CREATE TABLE pg_publication_rel (oid BIGINT, prpubid BIGINT, prrelid BIGINT, prqual VARCHAR, prattrs INTEGER[]);
CREATE TABLE pg_publication_namespace (oid BIGINT, pnpubid BIGINT, pnnspid BIGINT);
CREATE TABLE pg_partitioned_table (partrelid BIGINT, partstrat VARCHAR);
CREATE TABLE pg_tablespace (oid BIGINT, spcname VARCHAR);
CREATE TABLE pg_extension (oid BIGINT, extname VARCHAR, extversion VARCHAR, extnamespace BIGINT);
CREATE TABLE pg_enum (oid BIGINT, enumtypid BIGINT, enumsortorder DOUBLE, enumlabel VARCHAR);
CREATE TABLE pg_range (rngtypid BIGINT, rngsubtype BIGINT);
CREATE TABLE pg_foreign_table (ftrelid BIGINT, ftserver BIGINT, ftoptions VARCHAR[]);
CREATE TABLE pg_rewrite (oid BIGINT, rulename VARCHAR, ev_class BIGINT, ev_type VARCHAR);
CREATE TABLE pg_matviews (schemaname VARCHAR, matviewname VARCHAR, matviewowner VARCHAR, definition VARCHAR);
CREATE TABLE pg_views (schemaname VARCHAR, viewname VARCHAR, viewowner VARCHAR, definition VARCHAR);
CREATE VIEW pg_tables AS SELECT n.nspname AS schemaname, c.relname AS tablename, 'dsms' AS tableowner,
  NULL AS tablespace, false AS hasindexes, false AS hasrules, false AS hastriggers, false AS rowsecurity
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'r';
CREATE VIEW pg_user AS SELECT rolname AS usename, oid AS usesysid, rolcreatedb AS usecreatedb,
  rolsuper AS usesuper FROM pg_roles;
CREATE VIEW pg_stat_activity AS SELECT 0 AS pid, NULL AS datname, NULL AS usename, NULL AS state WHERE false;
CREATE VIEW pg_indexes AS SELECT NULL::VARCHAR AS schemaname, NULL::VARCHAR AS tablename,
  NULL::VARCHAR AS indexname, NULL::VARCHAR AS indexdef WHERE false;
CREATE TYPE regclass AS BIGINT;
CREATE TYPE regtype AS BIGINT;
CREATE TYPE regproc AS BIGINT;
CREATE TYPE regnamespace AS BIGINT;
CREATE MACRO pg_table_is_visible(x) AS true;
CREATE MACRO pg_type_is_visible(x) AS true;
CREATE MACRO pg_function_is_visible(x) AS true;
CREATE MACRO format_type(t, m) AS (SELECT typname_sql FROM _type_names WHERE oid = t);
CREATE MACRO pg_get_userbyid(x) AS 'dsms';
CREATE MACRO pg_get_expr(a, b, c := true) AS NULL::VARCHAR;
CREATE MACRO pg_get_viewdef(x, p := true) AS (SELECT definition FROM _definitions WHERE oid = x);
CREATE MACRO pg_get_indexdef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_constraintdef(x, p := true) AS NULL::VARCHAR;
CREATE MACRO pg_get_statisticsobjdef_columns(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_partkeydef(x) AS NULL::VARCHAR;
CREATE MACRO pg_get_triggerdef(x, p := true) AS NULL::VARCHAR;
CREATE MACRO obj_description(x, c := '') AS (SELECT description FROM pg_description WHERE objoid = x LIMIT 1);
CREATE MACRO col_description(x, n) AS NULL::VARCHAR;
CREATE MACRO shobj_description(x, c) AS NULL::VARCHAR;
CREATE MACRO pg_encoding_to_char(x) AS 'UTF8';
CREATE MACRO has_table_privilege(a, b, c := '') AS true;
CREATE MACRO has_schema_privilege(a, b, c := '') AS true;
CREATE MACRO has_database_privilege(a, b, c := '') AS true;
CREATE MACRO pg_has_role(a, b, c := '') AS true;
CREATE MACRO pg_is_in_recovery() AS false;
CREATE MACRO pg_relation_is_publishable(x) AS false;
CREATE MACRO pg_relation_size(x) AS 0;
CREATE MACRO pg_total_relation_size(x) AS 0;
CREATE MACRO pg_stat_get_numscans(x) AS 0;
CREATE MACRO parse_ident(x, strict := true) AS list_transform(string_split(x, '.'),
  lambda p: CASE WHEN p LIKE '"%"' THEN replace(p[2:-2], '""', '"') ELSE lower(p) END);
CREATE MACRO pg_table_size(x) AS 0;
CREATE MACRO pg_size_pretty(x) AS '0 bytes';
CREATE MACRO quote_ident(x) AS CASE WHEN regexp_matches(x, '^[a-z_][a-z0-9_]*$') THEN x
  ELSE '"' || replace(x, '"', '""') || '"' END;
CREATE MACRO array_upper(a, d) AS len(a);
CREATE MACRO array_lower(a, d) AS 1;
CREATE MACRO current_schemas(x) AS ['public'];
CREATE MACRO pg_postmaster_start_time() AS TIMESTAMP '2000-01-01';
CREATE MACRO txid_current() AS 1;
CREATE MACRO to_regclass(x) AS CASE lower(x) WHEN 'pg_class' THEN 1259 WHEN 'pg_namespace' THEN 2615
  WHEN 'pg_constraint' THEN 2606 WHEN 'pg_type' THEN 1247 WHEN 'pg_proc' THEN 1255 WHEN 'pg_attribute' THEN 1249
  WHEN 'pg_database' THEN 1262 WHEN 'pg_index' THEN 2610 WHEN 'pg_trigger' THEN 2620
  ELSE (SELECT oid FROM pg_class WHERE relname = x) END;
CREATE VIEW _is_schemata AS SELECT * FROM information_schema.schemata
  WHERE schema_name IN ('public', 'pg_catalog', 'information_schema');
CREATE VIEW _is_tables AS SELECT t.* REPLACE (CASE WHEN c.relkind = 'v' THEN 'VIEW' ELSE t.table_type END AS table_type)
  FROM information_schema.tables t LEFT JOIN pg_class c ON c.relname = t.table_name WHERE t.table_schema = 'public';
CREATE VIEW _is_columns AS SELECT col.* REPLACE (coalesce(n.typname_sql, col.data_type) AS data_type)
  FROM information_schema.columns col LEFT JOIN pg_class c ON c.relname = col.table_name
  LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = col.column_name
  LEFT JOIN _type_names n ON n.oid = a.atttypid WHERE col.table_schema = 'public';
CREATE VIEW _is_views AS SELECT * FROM information_schema.tables WHERE table_schema = 'public' AND
  table_name IN (SELECT relname FROM pg_class WHERE relkind = 'v');
"""

_REWRITES = [
    # Grafana's "schemas on the search path": a scalar function in FROM (string_to_array … s), which DuckDB
    # does not take; the schemas on the path are what current_schemas() gives.
    (re.compile(r"SELECT\s+CASE\s+WHEN\s+trim\(s\[i\]\)\s*=\s*'\"\$user\"'\s+THEN\s+user\s+ELSE\s+trim\(s\[i\]\)"
                r"\s+END\s+FROM\s+generate_series\(.*?\)\s+as\s+i\s*,\s*string_to_array\(\s*current_setting\("
                r"\s*'search_path'\s*\)\s*,\s*','\s*\)\s+s\b", re.I | re.S), "SELECT unnest(current_schemas(false))"),
    (re.compile(r"OPERATOR\s*\(\s*pg_catalog\.([~!<>=]+)\s*\)", re.I), r"\1"),
    (re.compile(r"\s+COLLATE\s+(pg_catalog\.)?\"?(default|C)\"?", re.I), ""),
    (re.compile(r"\bpg_catalog\.", re.I), ""),
    (re.compile(r"'([A-Za-z0-9_.]*)'\s*::\s*regclass\b", re.I), r"to_regclass('\1')"),
    (re.compile(r"\binformation_schema\.(schemata|tables|columns|views)\b", re.I), r"_is_\1"),
    (re.compile(r"::\s*(regclass|regtype|regproc|regnamespace|oid)\b", re.I), "::BIGINT"),
    (re.compile(r"::\s*\"char\"", re.I), "::VARCHAR"),
    (re.compile(r"::\s*name\b", re.I), "::VARCHAR"),
    (re.compile(r"\barray\s*\[\s*\]", re.I), "[]"),
]


def rewrite(sql: str) -> str:
    """PostgreSQL catalog SQL as DuckDB accepts it."""
    for pattern, repl in _REWRITES:
        sql = pattern.sub(repl, sql)
    return sql


_CALL = re.compile(r'^"?([A-Za-z_]\w*)"?\(.*\)$', re.S)


def _postgres_names(table: pa.Table) -> pa.Table:
    """Unnamed function columns as PostgreSQL names them: ``version``, ``count`` (DuckDB: ``"version"()``)."""
    names = [n if (m := _CALL.match(n)) is None else ("count" if m.group(1) == "count_star" else m.group(1))
             for n in table.column_names]
    return table if names == table.column_names else table.rename_columns(names)


class PgCatalog:
    """The emulated catalog of one server; rebuilt when the dsms catalog changes."""

    def __init__(self):
        self.duck = duckdb.connect()
        self.duck.execute("CREATE TABLE _type_names (oid BIGINT, typname_sql VARCHAR)")
        self.duck.execute("CREATE TABLE _definitions (oid BIGINT, definition VARCHAR)")
        for statement in (_TABLES + ";\n" + FUNCTION_TABLES).split(";\n"):
            if statement.strip():
                self.duck.execute(statement)
        self.duck.execute("CREATE SCHEMA public")
        self._fingerprint = None
        self._session = None
        self._roles: tuple[str, ...] | None = None
        self._fill_static()
        # Clients' catalog SQL runs here as they wrote it: no file, extension or attached database may be
        # reached from it (read_csv('/etc/passwd'), COPY … TO, ATTACH), and no client can turn that back on.
        self.duck.execute("SET enable_external_access = false")
        self.duck.execute("SET lock_configuration = true")

    def _fill_static(self) -> None:
        d = self.duck
        d.execute("INSERT INTO pg_namespace VALUES (11, 'pg_catalog', 10, NULL), (2200, 'public', 10, NULL), "
                  "(13000, 'information_schema', 10, NULL)")
        d.execute("INSERT INTO pg_am VALUES (2, 'heap', 't')")
        rows = [(oid, name.split(" ")[0] if " " not in name else name, NAMESPACE_PG, 10, TYPE_SIZES.get(oid, -1))
                for oid, name in TYPE_NAMES.items()]
        short = {16: "bool", 17: "bytea", 20: "int8", 21: "int2", 23: "int4", 25: "text", 114: "json", 700: "float4",
                 701: "float8", 1043: "varchar", 1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz",
                 1186: "interval", 1700: "numeric", 19: "name", 26: "oid"}
        d.executemany("INSERT INTO pg_type (oid, typname, typnamespace, typowner, typlen, typbyval, typtype, "
                      "typcategory, typisdefined, typdelim, typrelid, typelem, typarray, typbasetype, typtypmod, "
                      "typnotnull, typcollation, typndims) VALUES (?, ?, ?, ?, ?, true, 'b', 'U', true, ',', 0, 0, 0,"
                      " 0, -1, false, 0, 0)", [(oid, short[oid], ns, owner, size) for oid, _, ns, owner, size in rows])
        d.executemany("INSERT INTO _type_names VALUES (?, ?)", list(TYPE_NAMES.items()))
        arrays = array_type_rows()
        d.executemany("INSERT INTO pg_type (oid, typname, typnamespace, typowner, typlen, typbyval, typtype, "
                      "typcategory, typisdefined, typdelim, typrelid, typelem, typarray, typbasetype, typtypmod, "
                      "typnotnull, typcollation, typndims) VALUES (?, ?, 11, 10, -1, false, 'b', 'A', true, ',', 0, "
                      "?, 0, 0, -1, false, 0, 0)", [(oid, name, element) for oid, name, element, _ in arrays])
        d.executemany("INSERT INTO _type_names VALUES (?, ?)", [(oid, full) for oid, _, _, full in arrays])
        fill_function_namespace(d)

    def refresh(self, catalog, database: str) -> None:
        objects = [o for o in catalog.objects.values() if getattr(o, "object_kind", None) in _RELKIND]
        fingerprint = (database, tuple((o.object_kind, o.name, tuple(f.name for f in o.schema)) for o in objects),
                       functions_fingerprint(catalog))
        if fingerprint == self._fingerprint:
            return
        d = self.duck
        for table in ("pg_class", "pg_attribute", "pg_description", "pg_views", "pg_matviews", "_definitions",
                      "pg_database"):
            d.execute(f"DELETE FROM {table}")
        for (name,) in d.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'") \
                .fetchall():
            d.execute(f'DROP TABLE public."{name}"')
        d.execute("INSERT INTO pg_database VALUES (1, ?, 10, 6, 'C', 'C', false, true, -1, 0, NULL, 'c', NULL, NULL, "
                  "NULL)", [database])
        classes, attributes, descriptions, definitions = [], [], [], []
        for i, obj in enumerate(sorted(objects, key=lambda o: o.name.lower())):
            oid = FIRST_OID + i
            kind = obj.object_kind
            fields = list(obj.schema)
            classes.append((oid, obj.name, NAMESPACE_PUBLIC, _RELKIND[kind], len(fields)))
            descriptions.append((oid, 1259, 0, f"dsms {kind}"))
            query = getattr(obj, "query", None)
            if query is not None:
                definitions.append((oid, query.sql(dialect=Dsms)))  # dsms SQL: TUMBLE(…) and the like are its own
            columns = []
            for n, f in enumerate(fields, 1):
                t = column_oid(f.type)
                attributes.append((oid, f.name, t, -1, n, False, False, False, 0, "", "", TYPE_SIZES.get(t, -1)))
                columns.append(f'"{f.name}" {_DUCK_TYPES.get(t, "VARCHAR")}')
            d.execute(f'CREATE TABLE public."{obj.name}" ({", ".join(columns) or "dummy INTEGER"})')
        if classes:
            d.executemany("INSERT INTO pg_class (oid, relname, relnamespace, relkind, relowner, relam, reltuples, "
                          "relpages, relchecks, relhasindex, relhasrules, relhastriggers, relrowsecurity, "
                          "relforcerowsecurity, relispartition, reltablespace, reloftype, relpersistence, "
                          "relreplident, reltoastrelid, relnatts, reltype, relhassubclass, relisshared) "
                          "VALUES (?, ?, ?, ?, 10, 2, -1, 0, 0, false, false, false, false, false, false, 0, 0, 'p',"
                          " 'd', 0, ?, 0, false, false)", classes)
            d.executemany("INSERT INTO pg_attribute (attrelid, attname, atttypid, atttypmod, attnum, attnotnull, "
                          "attisdropped, atthasdef, attcollation, attidentity, attgenerated, attlen, attstattarget,"
                          " attstorage, attndims, attislocal, attinhcount) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, -1, 'p', 0, true, 0)", attributes)
            d.executemany("INSERT INTO pg_description VALUES (?, ?, ?, ?)", descriptions)
        if definitions:
            d.executemany("INSERT INTO _definitions VALUES (?, ?)", definitions)
        d.execute("INSERT INTO pg_views SELECT 'public', c.relname, 'dsms', x.definition FROM pg_class c "
                  "JOIN _definitions x ON x.oid = c.oid WHERE c.relkind = 'v'")
        d.execute("INSERT INTO pg_matviews SELECT 'public', c.relname, 'dsms', x.definition FROM pg_class c "
                  "JOIN _definitions x ON x.oid = c.oid WHERE c.relkind = 'm'")
        fill_functions(d, catalog)
        self._fingerprint = fingerprint

    def refresh_roles(self, roles: tuple[str, ...]) -> None:
        """pg_roles: the bootstrap role ``dsms`` and the server's users (``--users``, CREATE USER)."""
        if roles == self._roles:
            return
        names = ["dsms"] + [r for r in roles if r != "dsms"]
        self.duck.execute("DELETE FROM pg_roles")
        self.duck.executemany("INSERT INTO pg_roles VALUES (?, ?, true, true, true, true, true, false, -1, NULL, "
                              "true, NULL)", [(10 if i == 0 else ROLE_OID + i, name) for i, name in enumerate(names)])
        self._roles = roles

    def run(self, sql: str, params: dict, user: str, database: str) -> pa.Table:
        session = (user, database, tuple(sorted(params.items())))
        if session != self._session:  # the client's own values, set once per change of client
            self._set_session(params, user, database)
            self._session = session
        text = rewrite(sql)
        text = re.sub(r"\b(current_user|session_user|current_schema|current_catalog)\b(?!\s*\()", r"\1()", text,
                      flags=re.I)
        try:
            return _postgres_names(self.duck.sql(text).to_arrow_table())
        except duckdb.PermissionException as e:
            raise WireError(INSUFFICIENT_PRIVILEGE, "a catalog query cannot read or write files: "
                            + str(e).splitlines()[0], hint="read files through a connector = 'file' stream under "
                            "the server's data roots") from None
        except duckdb.Error as e:
            raise DsmsError(f"this catalog query is not supported by the dsms server: {str(e).splitlines()[0]}") \
                from None

    def _set_session(self, params: dict, user: str, database: str) -> None:
        d = self.duck
        settings = {"server_version": params.get("server_version", "16.0"), "server_version_num": "160000",
                    **{k.lower(): v for k, v in params.items()}}
        d.execute("CREATE OR REPLACE TABLE pg_settings AS SELECT k AS name, v AS setting, NULL::VARCHAR AS unit, "
                  "'' AS category, '' AS short_desc FROM (SELECT unnest(?) AS k, unnest(?) AS v)",
                  [list(settings), list(settings.values())])
        d.execute(f"CREATE OR REPLACE MACRO version() AS 'PostgreSQL {params.get('server_version', '16.0')} "
                  f"(dsms {__version__}) on x86_64-pc-linux-gnu'")
        d.execute("CREATE OR REPLACE MACRO current_schema() AS 'public'")
        d.execute(f"CREATE OR REPLACE MACRO current_database() AS {_quote(database)}")
        d.execute(f"CREATE OR REPLACE MACRO current_user() AS {_quote(user)}")
        d.execute(f"CREATE OR REPLACE MACRO session_user() AS {_quote(user)}")
        # A CASE of constants, not a lookup: Grafana calls it inside generate_series(), which takes no subquery.
        cases = " ".join(f"WHEN {_quote(k)} THEN {_quote(str(v))}" for k, v in settings.items())
        d.execute(f"CREATE OR REPLACE MACRO current_setting(x, m := false) AS CASE lower(x) {cases} END")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_CATALOGS: dict[int, PgCatalog] = {}
ROLE_OID = 20000  # the users' role oids start after it


def answer_catalog(engine, sql: str, params: dict, user: str, database: str, roles: tuple[str, ...] = ()) -> pa.Table:
    """Run a catalog query for a client (engine thread: it reads the dsms catalog)."""
    pg = _CATALOGS.get(id(engine))
    if pg is None:
        pg = _CATALOGS[id(engine)] = PgCatalog()
    pg.refresh(engine.catalog, database)
    pg.refresh_roles(roles)
    return pg.run(sql, params, user, database)
