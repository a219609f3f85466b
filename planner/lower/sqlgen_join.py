"""DuckDB statements for the join operators, over their state tables.

Each join keeps rows of its inputs in DuckDB tables of the job's
connection (named after the operator id) and joins every batch against
them in one statement, so matching is a hash join in DuckDB, never a loop
in Python. In every statement the left input's rows are aliased ``l`` and
the right input's ``r``; the join condition is rendered once over those
aliases. ``$1`` is the watermark the runtime passes (already reduced by
the allowed lateness).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..logical.join import Join
from ..physical.specs import BATCH
from ..vocabulary import OP, ChangeOp
from . import sqlgen as S
from .sqlgen_ttl import TtlSql, join_ttl, touch_keys
from .sqltree import (
    alias,
    asc,
    call,
    cast,
    col,
    cols,
    create_table,
    create_temp,
    delete_using,
    desc,
    group_by_all,
    insert,
    lit,
    render,
    row_number,
    same,
    select_from,
    sign,
    star,
    sub,
    table,
    union_all,
)

SEQ = "__seq"  # arrival number the runtime adds to the batches of a versioned table or an updating lookup stream
ID = "__id"  # row id the runtime adds to an outer side's batches (interval joins)
WATERMARK = exp.Placeholder(this="1")  # $1: the watermark the runtime passes


def _all(statements) -> tuple[str, ...]:
    return tuple(render(s) for s in statements)


def _delete_where(name: str, where: exp.Expression) -> exp.Delete:
    return exp.Delete(this=table(name), where=exp.Where(this=where))


def _below_watermark(e: exp.Expression) -> exp.Expression:
    return exp.LT(this=e, expression=WATERMARK.copy())


def _at_most_watermark(e: exp.Expression) -> exp.Expression:
    return exp.LTE(this=e, expression=WATERMARK.copy())


@dataclass
class JoinSql:
    """Names, column lists and the condition of one join operator, as sqlglot trees."""

    node: Join
    op_id: int
    schemas: tuple[pa.Schema, pa.Schema]  # the input operators' schemas (without __op)

    def output_schema(self) -> pa.Schema:
        return pa.schema([pa.field(f.name, f.type, f.nullable) for f in self.out_fields])

    def __post_init__(self):
        n = self.node
        self.cols = tuple(tuple(f.name for f in s) for s in self.schemas)
        # output name -> (alias, input column); inputs carry only the columns the plan uses
        self.source = {o: ("l" if side == 0 else "r", inner) for o in n.schema.names
                       for side, inner in [n.input_name(o)]}
        self.out_names = [o for o in n.schema.names if self.source[o][1] in self.cols[0 if self.source[o][0] == "l"
                                                                                     else 1]]
        self.out_fields = [n.schema.find(o) for o in self.out_names]
        self.preserved = (n.kind in ("left", "full"), n.kind in ("right", "full"))

    def table(self, tag: str) -> str:
        return f"__j{tag}_{self.op_id}"

    def ref(self, out: str) -> exp.Column:
        alias_, name = self.source[out]
        return col(name, alias_)

    def expr(self, e: exp.Expression) -> exp.Expression:
        """A bound expression over output names, over the aliases l and r."""
        typed = S.typed(e, self.node.schema)

        def qualify(c: exp.Expression) -> exp.Expression:
            if isinstance(c, exp.Column):
                return self.ref(c.name)
            return c

        return typed.transform(qualify)

    def condition(self, *extra: exp.Expression, residual: bool = True) -> exp.Expression:
        parts = [exp.EQ(this=self.expr(a), expression=self.expr(b)) for a, b in self.node.equi]
        parts += list(extra)
        if residual and self.node.residual is not None:
            parts.append(exp.Paren(this=self.expr(self.node.residual)))
        return exp.and_(*parts) if parts else exp.true()

    def outputs(self, null_left: bool = False, null_right: bool = False) -> list[exp.Expression]:
        """The output columns from l and r; a padded side's as typed NULLs."""
        items = []
        for f, name in zip(self.out_fields, self.out_names):
            side = self.source[name][0]
            if (side == "l" and null_left) or (side == "r" and null_right):
                items.append(alias(cast(exp.Null(), f.type), name))
            else:
                items.append(alias(self.ref(name), name))
        return items

    def columns(self, side: int, *extra: tuple[str, str]) -> list[tuple[str, object]]:
        """A state table's columns: the side's, then ``extra`` (name, SQL type) pairs."""
        return [(f.name, f.type) for f in self.schemas[side]] + list(extra)

    def column_list(self, side: int, alias_: str | None = None) -> list[exp.Column]:
        return cols(self.cols[side], alias_)

    def same_row(self, side: int, a: str, b: str) -> exp.Expression:
        return same(a, b, self.cols[side])


