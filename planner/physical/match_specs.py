"""The physical spec of MATCH_RECOGNIZE and how the planner fills it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..logical.match import MatchRecognize
from ..lower.sqlgen_match import match_sql
from .specs import OpSpec


@dataclass(frozen=True)
class MatchRecognizeSpec(OpSpec):
    """Rows wait until the watermark passes their time, then are matched in time order per partition.

    See planner/lower/sqlgen_match.py for the statements and
    runtime/operators/match_recognize.py for the operator.
    """

    spec_kind: ClassVar[str] = "match_recognize"

    columns: tuple[str, ...] = ()  # the input columns kept (the statements read only these)
    input_sql: str | None = None  # fused per-batch nodes below, run on each batch first
    partition: tuple[str, ...] = ()
    order: str = ""
    terms: tuple[tuple[int, int, int, bool], ...] = ()  # (variable, min, max or -1, greedy) per pattern term
    variables: tuple[str, ...] = ()
    skip: str = "PAST LAST ROW"
    skip_var: int = -1
    within_us: int = 0  # 0: no WITHIN
    max_prev: int = 0
    conditions_sql: str = ""
    measures_sql: str = ""


def match_fields(node: MatchRecognize) -> dict:
    """The fields of a MatchRecognizeSpec computing ``node``."""
    sql = match_sql(node)
    # Greediness decides whether a repeating term that can take a row also lets the next term try it; an
    # optional single row (B?) always tries both, as in Flink's CEP.
    terms = tuple((node.variables.index(t.var), t.min, -1 if t.max is None else t.max, t.greedy and t.max != 1)
                  for t in node.pattern)
    used = node.child_needs(set(node.schema.names))[0]
    columns = tuple(f.name for f in node.input.schema if f.name in used)
    return dict(columns=columns, partition=node.partition_by,
                order=node.order_by, terms=terms, variables=node.variables, skip=node.skip.kind,
                skip_var=-1 if node.skip.var is None else node.skip.var,
                within_us=node.within_us or 0, max_prev=node.max_prev,
                conditions_sql=sql.conditions, measures_sql=sql.measures)

