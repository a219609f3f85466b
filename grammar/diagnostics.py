"""User-facing errors: a message, a span in the statement, notes and help.

Every error dsms raises derives from :class:`DsmsError`. Errors about SQL
text carry a :class:`Diagnostic` whose span points into the script, and are
rendered by one function, :func:`render`, as::

    error: unknown column 'pricee'
     --> line 2, column 8
      |
    2 | SELECT pricee FROM bid
      |        ^^^^^^
      = help: did you mean 'price'?

This module is the lowest layer, so the planner and runtime raise these
types too; ``dsms.errors`` re-exports them for users.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A half-open character range ``[start, end)`` in a source text."""

    start: int
    end: int

    def shift(self, offset: int) -> "Span":
        return Span(self.start + offset, self.end + offset)


@dataclass(frozen=True)
class Diagnostic:
    message: str
    span: Span | None = None
    source: str | None = None
    notes: tuple[str, ...] = ()
    help: str | None = None

    def position(self) -> tuple[int, int] | None:
        """1-based (line, column) of the span start, if known."""
        if self.span is None or self.source is None:
            return None
        return line_col(self.source, self.span.start)


def line_col(text: str, offset: int) -> tuple[int, int]:
    offset = max(0, min(offset, len(text)))
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def render(diag: Diagnostic) -> str:
    """Render a diagnostic with the offending line and a caret under the span."""
    out = [f"error: {diag.message}"]
    pos = diag.position()
    if pos is not None:
        assert diag.source is not None and diag.span is not None
        line, col = pos
        lines = diag.source.split("\n")
        text = lines[line - 1] if line - 1 < len(lines) else ""
        width = len(str(line))
        # Underline to the end of the span, but not past the end of its line.
        length = max(1, min(diag.span.end - diag.span.start, len(text) - col + 1))
        pad = " " * width
        out += [
            f"{pad}--> line {line}, column {col}",
            f"{pad} |",
            f"{line} | {text.expandtabs(1)}",
            f"{pad} | {' ' * (col - 1)}{'^' * length}",
        ]
    out += [f"  = note: {n}" for n in diag.notes]
    if diag.help:
        out.append(f"  = help: {diag.help}")
    return "\n".join(out)


def did_you_mean(name: str, candidates) -> str | None:
    """A 'did you mean' help line naming the closest candidates, if any."""
    names = sorted({c for c in candidates if c})
    lowered = {c.lower(): c for c in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(f"'{lowered[c]}'" for c in close) + "?"
    if names and len(names) <= 12:
        return "available: " + ", ".join(f"'{n}'" for n in names)
    return None
