"""The grammar's errors, and the root of every error dsms raises on purpose.

Each layer defines its user-facing errors in one module: this one,
``planner/errors.py``, ``runtime/errors.py``; ``dsms/errors.py`` gathers
them for programs (``dsms.DsmsError`` and its subclasses).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .diagnostics import Diagnostic, render


class DsmsError(Exception):
    """Base class of every error dsms raises on purpose."""


@dataclass
class SqlError(DsmsError):
    """An error in SQL text, with its place in the statement."""

    diagnostic: Diagnostic
    extra: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return render(self.diagnostic)

    @property
    def message(self) -> str:
        return self.diagnostic.message

    @property
    def line(self) -> int | None:
        pos = self.diagnostic.position()
        return pos[0] if pos else None

    @property
    def column(self) -> int | None:
        pos = self.diagnostic.position()
        return pos[1] if pos else None


class SqlSyntaxError(SqlError):
    """The text is not valid dsms SQL."""
