"""Binding joins: FROM a [JOIN b ON ...]... -> left-deep Join nodes with a strategy each.

Every relation is bound first, so that the output names are fixed (a right
column whose name the left side already has becomes ``name0``, ``name1``
... as in Flink) and WHERE can be bound against all of them. Conjuncts of
WHERE that relate the two sides of an inner join (``FROM a, b WHERE a.id =
b.id AND b.ts BETWEEN ...``, as the Nexmark queries write them) become
part of that join's condition, unless a later RIGHT or FULL join could
pad their rows with NULLs.

The strategy of each join is decided here (see :mod:`logical.join`): it changes
what the join means on unbounded input, so it is part of binding, not an
optimization.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ...grammar import SqlError
from ..logical import nodes as L
from ..logical.join import Join, TimeBounds
from ..timeutil import interval_micros, node_span, parse_duration, state_ttl
from ..types import Schema, sql_name, unique_name
from .context import BindContext, require_boolean
from .expressions import Scope, ScopeColumn, bind_scalar, infer_type
from .from_clause import bind_relation, common_type

_FLIP = {exp.GT: exp.LT, exp.GTE: exp.LTE, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.EQ: exp.EQ}


def bind_joins(first: exp.Expression, joins: list[exp.Join], where: exp.Where | None,
               ctx: BindContext) -> tuple[L.Node, Scope, exp.Expression | None]:
    """Bind FROM with joins. Returns the plan, its scope, and what is left of WHERE (bound)."""
    rels = [bind_relation(first, ctx)] + [bind_relation(j.this, ctx) for j in joins]
    if first.args.get("version") is not None:
        raise ctx.error("FOR SYSTEM_TIME AS OF belongs to the right side of a join", first.args["version"])
    scopes, renames = _output_names(rels)
    full = Scope(tuple(c for s in scopes for c in s.columns))

    pending: list[exp.Expression] = []
    if where is not None:
        cond = bind_scalar(where.this, full, ctx.source, clause="WHERE")
        require_boolean(cond, _schema_of(rels, renames), where.this, ctx)
        pending = _conjuncts(cond)

    kinds = [_kind(j, ctx) for j in joins]
    node: L.Node = rels[0][0]
    for i, j in enumerate(joins):
        right, right_names = rels[i + 1][0], renames[i + 1]
        prefix = Scope(tuple(c for s in scopes[: i + 2] for c in s.columns))
        parts: list[exp.Expression] = []
        on = j.args.get("on")
        if on is not None:
            bound = bind_scalar(on, prefix, ctx.source, clause="ON")
            require_boolean(bound, _schema_of(rels[: i + 2], renames[: i + 2]), on, ctx)
            parts = _conjuncts(bound)
        kind = kinds[i]
        if kind == "inner" and all(k in ("inner", "left") for k in kinds[i + 1:]):
            moved = _between(pending, set(node.schema.names), set(right_names))
            parts += moved
            pending = [c for c in pending if not any(c is m for m in moved)]
        node = _join(node, right, right_names, kind, parts, j, Scope(tuple(c for s in scopes[: i + 1]
                                                                          for c in s.columns)), ctx)
    scope = Scope(tuple(ScopeColumn(c.qualifier, c.name, node.schema.find(c.field.name)) for c in full.columns))
    return node, scope, _and(pending)


def _schema_of(rels, renames) -> Schema:
    """The columns of the relations side by side, under their output names."""
    return Schema(tuple(f.renamed(n) for (node, _), names in zip(rels, renames)
                        for f, n in zip(node.schema, names)))


def _kind(j: exp.Join, ctx: BindContext) -> str:
    if j.args.get("method"):
        raise ctx.error(f"{j.args['method'].upper()} JOIN is not supported", j, help="write ON a.k = b.k")
    if j.args.get("using"):
        raise ctx.error("JOIN ... USING is not supported", j, help="write ON a.k = b.k")
    side = (j.args.get("side") or "").lower()
    kind = (j.args.get("kind") or "").lower()
    if kind in ("semi", "anti"):
        raise ctx.error(f"{kind.upper()} JOIN is not supported", j, help="use a join and a filter")
    if kind == "cross" or not side:
        if kind not in ("", "inner", "cross", "outer"):
            raise ctx.error(f"{kind.upper()} JOIN is not supported", j)
        return "inner"
    return side


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren) and isinstance(e.this, exp.And):
        return _conjuncts(e.this)
    return [e]


def _refs(e: exp.Expression) -> set[str]:
    return {c.name for c in e.find_all(exp.Column)}


def _lateness(node: L.Node) -> int:
    """The largest allowed lateness of the sources under ``node``."""
    out = 0
    for n in L.walk(node):
        if isinstance(n, L.Scan) and "allowed_lateness" in n.source.options:
            out = max(out, parse_duration(n.source.options["allowed_lateness"]))
    return out


def _table_like(node: L.Node) -> bool:
    """An updating relation read from tables (through filters and projections): lookup-join material."""
    if isinstance(node, L.Scan):
        return node.source.kind == "table"
    if isinstance(node, (L.Filter, L.Project)):
        return _table_like(node.input)
    return False


def _output_names(rels: list[tuple[L.Node, Scope]]) -> tuple[list[Scope], list[tuple[str, ...]]]:
    """Each relation's scope under its output names (unique over all relations, left to right), and those names."""
    taken: list[str] = []
    scopes: list[Scope] = []
    renames: list[tuple[str, ...]] = []
    for node, scope in rels:
        names = []
        for f in node.schema:
            names.append(unique_name(f.name, taken))
            taken.append(names[-1])
        renames.append(tuple(names))
        mapping = dict(zip(node.schema.names, names))
        scopes.append(Scope(tuple(ScopeColumn(c.qualifier, c.name, c.field.renamed(mapping[c.field.name]))
                                  for c in scope.columns)))
    return scopes, renames


