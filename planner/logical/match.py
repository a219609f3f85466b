"""The logical node of MATCH_RECOGNIZE: row patterns over each partition's rows in time order."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ...grammar.match_recognize import PatternTerm
from ..timeutil import format_duration
from ..types import Field, Schema
from .nodes import APPEND, Unary, _derive

# A navigation in MEASURES, kept in bound trees as ``MR_NAV('<how>', var, arg, n)``: ``how`` is FIRST or
# LAST (the n-th row of the variable from its first or last row) or an aggregate (SUM, AVG, MIN, MAX,
# COUNT); ``var`` is the index of a pattern variable, or -1 for every row of the match.
NAV = "MR_NAV"
ALL_ROWS = -1


def nav(how: str, var: int, arg: exp.Expression | None, n: int = 0) -> exp.Anonymous:
    return exp.Anonymous(this=NAV, expressions=[exp.Literal.string(how), exp.Literal.string(str(var)),
                                                arg if arg is not None else exp.Star(), exp.Literal.number(n)])


def nav_parts(node: exp.Anonymous) -> tuple[str, int, exp.Expression | None, int]:
    how, var, arg, n = node.expressions
    return how.name, int(var.name), None if isinstance(arg, exp.Star) else arg, int(n.name)


def is_nav(node: exp.Expression) -> bool:
    return isinstance(node, exp.Anonymous) and node.name == NAV


# PREV(col, n) in a DEFINE condition, kept as ``MR_PREV(col, n)``: the column n rows back in the partition.
PREV = "MR_PREV"


@dataclass(frozen=True)
class SkipTo:
    """Where matching resumes after a match: PAST LAST ROW, TO NEXT ROW, TO FIRST var or TO LAST var."""

    kind: str  # 'PAST LAST ROW' | 'TO NEXT ROW' | 'TO FIRST' | 'TO LAST'
    var: int | None = None  # the variable of TO FIRST / TO LAST


@dataclass(frozen=True, eq=False)
class MatchRecognize(Unary):
    """One row per match of ``pattern`` in each partition's rows, ordered by the time attribute ``order_by``.

    Output: the partition columns, then the measures. Append-only: a match is
    emitted once the watermark has passed its rows (rows are matched in time
    order, so the watermark says when a row's predecessors are all known).
    """

    partition_by: tuple[str, ...]
    order_by: str
    variables: tuple[str, ...]  # pattern variables in order of first appearance
    pattern: tuple[PatternTerm, ...]
    defines: tuple[exp.Expression | None, ...]  # per variable: a condition on the current row (None: TRUE)
    measures: tuple[tuple[str, exp.Expression], ...]  # over MR_NAV(...) calls and partition columns
    measure_fields: tuple[Field, ...]
    skip: SkipTo
    within_us: int | None
    schema: Schema = field(init=False)
    changelog: str = field(init=False, default=APPEND)
    watermark: str | None = field(init=False)

    def __post_init__(self):
        parts = tuple(self.input.schema.find(p).plain() for p in self.partition_by)
        _derive(self, schema=Schema(parts + self.measure_fields), watermark=self.input.watermark)

    @property
    def max_prev(self) -> int:
        """How many rows back a DEFINE condition looks (PREV)."""
        return max((int(p.expressions[1].name) for d in self.defines if d is not None
                    for p in d.find_all(exp.Anonymous) if p.name == PREV), default=0)

    def child_needs(self, req: set[str]) -> list[set[str]]:
        """The input columns the match reads: partition, time, and those DEFINE and MEASURES use."""
        used = set(self.partition_by) | {self.order_by}
        for e in [d for d in self.defines if d is not None] + [m for _, m in self.measures]:
            used |= {c.name for c in e.find_all(exp.Column)}
        return [used]

    acts_on_event_time = True  # rows wait for the watermark; those behind it are late

    def state_description(self) -> str:
        """What bounds the state, for EXPLAIN."""
        if self.within_us:
            return (f"rows until the watermark passes them, and partial matches until {format_duration(self.within_us)}"
                    " after their first row (WITHIN)")
        return "rows until the watermark passes them, and partial matches until they fail (no WITHIN bounds them)"

    def label(self) -> str:
        part = f"partition by {', '.join(self.partition_by)}, " if self.partition_by else ""
        pattern = " ".join(t.describe() for t in self.pattern)
        within = f" within {format_duration(self.within_us)}" if self.within_us else ""
        skip = self.skip.kind + (f" {self.variables[self.skip.var]}" if self.skip.var is not None else "")
        return f"MatchRecognize({part}order by {self.order_by}, pattern ({pattern}){within}, skip {skip})"
