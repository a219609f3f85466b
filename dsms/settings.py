"""SET: which settings take which values, checked when they are set (not when a query runs).

The values of ``'engine'`` and ``'backfill'`` are the registered routes'
(``runtime/routes.py``), so a new route is accepted without a change here.
"""

from __future__ import annotations

from .grammar import Diagnostic, Span, SqlError
from .grammar.diagnostics import did_you_mean
from .planner.analysis.routing import parse_size
from .planner.catalog import DEFAULT_SETTINGS
from .planner.timeutil import parse_duration
from .runtime.routes import backfill_names, engine_names

_VALUES = {"engine": engine_names, "backfill": backfill_names, "emit": lambda: ("final", "changes"),
           "strict": lambda: ("true", "false"), "join.stream_table": lambda: ("lookup", "regular")}


def check_setting(key: str, value: str, span: Span | None = None, source: str | None = None) -> None:
    """Raise a SqlError (pointing at ``span`` of ``source``) if ``key`` cannot be ``value``.

    Example:
        >>> check_setting("engine", "duckdb")
        >>> check_setting("engine", "flink")
        Traceback (most recent call last):
        ...
        dsms.grammar.errors.SqlError: error: invalid value 'flink' for 'engine'
          = help: expected one of: auto, runtime, duckdb, spark
    """
    known = set(DEFAULT_SETTINGS) | set(_VALUES) | {"state.ttl"}
    if key not in known and not key.startswith("spark."):  # a typo would otherwise do nothing, silently
        raise SqlError(Diagnostic(f"unknown setting '{key}'", span, source,
                                  help=did_you_mean(key, known) or "SET alone lists the settings"))
    allowed = _VALUES[key]() if key in _VALUES else None
    if allowed and value.lower() not in allowed:
        raise SqlError(Diagnostic(f"invalid value '{value}' for '{key}'", span, source,
                                  help="expected one of: " + ", ".join(allowed)))
    if key == "batch.max_bytes":
        try:
            parse_size(value)
        except ValueError as e:
            raise SqlError(Diagnostic(str(e), span, source)) from None
    if key == "batch.size" and (not value.isdigit() or int(value) < 1):
        raise SqlError(Diagnostic(f"'batch.size' needs a positive whole number, not '{value}'", span, source))
    if key in ("checkpoint.interval", "state.ttl"):
        try:
            parse_duration(value)
        except ValueError as e:
            raise SqlError(Diagnostic(str(e), span, source, help=f"e.g. SET '{key}' = '10 s'")) from None