def _between(conjuncts: list[exp.Expression], left_set: set[str], right_set: set[str]) -> list[exp.Expression]:
    """The WHERE conjuncts that compare the two sides of a join (an inner join takes them as its condition)."""
    return [c for c in conjuncts if _refs(c) <= left_set | right_set and _refs(c) & left_set and _refs(c) & right_set]


def _join(left: L.Node, right: L.Node, right_names: tuple[str, ...], kind: str, parts: list[exp.Expression],
          j: exp.Join, left_scope: Scope, ctx: BindContext) -> Join:
    rename = dict(zip(right_names, right.schema.names))
    equi, rest = _equi_and_rest(left, right, right_names, parts, j, ctx)
    common = dict(left=left, right=right, kind=kind, right_names=right_names,
                  lateness=max(_lateness(left), _lateness(right)))
    version = j.this.args.get("version") if isinstance(j.this, exp.Table) else None
    if version is not None:
        return _versioned(version, equi, rest, common, j, left_scope, ctx)

    both_append = left.changelog == L.APPEND and right.changelog == L.APPEND
    if both_append:
        timed = _time_join(left, right, rename, equi, rest, common, ctx, j)
        if timed is not None:
            return timed
    elif ctx.catalog.setting("join.stream_table") != "regular":
        lookup = _lookup_join(left, right, kind, equi, rest, common)
        if lookup is not None:
            return lookup
    return Join(**common, strategy="regular", equi=tuple(equi), residual=_and(rest),
                warning=_unbounded_state_warning(left, right, j, ctx))


def _equi_and_rest(left: L.Node, right: L.Node, right_names: tuple[str, ...], parts: list[exp.Expression],
                   j: exp.Join, ctx: BindContext) -> tuple[list[tuple[exp.Expression, exp.Expression]], list]:
    """The conjuncts ``left expr = right expr`` as (left, right) pairs (their types checked), and the others."""
    left_set, right_set = set(left.schema.names), set(right_names)

    def side(e: exp.Expression) -> str | None:
        refs = _refs(e)
        if refs and refs <= left_set:
            return "l"
        if refs and refs <= right_set:
            return "r"
        return None

    both = Schema(tuple(left.schema) + tuple(f.renamed(n) for f, n in zip(right.schema, right_names)))
    equi, rest = [], []
    for c in parts:
        if isinstance(c, exp.EQ) and {side(c.this), side(c.expression)} == {"l", "r"}:
            a, b = (c.this, c.expression) if side(c.this) == "l" else (c.expression, c.this)
            ta, tb = infer_type(a, both, ctx.source), infer_type(b, both, ctx.source)
            if common_type(ta, tb) is None and ta != tb:
                raise ctx.error(f"cannot join {sql_name(ta)} with {sql_name(tb)}", j,
                                help="CAST one side to the other's type")
            equi.append((a, b))
        else:
            rest.append(c)
    return equi, rest