def epoch(alias_: str, column: str) -> exp.Expression:
    return call("epoch_us", col(column, alias_))


def _t(alias_: str) -> exp.Column:
    return exp.column("__t", alias_)


def _plus(e: exp.Expression, n: int) -> exp.Expression:
    return exp.Add(this=e, expression=exp.Paren(this=lit(n) if n >= 0 else exp.Neg(this=lit(-n))))


def _minus(e: exp.Expression, n: int) -> exp.Expression:
    return exp.Sub(this=e, expression=exp.Paren(this=lit(n) if n >= 0 else exp.Neg(this=lit(-n))))


def _join(left: exp.Expression, right: exp.Expression, on: exp.Expression, how: str = "") -> exp.Select:
    """``SELECT FROM left <how> JOIN right ON on`` (items added by the caller)."""
    return exp.select().from_(left).join(right, on=on, join_type=how or None)


# -- interval join -------------------------------------------------------------------------

def interval_join_sql(j: JoinSql) -> dict:
    """The interval join's statements. Every row keeps ``__t`` (its time) and ``__w`` (its input's watermark
    when it arrived; the smallest possible where its input is not judged here). A pair that meets the join
    condition is joined unless the row that came later had a watermark past the last time the other could
    still find a partner (:func:`interval_pair_kept`); a row expires once the watermark has passed that
    time and its own ``__w`` (runtime/operators/interval_join.py)."""
    b = j.node.bounds
    times = (j.source[b.left_time][1], j.source[b.right_time][1])
    tables = (j.table("l"), j.table("r"))
    extra = [[("__t", "BIGINT"), ("__w", "BIGINT")] + ([(ID, "BIGINT"), ("__m", "BOOLEAN")] if j.preserved[s] else [])
             for s in (0, 1)]
    setup = tuple(render(create_table(tables[s], j.columns(s, *extra[s]))) for s in (0, 1))

    # A left row can meet right rows up to l.ts + upper; a right row left rows up to r.ts - lower.
    def reach(s: int, alias_: str | None = None) -> exp.Expression:
        t = exp.column("__t", alias_) if alias_ else exp.column("__t")
        return _plus(t, b.upper) if s == 0 else _minus(t, b.lower)

    bound = exp.Between(this=_t("r"), low=_plus(_t("l"), b.lower), high=_plus(_t("l"), b.upper))
    cond = j.condition(bound, interval_pair_kept(reach(0, "l"), reach(1, "r")))
    on_batch = []
    for s in (0, 1):
        own, other = ("l", "r") if s == 0 else ("r", "l")
        batch = sub(select_from(BATCH, None, star(), exp.alias_(epoch(BATCH, times[s]), "__t")), own)
        pair = _join(batch, table(tables[1], "r"), cond) if s == 0 else _join(table(tables[0], "l"), batch, cond)
        kept = (*j.column_list(s), epoch(BATCH, times[s]), exp.column("__w"))
        stored = insert(tables[s], select_from(BATCH, None, *kept))
        if not any(j.preserved):
            on_batch.append(_all([stored, pair.select(*j.outputs())]))
            continue
        matches = j.table("m")
        ids = [exp.alias_(exp.column(ID, "l") if j.preserved[0] else exp.Null(), "__lid"),
               exp.alias_(exp.column(ID, "r") if j.preserved[1] else exp.Null(), "__rid")]
        stmts: list[exp.Expression] = [create_temp(matches, pair.select(*j.outputs(), *ids))]
        if j.preserved[1 - s]:
            other_id = "__rid" if s == 0 else "__lid"
            stmts.append(exp.Update(this=table(tables[1 - s]), expressions=[exp.EQ(this=exp.column("__m"),
                                                                                    expression=exp.true())],
                                    where=exp.Where(this=exp.column(ID).isin(query=select_from(
                                        matches, None, exp.column(other_id))))))
        if j.preserved[s]:
            own_id = "__lid" if s == 0 else "__rid"
            matched = exp.column(ID).isin(query=select_from(matches, None, exp.column(own_id)))
            stmts.append(insert(tables[s], select_from(BATCH, None, *kept, exp.column(ID), matched)))
        else:
            stmts.append(stored)
        stmts.append(select_from(matches, None, *cols(j.out_names)))
        on_batch.append(_all(stmts))

    def expiring(s: int, alias_: str | None = None) -> exp.Expression:
        """No row still to come can pair with it: the watermark is past its reach and its own ``__w``."""
        w = exp.column("__w", alias_) if alias_ else exp.column("__w")
        return _below_watermark(exp.func("GREATEST", reach(s, alias_), _minus(w, 1)))

    expire, min_time, unmatched = [], [], []
    for s in (0, 1):
        alias_ = "l" if s == 0 else "r"
        padded = ""
        if j.preserved[s]:
            padded = render(select_from(tables[s], alias_, *j.outputs(null_left=s == 1, null_right=s == 0)).where(
                exp.and_(expiring(s, alias_), exp.Not(this=exp.column("__m", alias_)))))
        expire.append((padded, render(_delete_where(tables[s], expiring(s)))))
        min_time.append(render(select_from(tables[s], None, exp.Min(this=exp.func(
            "GREATEST", reach(s), _minus(exp.column("__w"), 1))))))
        # An inner side's rows that came too late to wait (their __w at or past their reach) and found no
        # partner: the rows the join drops as late. Counted as they expire, before either side's rows go.
        other = "r" if s == 0 else "l"
        partner = exp.Exists(this=select_from(tables[1 - s], other, lit(1)).where(cond))
        unmatched.append("" if j.preserved[s] else render(select_from(tables[s], alias_, exp.func("COUNT", exp.Star()))
                                                          .where(exp.and_(expiring(s, alias_), exp.GTE(
                                                              this=exp.column("__w", alias_), expression=reach(s, alias_)),
                                                              exp.Not(this=partner)))))
    return dict(setup=setup, state_tables=tables, on_batch=tuple(on_batch), expire=tuple(expire),
                min_time=tuple(min_time), times=times, unmatched=tuple(unmatched))


