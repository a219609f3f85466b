"""Scripts on a state directory: which statements of a script have already taken effect.

Running the same script again on the same directory (``dsms run --state-dir``)
skips the statements whose effect the directory keeps (CREATE, DROP, SET,
INSERT, ...) and runs the rest (SELECT, SHOW). The progress is saved in the
same write as the statement's effect on the catalog, and an INSERT's rows
carry the statement's number in the memory stream's journal, so a crash
between a statement and the bookkeeping never runs it twice.
"""

from __future__ import annotations

from .grammar import (
    CreateFunction,
    CreateMaterializedView,
    CreateSink,
    CreateSource,
    CreateTableAs,
    CreateView,
    Drop,
    DsmsError,
    Insert,
    PauseQuery,
    ResetOption,
    ResumeQuery,
    SetOption,
    Statement,
    StatementSet,
)

# Statements whose effect a state directory keeps: on a restart they are not run again.
_DURABLE = (CreateSource, CreateView, CreateSink, CreateMaterializedView, Drop, SetOption, ResetOption, Insert,
            PauseQuery, ResumeQuery, StatementSet, CreateTableAs)


class ScriptProgress:
    """Which statements of a script have taken effect in a state directory (none without one)."""

    def __init__(self, durable, statements: list[Statement], memory_logs):
        self.durable = durable
        self.texts = [_normal(s.text) for s in statements]
        self.kinds = [_durable(s) for s in statements]
        saved = durable.script if durable else []
        tags = [log.last_tag for log in memory_logs if log.last_tag is not None]
        self.count = max([len(saved), *(t + 1 for t in tags)])
        for i, text in enumerate(saved[: len(self.texts)]):
            if text != self.texts[i]:
                raise DsmsError(f"the script differs from the one run in the state directory {durable.path}: "
                                f"statement {i + 1} was\n  {text}\nand is now\n  {self.texts[i]}\n"
                                "run the same script to continue, or use another --state-dir")

    def done(self, index: int) -> bool:
        return index < self.count and self.kinds[index]

    def begin(self, index: int) -> None:
        """Statement ``index`` runs: whatever it saves records it as done with it."""
        if self.durable is not None:
            self.durable.data["script"] = self.texts[: index + 1]

    def applied(self, index: int) -> None:
        if self.durable is not None:
            self.durable.record_script(self.texts[: index + 1])


def _durable(stmt: Statement) -> bool:
    """Whether the state directory keeps the statement's effect (a TEMPORARY function is not kept)."""
    return isinstance(stmt, _DURABLE) or (isinstance(stmt, CreateFunction) and not stmt.temporary)


def _normal(text: str) -> str:
    return " ".join(text.split())
