"""Binding emission: EMIT / ALLOWED LATENESS clauses, SET 'emit', and sources' allowed lateness.

A SELECT's ``EMIT ...`` and ``ALLOWED LATENESS ...`` apply to the window
aggregate of that SELECT (:func:`bind_emit_clause`). Once the whole query
is bound, :func:`resolve_emit` settles every window aggregate's policy:

- without a clause, ``SET 'emit' = 'changes'`` makes the window
  aggregates whose results are not windowed again (the last ones of a
  cascade) emit changes;
- a window stays open for the largest ``'allowed_lateness'`` of the
  sources below it (and the query's own ALLOWED LATENESS), since those
  are the late events that reach it;
- a query's ALLOWED LATENESS also widens what its sources accept, for
  this query only (``Scan.lateness_us``).
"""

from __future__ import annotations

from dataclasses import replace

from ...grammar.stream_syntax import EmitClause
from ..logical import nodes as L
from ..timeutil import interval_micros, parse_duration
from .context import BindContext


def bind_emit_clause(node: L.Node, clause: EmitClause | None, ctx: BindContext) -> L.Node:
    """Apply a SELECT's EMIT / ALLOWED LATENESS to the window aggregate it computes."""
    if clause is None:
        return node
    policy = _emit_policy(clause, ctx)
    chain: list[L.Node] = []
    cur = node
    while isinstance(cur, (L.Project, L.Filter)):
        chain.append(cur)
        cur = cur.input
    if isinstance(cur, L.Aggregate):
        if policy.mode == "changes" and not policy.every_us and not policy.lateness_us:
            return node  # a group aggregate already emits its changes
        raise ctx.error("this query has no window: EMIT FINAL, EMIT ... EVERY and ALLOWED LATENESS apply to "
                        "window aggregates", clause,
                        help="group by the bounds of a window (TUMBLE, HOP, CUMULATE, SESSION); a group aggregate "
                             "without a window always emits its changes")
    _check_window_emit(cur, policy, clause, ctx)
    out: L.Node = replace(cur, emit=policy)
    for n in reversed(chain):
        out = n.with_inputs((out,))
    return out


def _emit_policy(clause: EmitClause, ctx: BindContext) -> L.EmitPolicy:
    """The policy the clause spells, its intervals checked."""
    every = clause.args.get("every")
    lateness = clause.args.get("lateness")
    policy = L.EmitPolicy(mode=clause.args.get("mode") or "final",
                          every_us=interval_micros(every, ctx.source) if every is not None else 0,
                          lateness_us=interval_micros(lateness, ctx.source) if lateness is not None else 0,
                          explicit=clause.args.get("mode") is not None)
    if every is not None and policy.every_us <= 0:
        raise ctx.error("the interval of EMIT ... EVERY must be positive", every)
    if lateness is not None and policy.lateness_us < 0:
        raise ctx.error("ALLOWED LATENESS cannot be negative", lateness)
    return policy


def _check_window_emit(cur: L.Node, policy: L.EmitPolicy, clause: EmitClause, ctx: BindContext) -> None:
    """Refuse a policy the window aggregate ``cur`` cannot follow (or ``cur`` not being one)."""
    if not isinstance(cur, L.WindowAggregate):
        raise ctx.error("EMIT and ALLOWED LATENESS apply to a window aggregate, and this SELECT computes none",
                        clause, help="put the clause on the SELECT that groups by the window")
    if cur.window.type.merging and policy.every_us:
        raise ctx.error(f"EMIT ... EVERY is not supported for {cur.window.kind} windows", clause,
                        help="use EMIT CHANGES (on every micro-batch) or the default (when the session closes)")
    if cur.window.time_col and cur.input.schema.find(cur.window.time_col).proctime and policy.lateness_us:
        raise ctx.error("processing-time windows have no late events; ALLOWED LATENESS does not apply", clause)


def resolve_emit(root: L.Node, settings: dict) -> L.Node:
    """Settle every window aggregate's emission policy (see the module docstring)."""
    default_changes = settings.get("emit", "final").lower() == "changes"
    windowed_again = _windowed_again(root)
    done: dict[int, L.Node] = {}

    def visit(n: L.Node, query_lateness: int) -> L.Node:
        key = id(n)
        if key in done:
            return done[key]
        below = query_lateness
        if isinstance(n, L.WindowAggregate) and n.emit.lateness_us:
            below = max(below, n.emit.lateness_us)
        inputs = tuple(visit(i, below) for i in n.inputs)
        out = n if all(a is b for a, b in zip(inputs, n.inputs)) else n.with_inputs(inputs)
        if isinstance(out, L.Scan) and below > out.lateness_us:
            out = L.Scan(out.source, lateness_us=below)
        if isinstance(out, L.WindowAggregate):
            policy = out.emit
            if not policy.explicit and default_changes and key not in windowed_again:
                policy = replace(policy, mode="changes")
            source_lateness = max((source_lateness_us(s) for s in L.walk(out) if isinstance(s, L.Scan)), default=0)
            if source_lateness > policy.lateness_us and not out.input.schema.find(out.window.time_col).proctime:
                policy = replace(policy, lateness_us=source_lateness)
            if policy != out.emit:
                out = replace(out, emit=policy)
        done[key] = out
        return out

    return visit(root, 0)


def source_lateness_us(scan: L.Scan) -> int:
    option = scan.source.options.get("allowed_lateness")
    return max(parse_duration(option) if option else 0, scan.lateness_us)


_TIME_CONSUMERS = (L.WindowAggregate, L.WindowTVF)


def _windowed_again(root: L.Node) -> set[int]:
    """Ids of the nodes whose results reach another window (so must stay append-only)."""
    out: set[int] = set()
    seen: set[tuple[int, bool]] = set()

    def mark(n: L.Node, under: bool) -> None:
        if (id(n), under) in seen:
            return
        seen.add((id(n), under))
        if under:
            out.add(id(n))
        for i in n.inputs:
            mark(i, under or isinstance(n, _TIME_CONSUMERS))

    mark(root, False)
    return out