def interval_pair_kept(reach_l: exp.Expression, reach_r: exp.Expression, wl: exp.Expression | None = None,
                       wr: exp.Expression | None = None) -> exp.Expression:
    """Whether Flink's ``TimeIntervalJoin`` joins a pair that meets the join condition, judged with each row's
    input watermark at arrival (``wl``, ``wr``; by default ``l.__w``, ``r.__w``).

    Flink joins a row with the other input's rows still in its cache, and caches a row only while the other
    input's time is below the last time a partner could have (its reach). Taking each row's own watermark
    for that time, the row with the larger watermark came later, so the pair is lost when that watermark is
    past the other row's reach (on a tie, when it is past either reach)::

        lost = (wl > reach_r AND wl >= wr) OR (wr > reach_l AND wr >= wl)

    A row on time (its time at or above its watermark) is never past a partner's reach, so only late rows
    lose pairs, and only their watermark need be exact.
    """
    wl = wl if wl is not None else exp.column("__w", "l")
    wr = wr if wr is not None else exp.column("__w", "r")
    lost = exp.or_(exp.and_(exp.GT(this=wl, expression=reach_r), exp.GTE(this=wl.copy(), expression=wr)),
                   exp.and_(exp.GT(this=wr.copy(), expression=reach_l), exp.GTE(this=wr.copy(), expression=wl.copy())))
    return exp.Not(this=exp.Paren(this=lost))


