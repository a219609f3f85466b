"""Binding MATCH_RECOGNIZE: the clause after a FROM relation becomes a :class:`~logical.match.MatchRecognize`.

What dsms reads (a subset of Flink's, which is itself a subset of the SQL standard):

- ``PARTITION BY`` columns; ``ORDER BY`` the input's event-time attribute, ascending;
- ``MEASURES``: expressions over ``V.col`` (the last row of V), ``FIRST(V.col [, n])``,
  ``LAST(V.col [, n])``, ``SUM/AVG/MIN/MAX/COUNT`` of one variable's rows, bare columns (the
  match's last row) and ``MATCH_ROWTIME()``;
- ``ONE ROW PER MATCH``; ``AFTER MATCH SKIP`` PAST LAST ROW (the default), TO NEXT ROW, TO FIRST v,
  TO LAST v;
- ``PATTERN``: a sequence of variables with ``*``, ``+``, ``?``, ``{n}``, ``{n,}``, ``{n,m}``,
  ``{,m}``, greedy or reluctant (a trailing ``?``), and ``WITHIN INTERVAL ...``;
- ``DEFINE``: conditions on the current row, which may look back with ``PREV(col [, n])``.

Everything else is refused with a message that says what to write instead.
"""

from __future__ import annotations

import pyarrow as pa
from sqlglot import exp

from ...grammar.match_recognize import PatternError, parse_pattern
from ..aggregate_kinds import KINDS
from ..logical import nodes as L
from ..logical.match import ALL_ROWS, PREV, MatchRecognize, SkipTo, is_nav, nav, nav_parts
from ..timeutil import interval_micros
from ..types import Field, Schema, unique_name
from .aggregate import agg_type
from .context import BindContext, require_boolean
from .expressions import Scope, bind_scalar, col, infer_type, output_name

