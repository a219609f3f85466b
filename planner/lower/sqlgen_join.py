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
from ..physical.specs import BATCH, OP
from ..vocabulary import RETRACTIONS, ChangeOp, sql_codes
from . import sqlgen as S
from .sqlgen_group import q, sql_type
from .sqlgen_ttl import TtlSql, join_ttl, touch_keys

SEQ = "__seq"  # arrival number the runtime adds to a versioned table's batches
ID = "__id"  # row id the runtime adds to an outer side's batches (interval joins)


@dataclass
class JoinSql:
    """Names, column lists and the rendered condition of one join operator."""

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

    def ref(self, out: str) -> str:
        alias, name = self.source[out]
        return f"{alias}.{q(name)}"

    def render(self, e: exp.Expression) -> str:
        """A bound expression over output names, as DuckDB SQL over the aliases l and r."""
        typed = S.typed(e, self.node.schema)

        def qualify(c: exp.Expression) -> exp.Expression:
            if isinstance(c, exp.Column):
                alias, name = self.source[c.name]
                return exp.Column(this=exp.Identifier(this=name, quoted=True),
                                  table=exp.Identifier(this=alias, quoted=False))
            return c

        return S.render(typed.transform(qualify))

    def condition(self, *extra: str, residual: bool = True) -> str:
        parts = [f"{self.render(a)} = {self.render(b)}" for a, b in self.node.equi]
        parts += list(extra)
        if residual and self.node.residual is not None:
            parts.append(f"({self.render(self.node.residual)})")
        return " AND ".join(parts) or "TRUE"

    def outputs(self, null_left: bool = False, null_right: bool = False) -> str:
        """The output columns from l and r; a padded side's as typed NULLs."""
        items = []
        for f, name in zip(self.out_fields, self.out_names):
            alias = self.source[name][0]
            if (alias == "l" and null_left) or (alias == "r" and null_right):
                items.append(f"CAST(NULL AS {sql_type(f.type)}) AS {q(name)}")
            else:
                items.append(f"{self.ref(name)} AS {q(name)}")
        return ", ".join(items)

    def columns_ddl(self, side: int, extra: str = "") -> str:
        fields = [f"{q(f.name)} {sql_type(f.type)}" for f in self.schemas[side]]
        return ", ".join(fields) + extra

    def column_list(self, side: int, alias: str | None = None) -> str:
        prefix = f"{alias}." if alias else ""
        return ", ".join(prefix + q(c) for c in self.cols[side])

    def same_row(self, side: int, a: str, b: str) -> str:
        return " AND ".join(f"{a}.{q(c)} IS NOT DISTINCT FROM {b}.{q(c)}" for c in self.cols[side]) or "TRUE"


def epoch(alias: str, column: str) -> str:
    return f"epoch_us({alias}.{q(column)})"


def sign() -> str:
    return f"CASE WHEN {q(OP)} IN {sql_codes(RETRACTIONS)} THEN -1 ELSE 1 END"


# -- interval join -------------------------------------------------------------------------