def _time_join(left: L.Node, right: L.Node, rename: dict, equi: list, rest: list, common: dict,
               ctx: BindContext, j: exp.Join) -> Join | None:
    """Two streams joined on their windows (a window join) or within time bounds (an interval join), if they are."""
    window = _window_join(left, right, rename, equi, ctx, j)
    if window is not None:
        spec, cols, equi = window
        return Join(**common, strategy="window", equi=tuple(equi), residual=_and(rest), window=spec,
                    window_columns=cols)
    # ``l.ts = r.ts`` is both a key and a bound (of zero width).
    times = [exp.EQ(this=a, expression=b) for a, b in equi if isinstance(a, exp.Column) and isinstance(
        b, exp.Column) and left.schema.find(a.name).rowtime and right.schema.find(rename[b.name]).rowtime]
    bounds, rest2 = _time_bounds(left, right, rename, rest + times, ctx, j)
    rest2 = [c for c in rest2 if not any(c is t for t in times)]
    if bounds is not None:
        return Join(**common, strategy="interval", equi=tuple(equi), residual=_and(rest2), bounds=bounds,
                    warning=_empty_bounds_warning(bounds, common["kind"], j, ctx))
    return None


def _empty_bounds_warning(bounds: TimeBounds, kind: str, j: exp.Join, ctx: BindContext) -> str | None:
    """Bounds that no pair can meet: run as Flink does, but say so (refused when 'strict' is 'true')."""
    if bounds.lower <= bounds.upper:
        return None
    outcome = "returns no rows" if kind == "inner" else "pairs no rows: every outer row comes padded with NULLs"
    message = f"the join's time bounds can never hold together, so it {outcome}"
    if ctx.catalog.setting("strict") == "true":
        raise ctx.error(message + " (refused because 'strict' is 'true')", j)
    return message


def _lookup_join(left: L.Node, right: L.Node, kind: str, equi: list, rest: list, common: dict) -> Join | None:
    """A stream joined with a table as it is when each event arrives (``join.stream_table`` = 'lookup')."""
    if left.changelog == L.APPEND and _table_like(right) and kind in ("inner", "left"):
        return Join(**common, strategy="lookup", equi=tuple(equi), residual=_and(rest), stream_side="left")
    if right.changelog == L.APPEND and _table_like(left) and kind in ("inner", "right"):
        return Join(**common, strategy="lookup", equi=tuple(equi), residual=_and(rest), stream_side="right")
    return None


def _unbounded_state_warning(left: L.Node, right: L.Node, j: exp.Join, ctx: BindContext) -> str | None:
    """What to tell about a regular join over a stream without a state TTL (refused when 'strict' is 'true')."""
    streams = [n for n in (left, right) if n.changelog == L.APPEND]
    if not streams or state_ttl(ctx.catalog.setting("state.ttl")) is not None:
        return None
    what = "two streams" if len(streams) == 2 else "a stream"
    message = (f"this regular join of {what} keeps every row it has seen: its state grows without bound")
    if len(streams) == 2:
        help_ = ("add a time condition (an interval join: ON ... AND b.ts BETWEEN a.ts - INTERVAL '1' MINUTE "
                 "AND a.ts), join windows, or bound the state with SET 'state.ttl' = '1 h'")
    else:
        help_ = ("bound the state with SET 'state.ttl' = '1 h', or join each event with the table as it is "
                 "when the event arrives: JOIN t FOR SYSTEM_TIME AS OF PROCTIME() (a lookup join)")
    if ctx.catalog.setting("strict") == "true":
        raise ctx.error(message + " (refused because 'strict' is 'true')", j, help=help_)
    return f"{message}; {help_}"


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    """The conjunction of ``parts`` (each parenthesized where needed), or None."""
    return exp.and_(*parts, copy=False) if parts else None


# -- temporal and lookup joins (FOR SYSTEM_TIME AS OF) --------------------------------------

def _versioned(version: exp.Version, equi, rest, common: dict, j: exp.Join, left_scope: Scope,
               ctx: BindContext) -> Join:
    left, right, kind = common["left"], common["right"], common["kind"]
    at = version.expression
    if kind not in ("inner", "left"):
        raise ctx.error(f"a {kind.upper()} JOIN cannot use FOR SYSTEM_TIME AS OF", j,
                        help="temporal and lookup joins are INNER or LEFT joins")
    field = None
    if isinstance(at, exp.Column):
        field = left.schema.find(bind_scalar(at, left_scope, ctx.source, clause="FOR SYSTEM_TIME AS OF").name)
    if _on_processing_time(at, field):
        # A processing-time attribute: each event (or change of an updating left side, which keeps its kind)
        # meets the table as it is when it arrives.
        if right.changelog != L.UPDATING:
            raise ctx.error(f"FOR SYSTEM_TIME AS OF {at.sql()} needs a table (with a primary key) on the right",
                            j.this)
        return Join(**common, strategy="lookup", equi=tuple(equi), residual=_and(rest), stream_side="left")
    return _temporal(at, field, equi, rest, common, j, ctx)


