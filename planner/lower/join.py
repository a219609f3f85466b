"""Lowering joins: interval, window, temporal and regular joins as one SQL join each.

Both inputs are selected with their output names (the right side renamed
where names clash, as the join node says), so the join's conditions,
which are bound over output names, render unqualified. Over bounded input
each strategy's final result is a plain join of the inputs' final rows:

* interval: ``ON keys AND r.t - l.t BETWEEN lower AND upper`` (in
  microseconds), inner or outer, and, for rows that came behind their
  input's watermark (``__wm``), the pair rule of Flink's ``TimeIntervalJoin``
  that the runtime applies (``interval_pair_kept``);
* window: ``ON l.window_start = r.window_start AND l.window_end = r.window_end AND keys``, over the
  rows whose window had not fired for their input when they arrived (``__wm``);
* regular: ``ON`` the condition, over the inputs' final rows;
* temporal: each left row with the version of the table's row valid at its
  time. Versions are the table's changes (a retraction's ``-U`` is not a
  version; a delete ends one), the last change at a time winning; a
  version is valid from its time to the next version's of the same join
  key (a validity range, computed with ``LEAD``)::

      versions of key 7      10:00 (bid 3)   10:05 (bid 4)   10:09 (delete)
      valid                  [10:00, 10:05)  [10:05, 10:09)  [10:09, ...) -> no row
      left row at 10:07      -> bid 4

  A left row whose next version is at or below its watermark at arrival
  (``__wm``) finds none (Flink has cleaned its version up, as the runtime).

A lookup join is refused before this (its result depends on arrival times).
"""

from __future__ import annotations

from sqlglot import exp

from ..analysis.lateness import judges_interval_join, judges_temporal_join, judges_window_join
from ..logical.join import Join
from ..vocabulary import ChangeOp
from .sql import ARRIVAL_WM, FILE, OP, ROW, alias, and_, c, micros, open_window, sub, window
from .sqlgen import lit
from .sqlgen_join import interval_pair_kept
from .stream import interval_bound

KIND = {"inner": None, "left": "LEFT", "right": "RIGHT", "full": "FULL"}


def _side(lw, node, side: int, rel=None) -> exp.Subquery:
    """One input, its columns under their output names. A window join keeps only the rows whose window
    had not fired for their input when they arrived (``__wm``, as the runtime's ``WindowJoinLogic``)."""
    child = node.inputs[side]
    src = rel or lw.rel(child)
    names = node.left_names if side == 0 else node.right_names
    items = [alias(c(inner), out) for inner, out in zip(child.schema.names, names)]
    if arrival_judged(node, side) and not lw.streaming(node):  # the watermark it came at, for the pair rule (``__wl`` / ``__wr``)
        items.append(alias(c(ARRIVAL_WM) if src.ordered else exp.Null(), ARRIVAL[side]))
    query = exp.select(*items).from_(lw.use(src))
    if src.ordered and judges_window_join(node):
        end = node.window_columns[1 + 2 * side]  # the side's window_end, by its output name
        query = query.where(open_window(micros(c(child.schema.names[list(names).index(end)]))))
    return sub(query, "l" if side == 0 else "r")


ARRIVAL = ("__wl", "__wr")  # each side's ``__wm`` under its own name in a join
NEVER = -(2**62)  # the watermark of a row that is not judged (``__wm`` NULL): no pair is lost to it


def arrival_judged(node: Join, side: int) -> bool:
    """Whether a side's rows carry their watermark at arrival into the join, which judges them with it."""
    return judges_interval_join(node) or (side == 0 and judges_temporal_join(node))


def _arrival(side: int) -> exp.Expression:
    return exp.Coalesce(this=c(ARRIVAL[side]), expressions=[lit(NEVER)])


def _conditions(lw, node: Join, *extra: exp.Expression) -> exp.Expression:
    parts = [exp.EQ(this=lw.expr(a, node.schema), expression=lw.expr(b, node.schema)) for a, b in node.equi]
    parts += list(extra)
    if node.residual is not None:
        parts.append(exp.Paren(this=lw.expr(node.residual, node.schema)))
    return and_(*parts) or exp.true()


def _join(left, right, on: exp.Expression, kind: str) -> exp.Select:
    return exp.select("*").from_(left).join(right, on=on, join_type=KIND[kind])


