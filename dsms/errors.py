"""Every error dsms raises on purpose derives from DsmsError.

Each layer defines its errors in one module (``grammar/errors.py``,
``planner/errors.py``, ``runtime/errors.py``); here they are together, for
programs: ``except dsms.DsmsError`` catches them all, and each subclass says
what went wrong (SQL errors carry a Diagnostic with the line and column).
"""

from .grammar.diagnostics import Diagnostic, Span, render
from .grammar.errors import DsmsError, SqlError, SqlSyntaxError
from .planner.errors import ConnectorRegistryError, LoweringRefused, UnsupportedPlan
from .runtime.errors import (
    BackfillError,
    BackpressureError,
    ChangelogError,
    EvaluationError,
    LookupTableError,
    MatchError,
    PythonFunctionError,
    RouteError,
    RouteNotFound,
    RowError,
    SinkError,
    SourceError,
)

__all__ = ["BackfillError", "BackpressureError", "ChangelogError", "ConnectorRegistryError", "Diagnostic", "DsmsError", "EvaluationError",
           "LookupTableError", "LoweringRefused", "MatchError", "PythonFunctionError",
           "RouteError", "RouteNotFound", "RowError", "SinkError", "SourceError", "Span", "SqlError", "SqlSyntaxError",
           "UnsupportedPlan", "render"]