# -- window join ---------------------------------------------------------------------------

def window_join_sql(j: JoinSql) -> dict:
    ls, le, rs, re_ = j.node.window_columns
    tables = (j.table("l"), j.table("r"))
    ends = (j.source[le][1], j.source[re_][1])
    setup = tuple(render(create_table(tables[s], j.columns(s, ("__we", "BIGINT")))) for s in (0, 1))
    on_batch = tuple(render(insert(tables[s], select_from(BATCH, None, *j.column_list(s), epoch(BATCH, ends[s]))))
                     for s in (0, 1))
    how = {"inner": "", "left": "LEFT", "right": "RIGHT", "full": "FULL"}[j.node.kind]
    cond = j.condition(exp.EQ(this=j.ref(ls), expression=j.ref(rs)), exp.EQ(this=j.ref(le), expression=j.ref(re_)))
    closed = [sub(select_from(tables[s], None, star()).where(_at_most_watermark(exp.column("__we"))), a)
              for s, a in ((0, "l"), (1, "r"))]
    fire = (render(_join(closed[0], closed[1], cond, how).select(*j.outputs())),
            render(_delete_where(tables[0], _at_most_watermark(exp.column("__we")))),
            render(_delete_where(tables[1], _at_most_watermark(exp.column("__we")))))
    least = [exp.Subquery(this=select_from(t, None, exp.Min(this=exp.column("__we")))) for t in tables]
    min_end = render(exp.select(exp.Least(this=least[0], expressions=[least[1]], ignore_nulls=True)))
    return dict(setup=setup, state_tables=tables, on_batch=on_batch, fire=fire, min_end=min_end, ends=ends)


# -- temporal join -------------------------------------------------------------------------

