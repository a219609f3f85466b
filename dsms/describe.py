"""SHOW STREAMS | TABLES | VIEWS | SINKS | MATERIALIZED VIEWS | FUNCTIONS | CONNECTORS, and DESCRIBE: as rows."""

from __future__ import annotations

import pyarrow as pa

from .grammar import Describe, Diagnostic, Show, SqlError, Statement
from .planner import Catalog
from .planner.catalog import SourceDef
from .planner.connectors import connectors
from .planner.functions import SCALAR_FUNCTIONS
from .planner.types import sql_name
from .pull import relation_names
from .queries import rows_table

_KINDS = {"streams": ("stream",), "tables": ("table",), "views": ("view",), "sinks": ("sink",),
          "materialized views": ("materialized view",)}


def show_catalog(catalog: Catalog, stmt: Show) -> pa.Table:
    what = stmt.what
    if what in _KINDS:
        objs = catalog.of_kind(*_KINDS[what])
        rows = [{"name": o.name, "kind": o.object_kind,
                 "connector": (o.connector if isinstance(o, SourceDef) else o.options.get("connector", "")
                               if hasattr(o, "options") else ""),
                 "columns": ", ".join(f.name for f in o.schema)} for o in objs]
        return rows_table(rows, ["name", "kind", "connector", "columns"])
    if what == "functions":
        return show_functions(catalog)
    if what == "connectors":
        return show_connectors()
    raise SqlError(Diagnostic(f"SHOW {what.upper()} is not supported yet", stmt.span, stmt.source))


def show_functions(catalog: Catalog) -> pa.Table:
    """The built-in scalar functions, then the Python functions (``CREATE FUNCTION``) with what they run."""
    rows = [{"name": n, "kind": "built-in", "definition": ""} for n in SCALAR_FUNCTIONS]
    rows += [{"name": f.name, "kind": ("python table" if f.table else "python aggregate" if f.aggregate else "python") + (", temporary" if f.temporary else ""),
              "definition": f"{f.target} RETURNS {sql_name(f.returns)}"}
             for f in sorted(catalog.functions.values(), key=lambda f: f.name.lower())]
    return rows_table(rows, ["name", "kind", "definition"])


SHOW_CONNECTORS_COLUMNS = ["name", "kind", "bounded", "formats", "routes", "description"]


def show_connectors() -> pa.Table:
    """One row per connector, from its descriptor.

    Example:
        >>> rows = {r["name"]: r for r in show_connectors().to_pylist()}
        >>> rows["file (filesystem)"]["kind"], rows["file (filesystem)"]["bounded"]
        ('source, sink', "unless watch = 'true'")
    """
    rows = [{"name": d.name + "".join(f" ({a})" for a in d.aliases), "kind": ", ".join(d.kinds),
             "bounded": d.bounded_note if d.source else "",
             "formats": ", ".join(f.name for f in d.formats), "routes": _routes(d),
             "description": d.help} for d in connectors()]
    return rows_table(rows, SHOW_CONNECTORS_COLUMNS)


def _routes(d) -> str:
    """The routes that read a source; a sink is written on every route."""
    if not d.source:
        return "all"
    if callable(d.batch_readable):  # on the batch routes only with some options (Kafka: a bounded read)
        return f"runtime; all {d.batch_note}" + ("; sinks: all" if d.sink else "")
    return ("all" if d.batch_readable else "runtime") + ("; sinks: all" if d.sink and not d.batch_readable else "")


def describe(catalog: Catalog, stmt: Describe) -> pa.Table:
    obj = catalog.require(stmt.name, stmt.source, kinds=("stream", "table", "view", "sink", "materialized view"))
    computed = dict(obj.computed) if isinstance(obj, SourceDef) else {}
    key = set(obj.primary_key) if isinstance(obj, SourceDef) else set()
    rows = []
    for f in obj.schema:
        extra = []
        if f.rowtime and isinstance(obj, SourceDef) and obj.watermark:
            extra.append(f"WATERMARK AS {f.name} - INTERVAL '{obj.watermark.delay_us / 1e6:g}' SECOND")
        elif f.rowtime:
            extra.append("event time")
        if f.name in computed:
            extra.append(f"AS {computed[f.name].sql()}")
        if f.name in key:
            extra.append("PRIMARY KEY")
        rows.append({"column": f.name, "type": sql_name(f.type), "nullable": f.nullable, "extra": "; ".join(extra)})
    return rows_table(rows, ["column", "type", "nullable", "extra"])


# What reads what: a DROP (or CREATE OR REPLACE) of an object that one of these reads is refused.
_READERS = ("view", "sink", "materialized view")


def check_unread(catalog: Catalog, obj, stmt: Statement, verb: str) -> None:
    """Refuse to drop or replace what a view, sink or materialized view reads (they were planned with it)."""
    readers = [o for o in catalog.of_kind(*_READERS) if o is not obj
               and obj.name.lower() in {n.lower() for n in relation_names(o.query)}]
    if readers:
        raise SqlError(Diagnostic(
            f"cannot {verb} {obj.object_kind} '{obj.name}': " + ", ".join(f"{r.object_kind} '{r.name}'" for r in readers)
            + (" reads it" if len(readers) == 1 else " read it"), stmt.name.span, stmt.source,
            help="drop " + ", ".join(f"{r.object_kind} {r.name}" for r in readers) + " first"))
