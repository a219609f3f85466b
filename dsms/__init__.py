"""dsms: a declarative SQL continuous-query engine.

Declare streams and tables, write SQL with TUMBLE, HOP and CUMULATE
windows, and get results that keep updating as events arrive::

    import dsms
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (x INT) WITH (connector = 'memory')")
    q = engine.query("SELECT x FROM s WHERE x > 1")
    engine.insert("s", [(1,), (2,), (3,)])
    engine.run_until_idle()
    q.snapshot()

``dsms.plan(sql, catalog)`` runs the planner alone, for embedding.
"""

from __future__ import annotations

from .engine import Engine
from .errors import DsmsError, SinkError, SourceError, SqlError, SqlSyntaxError, UnsupportedPlan
from .query import QueryHandle, Result

__version__ = "0.1.0"


def plan(sql: str, catalog):
    """Plan one statement without running it.

    ``sql`` is a query, or a CREATE SINK / VIEW / MATERIALIZED VIEW, or an
    EXPLAIN of one; the result has the bound and optimized logical plans,
    the runtime's operator DAG, the result schema and changelog mode.
    """
    from .grammar import parse_statement
    from .planner import plan_query

    stmt = parse_statement(sql)
    inner = getattr(stmt, "statement", None) or stmt
    query = getattr(inner, "query", None)
    if query is None:
        raise DsmsError("plan() takes a query or a CREATE SINK / VIEW / MATERIALIZED VIEW statement")
    return plan_query(query, catalog, stmt.source)


__all__ = ["DsmsError", "Engine", "QueryHandle", "Result", "SinkError", "SourceError", "SqlError",
           "SqlSyntaxError", "UnsupportedPlan", "plan", "__version__"]