def temporal_join_sql(j: JoinSql, keys: tuple[str, ...], updating: bool = False, judged: bool = False) -> dict:
    """``keys``: the versioned table's primary key (its input column names). ``updating``: the left side carries
    row kinds (and its rows an arrival number, ``SEQ``): each change is joined and emitted with its kind, in order.
    ``judged``: the left rows are judged here, each with its input's watermark at arrival (``__w``): as Flink's
    ``TemporalRowTimeJoinOperator`` keeps, per key, only the newest version at or below the watermark and the
    newer ones, a left row older than that version finds none. An inner join's fired rows then include the
    late rows (behind ``__w``) that found no version, flagged ``__drop``, for the operator to count and drop."""
    n = j.node
    left_time, version_time = j.source[n.as_of][1], j.source[n.version_time][1]
    buffer, versions, batch = j.table("l"), j.table("v"), j.table("b")
    K = list(keys)
    kinds = (("__op", "TINYINT"), ("__seq", "BIGINT")) if updating else ()
    setup = (render(create_table(buffer, j.columns(0, ("__t", "BIGINT"), ("__w", "BIGINT"), *kinds))),
             render(create_table(versions, j.columns(1, ("__t", "BIGINT"), ("__del", "BOOLEAN")))))
    carried = (col(OP), col(SEQ)) if updating else ()
    on_left = (render(insert(buffer, select_from(BATCH, None, *j.column_list(0), epoch(BATCH, left_time),
                                                 exp.column("__w"), *carried))),)
    # Versions by (key, time): the last change at a time wins; -U rows are replaced by their +U.
    latest = row_number([*cols(K), epoch(BATCH, version_time)], [desc(exp.column(SEQ))])
    ranked = select_from(BATCH, None, *j.column_list(1), exp.alias_(epoch(BATCH, version_time), "__t"),
                         exp.alias_(exp.EQ(this=col(OP), expression=lit(int(ChangeOp.DELETE))), "__del"),
                         exp.alias_(latest, "__rn")) \
        .where(exp.NEQ(this=col(OP), expression=lit(int(ChangeOp.UPDATE_BEFORE))))
    replaced = exp.and_(*[exp.EQ(this=col(k, versions), expression=col(k, "b")) for k in K],
                        exp.EQ(this=exp.column("__t", versions), expression=exp.column("__t", "b")))
    on_right = (
        render(create_temp(batch, select_from(sub(ranked, "v"), None, exp.Star(except_=[exp.column("__rn")]))
                           .where(exp.EQ(this=exp.column("__rn"), expression=lit(1))))),
        render(delete_using(versions, table(batch, "b"), replaced)),
        render(insert(versions, select_from(batch, None, star()))),
    )
    ok = exp.and_(exp.Not(this=exp.Is(this=_t("r"), expression=exp.Null())), exp.Not(this=exp.column("__del", "r")))
    if n.residual is not None:
        ok = exp.and_(ok, exp.func("COALESCE", j.expr(n.residual), exp.false()))
    asof = j.condition(exp.GTE(this=_t("l"), expression=_t("r")), residual=False)
    # A left row waits until the watermark passes its time and, if it came late, the watermark it came at:
    # every version up to there has arrived then.
    due = exp.func("GREATEST", exp.column("__t"), exp.column("__w"))
    pending = sub(select_from(buffer, None, star()).where(_below_watermark(due)), "l")
    late: list[exp.Expression] = []
    if judged:
        # The newest version at or below the row's watermark (``__wt``): a row older than it finds no version.
        newest = j.condition(exp.GTE(this=exp.column("__w", "l"), expression=_t("r")), residual=False)
        pending = sub(_join(pending, table(versions, "r"), newest, "ASOF LEFT").select(
            star("l"), exp.alias_(_t("r"), "__wt")), "l")
        cleaned = exp.func("COALESCE", exp.GT(this=exp.column("__wt", "l"), expression=_t("l")), exp.false())
        ok = exp.and_(ok, exp.Not(this=cleaned))
        late = [exp.alias_(exp.LT(this=_t("l"), expression=exp.column("__w", "l")), "__late")]
    kept = (exp.alias_(exp.column("__op", "l"), OP), exp.column("__seq", "l")) if updating else ()
    inner = _join(pending, table(versions, "r"), asof, "ASOF LEFT").select(*j.outputs(), exp.alias_(ok, "__ok"),
                                                                           *late, *kept)
    right_out = set(n.right_names)
    items = [alias(exp.Case(ifs=[exp.If(this=exp.column("__ok"), true=col(c))]), c) if c in right_out else col(c)
             for c in j.out_names]
    fired = select_from(sub(inner, "m"), None, *items, *((col(OP),) if updating else ()),
                        *((exp.alias_(exp.Not(this=exp.column("__ok")), "__drop"),) if judged and n.kind == "inner"
                          else ()))
    if n.kind == "inner":  # a late row without a version stays, to be counted (and then dropped)
        fired = fired.where(exp.or_(exp.column("__ok"), exp.column("__late")) if judged else exp.column("__ok"))
    if updating:  # a retraction before the row that replaces it
        fired = fired.order_by(exp.column("__seq"))
    fire = (render(fired), render(_delete_where(buffer, _below_watermark(due.copy()))))
    # Keep, per key, the last version before the watermark (unless it is a delete) and all newer ones.
    older = select_from(versions, None, exp.column("rowid"), exp.column("__del"), exp.alias_(
        row_number(cols(K), [desc(exp.column("__t"))]), "__rn")).where(_below_watermark(exp.column("__t")))
    superseded = select_from(sub(older, "p"), None, exp.column("rowid")).where(exp.or_(
        exp.GT(this=exp.column("__rn"), expression=lit(1)), exp.column("__del")))
    prune = (render(_delete_where(versions, exp.column("rowid").isin(query=superseded))),)
    return dict(setup=setup, state_tables=(buffer, versions), on_batch=(on_left, on_right), fire=fire,
                prune=prune, min_time=render(select_from(buffer, None, exp.Min(this=due.copy()))),
                time=left_time)


