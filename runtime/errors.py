"""The runtime's errors: bad input, sinks that cannot be written, queries that fail as they run.

Every one is a ``DsmsError`` whose message says where (the source, file,
line and column of a bad row) and what to do; ``dsms/errors.py`` gathers
them with the grammar's and the planner's.
"""

from __future__ import annotations

from ..grammar import DsmsError


class SourceError(DsmsError):
    """Bad input in a source: names the source, the file, the line and the column."""

    def __init__(self, message: str, *, source: str, file: str | None = None, line: int | None = None,
                 column: str | None = None):
        self.source, self.file, self.line, self.column = source, file, line, column
        where = ", ".join(p for p in (
            f"source '{source}'",
            f"file {file}" if file else None,
            f"line {line}" if line is not None else None,
            f"column '{column}'" if column else None,
        ) if p)
        super().__init__(f"{message} ({where})")
        self.reason = message


class SinkError(DsmsError):
    """A sink cannot be opened or written."""


class LookupTableError(DsmsError):
    """A lookup join's table in another system (jdbc) cannot be read."""


class RouteError(DsmsError):
    """A batch route failed for a reason other than bad input."""


class RowError(DsmsError):
    """Rows given to insert() do not fit the stream's columns."""


class EvaluationError(DsmsError):
    """An expression of a query failed on the data it was given (the query stops, as in Flink)."""

    def __init__(self, operator: str, cause: Exception):
        what = str(cause).strip().split("\n")[0]
        hint = "; TRY_CAST gives NULL where a value does not convert" if "onver" in what else ""
        super().__init__(f"the query failed in {operator}: {what}{hint}")


class PythonFunctionError(DsmsError):
    """A Python function (CREATE FUNCTION, Engine.create_function) failed on a row (the query stops, as in Flink)."""


class BackfillError(DsmsError):
    """The history changed while it was backfilled."""


class ChangelogError(DsmsError, ValueError):
    """A changelog retracted a row that was not there."""


class RouteNotFound(DsmsError):
    """No registered route serves a routing choice."""


class BackpressureError(DsmsError):
    """An insert was refused: the queries reading the stream fell too far behind (``'insert.max_pending'``)."""


class MatchError(DsmsError):
    """MATCH_RECOGNIZE cannot go on (AFTER MATCH SKIP TO a row that does not exist)."""