def _on_processing_time(at: exp.Expression, field) -> bool:
    """Whether AS OF names processing time: PROCTIME() or a processing-time attribute of the left side."""
    return (isinstance(at, exp.Anonymous) and at.name.upper() == "PROCTIME" and not at.expressions
            or isinstance(at, exp.Func) and type(at).__name__.upper() == "PROCTIME"
            or field is not None and field.proctime)


def _temporal(at: exp.Expression, field, equi, rest, common: dict, j: exp.Join, ctx: BindContext) -> Join:
    """A temporal join: each event meets the version of a keyed, event-timed table as of its event time."""
    right = common["right"]
    source = right.source if isinstance(right, L.Scan) else None
    if source is None or source.kind != "table":
        raise ctx.error("FOR SYSTEM_TIME AS OF needs a table with a PRIMARY KEY on the right", j.this,
                        help="declare it with CREATE TABLE ... PRIMARY KEY (k) NOT ENFORCED")
    if source.watermark is None:
        raise ctx.error(f"table '{source.name}' has no event time, so it has no versions to choose from", j.this,
                        help="declare its version time: WATERMARK FOR ts AS ts - INTERVAL '5' SECOND "
                             "(or join without FOR SYSTEM_TIME AS OF for its current rows)")
    if field is None:
        raise ctx.error("FOR SYSTEM_TIME AS OF takes the left side's event-time column (a temporal join) or a "
                        "processing-time attribute (a lookup join)", at,
                        help="e.g. FOR SYSTEM_TIME AS OF o.ts, or FOR SYSTEM_TIME AS OF PROCTIME()")
    if not field.rowtime:
        raise ctx.error(f"'{at.sql()}' is not a time attribute of the left side", at,
                        help="use the stream's WATERMARK column (a temporal join), or a processing-time column "
                             "declared as pt AS PROCTIME() (a lookup join)")
    rename = dict(zip(right.schema.names, common["right_names"]))
    keyed = {b.name for _, b in equi if isinstance(b, exp.Column)}
    missing = [k for k in source.primary_key if rename[k] not in keyed]
    if missing:
        raise ctx.error(f"a temporal join needs the table's primary key in its condition; "
                        f"'{missing[0]}' is not compared with the left side", j,
                        help=f"add ON ... = {source.name}.{missing[0]}")
    return Join(**common, strategy="temporal", equi=tuple(equi), residual=_and(rest), as_of=field.name,
                version_time=rename[source.watermark.column])


# -- window joins --------------------------------------------------------------------------

def window_origin(node: L.Node, name: str) -> tuple[L.WindowSpec, str] | None:
    """The window a column holds the start or end of: (spec, 'window_start' | 'window_end'), or None."""
    while True:
        if isinstance(node, L.Project):
            e = dict(node.exprs).get(name)
            if not isinstance(e, exp.Column):
                return None
            node, name = node.input, e.name
        elif isinstance(node, L.Filter):
            node = node.input
        elif isinstance(node, L.WindowAggregate) and node.attached is not None:  # regrouped windows
            found = {node.attached_start: "window_start", "window_end": "window_end"}.get(name)
            return (node.attached, found) if found else None
        elif isinstance(node, (L.WindowTVF, L.WindowAggregate)):
            return (node.window, name) if name in ("window_start", "window_end") else None
        else:
            return None


def _same_windows(a: L.WindowSpec, b: L.WindowSpec) -> bool:
    return a.same_windows(b)


def _window_join(left, right, rename, equi, ctx, j):
    found: dict[str, tuple] = {}
    rest = []
    for a, b in equi:
        if isinstance(a, exp.Column) and isinstance(b, exp.Column):
            wa, wb = window_origin(left, a.name), window_origin(right, rename[b.name])
            if wa and wb and wa[1] == wb[1] and wa[1] not in found:
                found[wa[1]] = (wa[0], wb[0], a.name, b.name)
                continue
        rest.append((a, b))
    if set(found) != {"window_start", "window_end"}:
        return None
    (ls, rs, lstart, rstart), (le, re_, lend, rend) = found["window_start"], found["window_end"]
    if not (_same_windows(ls, rs) and _same_windows(le, re_) and _same_windows(ls, le)):
        raise ctx.error(f"a window join needs the same windows on both sides, not {ls.describe()} and "
                        f"{rs.describe()}", j)
    return ls, (lstart, lend, rstart, rend), rest