# -- multisets (lookup and regular joins) ----------------------------------------------------

def merge_into(j: JoinSql, side: int, name: str, delta: str, count: str) -> tuple[exp.Expression, ...]:
    """Add a batch's signed rows (``delta`` with the count column ``count``) into a multiset table."""
    merged = j.table(f"x{side}")
    held = select_from(name, "t", star("t")).join(table(delta, "d"), on=j.same_row(side, "t", "d"), join_type="semi")
    added = select_from(delta, None, *j.column_list(side), exp.column(count))
    return (
        create_temp(merged, group_by_all(select_from(sub(union_all(held, added), "u"), None, *j.column_list(side),
                                                     exp.alias_(exp.Sum(this=exp.column("__n")), "__n")))),
        delete_using(name, table(merged, "m"), j.same_row(side, name, "m")),
        insert(name, select_from(merged, None, star()).where(exp.GT(this=exp.column("__n"), expression=lit(0)))),
    )


def lookup_join_sql(j: JoinSql, updating: bool = False) -> dict:
    """``updating``: the stream side is a changelog (its rows carry their kind and, added by the runtime, their
    arrival number ``SEQ``): each change is looked up as it comes and emitted with its own kind, in order."""
    s = 0 if j.node.stream_side == "left" else 1
    t = 1 - s
    name, delta = j.table("t"), j.table("d")
    setup = (render(create_table(name, j.columns(t, ("__n", "BIGINT")))),)
    signed = group_by_all(select_from(BATCH, None, *j.column_list(t), exp.alias_(exp.Sum(this=sign(True)), "__n")))
    update = _all([create_temp(delta, signed), *merge_into(j, t, name, delta, "__n")])
    outer = j.node.kind != "inner"
    table_alias = "r" if s == 0 else "l"
    how = ("LEFT" if s == 0 else "RIGHT") if outer else ""
    pair = _join(table(BATCH, "l"), table(name, "r"), j.condition(), how) if s == 0 else \
        _join(table(name, "l"), table(BATCH, "r"), j.condition(), how)
    # A table row held n times joins n times.
    times = exp.alias_(exp.Explode(this=call("range", exp.func("COALESCE", exp.column("__n", table_alias), lit(1)))),
                       "__i")
    stream_alias = "l" if s == 0 else "r"
    kept = (exp.alias_(col(OP, stream_alias), OP), exp.alias_(col(SEQ, stream_alias), SEQ)) if updating else ()
    joined = select_from(sub(pair.select(*j.outputs(), times, *kept), "m"), None, *cols(j.out_names),
                         *((col(OP),) if updating else ()))
    if updating:  # a retraction before the row that replaces it
        joined = joined.order_by(asc(col(SEQ)))
    return dict(setup=setup, state_tables=(name,), update=update, lookup=(render(joined),))


def external_lookup_sql(j: JoinSql, updating: bool = False) -> dict:
    """A lookup join whose table is fetched by key (``ExternalLookup``): the cache is the join's table, with
    the time each row was fetched; the keys of an event batch are found with ``key_sql``."""
    s = 0 if j.node.stream_side == "left" else 1
    t = 1 - s
    sql = lookup_join_sql(j, updating)
    name, misses = j.table("t"), j.table("m")
    stream_alias = "l" if s == 0 else "r"
    pairs = [(a, b) if s == 0 else (b, a) for a, b in j.node.equi]  # (stream expression, table column)
    keys = tuple(j.source[b.name][1] for _, b in pairs)
    key_types = {f.name: f.type for f in j.schemas[t]}
    items = [alias(j.expr(a), k) for (a, _), k in zip(pairs, keys)]
    not_null = exp.and_(*[exp.Not(this=exp.Is(this=j.expr(a), expression=exp.Null())) for a, _ in pairs])
    setup = (render(create_table(name, j.columns(t, ("__n", "BIGINT"), ("__fetched", "BIGINT")))),
             render(create_table(misses, [(k, key_types[k]) for k in keys] + [("__fetched", "BIGINT")])))
    key_sql = select_from(BATCH, stream_alias, *items).distinct().where(not_null)
    return dict(setup=setup, state_tables=(name, misses), lookup=sql["lookup"], keys=keys, misses=misses,
                key_sql=render(key_sql))


