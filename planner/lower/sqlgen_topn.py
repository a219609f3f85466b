"""DuckDB SQL for Top-N and deduplication.

Rows are ranked by the ORDER BY of ``ROW_NUMBER()``, with NULLs smallest
(first ascending, last descending, as in Flink); ties are broken by the
other columns, ascending, so the chosen rows never depend on arrival
order or batching. The runtime registers its inputs under the names each
statement reads.

- window Top-N: ``rank`` over ``__ready`` (the rows of closed windows);
- global Top-N: ``__input`` (a batch, with ``__op`` when updating) is
  folded into a multiset of candidate rows per partition
  (``__topn_rows_<id>``); the partitions it touches are re-ranked and
  compared with what was emitted. Over an append-only input a row that
  falls out of the top can never come back, so only the top rows are kept;
- first row per key: ``first`` keeps one candidate per key until the
  watermark passes it (``__pending``, ``__seen``, ``__rows``);
- last row per key: ``last`` picks each key's latest row of a batch that is
  not older than the one emitted (``__rows``, the emitted table).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from ..vocabulary import OP, ChangeOp
from .sqltree import (
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

SEQ = "__seq"
RANK = "__rn"


@dataclass(frozen=True)
class TopNSql:
    rank: str = ""  # window: the ranked rows of __ready
    setup: tuple[str, ...] = ()
    per_batch: tuple[str, ...] = ()  # global: run in order; leaves __top_<id> and __touched_<id>
    multiset_diff: tuple[str, ...] = ()  # global without a rank column: the last returns the changes
    first: str = ""  # dedup first: the new candidates
    last: str = ""  # dedup last: the rows that replace the emitted ones
    tables: tuple[str, ...] = ()


def order_keys(order: tuple[tuple[str, bool], ...], columns: list[str]) -> list[exp.Ordered]:
    """The ranking order: the ORDER BY (NULLs smallest), then the other columns ascending as a tie-break."""
    keys = [desc(c) if descending else asc(c, nulls_first=True) for c, descending in order]
    ordered = {c for c, _ in order}
    return keys + [asc(c, nulls_first=True) for c in columns if c not in ordered]


def _ranked(source: exp.Expression, partition: list[str], order: list[exp.Ordered], names: list[str],
            limit: int) -> exp.Select:
    """The first ``limit`` rows of ``source`` per partition by ``order``, with their rank."""
    numbered = select_from(source, None, star(), exp.alias_(row_number(cols(partition), order), RANK))
    return select_from(sub(numbered, "r"), None, *cols(names), exp.column(RANK)).where(
        exp.LTE(this=exp.column(RANK), expression=lit(limit)))


def window_topn_sql(columns: list[str], partition: tuple[str, ...], order, limit: int, window_end: str) -> TopNSql:
    P = list(partition)
    rank = _ranked(table("__ready"), P, order_keys(order, columns), columns, limit) \
        .order_by(asc(window_end), *[asc(p) for p in P], asc(exp.column(RANK)))
    return TopNSql(rank=render(rank))


def global_topn_sql(op_id: int, schema: pa.Schema, partition: tuple[str, ...], order, limit: int,
                    updating_input: bool, input_sql: exp.Expression | None) -> TopNSql:
    """``schema``: the input columns kept (without __op); ``input_sql``: the query of the rows, if not the batch."""
    columns = [f.name for f in schema]
    rows_t, d, t, m, top, out = (f"__topn_rows_{op_id}", f"__topn_d_{op_id}", f"__touched_{op_id}",
                                 f"__topn_m_{op_id}", f"__top_{op_id}", f"__topn_out_{op_id}")
    P = list(partition)
    source = sub(input_sql, "b") if input_sql is not None else table("__input", "b")
    ddl = [(f.name, f.type) for f in schema]
    setup = (create_table(rows_t, ddl + [("__n", pa.int64())]), create_table(out, ddl))
    touched = select_from(d, None, *cols(P)).distinct() if P else \
        select_from(d, None, exp.alias_(lit(1), "__unit")).limit(1)
    count = exp.alias_(cast(exp.Sum(this=exp.column("__n")), pa.int64()), "__n")
    # each candidate row repeated as many times as it is held
    repeated = select_from(sub(select_from(m, None, star(), exp.Explode(this=call("range", exp.column("__n")))),
                               "x"), None, *cols(columns))
    per_batch = [
        create_temp(d, group_by_all(select_from(source, None, *cols(columns), exp.alias_(
            cast(exp.Sum(this=sign(updating_input)), pa.int64()), "__n")))),
        create_temp(t, touched),
        create_temp(m, group_by_all(select_from(sub(union_all(
            select_from(rows_t, "r", star("r")).join(table(t, "t"), on=same("r", "t", P), join_type="semi"),
            select_from(d, None, star())), "u"), None, *cols(columns), count))
            .having(exp.GT(this=exp.Sum(this=exp.column("__n")), expression=lit(0)))),
        delete_using(rows_t, table(t, "t"), same(rows_t, "t", P)),
        create_temp(top, _ranked(sub(repeated, "e"), P, order_keys(order, columns), columns, limit)),
        # Over an append-only input a row below the top never returns: keep the top only.
        insert(rows_t, group_by_all(select_from(top, None, *cols(columns), exp.Count(this=exp.Star()))))
        if not updating_input else insert(rows_t, select_from(m, None, star())),
    ]
    changes = f"__topn_changes_{op_id}"
    diff = exp.alias_(cast(exp.Sum(this=exp.column("__s")), pa.int64()), "__d")
    counted = group_by_all(select_from(sub(union_all(
        select_from(top, None, *cols(columns), exp.alias_(lit(1), "__s")),
        select_from(out, "o", star("o"), exp.alias_(exp.Neg(this=lit(1)), "__s"))
        .join(table(t, "t"), on=same("o", "t", P), join_type="semi")), "u"), None, *cols(columns), diff)) \
        .having(exp.NEQ(this=exp.Sum(this=exp.column("__s")), expression=lit(0)))
    one_per_change = select_from(sub(counted, "g"), None, *cols(columns), exp.column("__d"),
                                 exp.Explode(this=call("range", exp.Abs(this=exp.column("__d")))))
    kind = exp.Case(ifs=[exp.If(this=exp.GT(this=exp.column("__d"), expression=lit(0)),
                                true=lit(int(ChangeOp.INSERT)))], default=lit(int(ChangeOp.DELETE)))
    multiset = [
        create_temp(changes, select_from(sub(one_per_change, "x"), None, *cols(columns),
                                         exp.alias_(cast(kind, "TINYINT"), OP, quoted=True))
                    .order_by(desc(col(OP)))),
        delete_using(out, table(t, "t"), same(out, "t", P)),
        insert(out, select_from(top, None, *cols(columns))),
        select_from(changes, None, star()),
    ]
    return TopNSql(setup=_all(setup), per_batch=_all(per_batch), multiset_diff=_all(multiset), tables=(rows_t, out))


def dedup_sql(columns: list[str], partition: tuple[str, ...], time_col: str, emitted: str) -> TopNSql:
    """Deduplication: ``first`` and ``last`` (see the module docstring)."""
    P = list(partition)
    names = [*columns, SEQ]

    def numbered(source: exp.Expression, *order: exp.Ordered) -> exp.Select:
        return select_from(source, None, star(), exp.alias_(row_number(cols(P), list(order)), "__r"))

    candidates = union_all(select_from("__pending", None, *cols(names)),
                           select_from("__rows", "r", star("r")).join(table("__seen", "s"), on=same("r", "s", P),
                                                                       join_type="anti"))
    first = select_from(sub(numbered(sub(candidates, "u"), asc(time_col), asc(exp.column(SEQ))), "c"), None,
                        *cols(names)).where(exp.EQ(this=exp.column("__r"), expression=lit(1)))
    latest = select_from(sub(numbered(table("__rows"), desc(time_col), desc(exp.column(SEQ))), "r"), None,
                         *cols(columns)).where(exp.EQ(this=exp.column("__r"), expression=lit(1)))
    newer = exp.or_(exp.Is(this=col(time_col, "e"), expression=exp.Null()),
                    exp.GTE(this=col(time_col, "c"), expression=col(time_col, "e")))
    last = select_from(sub(latest, "c"), None, star("c")).join(table(emitted, "e"), on=same("c", "e", P),
                                                               join_type="left").where(newer)
    return TopNSql(first=render(first), last=render(last))


def _all(statements: list[exp.Expression] | tuple[exp.Expression, ...]) -> tuple[str, ...]:
    return tuple(render(s) for s in statements)
