"""Physical planning of session windows, emission policies and OVER aggregates.

Called by :class:`physical.planner._Planner`; each function returns the spec
fields of one operator.
"""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
from sqlglot import exp

from ..aggregate_kinds import SEQ, fold
from ..logical import nodes as L
from ..logical.over import OverAggregate
from ..logical.rank import TopN, window_end_column
from ..lower.sqlgen_emit import emit_sql
from ..lower.sqlgen_over import over_sql
from ..lower.sqlgen_session import direct_rows, partial_columns, session_sql, session_state_schema
from ..lower.sqlgen_topn import dedup_sql, global_topn_sql, window_topn_sql
from ..lower.sqlgen_ttl import partition_touch, partition_ttl
from ..lower.sqltree import alias, cast, col, cols, render, select_from, sub
from ..types import Schema
from .specs import BATCH, OP, PartialAgg


def output_schema(node: L.Node) -> pa.Schema:
    """The node's Arrow schema, with the changelog column when it is updating."""
    schema = node.schema.to_arrow()
    return schema.append(pa.field(OP, pa.int8())) if node.changelog == L.UPDATING else schema


def session_fields(op_id: int, node: L.WindowAggregate | L.WindowTVF, inner: exp.Expression, needed: set[str],
                   picks: tuple[tuple[str, str], ...] | None = None) -> dict:
    """The fields of a SessionSpec computing ``node`` from rows given by the query ``inner``.

    ``needed``: the columns of the node's output read above it; ``picks``:
    (row column, batch column) pairs when ``inner`` only picks and
    renames the batch's columns.
    """
    w = node.window
    schema = node.input.schema
    partition = w.partition_by
    if isinstance(node, L.WindowTVF):
        aggs, group, keys, partials = (), (), (), None
        emit = L.EmitPolicy()
        keep = needed | {w.time_col, *partition}
        schema = Schema(tuple(f for f in schema if f.name in keep))
        inner = select_from(sub(inner, "r"), None, *cols(f.name for f in schema))
    else:
        distinct = [a.arg for a in node.aggs if a.keeps_values and a.arg not in node.keys]
        group = tuple(dict.fromkeys([k for k in node.keys if k not in partition] + distinct))
        keys = node.keys
        partials = partial_columns(node.aggs, schema)
        aggs = tuple(partial_agg(i, a) for i, a in enumerate(node.aggs))
        emit = node.emit
    state_schema = session_state_schema(partition, group, partials, schema)
    direct = direct_rows(picks, w.time_col, partials, state_schema, schema)
    sql = session_sql(inner, w.time_col, w.gap, partition, group, partials, state_schema, direct)
    merges = tuple((p.name, p.merge) for p in partials or ())
    fields = dict(window=w, partition=partition, keys=keys, group=group, aggs=aggs, sql=sql, merges=merges,
                  state_schema=state_schema, emit=emit)
    if emit.updating:
        out = node.schema.to_arrow()
        identity = tuple(partition) + tuple(k for k in group if k in keys) + ("window_start",)
        fields["emit_sql"] = emit_sql(op_id, out, identity, tuple(partition))
    return fields


def partial_agg(i: int, a: L.AggCall) -> PartialAgg:
    """How aggregate ``i`` is split into partial columns (``__p<i><suffix>``) and merged."""
    if a.keeps_values:
        return PartialAgg(a.kind, a.name, a.type, (), a.arg, a.arg_type)
    parts = tuple((f"__p{i}{p.suffix}", p.merge, p.suffix) for p in a.partials())
    return PartialAgg(a.kind, a.name, a.type, parts, None, a.arg_type)


def partial_items(i: int, a: L.AggCall) -> list[exp.Expression]:
    """The per-batch partial columns of aggregate ``i`` (none for DISTINCT: its argument is grouped by)."""
    if a.keeps_values:
        return []
    arg = col(a.arg) if a.arg else None
    if a.kind.ordered:  # in arrival order: the operator numbers the rows
        ordered = a.kind.batch_items(arg, col(SEQ))
        return [alias(cast(ordered[p.suffix], p.type), f"__p{i}{p.suffix}") for p in a.partials()]
    if a.kind.python:  # the group's values, accumulated by the operator (runtime/udaf.py)
        return [alias(a.kind.batch_partial(arg), f"__p{i}{p.suffix}") for p in a.partials()]
    items = []
    for p in a.partials():
        folded = exp.Count(this=exp.Star()) if arg is None else fold(p.first, p.value(arg))
        items.append(alias(cast(folded, p.type), f"__p{i}{p.suffix}"))
    return items


