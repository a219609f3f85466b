"""Lowering: a bound, optimized logical plan -> one SQL statement for a batch route.

The statement is a sqlglot tree, one CTE per plan node (a node used twice
is computed once), rendered for DuckDB or Spark at the end. It computes
the *final* result of the query over bounded input: what the runtime's
output amounts to once every source has ended (for an updating result,
its changelog applied). Each node is lowered by the module of its family:

* scans and the late-event rule: ``lower/scan.py``;
* window table functions, window and group aggregates, sessions: ``lower/window.py``;
* joins (interval, window, temporal, regular): ``lower/join.py``;
* OVER, Top-N, deduplication and CQL relations: ``lower/rank.py``.

Every relation has exactly its node's columns, plus the source order
(``__file``, ``__row``) while rows still map one to one to source rows,
which is what breaks ties where the runtime takes rows in arrival order
(ROWS frames, deduplication).

What the batch routes refuse (with :class:`LoweringRefused`, naming the
operator and that the runtime runs it): processing time, memory and
watched (unbounded) sources, lookup joins, and ISTREAM/DSTREAM of a
relation that changes with every event. Each of these depends on when
events arrive, which a batch statement over files cannot know.

Example:
    >>> from dsms.planner import declare, plan_query
    >>> catalog = declare("CREATE STREAM s (k INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) "
    ...                   "WITH (connector = 'file', path = 's.jsonl', format = 'json')")
    >>> p = plan_query("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
    ...                "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end", catalog)
    >>> lowered = lower_plan(p.optimized, "spark")
    >>> [(s.relation, s.source.name, s.drop_late, s.per_window) for s in lowered.scans]  # the window judges
    [('__scan0', 's', False, True)]
    >>> print(lowered.sql(pretty=True).splitlines()[-6:])  # the query's SELECT list, in window order
    ['SELECT', '  `window_start`,', '  `n`', 'FROM `n6`', 'ORDER BY', '  `window_start` NULLS LAST']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

from sqlglot import exp

from ..analysis.backfill import check_backfill, max_event_time, watermark_at_seam
from ..analysis.lateness import (
    judges_on_batch_routes,
    judges_per_session,
    scans_judged_per_window,
    scans_under_event_time,
)
from ..analysis.needed_columns import required_columns
from ..catalog import SourceDef
from ..logical import nodes as L
from ..logical.cql import SnapshotDiff, StreamOf
from ..logical.join import Join
from ..logical.late import LateScan
from ..logical.match import MatchRecognize
from ..logical.over import OverAggregate
from ..logical.rank import TopN
from ..logical.sort import Limit, TemporalSort
from ..logical.unnest import Unnest
from ..physical.plan_window import time_kinds
from ..types import Schema
from .duckdb_only import duckdb_only_call
from .join import lower_join
from .rank import lower_over, lower_snapshot_diff, lower_topn
from .scan import ScanSpec, scan_select, scan_spec, table_state
from .sort import limit_refusal, lower_limit, lower_temporal_sort, result_order
from .sql import DIALECTS, ORDER, RUNTIME, LoweringRefused, alias, c, cast, table
from .sqlgen import typed
from .sqlgen_unnest import unnest_select
from .stream import check_stream, streaming_nodes
from .window import lower_aggregate, lower_window_aggregate, lower_window_tvf


@dataclass(frozen=True)
class Rel:
    """A lowered node: the CTE holding its rows, its columns, and whether it carries the source order."""

    name: str
    columns: tuple[str, ...]
    ordered: bool = False

    def ref(self, alias_: str | None = None) -> exp.Table:
        return table(self.name, alias_)

    def cols(self, alias_: str | None = None, order: bool = False) -> list[exp.Expression]:
        names = list(self.columns) + (list(ORDER) if order and self.ordered else [])
        return [alias(c(n, alias_), n) if alias_ else c(n) for n in names]


@dataclass(frozen=True)
class Lowered:
    """A query lowered to one statement of ``dialect``, and the scan relations it reads.

    ``streaming``: a Spark Structured Streaming query (its streaming scans
    are read as files appear; see ``lower/stream.py``).
    """

    dialect: str
    tree: exp.Expression
    scans: tuple[ScanSpec, ...]
    schema: Schema
    streaming: bool = False
    history: bool = False  # a backfill: the history of watched files, cut at the seam (analysis/backfill.py)

    def sql(self, pretty: bool = False) -> str:
        return self.tree.sql(dialect=self.dialect, pretty=pretty)

    def explain(self) -> str:
        """The statement, after a comment per scan relation saying what it holds."""
        within = "its file" if self.dialect == "spark" else "the source"
        lines = []
        if self.streaming:
            lines.append("-- a Spark Structured Streaming query in append mode: each row is written once")
        for s in self.scans:
            src = s.source
            if src.descriptor.batch_reader == "source":  # a bounded read of a connector (Kafka), in one pass
                lines.append(f"-- {s.relation}: {src.name} (connector '{src.connector}', a bounded read), read by "
                             f"its connector's reader: {', '.join(s.relation_schema.names)}")
                holds = (f"--   __mx: the largest {s.time_column} before each row that the source's watermark "
                         f"holds (per partition: the minimum over its partitions); ")
                if s.time_column and s.drop_late:
                    lines.append(f"{holds}rows more than {s.bound_us} us behind it are late")
                elif s.time_column and s.per_window:
                    lines.append(f"{holds}__wm = __mx - {s.bound_us} us, the watermark when the row arrived: a window "
                                 "counts the row when its last millisecond is above it")
                continue
            lines.append(f"-- {s.relation}: {src.name} ({src.format} files at {src.path}), read by dsms's file "
                         f"reader: {', '.join(s.relation_schema.names)}")
            if s.streaming:
                lines.append(f"--   a stream: new files as they appear; late events judged by Spark's watermark "
                             f"on {s.time_column} ({s.bound_us} us behind the largest time of earlier micro-batches)"
                             if s.time_column else "--   a stream: new files as they appear")
                continue
            if s.time_column and s.drop_late:
                lines.append(f"--   __mx: the largest {s.time_column} before each row in {within}; "
                             f"{'only the late rows' if s.late_only else 'rows'} "
                             f"{'are kept' if s.late_only else 'more than ' + str(s.bound_us) + ' us behind it are late'}")
            elif s.time_column and s.per_window:
                lines.append(f"--   __mx: the largest {s.time_column} before each row in {within}; __wm = __mx - "
                             f"{s.bound_us} us, the watermark when the row arrived, against which the operators "
                             "above judge it (a window counts it when its last millisecond is above it)")
        return "\n".join(lines + [self.sql(pretty=True)])


def lower_plan(root: L.Node, dialect: str, streaming: bool = False, history: bool = False) -> Lowered:
    """Lower ``root`` to one ``dialect`` statement (``duckdb`` or ``spark``).

    ``streaming``: for Spark Structured Streaming, its watched sources read
    as streams (``lower/stream.py``). ``history``: a backfill, its watched
    sources read as they are now and its windows cut at the seam (``analysis/backfill.py``).

    Raises:
        LoweringRefused: the plan has an operator the route cannot run.
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    if streaming and dialect != "spark":
        raise ValueError("only Spark runs streaming statements")
    return _Lowering(root, dialect, streaming, history).build()


