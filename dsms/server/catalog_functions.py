"""``pg_proc`` for psql's ``\\df``: the functions a dsms session can call.

The built-in functions (scalar and aggregate) are in schema ``dsms``, so a
plain ``\\df`` (which leaves out ``pg_catalog``) lists them; the Python
functions of ``CREATE FUNCTION`` are in ``public`` with their result type
and the Python they run as source. Names are lower case, as PostgreSQL
folds them, so ``\\df upper`` finds ``UPPER``. Argument types are not
declared (a built-in takes what its rules allow, a Python function what
Python accepts), so that column is empty.

Example:
    >>> from dsms.planner.catalog import Catalog
    >>> rows = {r.name: r for r in proc_rows(Catalog())}
    >>> rows["upper"].kind, rows["count"].kind, rows["upper"].namespace == NAMESPACE_DSMS
    ('f', 'a', True)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..planner.functions import AGGREGATES, SCALAR_FUNCTIONS
from ..planner.types import sql_name

NAMESPACE_DSMS = 13100
LANGUAGE_INTERNAL, LANGUAGE_PYTHON = 12, 13200  # PostgreSQL's oid of 'internal'; one of our own for Python
FIRST_PROC_OID = 40000

TABLES = """
CREATE TABLE pg_proc (oid BIGINT, proname VARCHAR, pronamespace BIGINT, prokind VARCHAR, prorettype BIGINT,
  proargtypes VARCHAR, proretset BOOLEAN, provolatile VARCHAR, proparallel VARCHAR, proowner BIGINT,
  prosecdef BOOLEAN, proacl VARCHAR[], prolang BIGINT, prosrc VARCHAR, pronargs INTEGER, proisstrict BOOLEAN,
  proargnames VARCHAR[], probin VARCHAR);
CREATE TABLE pg_language (oid BIGINT, lanname VARCHAR, lanowner BIGINT, lanispl BOOLEAN, lanpltrusted BOOLEAN);
CREATE TABLE _proc_text (oid BIGINT, result VARCHAR, arguments VARCHAR);
CREATE MACRO pg_get_function_result(x) AS (SELECT result FROM _proc_text WHERE oid = x);
CREATE MACRO pg_get_function_arguments(x) AS (SELECT arguments FROM _proc_text WHERE oid = x);
CREATE MACRO pg_get_function_identity_arguments(x) AS (SELECT arguments FROM _proc_text WHERE oid = x);
CREATE MACRO pg_get_function_sqlbody(x) AS NULL::VARCHAR
"""


@dataclass(frozen=True)
class ProcRow:
    name: str
    namespace: int
    kind: str  # 'f' function, 'a' aggregate
    language: int
    source: str  # prosrc: the Python a user function runs; the name of a built-in
    result: str
    returns_set: bool
    description: str


def proc_rows(catalog) -> list[ProcRow]:
    """The built-in scalar functions and aggregates, then the catalog's Python functions."""
    rows = [ProcRow(n.lower(), NAMESPACE_DSMS, "f", LANGUAGE_INTERNAL, n, "", False, "dsms built-in function")
            for n in sorted(set(SCALAR_FUNCTIONS))]
    rows += [ProcRow(n.lower(), NAMESPACE_DSMS, "a", LANGUAGE_INTERNAL, n, "", False, "dsms built-in aggregate")
             for n in sorted(AGGREGATES)]
    for f in sorted(catalog.functions.values(), key=lambda f: f.name.lower()):
        what = "table function" if f.table else "aggregate function" if f.aggregate else "function"
        temporary = "temporary " if f.temporary else ""
        rows.append(ProcRow(f.name.lower(), 2200, "a" if f.aggregate else "f", LANGUAGE_PYTHON, f.target,
                            ("SETOF " if f.table else "") + sql_name(f.returns), f.table,
                            f"{temporary}Python {what} {f.target}"))
    return rows


def functions_fingerprint(catalog) -> tuple:
    """What ``pg_proc`` depends on: the Python functions (the built-ins do not change)."""
    return tuple((f.name, f.target, str(f.returns), f.table, f.aggregate is not None, f.temporary)
                 for f in catalog.functions.values())


def fill_functions(duck, catalog) -> None:
    """Replace the rows of ``pg_proc`` (and their result types and descriptions) with the catalog's functions."""
    duck.execute(f"DELETE FROM pg_description WHERE objoid >= {FIRST_PROC_OID}")
    duck.execute("DELETE FROM pg_proc")
    duck.execute("DELETE FROM _proc_text")
    rows = proc_rows(catalog)
    oids = range(FIRST_PROC_OID, FIRST_PROC_OID + len(rows))
    duck.executemany("INSERT INTO pg_proc VALUES (?, ?, ?, ?, 0, '', ?, 'v', 'u', 10, false, NULL, ?, ?, 0, false, "
                     "NULL, NULL)", [(oid, r.name, r.namespace, r.kind, r.returns_set, r.language, r.source)
                                     for oid, r in zip(oids, rows)])
    duck.executemany("INSERT INTO _proc_text VALUES (?, ?, '')", [(oid, r.result) for oid, r in zip(oids, rows)])
    duck.executemany("INSERT INTO pg_description VALUES (?, 1255, 0, ?)",
                     [(oid, r.description) for oid, r in zip(oids, rows)])


def fill_static(duck) -> None:
    duck.execute(f"INSERT INTO pg_namespace VALUES ({NAMESPACE_DSMS}, 'dsms', 10, NULL)")
    duck.execute(f"INSERT INTO pg_language VALUES ({LANGUAGE_INTERNAL}, 'internal', 10, false, false), "
                 f"({LANGUAGE_PYTHON}, 'python', 10, true, false)")