_AGGS = {exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX", exp.Count: "COUNT"}
_UNSUPPORTED = {"CLASSIFIER": "CLASSIFIER() is not supported (nor in Flink)",
                "MATCH_NUMBER": "MATCH_NUMBER() is not supported (nor in Flink)",
                "MATCH_PROCTIME": "MATCH_PROCTIME() is not supported: dsms matches on event time",
                "NEXT": "NEXT() is not supported (nor in Flink): a condition sees the rows up to the current one",
                "RUNNING": "RUNNING is not supported"}

_KINDS = {k.name: k for k in KINDS}  # the aggregates a measure may take, by name


def bind_match_recognize(node: L.Node, scope: Scope, mr: exp.MatchRecognize, ctx: BindContext) -> tuple[L.Node, Scope]:
    """The MATCH_RECOGNIZE node over ``node`` and the scope of its output (qualified by its alias)."""
    if node.changelog == L.UPDATING:
        raise ctx.error("MATCH_RECOGNIZE needs an append-only input (a stream)", mr)
    partition = tuple(_column(p, scope, ctx, "PARTITION BY") for p in mr.args.get("partition_by") or [])
    order = _order(mr, scope, ctx)
    rows = mr.args.get("rows")
    if rows is not None and rows.name != "ONE ROW PER MATCH":
        raise ctx.error(f"{rows.name} is not supported (nor in Flink)", mr, help="use ONE ROW PER MATCH")
    if mr.args.get("pattern") is None:
        raise ctx.error("MATCH_RECOGNIZE needs a PATTERN", mr)
    try:
        pattern = tuple(parse_pattern(mr.args["pattern"].name))
    except PatternError as e:
        raise ctx.error(str(e), mr) from None
    variables = tuple(dict.fromkeys(t.var.upper() for t in pattern))
    if len(variables) < len(pattern):
        raise ctx.error("a pattern variable appears twice in the PATTERN; as in Flink, each must be unique", mr,
                        help="give the second one another name and the same DEFINE condition")
    pattern = tuple(t.__class__(t.var.upper(), t.min, t.max, t.greedy) for t in pattern)
    _check_pattern(pattern, mr, ctx)
    defines = _defines(mr, variables, node.schema, ctx)
    skip = _skip(mr, variables, pattern, ctx)
    within = mr.args.get("within")
    within_us = interval_micros(within, ctx.source) if within is not None else None
    if within_us is not None and within_us <= 0:
        raise ctx.error("WITHIN needs a positive interval", within)
    measures, fields = _measures(mr, variables, partition, order, node.schema, ctx)
    out = MatchRecognize(node, partition, order, variables, pattern, defines, measures, fields, skip, within_us)
    alias = mr.args.get("alias")
    return out, Scope.of(out.schema, alias.name if alias is not None else None)


def _column(e: exp.Expression, scope: Scope, ctx: BindContext, clause: str) -> str:
    if not isinstance(e, exp.Column) or isinstance(e.this, exp.Star):
        raise ctx.error(f"{clause} of MATCH_RECOGNIZE takes column names", e)
    return scope.resolve(e, ctx.source).field.name


def _order(mr: exp.MatchRecognize, scope: Scope, ctx: BindContext) -> str:
    order = mr.args.get("order")
    keys = order.expressions if order is not None else []
    if not keys:
        raise ctx.error("MATCH_RECOGNIZE needs ORDER BY the event-time attribute", mr,
                        help="e.g. ORDER BY ts, where ts has a WATERMARK")
    if len(keys) > 1:
        raise ctx.error("MATCH_RECOGNIZE is ordered by the time attribute alone; rows with equal times are "
                        "taken in arrival order", keys[1])
    if keys[0].args.get("desc"):
        raise ctx.error("MATCH_RECOGNIZE is ordered by its time attribute ascending", keys[0])
    name = _column(keys[0].this, scope, ctx, "ORDER BY")
    field = scope.resolve(keys[0].this, ctx.source).field
    if not field.rowtime:
        raise ctx.error(f"'{name}' is not an event-time attribute; MATCH_RECOGNIZE is ordered by one", keys[0],
                        help="order by the column the source's WATERMARK is declared on")
    return name


def _check_pattern(pattern, mr, ctx: BindContext) -> None:
    if all(t.min == 0 for t in pattern):
        raise ctx.error("a PATTERN that can match no rows is not supported (as in Flink)", mr,
                        help="give at least one variable a quantifier that needs a row, e.g. A+ instead of A*")
    last = pattern[-1]
    if last.greedy and last.min != last.max:
        raise ctx.error(f"a greedy quantifier on the last variable ({last.describe()}) is not supported (as in "
                        "Flink): the match could always take one more row", mr,
                        help=f"make it reluctant ({last.describe()}?) or end the pattern with a variable whose "
                             "condition stops it")


def _skip(mr, variables, pattern, ctx: BindContext) -> SkipTo:
    after = mr.args.get("after")
    text = after.name if after is not None else "PAST LAST ROW"
    if text in ("PAST LAST ROW", "TO NEXT ROW"):
        return SkipTo(text)
    kind, var = text.rsplit(" ", 1)
    if var.upper() not in variables:
        raise ctx.error(f"AFTER MATCH SKIP {text}: '{var}' is not a pattern variable", mr,
                        help=f"the variables are {', '.join(variables)}")
    index = variables.index(var.upper())
    if kind == "TO FIRST" and pattern[0].var == var.upper() and pattern[0].min > 0:
        raise ctx.error(f"AFTER MATCH SKIP TO FIRST {var} would start the next match where this one started",
                        mr, help="skip TO NEXT ROW, or TO FIRST of a later variable")
    return SkipTo(kind, index)


def _defines(mr, variables, schema: Schema, ctx: BindContext) -> tuple[exp.Expression | None, ...]:
    conds: dict[str, exp.Expression] = {}
    for d in mr.args.get("define") or []:
        var = d.alias.upper()
        if var not in variables:
            raise ctx.error(f"DEFINE {d.alias}: '{d.alias}' is not a variable of the PATTERN", d)
        if var in conds:
            raise ctx.error(f"{d.alias} is defined twice", d)
        cond = _define_expr(d.this, var, variables, schema, ctx)
        require_boolean(without_prev(cond), schema, d.this, ctx)
        conds[var] = cond
    return tuple(conds.get(v) for v in variables)


def _define_expr(tree: exp.Expression, var: str, variables, schema: Schema, ctx: BindContext) -> exp.Expression:
    """A DEFINE condition over the current row: ``var.col`` and bare columns are the row, PREV looks back."""
    scope = Scope.of(schema, None)
    for node in tree.walk():
        if isinstance(node, exp.Column) and node.table and node.table.upper() != var:
            what = "another pattern variable" if node.table.upper() in variables else "an unknown variable"
            raise ctx.error(f"'{node.sql()}' refers to {what}; a DEFINE condition in dsms sees the current row "
                            "and the rows before it (PREV)", node,
                            help=f"write it over {var}.col and PREV({var}.col, n)")
        if isinstance(node, (exp.First, exp.Last, exp.AggFunc)):
            raise ctx.error(f"{node.sql_name()} in DEFINE is not supported; a condition sees the current row and "
                            "PREV(col, n)", node)
        if isinstance(node, exp.Anonymous) and node.name.upper() in _UNSUPPORTED:
            raise ctx.error(_UNSUPPORTED[node.name.upper()], node)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and node.name.upper() == "PREV":
            args = node.expressions
            if not args or len(args) > 2 or not isinstance(args[0], exp.Column):
                raise ctx.error("PREV takes a column and an optional offset: PREV(A.price [, n])", node)
            n = _offset(args[1] if len(args) > 1 else None, 1, node, ctx)
            return exp.Anonymous(this=PREV, expressions=[_bare(args[0], scope, ctx), exp.Literal.number(n)])
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return _bare(node, scope, ctx)
        return node

    bound = tree.copy().transform(rewrite)
    bind_scalar(without_prev(bound), scope, ctx.source, clause="DEFINE")  # checks the functions it calls
    return bound


def without_prev(tree: exp.Expression) -> exp.Expression:
    """``tree`` with each PREV(col, n) replaced by col (for checks and types)."""
    return tree.copy().transform(lambda n: n.expressions[0].copy()
                                 if isinstance(n, exp.Anonymous) and n.name == PREV else n)


def _bare(column: exp.Column, scope: Scope, ctx: BindContext) -> exp.Column:
    return col(scope.resolve(exp.Column(this=column.this.copy()), ctx.source).field.name)


def _offset(e: exp.Expression | None, default: int, node, ctx: BindContext) -> int:
    if e is None:
        return default
    if not (isinstance(e, exp.Literal) and e.is_int and int(e.name) >= 0):
        raise ctx.error("the offset must be a whole number literal", e)
    return int(e.name)


def _measures(mr, variables, partition, order, schema: Schema, ctx: BindContext):
    measures: list[tuple[str, exp.Expression]] = []
    fields: list[Field] = []
    taken = list(partition)
    scope = Scope.of(schema, None)
    for i, m in enumerate(mr.args.get("measures") or []):
        if m.args.get("window_frame") == "RUNNING":
            raise ctx.error(_UNSUPPORTED["RUNNING"], m, help="ONE ROW PER MATCH measures are FINAL")
        item = m.this
        inner = item.this if isinstance(item, exp.Alias) else item
        name = unique_name(output_name(item, i), taken)
        taken.append(name)
        bound = _measure_expr(inner, variables, scope, order, ctx)
        rowtime = _is_match_rowtime(inner)
        dtype = schema.find(order).type if rowtime else _measure_type(bound, schema, ctx)
        measures.append((name, bound))
        fields.append(Field(name, dtype, rowtime=rowtime))
    if not measures:
        raise ctx.error("MATCH_RECOGNIZE needs MEASURES", mr, help="e.g. MEASURES FIRST(A.ts) AS start_ts")
    return tuple(measures), tuple(fields)


def _is_match_rowtime(e: exp.Expression) -> bool:
    return isinstance(e, exp.Anonymous) and e.name.upper() == "MATCH_ROWTIME"


def _var_of(tree: exp.Expression, variables, ctx: BindContext) -> int:
    """The one pattern variable ``tree`` refers to (ALL_ROWS for none)."""
    found = {c.table.upper() for c in tree.find_all(exp.Column) if c.table}
    for v in found:
        if v not in variables:
            raise ctx.error(f"'{v}' is not a pattern variable", tree, help=f"the variables are {', '.join(variables)}")
    if len(found) > 1:
        raise ctx.error("an expression inside FIRST, LAST or an aggregate must use one pattern variable", tree)
    return variables.index(found.pop()) if found else ALL_ROWS


def _measure_expr(tree: exp.Expression, variables, scope: Scope, order: str, ctx: BindContext) -> exp.Expression:
    def strip(arg: exp.Expression) -> exp.Expression:
        return arg.copy().transform(lambda n: _bare(n, scope, ctx) if isinstance(n, exp.Column)
                                    and not isinstance(n.this, exp.Star) else n)

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, (exp.First, exp.Last)):
            n = _offset(node.args.get("expression"), 0, node, ctx)
            return nav("FIRST" if isinstance(node, exp.First) else "LAST", _var_of(node.this, variables, ctx),
                       strip(node.this), n)
        if type(node) in _AGGS:
            if node.args.get("distinct") or isinstance(node.this, exp.Distinct):
                raise ctx.error("DISTINCT aggregates are not supported in MATCH_RECOGNIZE (nor in Flink)", node)
            arg = node.this
            if isinstance(arg, exp.Star) or (isinstance(arg, exp.Column) and isinstance(arg.this, exp.Star)):
                var = variables.index(arg.table.upper()) if isinstance(arg, exp.Column) and arg.table \
                    and arg.table.upper() in variables else ALL_ROWS
                return nav("COUNT", var, None)
            return nav(_AGGS[type(node)], _var_of(arg, variables, ctx), strip(arg))
        if isinstance(node, exp.Anonymous):
            name = node.name.upper()
            if name == "MATCH_ROWTIME":
                return nav("MAX", ALL_ROWS, col(order))
            if name in _UNSUPPORTED or name == "PREV":
                raise ctx.error(_UNSUPPORTED.get(name, "PREV is for DEFINE; in MEASURES use LAST(A.col, n)"), node)
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return nav("LAST", _var_of(node, variables, ctx), _bare(node, scope, ctx))
        return node

    out = tree.copy().transform(rewrite)
    for node in out.walk():  # what is left besides navigations must be plain scalar SQL
        if isinstance(node, exp.AggFunc):
            raise ctx.error(f"{node.sql_name()} is not supported in MEASURES", tree,
                            help="use SUM, AVG, MIN, MAX or COUNT")
    return out


def _measure_type(bound: exp.Expression, schema: Schema, ctx: BindContext) -> pa.DataType:
    """The type of a measure: each navigation stands for a column of its value's type."""
    fields: list[Field] = []

    def placeholder(node: exp.Expression) -> exp.Expression:
        if not is_nav(node):
            return node
        how, _, arg, _ = nav_parts(node)
        arg_type = infer_type(arg, schema, ctx.source) if arg is not None else None
        dtype = arg_type if how in ("FIRST", "LAST") else agg_type(_KINDS[how], arg_type, node, ctx)
        name = f"__nav{len(fields)}"
        fields.append(Field(name, dtype))
        return col(name)

    probe = bound.copy().transform(placeholder)
    return infer_type(probe, Schema(tuple(fields)), ctx.source)