def refusal(root: L.Node, route: str, streaming: bool = False, history: bool = False) -> LoweringRefused | None:
    """Why ``route`` cannot run ``root`` (None: it can), without lowering it."""
    try:
        _check(root, route, streaming, history)
    except LoweringRefused as e:
        return e
    return None


def _refuse(route: str, what: str, why: str) -> LoweringRefused:
    return LoweringRefused(f"the {route} route cannot {what}: {why}; {RUNTIME}", what, why)


def _expressions(value):
    """The sqlglot expressions in a plan node's field (an expression, or tuples and lists holding them)."""
    if isinstance(value, exp.Expression):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _expressions(v)


def _in_source_order(node: L.Node) -> bool:
    """Whether a node's rows map one to one to a stream's rows, so the batch routes have their source order."""
    while isinstance(node, (L.Project, L.Filter, L.WindowTVF)):
        node = node.input
    return isinstance(node, L.Scan) and node.changelog == L.APPEND


def _check(root: L.Node, route: str, streaming: bool = False, history: bool = False) -> None:
    """Refuse (with :class:`LoweringRefused`) what a batch statement cannot run, the first refusal first."""
    _check_operators(root, route)
    _check_processing_time(root, route)
    for n in L.walk(root):
        _check_read(n, route, streaming, history)
    duckdb_only = duckdb_only_call(root) if route == "spark" else None
    if duckdb_only is not None:
        raise _refuse(route, *duckdb_only)
    _check_ordered_aggregates(root, route, streaming)
    _check_state_ttl(root, route)
    if streaming:
        check_stream(root)
    if history:
        check_backfill(root, route)
    if not streaming:
        _check_late_rules(root, route)