def interval_join_sql(j: JoinSql) -> dict:
    b = j.node.bounds
    times = (j.source[b.left_time][1], j.source[b.right_time][1])
    tables = (j.table("l"), j.table("r"))
    extra = [", __t BIGINT" + (f", {ID} BIGINT, __m BOOLEAN" if j.preserved[s] else "") for s in (0, 1)]
    setup = tuple(f"CREATE TABLE IF NOT EXISTS {tables[s]} ({j.columns_ddl(s, extra[s])})" for s in (0, 1))
    bound = f"r.__t BETWEEN l.__t + ({b.lower}) AND l.__t + ({b.upper})"
    cond = j.condition(bound)
    on_batch = []
    for s in (0, 1):
        own, other = ("l", "r") if s == 0 else ("r", "l")
        batch = f"(SELECT *, {epoch(BATCH, times[s])} AS __t FROM {BATCH}) AS {own}"
        pair = f"{batch} JOIN {tables[1 - s]} AS {other}" if s == 0 else f"{tables[0]} AS l JOIN {batch}"
        if not any(j.preserved):
            on_batch.append((f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, {epoch(BATCH, times[s])} "
                             f"FROM {BATCH}",
                             f"SELECT {j.outputs()} FROM {pair} ON {cond}"))
            continue
        matches = j.table("m")
        stmts = [f"CREATE OR REPLACE TEMP TABLE {matches} AS SELECT {j.outputs()}, "
                 f"{'l.' + ID if j.preserved[0] else 'NULL'} AS __lid, {'r.' + ID if j.preserved[1] else 'NULL'} "
                 f"AS __rid FROM {pair} ON {cond}"]
        if j.preserved[1 - s]:
            other_id = "__rid" if s == 0 else "__lid"
            stmts.append(f"UPDATE {tables[1 - s]} SET __m = TRUE WHERE {ID} IN (SELECT {other_id} FROM {matches})")
        if j.preserved[s]:
            own_id = "__lid" if s == 0 else "__rid"
            stmts.append(f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, {epoch(BATCH, times[s])}, {ID}, "
                         f"{ID} IN (SELECT {own_id} FROM {matches}) FROM {BATCH}")
        else:
            stmts.append(f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, {epoch(BATCH, times[s])} FROM {BATCH}")
        stmts.append(f"SELECT {', '.join(q(c) for c in j.out_names)} FROM {matches}")
        on_batch.append(tuple(stmts))
    # A left row can meet right rows up to l.ts + upper; a right row left rows up to r.ts - lower.
    reach = (f"__t + ({b.upper})", f"__t - ({b.lower})")
    expire, min_time = [], []
    for s in (0, 1):
        alias = "l" if s == 0 else "r"
        padded = ""
        if j.preserved[s]:
            padded = (f"SELECT {j.outputs(null_left=s == 1, null_right=s == 0)} FROM {tables[s]} AS {alias} "
                      f"WHERE {alias}.{reach[s]} < $1 AND NOT {alias}.__m")
        expire.append((padded, f"DELETE FROM {tables[s]} WHERE {reach[s]} < $1"))
        min_time.append(f"SELECT MIN({reach[s]}) FROM {tables[s]}")
    return dict(setup=setup, state_tables=tables, on_batch=tuple(on_batch), expire=tuple(expire),
                min_time=tuple(min_time), times=times)


# -- window join ---------------------------------------------------------------------------

def window_join_sql(j: JoinSql) -> dict:
    ls, le, rs, re_ = j.node.window_columns
    tables = (j.table("l"), j.table("r"))
    ends = (j.source[le][1], j.source[re_][1])
    setup = tuple(f"CREATE TABLE IF NOT EXISTS {tables[s]} ({j.columns_ddl(s, ', __we BIGINT')})" for s in (0, 1))
    on_batch = tuple(f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, {epoch(BATCH, ends[s])} FROM {BATCH}"
                     for s in (0, 1))
    kind = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN"}[j.node.kind]
    cond = j.condition(f"{j.ref(ls)} = {j.ref(rs)}", f"{j.ref(le)} = {j.ref(re_)}")
    fire = (f"SELECT {j.outputs()} FROM (SELECT * FROM {tables[0]} WHERE __we <= $1) AS l {kind} "
            f"(SELECT * FROM {tables[1]} WHERE __we <= $1) AS r ON {cond}",
            f"DELETE FROM {tables[0]} WHERE __we <= $1",
            f"DELETE FROM {tables[1]} WHERE __we <= $1")
    min_end = f"SELECT LEAST((SELECT MIN(__we) FROM {tables[0]}), (SELECT MIN(__we) FROM {tables[1]}))"
    return dict(setup=setup, state_tables=tables, on_batch=on_batch, fire=fire, min_end=min_end, ends=ends)


# -- temporal join -------------------------------------------------------------------------

def temporal_join_sql(j: JoinSql, keys: tuple[str, ...]) -> dict:
    """``keys``: the versioned table's primary key (its input column names)."""
    n = j.node
    left_time, version_time = j.source[n.as_of][1], j.source[n.version_time][1]
    buffer, versions, batch = j.table("l"), j.table("v"), j.table("b")
    K = [q(k) for k in keys]
    setup = (f"CREATE TABLE IF NOT EXISTS {buffer} ({j.columns_ddl(0, ', __t BIGINT')})",
             f"CREATE TABLE IF NOT EXISTS {versions} ({j.columns_ddl(1, ', __t BIGINT, __del BOOLEAN')})")
    on_left = (f"INSERT INTO {buffer} SELECT {j.column_list(0)}, {epoch(BATCH, left_time)} FROM {BATCH}",)
    # Versions by (key, time): the last change at a time wins; -U rows are replaced by their +U.
    on_right = (
        f"CREATE OR REPLACE TEMP TABLE {batch} AS SELECT * EXCLUDE (__rn) FROM (SELECT {j.column_list(1)}, "
        f"{epoch(BATCH, version_time)} AS __t, {q(OP)} = {ChangeOp.DELETE.sql} AS __del, row_number() OVER (PARTITION BY "
        f"{', '.join(K)}, {epoch(BATCH, version_time)} ORDER BY {SEQ} DESC) AS __rn FROM {BATCH} "
        f"WHERE {q(OP)} <> {ChangeOp.UPDATE_BEFORE.sql}) AS v WHERE __rn = 1",
        f"DELETE FROM {versions} USING {batch} AS b WHERE "
        + " AND ".join(f"{versions}.{k} = b.{k}" for k in K + ["__t"]),
        f"INSERT INTO {versions} SELECT * FROM {batch}",
    )
    ok = "r.__t IS NOT NULL AND NOT r.__del" + (f" AND COALESCE({j.render(n.residual)}, FALSE)"
                                                  if n.residual is not None else "")
    asof = j.condition("l.__t >= r.__t", residual=False)
    inner = (f"SELECT {j.outputs()}, {ok} AS __ok FROM (SELECT * FROM {buffer} WHERE __t < $1) AS l "
             f"ASOF LEFT JOIN {versions} AS r ON {asof}")
    right_out = set(n.right_names)
    items = ", ".join(f"CASE WHEN __ok THEN {q(c)} END AS {q(c)}" if c in right_out else q(c) for c in j.out_names)
    fire = (f"SELECT {items} FROM ({inner}) AS m" + (" WHERE __ok" if n.kind == "inner" else ""),
            f"DELETE FROM {buffer} WHERE __t < $1")
    # Keep, per key, the last version before the watermark (unless it is a delete) and all newer ones.
    prune = (f"DELETE FROM {versions} WHERE rowid IN (SELECT rowid FROM (SELECT rowid, __del, row_number() OVER "
             f"(PARTITION BY {', '.join(K)} ORDER BY __t DESC) AS __rn FROM {versions} WHERE __t < $1) AS p "
             f"WHERE __rn > 1 OR __del)",)
    return dict(setup=setup, state_tables=(buffer, versions), on_batch=(on_left, on_right), fire=fire,
                prune=prune, min_time=f"SELECT MIN(__t) FROM {buffer}", time=left_time)


# -- multisets (lookup and regular joins) ----------------------------------------------------

def merge_into(j: JoinSql, side: int, table: str, delta: str, count: str) -> tuple[str, ...]:
    """Add a batch's signed rows (``delta`` with the count column ``count``) into a multiset table."""
    merged = j.table(f"x{side}")
    cols = j.column_list(side)
    return (
        f"CREATE OR REPLACE TEMP TABLE {merged} AS SELECT {cols}, SUM(__n) AS __n FROM ("
        f"SELECT t.* FROM {table} AS t SEMI JOIN {delta} AS d ON {j.same_row(side, 't', 'd')} "
        f"UNION ALL SELECT {cols}, {count} FROM {delta}) AS u GROUP BY ALL",
        f"DELETE FROM {table} USING {merged} AS m WHERE {j.same_row(side, table, 'm')}",
        f"INSERT INTO {table} SELECT * FROM {merged} WHERE __n > 0",
    )


def lookup_join_sql(j: JoinSql) -> dict:
    s = 0 if j.node.stream_side == "left" else 1
    t = 1 - s
    table, delta = j.table("t"), j.table("d")
    setup = (f"CREATE TABLE IF NOT EXISTS {table} ({j.columns_ddl(t, ', __n BIGINT')})",)
    update = (f"CREATE OR REPLACE TEMP TABLE {delta} AS SELECT {j.column_list(t)}, SUM({sign()}) AS __n "
              f"FROM {BATCH} GROUP BY ALL",) + merge_into(j, t, table, delta, "__n")
    outer = j.node.kind != "inner"
    stream_alias, table_alias = ("l", "r") if s == 0 else ("r", "l")
    how = ("LEFT JOIN" if s == 0 else "RIGHT JOIN") if outer else "JOIN"
    pair = (f"{BATCH} AS l {how} {table} AS r" if s == 0 else f"{table} AS l {how} {BATCH} AS r")
    # A table row held n times joins n times.
    lookup = (f"SELECT {', '.join(q(c) for c in j.out_names)} FROM (SELECT {j.outputs()}, "
              f"unnest(range(COALESCE({table_alias}.__n, 1))) AS __i FROM {pair} ON {j.condition()}) AS m",)
    return dict(setup=setup, state_tables=(table,), update=update, lookup=lookup)


def external_lookup_sql(j: JoinSql) -> dict:
    """A lookup join whose table is fetched by key (``ExternalLookup``): the cache is the join's table, with
    the time each row was fetched; the keys of an event batch are found with ``key_sql``."""
    s = 0 if j.node.stream_side == "left" else 1
    t = 1 - s
    sql = lookup_join_sql(j)
    table, misses = j.table("t"), j.table("m")
    stream_alias = "l" if s == 0 else "r"
    pairs = [(a, b) if s == 0 else (b, a) for a, b in j.node.equi]  # (stream expression, table column)
    keys = tuple(j.source[b.name][1] for _, b in pairs)
    key_types = {f.name: f.type for f in j.schemas[t]}
    items = ", ".join(f"{j.render(a)} AS {q(k)}" for (a, _), k in zip(pairs, keys))
    not_null = " AND ".join(f"{j.render(a)} IS NOT NULL" for a, _ in pairs)
    setup = (f"CREATE TABLE IF NOT EXISTS {table} ({j.columns_ddl(t, ', __n BIGINT, __fetched BIGINT')})",
             f"CREATE TABLE IF NOT EXISTS {misses} ("
             + ", ".join(f"{q(k)} {sql_type(key_types[k])}" for k in keys) + ", __fetched BIGINT)")
    return dict(setup=setup, state_tables=(table, misses), lookup=sql["lookup"], keys=keys, misses=misses,
                key_sql=f"SELECT DISTINCT {items} FROM {BATCH} AS {stream_alias} WHERE {not_null}")


def regular_join_sql(j: JoinSql, updating: tuple[bool, bool], ttl_us: int = 0) -> dict:
    """``updating``: whether each input carries retractions. ``ttl_us``: SET 'state.ttl' (see lower/sqlgen_ttl.py)."""
    tables = (j.table("l"), j.table("r"))
    setup = tuple(f"CREATE TABLE IF NOT EXISTS {tables[s]} ({j.columns_ddl(s, ', __n BIGINT')})" for s in (0, 1))
    keys = ([j.render(a) for a, _ in j.node.equi], [j.render(b) for _, b in j.node.equi])
    ttl, key_table = TtlSql(), ""
    if ttl_us:
        ttl, key_table = join_ttl(j.op_id, tables, keys[0], keys[1], ttl_us)
        setup += ttl.setup
    names = ", ".join(q(c) for c in j.out_names)
    on_batch = []
    for s in (0, 1):
        own, other = ("l", "r") if s == 0 else ("r", "l")
        delta, out = j.table("d"), j.table("o")
        touch = touch_keys(j.op_id, key_table, delta, own, keys[s]) if ttl_us else ()
        pair = (f"{delta} AS l JOIN {tables[1]} AS r" if s == 0 else f"{tables[0]} AS l JOIN {delta} AS r")
        if not any(updating) and not any(j.preserved):
            # Two streams, inner: every match is new, nothing is ever retracted.
            pair = pair.replace(delta, BATCH)
            touch = touch_keys(j.op_id, key_table, BATCH, own, keys[s]) if ttl_us else ()
            on_batch.append((f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, 1 FROM {BATCH}", *touch,
                             f"SELECT {j.outputs()} FROM {pair} ON {j.condition()}"))
            continue
        cond = j.condition()
        stmts = [
            f"CREATE OR REPLACE TEMP TABLE {delta} AS SELECT {j.column_list(s)}, "
            + (f"{sign()} AS __sg, {q(OP)} AS __k" if updating[s] else f"1 AS __sg, {ChangeOp.INSERT.sql} AS __k") + f" FROM {BATCH}",
            f"CREATE OR REPLACE TEMP TABLE {out} AS SELECT {j.outputs()}, {own}.__sg * {other}.__n AS __n, "
            f"{own}.__k FROM {pair} ON {cond}",
        ]
        if ttl_us and updating[s]:  # a retraction of an expired row: nothing to retract
            stmts.insert(1, f"DELETE FROM {delta} WHERE __sg < 0 AND NOT EXISTS (SELECT 1 FROM {tables[s]} AS t "
                            f"WHERE {j.same_row(s, 't', delta)}) AND NOT EXISTS (SELECT 1 FROM {delta} AS t "
                            f"WHERE t.__sg > 0 AND {j.same_row(s, 't', delta)})")
        if j.preserved[s]:  # own rows without a match, padded
            anti = (f"{delta} AS l ANTI JOIN {tables[1]} AS r" if s == 0 else
                    f"{delta} AS r ANTI JOIN {tables[0]} AS l")
            stmts.append(f"INSERT INTO {out} SELECT {j.outputs(null_left=s == 1, null_right=s == 0)}, "
                         f"{own}.__sg, {own}.__k FROM {anti} ON {cond}")
        if j.preserved[1 - s]:  # the other side's rows that gain their first match or lose their last
            touched, counted = j.table("a"), j.table("c")
            stmts += [
                f"CREATE OR REPLACE TEMP TABLE {touched} AS SELECT {other}.rowid AS __yid, SUM({own}.__sg) AS "
                f"__delta FROM {pair} ON {cond} GROUP BY {other}.rowid",
                f"CREATE OR REPLACE TEMP TABLE {counted} AS SELECT q.__yid, q.__delta, COALESCE(SUM({own}.__n), 0) "
                f"AS __old FROM {touched} AS q JOIN {tables[1 - s]} AS {other} ON {other}.rowid = q.__yid "
                f"LEFT JOIN {tables[s]} AS {own} ON {cond} GROUP BY q.__yid, q.__delta",
                f"INSERT INTO {out} SELECT {j.outputs(null_left=s == 0, null_right=s == 1)}, CASE WHEN q.__old = 0 "
                f"THEN -{other}.__n ELSE {other}.__n END, CASE WHEN q.__old = 0 THEN {ChangeOp.DELETE.sql} ELSE {ChangeOp.INSERT.sql} END FROM {counted} "
                f"AS q JOIN {tables[1 - s]} AS {other} ON {other}.rowid = q.__yid "
                f"WHERE (q.__old = 0) <> (q.__old + q.__delta = 0)",
            ]
        if updating[s]:
            stmts += list(merge_into(j, s, tables[s], delta, "__sg"))
        else:
            stmts.append(f"INSERT INTO {tables[s]} SELECT {j.column_list(s)}, 1 FROM {delta}")
        stmts += touch
        # The net change of each output row: retractions first, a row held n times emitted n times.
        stmts.append(
            f"SELECT {names}, CAST(CASE WHEN __net > 0 THEN (CASE WHEN __upd THEN {ChangeOp.UPDATE_AFTER.sql} ELSE {ChangeOp.INSERT.sql} END) "
            f"ELSE (CASE WHEN __upd THEN {ChangeOp.UPDATE_BEFORE.sql} ELSE {ChangeOp.DELETE.sql} END) END AS TINYINT) AS {q(OP)} FROM (SELECT {names}, __net, "
            f"__upd, unnest(range(abs(__net))) AS __i FROM (SELECT {names}, CAST(SUM(__n) AS BIGINT) AS __net, "
            f"bool_or(__k IN {sql_codes((ChangeOp.UPDATE_BEFORE, ChangeOp.UPDATE_AFTER))}) AS __upd FROM {out} GROUP BY ALL) AS g WHERE __net <> 0) AS e "
            f"ORDER BY __net > 0")
        on_batch.append(tuple(stmts))
    return dict(setup=setup, state_tables=tables + ttl.tables, on_batch=tuple(on_batch), expire=ttl.expire,
                oldest=ttl.oldest)