def regular_join_sql(j: JoinSql, updating: tuple[bool, bool], ttl_us: int = 0) -> dict:
    """``updating``: whether each input carries retractions. ``ttl_us``: SET 'state.ttl' (see lower/sqlgen_ttl.py)."""
    tables = (j.table("l"), j.table("r"))
    setup = tuple(render(create_table(tables[s], j.columns(s, ("__n", "BIGINT")))) for s in (0, 1))
    keys = ([j.expr(a) for a, _ in j.node.equi], [j.expr(b) for _, b in j.node.equi])
    ttl, key_table = TtlSql(), ""
    if ttl_us:
        ttl, key_table = join_ttl(j.op_id, tables, keys[0], keys[1], ttl_us)
        setup += ttl.setup
    on_batch = []
    for s in (0, 1):
        own, other = ("l", "r") if s == 0 else ("r", "l")
        delta, out = j.table("d"), j.table("o")
        cond = j.condition()

        def pair(rows: str, s: int = s, cond: exp.Expression = cond) -> exp.Select:
            """The batch's rows (``rows``) on its side, joined with the other side's table."""
            return _join(table(rows, "l"), table(tables[1], "r"), cond) if s == 0 else \
                _join(table(tables[0], "l"), table(rows, "r"), cond)

        if not any(updating) and not any(j.preserved):
            # Two streams, inner: every match is new, nothing is ever retracted.
            touch = touch_keys(j.op_id, key_table, BATCH, own, keys[s]) if ttl_us else ()
            on_batch.append((render(insert(tables[s], select_from(BATCH, None, *j.column_list(s), lit(1)))), *touch,
                             render(pair(BATCH).select(*j.outputs()))))
            continue
        touch = touch_keys(j.op_id, key_table, delta, own, keys[s]) if ttl_us else ()
        kinds = [exp.alias_(sign(True), "__sg"), exp.alias_(col(OP), "__k")] if updating[s] else \
            [exp.alias_(lit(1), "__sg"), exp.alias_(lit(int(ChangeOp.INSERT)), "__k")]
        own_sg = exp.column("__sg", own)
        stmts: list[exp.Expression] = [
            create_temp(delta, select_from(BATCH, None, *j.column_list(s), *kinds)),
            create_temp(out, pair(delta).select(*j.outputs(), exp.alias_(exp.Mul(
                this=own_sg, expression=exp.column("__n", other)), "__n"), exp.column("__k", own))),
        ]
        if ttl_us and updating[s]:  # a retraction of an expired row: nothing to retract
            held = exp.Exists(this=select_from(tables[s], "t", lit(1)).where(j.same_row(s, "t", delta)))
            added = exp.Exists(this=select_from(delta, "t", lit(1)).where(exp.and_(
                exp.GT(this=exp.column("__sg", "t"), expression=lit(0)), j.same_row(s, "t", delta))))
            stmts.insert(1, _delete_where(delta, exp.and_(exp.LT(this=exp.column("__sg"), expression=lit(0)),
                                                          exp.Not(this=held), exp.Not(this=added))))
        if j.preserved[s]:  # own rows without a match, padded
            anti = _join(table(delta, "l"), table(tables[1], "r"), cond, "ANTI") if s == 0 else \
                _join(table(delta, "r"), table(tables[0], "l"), cond, "ANTI")
            stmts.append(insert(out, anti.select(*j.outputs(null_left=s == 1, null_right=s == 0), own_sg.copy(),
                                                 exp.column("__k", own))))
        if j.preserved[1 - s]:  # the other side's rows that gain their first match or lose their last
            touched, counted = j.table("a"), j.table("c")
            yid = exp.column("rowid", other)
            same_id = exp.EQ(this=exp.column("rowid", other), expression=exp.column("__yid", "q"))
            old = exp.column("__old", "q")
            first = exp.EQ(this=old, expression=lit(0))
            stmts += [
                create_temp(touched, pair(delta).select(exp.alias_(yid, "__yid"), exp.alias_(
                    exp.Sum(this=own_sg.copy()), "__delta")).group_by(yid.copy())),
                create_temp(counted, select_from(touched, "q", exp.column("__yid", "q"), exp.column("__delta", "q"),
                                                 exp.alias_(exp.func("COALESCE", exp.Sum(this=exp.column("__n", own)),
                                                                     lit(0)), "__old"))
                            .join(table(tables[1 - s], other), on=same_id)
                            .join(table(tables[s], own), on=cond.copy(), join_type="left")
                            .group_by(exp.column("__yid", "q"), exp.column("__delta", "q"))),
                insert(out, select_from(counted, "q", *j.outputs(null_left=s == 0, null_right=s == 1),
                                        exp.Case(ifs=[exp.If(this=first, true=exp.Neg(this=exp.column("__n", other)))],
                                                 default=exp.column("__n", other)),
                                        exp.Case(ifs=[exp.If(this=first.copy(), true=lit(int(ChangeOp.DELETE)))],
                                                 default=lit(int(ChangeOp.INSERT))))
                       .join(table(tables[1 - s], other), on=same_id.copy())
                       .where(exp.NEQ(this=exp.Paren(this=first.copy()), expression=exp.Paren(this=exp.EQ(
                           this=exp.Add(this=old.copy(), expression=exp.column("__delta", "q")), expression=lit(0)))))),
            ]
        if updating[s]:
            stmts += list(merge_into(j, s, tables[s], delta, "__sg"))
        else:
            stmts.append(insert(tables[s], select_from(delta, None, *j.column_list(s), lit(1))))
        on_batch.append(_all(stmts) + touch + (render(_net_changes(j, out)),))
    return dict(setup=setup, state_tables=tables + ttl.tables, on_batch=tuple(on_batch), expire=ttl.expire,
                oldest=ttl.oldest)