def _check_operators(root: L.Node, route: str) -> None:
    """Refuse the operators whose result depends on walking rows or on timing: MATCH_RECOGNIZE, lookup joins."""
    for n in L.walk(root):
        if isinstance(n, MatchRecognize):
            raise _refuse(route, "run MATCH_RECOGNIZE",
                          "its matches are found by walking each partition's rows in time order, which "
                          "neither DuckDB nor Spark SQL can express")
        if isinstance(n, Join) and n.strategy == "lookup":
            raise _refuse(route, f"run the lookup join {n.label()}",
                          "each event meets the table as it is when the event arrives, which depends on timing; "
                          "a temporal join (FOR SYSTEM_TIME AS OF the event time) or a plain JOIN (a regular "
                          "join) has a result every route agrees on")


def _check_processing_time(root: L.Node, route: str) -> None:
    if "processing" in time_kinds(root) or any(
            f.proctime for n in L.walk(root) if isinstance(n, L.Scan) for f in n.schema):
        raise _refuse(route, "run a query on processing time",
                      "its windows close as the clock moves, which a batch statement over files does not have")


def _check_read(n: L.Node, route: str, streaming: bool, history: bool) -> None:
    """Refuse one node whose rows a batch statement cannot read or compute: an unreadable or unbounded
    source, a LIMIT the batch routes cannot cut the same way, a stream of a relation's changes."""
    if isinstance(n, (L.Scan, LateScan)):
        src: SourceDef = n.source
        if not src.descriptor.batch_reads(src.options):
            # The batch routes read files, and the sources whose descriptor says when (a bounded Kafka read).
            note = src.descriptor.batch_note
            raise _refuse(route, f"read '{src.name}' (connector '{src.connector}')",
                          f"the batch routes read it only {note}, a bounded read" if note else
                          "the batch routes read files only")
        if not src.bounded and not (streaming or history):
            raise _refuse(route, f"read '{src.name}' (watch = 'true')",
                          "it keeps growing, and the batch routes read bounded files")
    why = limit_refusal(n) if isinstance(n, Limit) else None
    if why is not None:
        raise _refuse(route, f"run {n.label()}", why)
    if isinstance(n, StreamOf):
        raise _refuse(route, f"run {n.label()}",
                      "the rows a relation that changes with every event inserts or deletes depend on "
                      "how its input is cut into micro-batches")


def _check_ordered_aggregates(root: L.Node, route: str, streaming: bool) -> None:
    """Refuse an aggregate whose value depends on row order where the batch routes do not know that order."""
    for n in L.walk(root):
        ordered = [a for a in n.aggs if a.kind.ordered] if isinstance(n, (L.Aggregate, L.WindowAggregate)) else []
        if ordered and (streaming or not _in_source_order(n.input)):
            raise _refuse(route, f"compute {ordered[0].kind.name} in {n.label()}",
                          "its value depends on the order rows arrive in, which the batch routes know only for "
                          "the rows of one source read as they are (not after a join, a union, an aggregate or "
                          "a table's changes, nor in a streaming run)")


def _check_state_ttl(root: L.Node, route: str) -> None:
    ttl = next((n for n in L.walk(root) if getattr(n, "ttl", 0)), None)
    if ttl is not None:
        raise _refuse(route, f"bound the state of {ttl.label()} by SET 'state.ttl'",
                      "a state time-to-live drops rows by processing time, which a batch statement does not "
                      "have (SET 'state.ttl' = '0 ms' computes the exact result)")


def _check_late_rules(root: L.Node, route: str) -> None:
    """Refuse the event-time operators whose late rule (docs/time.md) one statement cannot follow: it
    depends on the state the operator keeps as events arrive, not only on the watermark then."""
    timed = scans_under_event_time(root)
    for n in L.walk(root):
        if not any(id(s) in timed for s in L.walk(n) if isinstance(s, L.Scan)):
            continue
        if judges_per_session(n):
            raise _refuse(route, f"run {n.label()}",
                          "a session drops an event behind the watermark only when the session it merges "
                          "into had already closed, which depends on the sessions open as events arrive")
        if isinstance(n, OverAggregate) and n.frame.kind == "RANGE" and n.frame.preceding is not None:
            raise _refuse(route, f"run {n.label()}",
                          "a RANGE frame forgets a partition idle for 1.5 frames (as Flink's "
                          "RowTimeRangeBoundedPrecedingFunction), so which late rows count depends on "
                          "the state kept as rows arrive")