def lower_join(lw, node: Join):
    if node.strategy == "temporal":
        return _temporal(lw, node)
    extra: list[exp.Expression] = []
    if node.strategy == "interval" and lw.streaming(node):  # Spark reads the bounds off the timestamps
        b = node.bounds
        extra.append(interval_bound(b.left_time, b.right_time, b.lower, b.upper))
        # Spark's stream-stream outer joins find partners by key in their state, where a NULL key meets NULL
        extra += [exp.Not(this=exp.Is(this=lw.expr(a, node.schema), expression=exp.Null())) for a, _ in node.equi]
    elif node.strategy == "interval":
        b = node.bounds
        lt, rt = micros(c(b.left_time)), micros(c(b.right_time))
        extra.append(exp.Between(this=rt, low=exp.Add(this=lt, expression=lit(b.lower)),
                                 high=exp.Add(this=lt.copy(), expression=lit(b.upper))))
        if judges_interval_join(node):  # (Spark Structured Streaming judges with its own watermark)
            reach_l = exp.Add(this=lt.copy(), expression=lit(b.upper))
            reach_r = exp.Sub(this=rt.copy(), expression=lit(b.lower))
            extra.append(interval_pair_kept(reach_l, reach_r, _arrival(0), _arrival(1)))
    elif node.strategy == "window":
        ls, le, rs, re_ = node.window_columns
        extra += [exp.EQ(this=c(ls), expression=c(rs)), exp.EQ(this=c(le), expression=c(re_))]
    query = _join(_side(lw, node, 0), _side(lw, node, 1), _conditions(lw, node, *extra), node.kind)
    query.set("expressions", [c(n) for n in node.schema.names])
    return lw.add(query, node.schema.names)


def _temporal(lw, node: Join):
    table_scan = node.right
    keys = table_scan.source.primary_key
    changes = lw.changes(table_scan)
    right_names = dict(zip(table_scan.schema.names, node.right_names))
    vt = node.version_time
    # Versions: the table's changes without -U; per key and time the last change wins.
    last = window(exp.RowNumber(), [c(right_names[k]) for k in keys] + [c(vt)],
                  [exp.Ordered(this=c(FILE), desc=True), exp.Ordered(this=c(ROW), desc=True)])
    renamed = [alias(c(inner), out) for inner, out in right_names.items()]
    raw = exp.select(*renamed, c(OP), c(FILE), c(ROW)).from_(lw.use(changes)).where(
        exp.NEQ(this=c(OP), expression=lit(int(ChangeOp.UPDATE_BEFORE))))
    ranked = exp.select("*", alias(last, "__rn")).from_(sub(raw, "v"))
    versions = exp.select(*[c(n) for n in node.right_names], alias(exp.EQ(this=c(OP), expression=lit(int(ChangeOp.DELETE))), "__del"),
                          alias(micros(c(vt)), "__vt")).from_(sub(ranked, "k")).where(
        exp.EQ(this=c("__rn"), expression=lit(1)))
    # Valid until the next version of the same join key (the runtime's ASOF join matches on exactly these).
    partition = [lw.expr(b, node.schema) for _, b in node.equi]
    nxt = window(exp.Lead(this=c("__vt")), partition, [exp.Ordered(this=c("__vt"))])
    ranged = lw.add(exp.select("*", alias(nxt, "__vnext")).from_(sub(versions, "w")),
                    list(node.right_names) + ["__del", "__vt", "__vnext"])
    right = sub(exp.select("*").from_(lw.use(ranged)), "r")
    at = micros(c(node.as_of))
    valid = and_(exp.GTE(this=at, expression=c("__vt")),
                 exp.Or(this=exp.Is(this=c("__vnext"), expression=exp.Null()),
                        expression=exp.LT(this=at.copy(), expression=c("__vnext"))))
    if judges_temporal_join(node) and not lw.streaming(node):  # its next version at or below the row's watermark: cleaned up
        valid = and_(valid, exp.Or(this=exp.Is(this=c("__vnext"), expression=exp.Null()),
                                   expression=exp.GT(this=c("__vnext"), expression=_arrival(0))))
    on = and_(*[exp.EQ(this=lw.expr(a, node.schema), expression=lw.expr(b, node.schema)) for a, b in node.equi], valid)
    matched = exp.select("*").from_(_side(lw, node, 0)).join(right, on=on, join_type="LEFT")
    ok = and_(exp.Not(this=exp.Is(this=c("__vt"), expression=exp.Null())), exp.Not(this=c("__del")))
    if node.residual is not None:
        ok = and_(ok, exp.Coalesce(this=exp.Paren(this=lw.expr(node.residual, node.schema)),
                                   expressions=[exp.false()]))
    right_set = set(node.right_names)
    flagged = exp.select(*[c(n) for n in node.schema.names], alias(ok, "__ok")).from_(sub(matched, "m"))
    items = [alias(exp.Case(ifs=[exp.If(this=c("__ok"), true=c(n))]), n) if n in right_set else c(n)
             for n in node.schema.names]
    query = exp.select(*items).from_(sub(flagged, "t"))
    if node.kind == "inner":
        query = query.where(c("__ok"))
    return lw.add(query, node.schema.names)

