"""The planner's errors: queries a route cannot run, connectors that cannot be loaded.

Errors in the SQL itself (unknown names, wrong types) are ``SqlError`` with
a Diagnostic pointing into the statement (``grammar/errors.py``).
"""

from __future__ import annotations

from ..grammar import DsmsError


class UnsupportedPlan(DsmsError):
    """A query the chosen route cannot run (yet); the message says what to do instead."""


class LoweringRefused(UnsupportedPlan):
    """A query a route other than the runtime cannot run; the message names the operator and the route that can."""

    def __init__(self, message: str, what: str = "", why: str = ""):
        super().__init__(message)
        self.what, self.why = what, why


class ConnectorRegistryError(DsmsError):
    """A connector entry point cannot be loaded, or two connectors claim one name (planner/connectors/registry.py)."""
