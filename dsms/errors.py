"""Every error dsms raises on purpose derives from DsmsError."""

from .grammar.diagnostics import Diagnostic, DsmsError, Span, SqlError, SqlSyntaxError, render
from .planner.physical_plan import UnsupportedPlan
from .runtime.changelog import ChangelogError
from .runtime.connectors.base import SinkError, SourceError
from .runtime.convert import RowError
from .runtime.job import EvaluationError

__all__ = ["ChangelogError", "Diagnostic", "DsmsError", "EvaluationError", "RowError", "SinkError", "SourceError", "Span", "SqlError",
           "SqlSyntaxError", "UnsupportedPlan", "render"]
