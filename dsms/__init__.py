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
from .errors import (
    BackpressureError,
    DsmsError,
    EvaluationError,
    PythonFunctionError,
    SinkError,
    SourceError,
    SqlError,
    SqlSyntaxError,
    UnsupportedPlan,
)
from .python_functions import udf, udtf
from .queries import Subscription
from .query import QueryHandle, Result
from .runtime.clock import SystemClock, VirtualClock

__version__ = "0.1.0"


def plan(sql: str, catalog):
    """Plan one statement without running it.

    ``sql`` is a query, or a CREATE SINK / VIEW / MATERIALIZED VIEW, or an
    EXPLAIN of one; the result has the bound and optimized logical plans,
    the runtime's operator DAG, the result schema and changelog mode.
    Nothing runs: no source is opened, no sink is created.

    Example:
        >>> import dsms
        >>> engine = dsms.Engine()
        >>> _ = engine.execute("CREATE STREAM s (k INT, ts TIMESTAMP(3), "
        ...                    "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory')")
        >>> p = dsms.plan("SELECT k, COUNT(*) AS n FROM s GROUP BY k", engine.catalog)
        >>> p.changelog, [f.name for f in p.schema]
        ('updating', ['k', 'n'])
        >>> [(op.id, type(op).__name__, op.changelog) for op in p.physical.ops]
        [(0, 'SourceSpec', 'append-only'), (1, 'GroupAggSpec', 'updating'), (2, 'CalcSpec', 'updating')]
    """
    from .grammar import parse_statement
    from .planner import plan_query

    stmt = parse_statement(sql)
    inner = getattr(stmt, "statement", None) or stmt
    query = getattr(inner, "query", None)
    if query is None:
        raise DsmsError("plan() takes a query or a CREATE SINK / VIEW / MATERIALIZED VIEW statement")
    return plan_query(query, catalog, stmt.source)


__all__ = ["BackpressureError", "DsmsError", "Engine", "EvaluationError", "PythonFunctionError", "QueryHandle", "Result", "SinkError", "SourceError", "SqlError",
           "SqlSyntaxError", "Subscription", "SystemClock", "UnsupportedPlan", "VirtualClock", "plan", "udf", "udtf",
           "__version__"]
