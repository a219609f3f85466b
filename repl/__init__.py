"""The interactive shell (``dsms`` with no arguments), on prompt-toolkit.

Only this package imports prompt-toolkit, so ``import dsms`` stays light.
See docs/repl.md.
"""

from .app import Repl, main
from .completion import Suggestion, suggest

__all__ = ["Repl", "Suggestion", "main", "suggest"]