# -- interval joins ------------------------------------------------------------------------

def _time_term(e: exp.Expression, times: set[str], ctx) -> tuple[str, int] | None:
    """``col``, ``col + INTERVAL``, ``col - INTERVAL`` or ``INTERVAL + col`` over an event-time column."""
    if isinstance(e, exp.Paren):
        return _time_term(e.this, times, ctx)
    if isinstance(e, exp.Column):
        return (e.name, 0) if e.name in times else None
    if isinstance(e, (exp.Add, exp.Sub)):
        a, b = e.this, e.expression
        if isinstance(e, exp.Add) and isinstance(a, exp.Interval):
            a, b = b, a
        if isinstance(b, exp.Interval):
            inner = _time_term(a, times, ctx)
            if inner is not None:
                us = interval_micros(b, ctx.source)
                return inner[0], inner[1] + (us if isinstance(e, exp.Add) else -us)
    return None


def _time_bounds(left, right, rename, rest, ctx, j) -> tuple[TimeBounds | None, list]:
    lt = {f.name for f in left.schema if f.rowtime}
    rt = {n for n, orig in rename.items() if right.schema.find(orig).rowtime}
    comparisons = []  # (conjunct, [(left col, right col, lower, upper), ...])
    for c in rest:
        bounds = _conjunct_bounds(c, lt, rt, ctx, j)
        if bounds:
            comparisons.append((c, bounds))
    if not comparisons:
        return None, rest
    pair = (comparisons[0][1][0][0], comparisons[0][1][0][1])
    lower, upper, used = _tightest_bounds(comparisons, pair)
    if lower is None or upper is None:
        return None, rest  # one bound only: not an interval join (a regular join filters on it)
    # lower > upper: no pair can match; Flink runs it anyway (inner: nothing, outer: every row padded).
    remaining = [c for c in rest if not any(c is u for u in used)]
    return TimeBounds(pair[0], pair[1], lower, upper), remaining


def _conjunct_bounds(c: exp.Expression, lt: set[str], rt: set[str], ctx, j) -> list | None:
    """The time bounds one conjunct sets (a BETWEEN sets two), or None when it is not a time comparison."""
    pieces = [c]
    if isinstance(c, exp.Between):
        pieces = [exp.GTE(this=c.this, expression=c.args["low"]), exp.LTE(this=c.this, expression=c.args["high"])]
    bounds = []
    for p in pieces:
        try:
            b = _bound(p, lt, rt, ctx)
        except SqlError as e:  # the split BETWEEN has no place of its own: blame the condition
            if e.diagnostic.span is not None:
                raise
            raise SqlError(replace(e.diagnostic, span=node_span(c) or node_span(j), source=ctx.source)) from None
        if b is None:
            return None
        bounds.append(b)
    return bounds


def _tightest_bounds(comparisons: list, pair: tuple[str, str]) -> tuple[int | None, int | None, list]:
    """The largest lower and smallest upper bound the comparisons of ``pair``'s two columns set, and those
    comparisons (the ones the interval join takes over)."""
    lower, upper, used = None, None, []
    for c, bounds in comparisons:
        if any((b[0], b[1]) != pair for b in bounds):
            continue
        used.append(c)
        for _, _, lo, hi in bounds:
            lower = lo if lo is not None and (lower is None or lo > lower) else lower
            upper = hi if hi is not None and (upper is None or hi < upper) else upper
    return lower, upper, used


def _bound(p: exp.Expression, lt: set[str], rt: set[str], ctx):
    """A comparison of a left and a right event time: (left col, right col, lower, upper) on right - left."""
    cls = type(p)
    if cls not in _FLIP:
        return None
    a, b = _time_term(p.this, lt | rt, ctx), _time_term(p.expression, lt | rt, ctx)
    if a is None or b is None:
        return None
    if a[0] in lt and b[0] in rt:
        (lcol, la), (rcol, rb), op = a, b, cls
    elif a[0] in rt and b[0] in lt:
        (lcol, la), (rcol, rb), op = b, a, _FLIP[cls]
    else:
        return None
    # l + la  op  r + rb   <=>   r - l  (op flipped)  la - rb
    d = la - rb
    if op is exp.EQ:
        return lcol, rcol, d, d
    if op is exp.LTE:
        return lcol, rcol, d, None
    if op is exp.LT:
        return lcol, rcol, d + 1, None
    if op is exp.GTE:
        return lcol, rcol, None, d
    return lcol, rcol, None, d - 1
