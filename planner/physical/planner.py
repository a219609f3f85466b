"""Physical planning: an optimized logical plan -> the runtime's operator DAG.

Runs of per-batch nodes (Filter, Project, WindowTVF, Unnest) are fused into one
SQL statement per batch: into a CalcSpec, or into the partial aggregation of
the WindowAggSpec above them. Sources read only the columns the plan uses.

Example:
    >>> plan = plan_physical(logical_plan)      # doctest: +SKIP
    >>> [type(op).__name__ for op in plan.ops]  # doctest: +SKIP
    ['SourceSpec', 'WindowAggSpec', 'CalcSpec']
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ..analysis.lateness import (
    is_session_tvf,
    judges_late_events,
    judges_per_session,
    judges_row_join,
    scans_judged_per_window,
    scans_under_event_time,
    window_grids,
)
from ..analysis.needed_columns import required_columns, source_columns
from ..analysis.state_bounds import state_bound
from ..bind.emit import source_lateness_us
from ..bind.expressions import col
from ..errors import UnsupportedPlan
from ..literal_cells import plain_cast_type
from ..logical import nodes as L
from ..logical.cql import SnapshotDiff, StreamOf
from ..logical.late import LateScan
from ..logical.sort import Limit, TemporalSort
from ..logical.unnest import Unnest
from ..lower import sqlgen as S
from ..lower.sqlgen_emit import emit_sql
from ..lower.sqlgen_group import group_agg_sql
from ..timeutil import parse_duration
from ..types import Schema
from ..vocabulary import ADDITIONS, RETRACTIONS
from ..windows import floor_to
from .match_specs import MatchRecognizeSpec, match_fields
from .plan_joins import JoinPlanning
from .plan_window import over_fields, partial_agg, partial_items, session_fields, time_kinds, topn_fields
from .sort_specs import LimitSpec, TemporalSortSpec
from .specs import (
    OP,
    PANE,
    ROWS_COLUMN,
    CalcSpec,
    GroupAggSpec,
    OpSpec,
    PhysicalPlan,
    SourceSpec,
    UnionSpec,
    ValuesSpec,
    WindowAggSpec,
)
from .stream_specs import OverAggSpec, SessionSpec, SnapshotDiffSpec, TopNSpec, WindowEmitSpec

_PER_BATCH = (L.Filter, L.Project, L.WindowTVF, Unnest)


def plan_physical(root: L.Node) -> PhysicalPlan:
    return _Planner(root).build()


def plan_physical_roots(root: L.Node, roots: tuple[L.Node, ...]) -> PhysicalPlan:
    """The DAG under ``root`` with one output per node of ``roots`` (a statement set's INSERTs)."""
    planner = _Planner(root)
    outputs = tuple(planner.op_for(r) for r in roots)
    return PhysicalPlan(tuple(planner.ops), outputs[0], outputs=outputs)


class _Planner(JoinPlanning):
    def __init__(self, root: L.Node):
        self.root = root
        self.ops: list[OpSpec] = []
        self.done: dict[int, int] = {}
        self.consumers: dict[int, int] = {}
        self.parents: dict[int, L.Node] = {}
        for n in L.walk(root):
            for i in n.inputs:
                self.consumers[id(i)] = self.consumers.get(id(i), 0) + 1
                self.parents[id(i)] = n
        # Which columns a stateful operator keeps in its state is a physical choice: the plan says what each
        # node produces (rules/prune_columns.py), its consumers say which of those they read.
        self.required = required_columns(root)
        self.timed_scans = scans_under_event_time(root)
        self.window_judged = scans_judged_per_window(root, judges_late_events)
        times = time_kinds(root)
        if len(times) > 1:  # one watermark drives a job
            raise _unsupported("a query that uses both processing time and event time",
                               "use one kind of time attribute for its windows")
        self.processing_time = times == {"processing"}

    def build(self) -> PhysicalPlan:
        out = self.op_for(self.root)
        return PhysicalPlan(tuple(self.ops), out)

    def add(self, cls, node: L.Node, inputs: tuple[int, ...], label: str, schema: pa.Schema | None = None, **kw) -> int:
        schema = schema if schema is not None else node.schema.to_arrow()
        if node.changelog == L.UPDATING and OP not in schema.names:
            schema = schema.append(pa.field(OP, pa.int8()))  # updating streams carry their row kind
        kw.setdefault("state", state_bound(node))
        op = cls(id=len(self.ops), inputs=inputs, schema=schema,
                 changelog=node.changelog, watermark=node.watermark, label=label, **kw)
        self.ops.append(op)
        return op.id

    def chain_below(self, node: L.Node) -> tuple[list[L.Node], L.Node]:
        """The per-batch nodes under ``node`` (bottom first) that can fuse into it, and their base."""
        chain: list[L.Node] = []
        cur = node
        while isinstance(cur, _PER_BATCH) and (cur is node or self.consumers.get(id(cur), 0) <= 1) \
                and id(cur) not in self.done and not is_session_tvf(cur):
            chain.append(cur)
            cur = cur.inputs[0]
        return chain[::-1], cur

    def op_for(self, node: L.Node) -> int:
        """The operator computing ``node`` (planned once, however many consumers it has)."""
        if id(node) in self.done:
            return self.done[id(node)]
        planner = getattr(self, f"plan_{type(node).__name__}", None)
        if planner is None:
            raise _unsupported(type(node).__name__, "")
        op_id = planner(node)
        self.done[id(node)] = op_id
        return op_id

    # One method per logical node type: plan_<NodeType>(node) -> operator id.

    def plan_per_batch(self, node: L.Node) -> int:
        chain, base = self.chain_below(node)
        base_id = self.op_for(base)
        sql = S.render(S.chain_sql(chain))
        label = " -> ".join(n.label() for n in chain)
        return self.add(CalcSpec, node, (base_id,), f"Calc[{label}]", sql=sql, picks=S.column_picks(chain))

    plan_Filter = plan_Project = plan_Unnest = plan_per_batch

    def plan_WindowTVF(self, node: L.WindowTVF) -> int:
        if is_session_tvf(node):
            return self.session(node)
        return self.plan_per_batch(node)

    def plan_Scan(self, node: L.Scan) -> int:
        if not node.source.descriptor.source:  # a lookup connector (jdbc): rows are fetched by key
            raise UnsupportedPlan(f"{node.source.connector} table '{node.source.name}' is read by key in lookup "
                                  f"joins only: JOIN {node.source.name} FOR SYSTEM_TIME AS OF PROCTIME() ON s.k = t.k "
                                  "(to follow a PostgreSQL table's rows, declare it with connector = 'postgres-cdc')")
        if node.source.kind == "table":
            return self.normalize(node, self.source(node))  # changes by key -> a changelog
        return self.source(node)

    def plan_Values(self, node: L.Values) -> int:
        return self.values(node)

    def plan_WindowAggregate(self, node: L.WindowAggregate) -> int:
        return self.window_aggregate(node)

    def plan_Aggregate(self, node: L.Aggregate) -> int:
        return self.group_aggregate(node)

    def plan_OverAggregate(self, node) -> int:
        chain, base = self.fused_input(node)
        fields = over_fields(node, self.required.get(id(node), set(node.schema.names)), not self.processing_time)
        return self.add(OverAggSpec, node, (self.op_for(base),), _fused_label(node, chain),
                        input_sql=S.render(S.chain_sql(chain)) if chain else None, **fields)

    def plan_MatchRecognize(self, node) -> int:
        chain, base = self.fused_input(node)
        return self.add(MatchRecognizeSpec, node, (self.op_for(base),), _fused_label(node, chain),
                        input_sql=S.render(S.chain_sql(chain)) if chain else None, **match_fields(node))

    def plan_TopN(self, node) -> int:
        chain, base = self.fused_input(node)
        base_id = self.op_for(base)  # first: the operator's id (which names its tables) is the next one
        inner = S.chain_sql(chain) if chain else None
        fields = topn_fields(len(self.ops), node, self.required.get(id(node), set(node.schema.names)), inner)
        return self.add(TopNSpec, node, (base_id,), _fused_label(node, chain), **fields)

    def plan_TemporalSort(self, node: TemporalSort) -> int:
        return self.add(TemporalSortSpec, node, (self.op_for(node.input),), node.label(),
                        time_column=node.time_column, keys=node.keys)

    def plan_Limit(self, node: Limit) -> int:
        return self.add(LimitSpec, node, (self.op_for(node.input),), node.label(), count=node.count)

    def plan_SnapshotDiff(self, node: SnapshotDiff) -> int:
        chain, base = self.fused_input(node)
        base_id = self.op_for(base)
        return self.add(SnapshotDiffSpec, node, (base_id,), _fused_label(node, chain), instant=node.instant,
                        slide_us=node.slide_us, kind=node.kind, columns=tuple(node.schema.names),
                        input_sql=S.render(S.chain_sql(chain)) if chain else None)

    def plan_StreamOf(self, node: StreamOf) -> int:
        ops = ADDITIONS if node.kind == "insert" else RETRACTIONS
        sql = exp.select(*[col(f.name) for f in node.schema]).from_(S.batch_table()).where(
            exp.column(OP, quoted=True).isin(*[exp.Literal.number(int(o)) for o in ops]))
        return self.add(CalcSpec, node, (self.op_for(node.input),), node.label(), sql=S.render(sql))

    def fused_input(self, node: L.Node) -> tuple[list[L.Node], L.Node]:
        """The per-batch nodes under a one-input operator to fuse into its input SQL, and the node below them."""
        chain, base = self.chain_below(node.input)
        return chain, (base if chain else node.input)

    def plan_Union(self, node: L.Union) -> int:
        inputs = tuple(self.op_for(i) for i in node.inputs)
        columns = tuple(tuple(n.schema.names) for n in node.inputs)  # aligned by rules/prune_columns.py
        if node.changelog == L.UPDATING:  # the changes of updating inputs go on as they are; the others insert
            columns = tuple(c + ((OP,) if n.changelog == L.UPDATING else ()) for c, n in zip(columns, node.inputs))
        return self.add(UnionSpec, node, inputs, node.label(), input_columns=columns)

    def plan_LateScan(self, node: LateScan) -> int:
        return self.source(node)

    def source(self, node: L.Scan | LateScan) -> int:
        src = node.source
        late_only = isinstance(node, LateScan)
        # The scan reads what rules/prune_columns.py left in it: split into what is read and what is computed.
        columns, computed, proctime = source_columns(src, set(node.schema.names))
        wm = src.watermark
        read = set(columns) | {n for n, _ in computed} | ({proctime} if proctime is not None else set())
        schema = Schema(tuple(f for f in node.schema if f.name in read))
        computed_sql = computed_columns_sql(src, columns, computed, proctime)
        if late_only and wm is None:
            raise _unsupported(f"LATE({src.name})", f"'{src.name}' has no WATERMARK, so no event is late")
        lateness = source_lateness_us(node) if not late_only else source_lateness_us(L.Scan(src))
        idle = src.options.get("idle_timeout")
        return self.add(SourceSpec, node, (), _source_label(src, late_only), schema=schema.to_arrow(), source=src, columns=columns,
                        computed_sql=computed_sql, time_column=wm.column if wm else None,
                        delay_us=wm.delay_us if wm else 0, lateness_us=lateness, proctime_column=proctime,
                        clock_watermark=self.processing_time and not late_only,
                        idle_timeout_us=parse_duration(idle) if idle else 0, late_only=late_only,
                        drop_late=late_only or (id(node) in self.timed_scans and id(node) not in self.window_judged),
                        per_window=not late_only and id(node) in self.window_judged,
                        window_grids=window_grids(self.root, judges_late_events)
                        if id(node) in self.window_judged else (),
                        isolate_late=id(node) in self.window_judged and any(
                            judges_per_session(n) for n in L.walk(self.root)),
                        arrival_column=self._read_by_a_row_join(node))

    def _read_by_a_row_join(self, node: L.Node) -> bool:
        """Whether a scan's only consumer is an interval or temporal join that judges its rows (it takes each
        row's watermark at arrival as a column, ``__w``, rather than batches cut before each late row)."""
        parent = self.parents.get(id(node))
        return (id(node) in self.window_judged and self.consumers.get(id(node)) == 1 and parent is not None
                and judges_row_join(parent))

    def values(self, node: L.Values) -> int:
        if not node.schema.fields:
            sql = exp.select(exp.alias_(exp.Literal.number(1), "__unit", quoted=True))
            schema = pa.schema([pa.field("__unit", pa.int32())])
            return self.add(ValuesSpec, node, (), node.label(), schema=schema, sql=S.render(sql))
        rows = [exp.Tuple(expressions=[S.cast(v.copy() if plain_cast_type(v) else S.typed(v, Schema(())), f.type)
                                       for v, f in zip(r, node.schema)])
                for r in node.rows]
        alias = exp.TableAlias(this=exp.Identifier(this="v", quoted=True),
                               columns=[exp.Identifier(this=f.name, quoted=True) for f in node.schema])
        sql = exp.select(exp.Star()).from_(exp.Values(expressions=rows, alias=alias))
        return self.add(ValuesSpec, node, (), node.label(), sql=S.render(sql))

    def group_aggregate(self, node: L.Aggregate) -> int:
        # The operator numbers the rows it receives (Python aggregates: accumulated and retracted in that order).
        numbered = any(a.kind.ordered or a.kind.python for a in node.aggs)
        chain, base = self.chain_below(node.input) if not numbered else ([], node.input)
        if not chain:
            base = node.input
        base_id = self.op_for(base)
        updating = node.input.changelog == L.UPDATING
        sql = group_agg_sql(len(self.ops), node.keys, node.aggs, node.input.schema, updating,
                            S.chain_sql(chain), node.ttl)
        return self.add(GroupAggSpec, node, (base_id,), _fused_label(node, chain), keys=node.keys, setup=sql.setup,
                        per_batch=sql.per_batch, compact=sql.compact, state_tables=sql.state_tables,
                        ttl_us=node.ttl, expire=sql.expire, oldest=sql.oldest, numbered=numbered)

    def session(self, node: L.WindowAggregate | L.WindowTVF) -> int:
        chain, base = self.chain_below(node.input)
        if not chain:
            base = node.input
        base_id = self.op_for(base)
        needed = self.required.get(id(node), set(node.schema.names))
        picks = S.column_picks(chain) if chain else tuple((n, n) for n in node.input.schema.names)
        fields = session_fields(len(self.ops), node, S.chain_sql(chain), needed, picks)
        schema = None
        if isinstance(node, L.WindowTVF):  # rows keep only the columns read above
            kept = set(fields["state_schema"].names) | set(L.WINDOW_COLUMNS)
            schema = pa.schema([f for f in node.schema.to_arrow() if f.name in kept])
        return self.add(SessionSpec, node, (base_id,), _fused_label(node, chain), schema=schema, **fields)

    def window_aggregate(self, node: L.WindowAggregate) -> int:
        if node.input.changelog == L.UPDATING:
            raise _unsupported("a window aggregate over an updating input",
                               "window aggregates need an append-only input (a stream)")
        if node.window.type.merging:
            return self.session(node)
        numbered = any(a.kind.ordered for a in node.aggs)  # the operator numbers the rows it receives
        chain, base = self.chain_below(node.input) if not numbered else ([], node.input)
        if not chain:
            base = node.input
        base_id = self.op_for(base)
        inner = S.chain_sql(chain)
        w = node.window
        pane = exp.alias_(floor_to(S.epoch_us(col(w.time_col)), w.pane, w.offset), PANE, quoted=True)
        keys = [col(k) for k in node.keys]
        distinct = sorted({a.arg for a in node.aggs if a.keeps_values})
        items: list[exp.Expression] = [pane, *keys, *[col(d) for d in distinct if d not in node.keys]]
        aggs = tuple(partial_agg(i, a) for i, a in enumerate(node.aggs))
        for i, a in enumerate(node.aggs):
            items += partial_items(i, a)
        group = exp.Group(expressions=[exp.Literal.number(i + 1) for i in range(1 + len(keys) + len(
            [d for d in distinct if d not in node.keys]))])
        # how many events each partial row holds: late ones are counted
        items.append(exp.alias_(exp.Count(this=exp.Star()), ROWS_COLUMN, quoted=True))
        partial = exp.select(*items).from_(S.subquery(inner))
        partial.set("group", group)
        fields = dict(window=w, keys=node.keys, aggs=tuple(aggs), partial_sql=S.render(partial),
                      distinct_columns=tuple(d for d in distinct if d not in node.keys),
                      processing_time=self.processing_time, numbered=numbered)
        if node.emit.updating:
            identity = ("window_start", "window_end", *node.keys)
            sql = emit_sql(len(self.ops), node.schema.to_arrow(), identity, ("window_start", "window_end"))
            return self.add(WindowEmitSpec, node, (base_id,), _fused_label(node, chain), emit=node.emit,
                            emit_sql=sql, **fields)
        return self.add(WindowAggSpec, node, (base_id,), _fused_label(node, chain), **fields)


def _source_label(src, late_only: bool) -> str:
    kind = "Late" if late_only else "Source"
    return f"{kind}({src.name}, {src.connector}" + (f", {src.format}" if src.descriptor.formats else "") + \
        (", changes by key" if src.kind == "table" else "") + ")"


def computed_columns_sql(src, columns, computed, proctime: str | None = None) -> str | None:
    """The per-batch DuckDB SQL that adds a source's computed columns to the columns read (None: none)."""
    if not computed:
        return None
    physical_schema = Schema(tuple(f for f in src.schema if f.name in columns))
    items = [col(c) for c in columns] + ([col(proctime)] if proctime else []) + \
        [exp.alias_(S.typed(e, physical_schema), n, quoted=True) for n, e in computed] + \
        ([col(OP)] if src.kind == "table" else [])
    return S.render(exp.select(*items).from_(S.batch_table()))


def _fused_label(node: L.Node, chain: list[L.Node]) -> str:
    """An operator's label, with the per-batch nodes fused into its input SQL."""
    if not chain:
        return node.label()
    return f"{node.label()} over {' -> '.join(n.label() for n in chain)}"




def _unsupported(what: str, instead: str) -> UnsupportedPlan:
    return UnsupportedPlan(f"the runtime cannot run {what} yet" + (f"; {instead}" if instead else ""))