def _net_changes(j: JoinSql, out: str) -> exp.Select:
    """The net change of each output row: retractions first, a row held n times emitted n times."""
    names = cols(j.out_names)
    net, upd = exp.column("__net"), exp.column("__upd")
    updates = exp.In(this=exp.column("__k"), expressions=[lit(int(ChangeOp.UPDATE_BEFORE)),
                                                          lit(int(ChangeOp.UPDATE_AFTER))])
    grouped = group_by_all(select_from(out, None, *names, exp.alias_(cast(exp.Sum(this=exp.column("__n")), "BIGINT"),
                                                                      "__net"),
                                       exp.alias_(exp.LogicalOr(this=updates), "__upd")))
    each = select_from(sub(grouped, "g"), None, *[n.copy() for n in names], net, upd, exp.alias_(
        exp.Explode(this=call("range", exp.Abs(this=net.copy()))), "__i")).where(
        exp.NEQ(this=net.copy(), expression=lit(0)))

    def pick(update: ChangeOp, plain: ChangeOp) -> exp.Case:
        return exp.Case(ifs=[exp.If(this=upd.copy(), true=lit(int(update)))], default=lit(int(plain)))

    kind = exp.Case(ifs=[exp.If(this=exp.GT(this=net.copy(), expression=lit(0)),
                                true=pick(ChangeOp.UPDATE_AFTER, ChangeOp.INSERT))],
                    default=pick(ChangeOp.UPDATE_BEFORE, ChangeOp.DELETE))
    return select_from(sub(each, "e"), None, *[n.copy() for n in names], alias(cast(kind, "TINYINT"), OP)) \
        .order_by(asc(exp.GT(this=net.copy(), expression=lit(0))))