def over_fields(node: OverAggregate, needed: set[str], event_time: bool = True) -> dict:
    """The fields of an OverAggSpec computing ``node``, keeping the input columns read above it."""
    keep = needed | set(node.partition_by) | {node.order_by} | {a.arg for a in node.aggs if a.arg}
    columns = [f.name for f in node.input.schema if f.name in keep]
    sql = over_sql(columns, node.partition_by, node.order_by, node.frame, node.aggs, node.input.schema)
    return dict(schema=pa.schema([f for f in node.schema.to_arrow() if f.name in columns] +
                                 [pa.field(a.name, a.type) for a in node.aggs]),
                columns=tuple(columns), order=node.order_by, frame=node.frame, compute_sql=sql.compute,
                retain_sql=sql.retain, carry_sql=sql.carry, carry_schema=sql.carry_schema,
                partition=tuple(node.partition_by), event_time=event_time, last_of_rows_sql=sql.last_of_rows,
                advance_last_sql=sql.advance_last, last_schema=sql.last_schema,
                retain_by_partition_sql=sql.retain_by_partition)


def topn_fields(op_id: int, node: TopN, needed: set[str], inner: exp.Expression | None) -> dict:
    """The fields of a TopNSpec computing ``node`` (over the rows of the query ``inner``, if not the batch's),
    keeping the input columns read above it."""
    keep = needed | set(node.partition_by) | {c for c, _ in node.order_by}
    if node.kind == "global":
        keep |= set(node.input.schema.names)  # rows are compared whole
    columns = [f.name for f in node.input.schema if f.name in keep]
    rank = node.rank_name if node.rank_name in needed else None
    in_schema = pa.schema([pa.field(c, node.input.schema.find(c).type) for c in columns])
    out = in_schema.append(pa.field(rank, pa.int64(), False)) if rank else in_schema
    fields = dict(kind=node.kind, columns=tuple(columns), partition=node.partition_by, order=node.order_by,
                  limit=node.limit, rank=rank, input_sql=render(inner) if inner is not None else None)
    if node.kind == "window":
        end = window_end_column(node.input, node.partition_by)
        fields["sql"] = window_topn_sql(columns, node.partition_by, node.order_by, node.limit, end, node.function)
        fields["window_end"] = end
    elif node.kind == "global":
        # A row number is a key within the partition (updated in place); a rank that ties is not.
        keyed = rank is not None and node.function == "row_number"
        fields["sql"] = global_topn_sql(op_id, in_schema, node.partition_by, node.order_by, node.limit,
                                        node.input.changelog == L.UPDATING, inner, node.function,
                                        with_rank=rank is not None and not keyed)
        if keyed:
            fields["emit_sql"] = emit_sql(op_id, out, (*node.partition_by, rank), node.partition_by)
    else:
        fields["emit_sql"] = emit_sql(op_id, out, node.partition_by, node.partition_by)
        fields["sql"] = dedup_sql(columns, node.partition_by, node.order_by[0][0], fields["emit_sql"].table)
    if node.ttl:
        fields.update(_topn_ttl(op_id, node, in_schema, fields))
    schema = output_schema(node)
    fields["schema"] = pa.schema([f for f in schema if f.name in columns or f.name == rank or f.name == OP])
    return fields


def _topn_ttl(op_id: int, node: TopN, in_schema: pa.Schema, fields: dict) -> dict:
    """SET 'state.ttl' for global Top-N and deduplication: partitions not touched for that long are dropped
    (planner/lower/sqlgen_ttl.py); keep-first deduplication's emitted keys are Arrow state the runtime filters."""
    key_ddl = [(p, in_schema.field(p).type) for p in node.partition_by]
    tables = [fields["emit_sql"].table] if fields.get("emit_sql") and node.kind != "first" else []
    if node.kind == "global":
        tables += list(fields["sql"].tables)
    ttl = partition_ttl(op_id, key_ddl, tuple(tables), node.ttl)
    out = dict(ttl_us=node.ttl, ttl_setup=ttl.setup, ttl_tables=ttl.tables, expire=ttl.expire, oldest=ttl.oldest,
               touch=partition_touch(op_id, BATCH, [k for k, _ in key_ddl]))
    if node.kind == "global":  # the partitions a batch changes: __touched_<id>, after per_batch
        sql = fields["sql"]
        out["sql"] = replace(sql, per_batch=sql.per_batch + partition_touch(op_id, f"__touched_{op_id}",
                                                                             [k for k, _ in key_ddl]))
    return out


def is_proctime_call(e: exp.Expression) -> bool:
    """``PROCTIME()``: a computed column the source fills with the processing time."""
    return isinstance(e, exp.Anonymous) and e.name.upper() == "PROCTIME" and not e.expressions


def time_kinds(root: L.Node) -> set[str]:
    """Which time the plan's windows, OVER and deduplication use: ``processing``, ``event`` or both."""
    uses: set[str] = set()
    for n in L.walk(root):
        time_cols = []
        if isinstance(n, (L.WindowTVF, L.WindowAggregate)):
            time_cols = [(n.input, n.window.time_col)]
        elif isinstance(n, OverAggregate):
            time_cols = [(n.input, n.order_by)]
        elif isinstance(n, TopN) and n.kind in ("first", "last"):
            time_cols = [(n.input, n.order_by[0][0])]
        for below, name in time_cols:
            f = below.schema.find(name)
            if f is not None and (f.proctime or f.rowtime):
                uses.add("processing" if f.proctime else "event")
    return uses
