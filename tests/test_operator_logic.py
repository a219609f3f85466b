"""Operator unit tests: one ``*Logic`` driven directly with text-table batches and watermarks.

Each case plans a query, takes one operator out of its plan
(``logic_tables.OperatorDriver``) and feeds it batches written as text
tables with an op column. Every expected table is worked out by hand
from the operator's documented semantics (the timelines in the comments),
not taken from an earlier run.
"""

from __future__ import annotations

from logic_tables import OperatorDriver, assert_rows, parse, text_rows, us

from dsms.runtime.operators.group_agg import GroupAggLogic
from dsms.runtime.operators.regular_join import RegularJoinLogic
from dsms.runtime.operators.session import SessionLogic
from dsms.runtime.operators.topn import TopNLogic
from dsms.runtime.operators.window_agg import WindowAggLogic

DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'memory');
CREATE TABLE t1 (id BIGINT, k VARCHAR, v BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
CREATE TABLE t2 (id BIGINT, k VARCHAR, w BIGINT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
"""


def window_query(window: str, extra: str = "") -> str:
    return f"""SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS total
               FROM TABLE({window}) GROUP BY window_start, window_end, k {extra}"""


# -- the helper itself ------------------------------------------------------------------------


def test_text_tables_parse_ops_types_and_nulls():
    import pyarrow as pa

    schema = pa.schema([("id", pa.int64()), ("k", pa.string()), ("ts", pa.timestamp("us")), ("__op", pa.int8())])
    table = parse("""
        op | id | k    | ts
        +I | 1  | a    | 00:00:01.5
        -D | 2  | null | 1970-01-02 00:00:00
    """, schema)
    assert table.column("__op").to_pylist() == [0, 3]
    assert table.column("k").to_pylist() == ["a", None]
    assert table.column("ts").cast(pa.int64()).to_pylist() == [1_500_000, 86_400_000_000]
    assert text_rows(table, ["op", "k", "ts"]) == [("+I", "a", "00:00:01.500000"), ("-D", "null", "1970-01-02 00:00:00")]
    assert us("00:01:00") == 60_000_000


# -- window aggregate -------------------------------------------------------------------------


def test_tumble_fires_at_window_time_and_drops_rows_of_fired_windows():
    # TUMBLE 10 s:   [0, 10)             [10, 20)
    #                a@1 a@3 b@5         a@12          then a@7 (late: [0, 10) fired), b@15
    d = OperatorDriver(DDL, window_query("TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)"), WindowAggLogic)
    assert_rows(d.batch("""
        k | v | ts
        a | 1 | 00:00:01
        a | 2 | 00:00:03
        b | 4 | 00:00:05
        a | 8 | 00:00:12
    """), "")
    assert_rows(d.watermark("00:00:09.998"), "")  # window_time of [0, 10) is 9.999
    assert_rows(d.watermark("00:00:09.999"), """
        window_start | window_end | window_time  | k | agg0 | agg1
        00:00:00     | 00:00:10   | 00:00:09.999 | a | 2    | 3
        00:00:00     | 00:00:10   | 00:00:09.999 | b | 1    | 4
    """)
    assert_rows(d.batch("""
        k | v   | ts
        a | 100 | 00:00:07
        b | 16  | 00:00:15
    """), "")
    assert d.logic.late_dropped == 1
    assert_rows(d.watermark("00:00:20"), """
        window_start | window_end | k | agg0 | agg1
        00:00:10     | 00:00:20   | a | 1    | 8
        00:00:10     | 00:00:20   | b | 1    | 16
    """)
    assert d.logic.state_rows == 0  # every pane is freed once its windows are out


def test_hop_late_row_counts_only_in_its_windows_still_open():
    # HOP slide 5 s, size 10 s; panes of 5 s:
    #   a@6    windows [0, 10) [5, 15)
    #   a@11   windows [5, 15) [10, 20)
    #   a@17   windows [10, 20) [15, 25)
    # watermark 14.999 fires [0, 10) and [5, 15). Then a@13 counts in [10, 20) only,
    # and a@4 (windows [-5, 5) and [0, 10), both fired) is dropped.
    d = OperatorDriver(DDL, window_query("HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '10' SECOND)"), WindowAggLogic)
    d.batch("""
        k | v | ts
        a | 1 | 00:00:06
        a | 2 | 00:00:11
        a | 4 | 00:00:17
    """)
    assert_rows(d.watermark("00:00:14.999"), """
        window_start | window_end | k | agg0 | agg1
        00:00:00     | 00:00:10   | a | 1    | 1
        00:00:05     | 00:00:15   | a | 2    | 3
    """)
    d.batch("""
        k | v  | ts
        a | 8  | 00:00:13
        a | 16 | 00:00:04
    """)
    assert d.logic.late_dropped == 1
    assert_rows(d.watermark("00:00:30"), """
        window_start | window_end | k | agg0 | agg1
        00:00:10     | 00:00:20   | a | 3    | 14
        00:00:15     | 00:00:25   | a | 1    | 4
    """)


def test_cumulate_emits_each_step_of_a_window():
    # CUMULATE step 5 s, max 10 s: windows [0, 5) and [0, 10);  a@1, a@7, b@8
    d = OperatorDriver(DDL, window_query("CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '5' SECOND, "
                                         "INTERVAL '10' SECOND)"), WindowAggLogic)
    d.batch("""
        k | v | ts
        a | 1 | 00:00:01
        a | 2 | 00:00:07
        b | 4 | 00:00:08
    """)
    assert_rows(d.watermark("00:00:10"), """
        window_start | window_end | k | agg0 | agg1
        00:00:00     | 00:00:05   | a | 1    | 1
        00:00:00     | 00:00:10   | a | 2    | 3
        00:00:00     | 00:00:10   | b | 1    | 4
    """)


# -- session ----------------------------------------------------------------------------------

SESSION = "SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '5' SECOND)"


def test_session_merges_an_out_of_order_row_into_open_sessions():
    # gap 5 s: an event at t is the interval [t, t + 5)
    #   a: 1 3 -> [1, 8)   10 -> [10, 15)        b: 2 -> [2, 7)
    # watermark 8 closes b (7 < 8) but not a's [1, 8) (touching sessions still merge at 8).
    # Then a@6, behind the watermark, is [6, 11): it bridges [1, 8) and [10, 15) -> [1, 15).
    d = OperatorDriver(DDL, window_query(SESSION), SessionLogic)
    assert_rows(d.batch("""
        k | v  | ts
        a | 1  | 00:00:01
        b | 10 | 00:00:02
        a | 2  | 00:00:03
        a | 4  | 00:00:10
    """), "")
    assert_rows(d.watermark("00:00:08"), """
        window_start | window_end | window_time  | k | agg0 | agg1
        00:00:02     | 00:00:07   | 00:00:06.999 | b | 1    | 10
    """)
    assert_rows(d.batch("""
        k | v | ts
        a | 8 | 00:00:06
    """), "")
    assert_rows(d.watermark("00:00:15"), "")  # [1, 15) closes only once the watermark is past 15
    assert_rows(d.watermark("00:00:15.001"), """
        window_start | window_end | k | agg0 | agg1
        00:00:01     | 00:00:15   | a | 4    | 15
    """)
    assert d.logic.state_rows == 0


def test_session_with_allowed_lateness_corrects_an_emitted_session():
    # a@1, a@2 -> [1, 7), emitted at watermark 8; a@1.5 is late but within the lateness:
    # its interval [1.5, 6.5) lies inside [1, 7), so the session keeps its bounds and gains a row.
    d = OperatorDriver(DDL, window_query(SESSION, "ALLOWED LATENESS INTERVAL '1' MINUTE"), SessionLogic)
    d.batch("""
        k | v | ts
        a | 1 | 00:00:01
        a | 2 | 00:00:02
    """)
    assert_rows(d.watermark("00:00:08"), """
        op | window_start | window_end | k | agg0 | agg1
        +I | 00:00:01     | 00:00:07   | a | 2    | 3
    """)
    assert_rows(d.batch("""
        k | v | ts
        a | 4 | 00:00:01.5
    """), """
        op | window_start | window_end | k | agg0 | agg1
        -U | 00:00:01     | 00:00:07   | a | 2    | 3
        +U | 00:00:01     | 00:00:07   | a | 3    | 7
    """)


# -- group aggregate --------------------------------------------------------------------------


def test_group_aggregate_updates_retracts_and_deletes():
    d = OperatorDriver(DDL, "SELECT k, COUNT(*) AS n, SUM(v) AS total, MAX(v) AS hi FROM t1 GROUP BY k",
                       GroupAggLogic)
    assert_rows(d.batch("""
        op | id | k | v
        +I | 1  | a | 10
        +I | 2  | a | 30
        +I | 3  | b | 5
    """), """
        op | k | agg0 | agg1 | agg2
        +I | a | 2    | 40   | 30
        +I | b | 1    | 5    | 5
    """, ordered=False)
    # id 2 changes from 30 to 7: a's MAX falls back to 10, which a sum could not tell
    assert_rows(d.batch("""
        op | id | k | v
        -U | 2  | a | 30
        +U | 2  | a | 7
    """), """
        op | k | agg0 | agg1 | agg2
        -U | a | 2    | 40   | 30
        +U | a | 2    | 17   | 10
    """)
    assert_rows(d.batch("""
        op | id | k | v
        -D | 3  | b | 5
        -D | 1  | a | 10
    """), """
        op | k | agg0 | agg1 | agg2
        -U | a | 2    | 17   | 10
        -D | b | 1    | 5    | 5
        +U | a | 1    | 7    | 7
    """, ordered=False)
    # a key that appears and goes in one batch leaves no trace; a row that changes nothing emits nothing
    assert_rows(d.batch("""
        op | id | k | v
        +I | 4  | c | 1
        -D | 4  | c | 1
        -U | 2  | a | 7
        +U | 2  | a | 7
    """), "")


def test_group_aggregate_emits_retractions_before_additions():
    d = OperatorDriver(DDL, "SELECT k, COUNT(*) AS n FROM t1 GROUP BY k", GroupAggLogic)
    d.batch("""
        op | id | k
        +I | 1  | a
        +I | 2  | b
    """)  # (v is not read, so the plan does not carry it)
    out = d.batch("""
        op | id | k
        +I | 3  | a
        -D | 2  | b
        +I | 4  | c
    """)
    kinds = [op for op, in text_rows(out, ["op"])]
    assert sorted(kinds[:2]) == ["-D", "-U"] and sorted(kinds[2:]) == ["+I", "+U"]
    assert_rows(out, """
        op | k | agg0
        -U | a | 1
        -D | b | 1
        +U | a | 2
        +I | c | 1
    """, ordered=False)


# -- regular join -----------------------------------------------------------------------------


def test_inner_join_follows_both_sides_changes():
    d = OperatorDriver(DDL, "SELECT t1.id, t1.k, t1.v, t2.id AS id2, t2.w FROM t1 JOIN t2 ON t1.k = t2.k",
                       RegularJoinLogic)
    assert_rows(d.batch("""
        op | id | k    | v
        +I | 1  | a    | 10
        +I | 2  | b    | 20
        +I | 3  | null | 30
    """, port=0), "")
    assert_rows(d.batch("""
        op | id | k    | w
        +I | 7  | a    | 70
        +I | 8  | null | 80
    """, port=1), """
        op | id | k | v  | id0 | k0 | w
        +I | 1  | a | 10 | 7   | a  | 70
    """)  # NULL keys never match
    assert_rows(d.batch("""
        op | id | k | w
        -U | 7  | a | 70
        +U | 7  | a | 71
    """, port=1), """
        op | id | k | v  | id0 | k0 | w
        -U | 1  | a | 10 | 7   | a  | 70
        +U | 1  | a | 10 | 7   | a  | 71
    """)
    assert_rows(d.batch("""
        op | id | k | v
        +I | 4  | a | 40
        -D | 1  | a | 10
    """, port=0), """
        op | id | k | v  | id0 | k0 | w
        -D | 1  | a | 10 | 7   | a  | 71
        +I | 4  | a | 40 | 7   | a  | 71
    """)


def test_left_join_pads_and_unpads():
    d = OperatorDriver(DDL, "SELECT t1.id, t1.k, t1.v, t2.id AS id2, t2.w FROM t1 LEFT JOIN t2 ON t1.k = t2.k",
                       RegularJoinLogic)
    assert_rows(d.batch("""
        op | id | k | v
        +I | 1  | a | 10
    """, port=0), """
        op | id | k | v  | id0  | k0   | w
        +I | 1  | a | 10 | null | null | null
    """)
    assert_rows(d.batch("""
        op | id | k | w
        +I | 7  | a | 70
    """, port=1), """
        op | id | k | v  | id0  | k0   | w
        -D | 1  | a | 10 | null | null | null
        +I | 1  | a | 10 | 7    | a    | 70
    """)
    assert_rows(d.batch("""
        op | id | k | w
        -D | 7  | a | 70
    """, port=1), """
        op | id | k | v  | id0  | k0   | w
        -D | 1  | a | 10 | 7    | a    | 70
        +I | 1  | a | 10 | null | null | null
    """)


# -- Top-N ------------------------------------------------------------------------------------


def test_global_top_n_replaces_a_displaced_row():
    d = OperatorDriver(DDL, """SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC)
                               AS rn FROM s) WHERE rn <= 2""", TopNLogic)
    assert_rows(d.batch("""
        k | v | ts
        a | 5 | 00:00:01
        a | 3 | 00:00:02
        b | 1 | 00:00:03
    """), """
        op | k | v | ts
        +I | a | 5 | 00:00:01
        +I | a | 3 | 00:00:02
        +I | b | 1 | 00:00:03
    """, ordered=False)
    assert_rows(d.batch("""
        k | v | ts
        a | 4 | 00:00:04
    """), """
        op | k | v | ts
        -D | a | 3 | 00:00:02
        +I | a | 4 | 00:00:04
    """)
    assert_rows(d.batch("""
        k | v | ts
        a | 1 | 00:00:05
    """), "")  # below the top 2 of a


def test_top_1_over_a_table_follows_its_deletes():
    d = OperatorDriver(DDL, """SELECT id, k, v FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC)
                               AS rn FROM t1) WHERE rn <= 1""", TopNLogic)
    assert_rows(d.batch("""
        op | id | k | v
        +I | 1  | a | 10
        +I | 2  | a | 20
    """), """
        op | id | k | v
        +I | 2  | a | 20
    """)
    assert_rows(d.batch("""
        op | id | k | v
        -D | 2  | a | 20
    """), """
        op | id | k | v
        -D | 2  | a | 20
        +I | 1  | a | 10
    """)


def test_window_top_n_drops_rows_of_an_emitted_window():
    # TUMBLE 10 s, top 2 by v per window: [0, 10) holds 5 7 6 1 -> 7, 6; then v=100 at 5 s is late
    d = OperatorDriver(DDL, """SELECT window_start, window_end, k, v FROM (SELECT *, ROW_NUMBER() OVER (
                               PARTITION BY window_start, window_end ORDER BY v DESC) AS rn
                               FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 2""",
                       TopNLogic)
    d.batch("""
        k | v | ts
        a | 5 | 00:00:01
        a | 7 | 00:00:02
        b | 6 | 00:00:03
        a | 1 | 00:00:04
        b | 9 | 00:00:12
    """)
    assert_rows(d.watermark("00:00:10"), """
        window_start | window_end | k | v
        00:00:00     | 00:00:10   | a | 7
        00:00:00     | 00:00:10   | b | 6
    """)
    assert_rows(d.batch("""
        k | v   | ts
        a | 100 | 00:00:05
    """), "")
    assert d.logic.late_dropped == 1
    assert_rows(d.watermark("00:00:20"), """
        window_start | window_end | k | v
        00:00:10     | 00:00:20   | b | 9
    """)