class _Lowering:
    def __init__(self, root: L.Node, dialect: str, streaming: bool = False, history: bool = False):
        _check(root, dialect, streaming, history)
        self.root = root
        self.dialect = dialect
        self.history = history
        self.scan_max_of: dict[int, str] = {}  # history: a scan's largest event time, by the scan's id
        self.streams = streaming_nodes(root) if streaming else {}  # nodes over a stream, by id
        self.per_file_max = dialect == "spark"  # Spark reads files in parallel: maxima are per file
        self.required = required_columns(root)
        self.timed = scans_under_event_time(root)
        self.window_judged = frozenset(scans_judged_per_window(root, judges_on_batch_routes))
        self.ctes: list[tuple[str, exp.Expression]] = []
        self.uses: dict[str, int] = {}
        self.done: dict[int, Rel] = {}
        self.changes_of: dict[int, Rel] = {}
        self.scans: list[ScanSpec] = []

    def build(self) -> Lowered:
        family = {L.WindowTVF: lower_window_tvf, L.WindowAggregate: lower_window_aggregate,
                  L.Aggregate: lower_aggregate, Join: lower_join, OverAggregate: lower_over, TopN: lower_topn,
                  SnapshotDiff: lower_snapshot_diff, TemporalSort: lower_temporal_sort, Limit: lower_limit}
        self.handlers = {L.Filter: self.lower_filter, L.Project: self.lower_project, L.Union: self.lower_union,
                         Unnest: self.lower_unnest,
                         L.Values: self.lower_values, L.Scan: self.lower_scan, LateScan: self.lower_late_scan,
                         **{t: partial(f, self) for t, f in family.items()}}
        out = self.rel(self.root)
        schema = self.root.schema
        query = exp.select(*[c(n) for n in out.columns]).from_(self.use(out))
        streaming = self.streaming(self.root)
        order = result_order(self.root)
        if order and not streaming:  # sorted, or in event-time or window order, as the runtime emits
            query = query.order_by(*order)
        for name, body in self.ctes:
            materialized = self.dialect == "duckdb" and self.uses.get(name, 0) > 1
            query = query.with_(exp.to_identifier(name, quoted=True), as_=body, materialized=materialized or None)
        return Lowered(self.dialect, query, tuple(self.scans), schema, streaming, self.history)

    # -- plumbing -------------------------------------------------------------------------

    def cte(self, hint: str, body: exp.Expression) -> str:
        name = hint if hint.startswith("__scan") else f"n{len(self.ctes)}"
        self.ctes.append((name, body))
        return name

    def add(self, body: exp.Expression, columns, ordered: bool = False) -> Rel:
        return Rel(self.cte("n", body), tuple(columns), ordered)

    def use(self, rel: Rel, alias_: str | None = None) -> exp.Table:
        """A reference to ``rel`` in a FROM (counted: DuckDB materializes CTEs used more than once)."""
        self.uses[rel.name] = self.uses.get(rel.name, 0) + 1
        return rel.ref(alias_)

    def rel(self, node: L.Node) -> Rel:
        if id(node) not in self.done:
            handler = self.handlers.get(type(node))
            if handler is None:
                raise _refuse(self.dialect, f"run {type(node).__name__}", "it has no batch lowering")
            self.done[id(node)] = handler(node)
        return self.done[id(node)]

    def expr(self, e: exp.Expression, schema: Schema) -> exp.Expression:
        """A bound expression over ``schema``, typed so that it renders with Flink's meaning."""
        return typed(e, schema)

    def streaming(self, node: L.Node) -> bool:
        """Whether ``node`` is computed over a stream (a Spark Structured Streaming query)."""
        return id(node) in self.streams

    def watermark_at_seam(self, node: L.Node) -> exp.Expression:
        """A backfill: ``node``'s output watermark once the history is read (``analysis/backfill.py``)."""
        return watermark_at_seam(node, self.scan_max)

    def scan_max(self, scan: L.Scan) -> exp.Expression:
        """The largest event time of a scan's history, as a scalar subquery (over its on-time rows: the
        largest time is never late)."""
        if id(scan) not in self.scan_max_of:
            rel = self.rel(scan)
            query = exp.select(alias(max_event_time(scan.source.watermark.column), "m")).from_(self.use(rel))
            self.scan_max_of[id(scan)] = self.cte("m", query)
        return exp.Subquery(this=exp.select(c("m")).from_(table(self.scan_max_of[id(scan)])))

    def needed(self, node: L.Node) -> set[str]:
        return self.required.get(id(node), set(node.schema.names))

    # -- the plain nodes --------------------------------------------------------------------

    def lower_filter(self, node: L.Filter) -> Rel:
        src = self.rel(node.input)
        query = exp.select(*src.cols(order=True)).from_(self.use(src)).where(
            self.expr(node.condition, node.input.schema))
        return self.add(query, node.schema.names, src.ordered)

    def lower_project(self, node: L.Project) -> Rel:
        src = self.rel(node.input)
        items = [alias(self.expr(e, node.input.schema), name) for name, e in node.exprs]
        items += [c(n) for n in ORDER] if src.ordered else []
        return self.add(exp.select(*items).from_(self.use(src)), node.schema.names, src.ordered)

    def lower_unnest(self, node: Unnest) -> Rel:
        if self.dialect != "duckdb":
            raise _refuse(self.dialect, "run CROSS JOIN UNNEST", "it is lowered for DuckDB only")
        src = self.rel(node.input)
        query = unnest_select(node, self.use(src), self.expr(node.expr, node.input.schema))
        return self.add(query, node.schema.names, src.ordered)

    def lower_union(self, node: L.Union) -> Rel:
        parts = []
        for child in node.inputs:
            src = self.rel(child)
            items = [alias(c(f.name), out.name) for f, out in zip(child.schema, node.schema)]
            parts.append(exp.select(*items).from_(self.use(src)))
        query = parts[0]
        for p in parts[1:]:
            query = exp.union(query, p, distinct=False)
        return self.add(exp.select(*[c(n) for n in node.schema.names]).from_(
            exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier("u")))), node.schema.names)

    def lower_values(self, node: L.Values) -> Rel:
        if not node.schema.fields:
            return self.add(exp.select(alias(exp.Literal.number(1), "__unit")), ["__unit"])
        empty = Schema(())
        rows = [exp.Tuple(expressions=[cast(self.expr(v, empty), f.type) for v, f in zip(r, node.schema)])
                for r in node.rows]
        names = [exp.to_identifier(f.name, quoted=True) for f in node.schema]
        values = exp.Values(expressions=rows, alias=exp.TableAlias(this=exp.to_identifier("v"), columns=names))
        return self.add(exp.select(*[c(f.name) for f in node.schema]).from_(values), node.schema.names)

    # -- scans --------------------------------------------------------------------------------

    def scan(self, node: L.Scan | LateScan, keep_op: bool = False) -> Rel:
        spec = scan_spec(node, f"__scan{len(self.scans)}", self.timed, self.window_judged)
        if self.streaming(node):  # Spark's watermark judges late events of a stream
            spec = replace(spec, drop_late=False, per_window=False, streaming=True)
        self.scans.append(spec)
        names = node.schema.names
        query = scan_select(spec, node.schema, self.per_file_max, self.cte, keep_op=keep_op)
        self.uses[spec.relation] = self.uses.get(spec.relation, 0) + 1
        columns = list(names) + (["__op"] if keep_op else [])
        return self.add(query, columns, ordered=True)

    def lower_scan(self, node: L.Scan) -> Rel:
        if node.source.kind != "table":
            return self.scan(node)
        changes = self.changes(node)
        state = table_state(changes.name, node.schema, node.source.primary_key)
        self.uses[changes.name] = self.uses.get(changes.name, 0) + 1
        return self.add(state, node.schema.names)

    def changes(self, node: L.Scan) -> Rel:
        """A table's changes by key as read (with ``__op`` and the source order)."""
        if id(node) not in self.changes_of:
            self.changes_of[id(node)] = self.scan(node, keep_op=True)
        return self.changes_of[id(node)]

    def lower_late_scan(self, node: LateScan) -> Rel:
        return self.scan(node)
