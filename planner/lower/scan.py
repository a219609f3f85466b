"""Lowering scans: what a batch route reads for each source, and the late-event rule in SQL.

A lowered statement reads every scan from a *scan relation* that the
route's executor provides by running dsms's own file readers (so parsing,
bad-row errors and dead letters are those of the runtime; see
``runtime/batch_read.py``). Its columns (:meth:`ScanSpec.relation_schema`):

* the physical columns the plan reads, then the computed ones, with the
  declared types; a table's ``__op`` (what each row does to its key);
* ``__file`` and ``__row``: the file's place among the source's files and
  the row's place in the file, i.e. the source order;
* ``__mx``: the largest event time of the rows before this one (NULL
  before the first). The DuckDB executor reads a source in one pass and
  gives the running maximum over the whole source; the Spark executor
  reads files in parallel and gives it within each file, so the lowered
  Spark SQL adds the maxima of the earlier files (a two-level prefix scan:
  :func:`late_rows`).

An event is late, exactly as in the runtime (docs/time.md), when its time
is below that maximum minus the watermark delay and the allowed lateness;
a table's retractions are never late (and do not move the maximum). Only
scans under an operator that acts on event time drop late events
(``scans_under_event_time``); ``LATE(s)`` keeps only them. Idleness is not
reproduced (a bounded file source is never idle on a batch route).

These pieces are separate functions so that other routes (a Spark
Structured Streaming source) can reuse the columns and the time rule
without the late-event SQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..analysis.needed_columns import source_columns
from ..bind.emit import source_lateness_us
from ..catalog import SourceDef
from ..logical import nodes as L
from ..logical.late import LateScan
from ..physical.planner import computed_columns_sql
from ..vocabulary import ADDITIONS, RETRACTIONS
from .sql import (
    ARRIVAL_WM,
    FILE,
    MAX_BEFORE,
    OP,
    ROW,
    alias,
    and_,
    c,
    greatest,
    micros,
    null_of,
    rows_frame,
    sub,
    table,
    window,
)
from .sqlgen import lit

ORDER_TYPES = {FILE: pa.int32(), ROW: pa.int64(), MAX_BEFORE: pa.int64()}


@dataclass(frozen=True)
class ScanSpec:
    """One source as a batch route reads it (see the module docstring).

    ``computed_sql`` is the runtime's per-batch DuckDB statement adding the
    computed columns (the readers run it, as the runtime's sources do).
    """

    relation: str
    source: SourceDef
    columns: tuple[str, ...]
    computed: tuple[tuple[str, exp.Expression], ...]
    computed_sql: str | None
    time_column: str | None
    bound_us: int  # watermark delay + allowed lateness: how far behind the running maximum an event is late
    drop_late: bool
    late_only: bool
    per_window: bool = False  # the operators above judge lateness per window: the rows carry ``__wm``
    streaming: bool = False  # read as a stream by Spark Structured Streaming (lower/stream.py)

    @property
    def changes(self) -> str:
        """How the readers deliver rows: ``append``, or a table's ``upsert`` / ``debezium`` changes by key."""
        if self.source.kind != "table":
            return "append"
        return "debezium" if self.source.format == "debezium-json" else "upsert"

    @property
    def value_schema(self) -> pa.Schema:
        """The source columns the relation holds, read and computed, with their declared types."""
        names = set(self.columns) | {n for n, _ in self.computed}
        return pa.schema([pa.field(f.name, f.type) for f in self.source.schema if f.name in names])

    @property
    def relation_schema(self) -> pa.Schema:
        fields = list(self.value_schema)
        if self.source.kind == "table":
            fields.append(pa.field(OP, pa.int8()))
        return pa.schema(fields + [pa.field(n, t) for n, t in ORDER_TYPES.items()])


def scan_spec(node: L.Scan | LateScan, relation: str, timed: set[int],
              window_judged: frozenset[int] = frozenset()) -> ScanSpec:
    """The scan relation of ``node`` (its columns: those rules/prune_columns.py left in it); ``timed``: scans
    under event time; ``window_judged``: those whose operators above judge lateness per window
    (``scans_judged_per_window``)."""
    src = node.source
    columns, computed, proctime = source_columns(src, set(node.schema.names))
    late_only = isinstance(node, LateScan)
    lateness = source_lateness_us(L.Scan(src) if late_only else node)
    wm = src.watermark
    return ScanSpec(relation=relation, source=src, columns=columns, computed=tuple(computed),
                    computed_sql=computed_columns_sql(src, columns, computed, proctime),
                    time_column=wm.column if wm else None, bound_us=(wm.delay_us + lateness) if wm else 0,
                    drop_late=late_only or (id(node) in timed and id(node) not in window_judged),
                    late_only=late_only,
                    per_window=bool(wm) and not late_only and id(node) in window_judged)


def is_late(spec: ScanSpec, max_before: exp.Expression) -> exp.Expression:
    """Whether a row of the relation is late, given the largest event time before it (NULL: none)."""
    t = micros(c(spec.time_column))
    late = exp.Coalesce(this=exp.LT(this=t, expression=exp.Sub(this=max_before, expression=lit(spec.bound_us))),
                        expressions=[exp.false()])
    if spec.source.kind == "table":
        late = and_(late, exp.Not(this=exp.In(this=c(OP), expressions=[lit(int(o)) for o in RETRACTIONS])))
    return exp.Paren(this=late)


def late_rows(spec: ScanSpec, per_file_max: bool, add_cte) -> tuple[exp.Expression, exp.Expression | None]:
    """The FROM of a scan and the condition that keeps its rows (None: all of them).

    ``per_file_max``: ``__mx`` holds the maximum within each file only; the
    maxima of the earlier files are added from a small CTE of per-file maxima
    (``add_cte(name_hint, select) -> name``).
    """
    base = table(spec.relation, "s")
    if spec.time_column is None or not (spec.drop_late or spec.per_window):
        return base, None
    if per_file_max:
        t = micros(c(spec.time_column))
        if spec.source.kind == "table":  # retractions do not move the watermark
            t = exp.Case(ifs=[exp.If(this=exp.In(this=c(OP), expressions=[lit(int(o)) for o in RETRACTIONS]), true=exp.Null())],
                         default=t)
        files = exp.select(c(FILE), alias(exp.Max(this=t), "__fmax")).from_(table(spec.relation)).group_by(c(FILE))
        files_name = add_cte(f"{spec.relation}_files", files)
        prefix = exp.select(c(FILE), alias(window(exp.Max(this=c("__fmax")), [], [exp.Ordered(this=c(FILE))],
                                                  rows_frame(None, "1 PRECEDING")), "__prev")).from_(table(files_name))
        base = sub(_joined(spec, add_cte(f"{spec.relation}_prefix", prefix)), "s")
    if spec.per_window:  # judged above, per window, against ``__wm`` (arrival_watermark)
        return base, None
    late = is_late(spec, c(MAX_BEFORE, "s"))
    return base, (late if spec.late_only else exp.Not(this=late))


def arrival_watermark(spec: ScanSpec) -> exp.Expression:
    """``__wm`` of a scan's rows: the largest event time before the row less the watermark delay and the
    allowed lateness (NULL before the first event, and where nothing above judges lateness per window).
    A window ``[s, e)`` had fired for the row when ``e <= __wm``."""
    if not spec.per_window:
        return exp.Cast(this=exp.Null(), to=exp.DataType.build("BIGINT"))
    return exp.Sub(this=c(MAX_BEFORE, "s"), expression=lit(spec.bound_us))


def _joined(spec: ScanSpec, prefix_name: str) -> exp.Select:
    """The relation with ``__mx`` raised to the maxima of the earlier files."""
    names = [f.name for f in spec.relation_schema if f.name != MAX_BEFORE]
    items = [c(n, "r") for n in names] + [alias(greatest(c(MAX_BEFORE, "r"), c("__prev", "p")), MAX_BEFORE)]
    return exp.select(*items).from_(table(spec.relation, "r")).join(
        table(prefix_name, "p"), on=exp.EQ(this=c(FILE, "r"), expression=c(FILE, "p")), join_type="LEFT")


def scan_select(spec: ScanSpec, schema, per_file_max: bool, add_cte, keep_op: bool = False) -> exp.Select:
    """The rows of a scan: the node's columns (NULL for those nobody reads), source order, late rule applied."""
    source, keep = late_rows(spec, per_file_max, add_cte)
    held = set(spec.value_schema.names)
    items = [c(f.name, "s") if f.name in held else null_of(f.type) for f in schema]
    items = [alias(e, f.name) for e, f in zip(items, schema)]
    if keep_op:
        items.append(alias(c(OP, "s"), OP))
    items += [alias(c(FILE, "s"), FILE), alias(c(ROW, "s"), ROW), alias(arrival_watermark(spec), ARRIVAL_WM)]
    query = exp.select(*items).from_(source)
    return query.where(keep) if keep is not None else query


def table_state(changes: str, schema, keys: tuple[str, ...]) -> exp.Select:
    """A table's rows at the end of its changes: per key, the last change, unless it deletes the key."""
    latest = window(exp.RowNumber(), [c(k) for k in keys],
                    [exp.Ordered(this=c(FILE), desc=True), exp.Ordered(this=c(ROW), desc=True)])
    ranked = exp.select(*[c(f.name) for f in schema], c(OP), alias(latest, "__rn")).from_(table(changes))
    return exp.select(*[c(f.name) for f in schema]).from_(sub(ranked, "k")).where(
        and_(exp.EQ(this=c("__rn"), expression=lit(1)), exp.In(this=c(OP), expressions=[lit(int(o)) for o in ADDITIONS])))
