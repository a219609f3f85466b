"""The query shapes of the route matrix (tests/test_routes.py) and their oracles.

Holds no tests. Each shape is a query and the same question as plain
DuckDB SQL over the tables of the generated data (route_data.py): ``s``
and ``s2`` are a stream's on-time rows, ``s_all`` / ``s2_all`` all of
them, with ``seq``, their place in the source; ``s_arr`` / ``s2_arr`` all
of them with ``wm``, the watermark when each arrived, for the operators
that judge lateness per window (an event counts in a window when ``OPEN``
holds: its end above ``wm``); ``t_changes`` / ``d_changes`` a table's
changes in order.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa

from oracle import duck, flink_int


@dataclass(frozen=True)
class Shape:
    name: str
    query: str
    oracle: str
    settings: tuple = ()
    min_rows: int = 1  # the oracle must find at least this many rows (the case is not vacuous)


def tumble(seconds: int, table: str = "s", col: str = "ts") -> str:
    return f"time_bucket(INTERVAL '{seconds} seconds', {col}, TIMESTAMP '1970-01-01')"


def hop_starts(slide: int, size: int) -> str:
    last = tumble(slide)
    return f"unnest(range({last} - INTERVAL '{size - slide} seconds', {last} + INTERVAL '1 second', " \
           f"INTERVAL '{slide} seconds'))"


def islands(gap: int, table: str = "s", keys: str = "k") -> str:
    """Sessions per key: an event starts one when it is more than ``gap`` after the previous event."""
    return f"""(SELECT *, MIN(ts) OVER (PARTITION BY {keys}, isl) AS ws,
                MAX(ts) OVER (PARTITION BY {keys}, isl) + INTERVAL '{gap} seconds' AS we FROM (
             SELECT *, SUM(CASE WHEN prev IS NULL OR ts - prev > INTERVAL '{gap} seconds' THEN 1 ELSE 0 END)
                       OVER (PARTITION BY {keys} ORDER BY ts, seq ROWS UNBOUNDED PRECEDING) AS isl FROM (
               SELECT *, LAG(ts) OVER (PARTITION BY {keys} ORDER BY ts, seq) AS prev FROM {table})))"""


VERSIONS = """(SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY k, ts ORDER BY seq DESC) AS r
               FROM {changes} WHERE NOT late AND op <> '-U') WHERE r = 1)"""


def temporal(kind: str, changes: str, value: str, condition: str = "") -> str:
    """Each event of s with its key's latest version at or before its time (none if a delete, if
    ``condition`` on the version does not hold, or, as Flink cleans versions up, if a newer version is at or
    below the event's watermark when it arrived)."""
    v = VERSIONS.format(changes=changes)
    return f"""
    WITH v AS {v},
         s AS (SELECT * FROM s_arr),
         pick AS (SELECT s.seq, MAX(v.ts) AS vts FROM s JOIN v ON v.k = s.k AND v.ts <= s.ts GROUP BY s.seq),
         chosen AS (SELECT p.seq, v.{value} FROM pick p JOIN s USING (seq) JOIN v ON v.k = s.k AND v.ts = p.vts
                    WHERE NOT v.deleted {condition}
                      AND NOT EXISTS (SELECT 1 FROM v w WHERE w.k = s.k AND w.ts > s.ts AND w.ts <= s.wm))
    SELECT s.k, s.v, s.ts, chosen.{value} FROM s {kind} JOIN chosen USING (seq)"""


LONG_AGO = "TIMESTAMP '1970-01-01'"


def interval_kept(reach_a: str, reach_b: str) -> str:
    """Flink's TimeIntervalJoin keeps a pair unless the row that came later (the larger watermark at arrival)
    came past the other's reach (the last time a partner of it can have)."""
    wa, wb = f"COALESCE(a.wm, {LONG_AGO})", f"COALESCE(b.wm, {LONG_AGO})"
    return f"NOT (({wa} > {reach_b} AND {wa} >= {wb}) OR ({wb} > {reach_a} AND {wb} >= {wa}))"


def final_state(changes: str, value: str) -> str:
    return f"""SELECT k, {value}, ts FROM (SELECT *, row_number() OVER (PARTITION BY k ORDER BY seq DESC) AS r
               FROM {changes}) WHERE r = 1 AND op IN ('+I', '+U')"""


AGGS = "COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(v) AS av, MIN(price) AS lo, MAX(price) AS hi, " \
       "COUNT(DISTINCT v) AS dv, AVG(price) AS ap"
ORACLE_AGGS = "COUNT(*), COUNT(v), SUM(v), TRUNC(AVG(v))::BIGINT, MIN(price), MAX(price), COUNT(DISTINCT v), AVG(price)"
HOP = "FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '15' SECOND))"
TUMBLE10 = "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(TUMBLE(TABLE s, " \
           "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"
TUMBLE10_ORACLE = f"SELECT {tumble(10)} AS ws, ws + INTERVAL '10 seconds', k, COUNT(*), SUM(v) FROM {{src}} GROUP BY ALL"
# A window operator counts an event in a window that was open when it arrived: the watermark then (``wm``,
# NULL for a source's first event) below the window's last millisecond (Flink's rule).
OPEN = "(wm IS NULL OR {end} - INTERVAL 1 MILLISECOND > wm)"
TUMBLE10_OPEN = (f"SELECT {tumble(10)} AS ws, ws + INTERVAL '10 seconds', k, COUNT(*), SUM(v) FROM {{src}} "
                 f"WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ALL")
INSTANTS = f"""(SELECT {tumble(5)} + INTERVAL '5 seconds' AS i0, k, wm FROM s_arr)"""
CQL_RELATION = """(SELECT i, k, COUNT(*) AS n FROM (SELECT unnest(range(i0, i0 + INTERVAL '10 seconds',
                  INTERVAL '5 seconds')) AS i, k, wm FROM {instants}) WHERE {open} GROUP BY ALL)""".format(
    instants=INSTANTS, open=OPEN.format(end="i"))

FAMILY = ("STDDEV_POP(price) AS sp, VAR_SAMP(price) AS vs, STDDEV_SAMP(v) AS ssv, VAR_POP(v) AS vpv, "
          "BIT_AND(v) AS ba, BIT_OR(v) AS bo, BIT_XOR(v) AS bx, SUM(DISTINCT v) AS sdv, AVG(DISTINCT v) AS adv, "
          "COUNT(*) FILTER (WHERE price > 5) AS nf, SUM(v) FILTER (WHERE price < 3) AS sf")
ORACLE_FAMILY = (f"STDDEV_POP(price), VAR_SAMP(price), {flink_int('stddev_samp', 'v')}, {flink_int('var_pop', 'v')}, "
                 "BIT_AND(v), BIT_OR(v), BIT_XOR(v), SUM(DISTINCT v), TRUNC(AVG(DISTINCT v))::BIGINT, "
                 "COUNT(*) FILTER (WHERE price > 5), SUM(v) FILTER (WHERE price < 3)")

SHAPES = [
    Shape("filter_project_functions", "SELECT k, v * 2 AS v2, UPPER(k) AS uk, v10, ts FROM s WHERE v > 10",
          "SELECT k, v * 2, upper(k), v * 10, ts FROM s_all WHERE v > 10"),
    Shape("scalar_functions", "SELECT k, DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm') AS minute, CAST(ts AS VARCHAR) AS t, "
          "EXTRACT(SECOND FROM ts) AS sec, COALESCE(v, -1) AS v, ROUND(price, 1) AS p, v / 3 AS third FROM s "
          "WHERE k LIKE 'k%' AND price BETWEEN 1 AND 8",
          "SELECT k, strftime(ts, '%Y-%m-%d %H:%M'), strftime(ts, '%Y-%m-%d %H:%M:%S.%g'), second(ts), "
          "COALESCE(v, -1), round(price::DECIMAL(10, 2), 1)::DOUBLE, v // 3 FROM s_all "
          "WHERE k LIKE 'k%' AND price BETWEEN 1 AND 8"),
    Shape("computed_watermark_column", "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE sc, "
          "DESCRIPTOR(et), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
          f"SELECT {tumble(10, col='ts + INTERVAL 1 SECOND')} AS ws, COUNT(*) FROM sc_arr "
          f"WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ALL"),
    Shape("csv_source", "SELECT k, v, ts FROM c WHERE v IS NOT NULL", "SELECT k, v, ts FROM c_all WHERE v IS NOT NULL"),
    Shape("values", "SELECT 1 AS a, 'x' AS b", "SELECT 1, 'x'"),
    Shape("tumble_tvf_rows", "SELECT k, v, window_start, window_end, window_time FROM TABLE(TUMBLE(TABLE s, "
          "DESCRIPTOR(ts), INTERVAL '10' SECOND))",
          f"SELECT k, v, {tumble(10)} AS ws, ws + INTERVAL '10 seconds', ws + INTERVAL '9.999 seconds' FROM s_all"),
    Shape("tumble_with_offset", "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
          "INTERVAL '10' SECOND, INTERVAL '3' SECOND)) GROUP BY window_start, window_end",
          "SELECT time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01 00:00:03') AS ws, COUNT(*) FROM s_arr "
          f"WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ALL"),
    Shape("hop_tvf_rows", "SELECT k, v, window_start, window_end FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), "
          "INTERVAL '5' SECOND, INTERVAL '10' SECOND)) WHERE v > 0",
          f"SELECT k, v, ws, ws + INTERVAL '10 seconds' FROM (SELECT *, {hop_starts(5, 10)} AS ws FROM s_all) "
          "WHERE v > 0"),
    Shape("hop_all_aggregates_having", f"SELECT window_start, window_end, k, {AGGS} {HOP} "
          "GROUP BY window_start, window_end, k HAVING COUNT(*) > 1",
          f"SELECT ws, ws + INTERVAL '15 seconds', k, {ORACLE_AGGS} FROM (SELECT *, {hop_starts(5, 15)} AS ws "
          f"FROM s_arr) WHERE {OPEN.format(end='ws + INTERVAL 15 SECOND')} GROUP BY ws, k HAVING COUNT(*) > 1"),
    Shape("cumulate", "SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS sv FROM TABLE(CUMULATE(TABLE s, "
          "DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end",
          f"SELECT {tumble(20)} AS ws, we, COUNT(*), SUM(v) FROM (SELECT *, unnest(range({tumble(5)} + "
          f"INTERVAL '5 seconds', {tumble(20)} + INTERVAL '21 seconds', INTERVAL '5 seconds')) AS we FROM s_arr) "
          f"WHERE {OPEN.format(end='we')} GROUP BY ALL"),
    Shape("group_window_tumble", "SELECT k, TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, COUNT(*) AS n FROM s "
          "GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), k",
          f"SELECT k, {tumble(10)} AS ws, COUNT(*) FROM s_arr WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} "
          "GROUP BY ALL"),
    Shape("cascading_windows", "SELECT window_start, SUM(n) AS n FROM TABLE(TUMBLE(TABLE (SELECT window_time AS wt, "
          "COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, "
          "window_end, window_time), DESCRIPTOR(wt), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
          f"SELECT {tumble(60)}, COUNT(*) FROM s_arr WHERE {OPEN.format(end=tumble(10) + ' + INTERVAL 10 SECOND')} "
          "GROUP BY ALL"),
    Shape("union_all_window", "SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (SELECT k, ts FROM s "
          "UNION ALL SELECT k, ts FROM s2), DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k",
          f"SELECT {tumble(10)}, k, COUNT(*) FROM (SELECT k, ts FROM s UNION ALL SELECT k, ts FROM s2) GROUP BY ALL"),
    Shape("union_all_rows", "SELECT k, v FROM s UNION ALL SELECT k, v FROM s2",
          "SELECT k, v FROM s_all UNION ALL SELECT k, v FROM s2_all"),
    Shape("group_aggregate", "SELECT k, COUNT(*) AS n, SUM(v) AS sv, MIN(price) AS lo, COUNT(DISTINCT v) AS dv "
          "FROM s GROUP BY k", "SELECT k, COUNT(*), SUM(v), MIN(price), COUNT(DISTINCT v) FROM s_all GROUP BY k"),
    Shape("select_distinct", "SELECT DISTINCT k FROM s", "SELECT DISTINCT k FROM s_all"),
    Shape("regular_join_of_streams", "SELECT a.k, a.v, b.price FROM s a JOIN s2 b ON a.k = b.k AND a.v = b.v",
          "SELECT a.k, a.v, b.price FROM s_all a JOIN s2_all b ON a.k = b.k AND a.v = b.v"),
    Shape("global_aggregate", "SELECT COUNT(*) AS n, MAX(v) AS hi FROM s WHERE v > 50",
          "SELECT COUNT(*), MAX(v) FROM s_all WHERE v > 50"),
    Shape("global_aggregate_of_nothing", "SELECT COUNT(*) AS n FROM s WHERE v > 1000",
          "SELECT COUNT(*) FROM s_all WHERE v > 1000 HAVING COUNT(*) > 0", min_rows=0),
    Shape("over_rows_ties_in_arrival_order", "SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts "
          "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS sv FROM s",
          # Flink's late rule (docs/time.md): a row at or below the last time released for its partition is
          # dropped: an earlier row of the partition between its time and the watermark then, which a later
          # watermark (above the earlier row's own) released.
          "SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts, seq ROWS 2 PRECEDING) FROM s_arr_seq AS i "
          "WHERE NOT EXISTS (SELECT 1 FROM s_arr_seq AS j WHERE j.k IS NOT DISTINCT FROM i.k AND j.seq < i.seq "
          "AND j.ts BETWEEN i.ts AND i.wm AND (j.wm IS NULL OR j.wm < i.wm))"),
    Shape("over_unbounded", "SELECT k, ts, AVG(price) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED "
          "PRECEDING AND CURRENT ROW) AS ap FROM s",
          # An UNBOUNDED frame drops a row at or below the watermark when it arrived (Flink's rule).
          "SELECT k, ts, AVG(price) OVER (PARTITION BY k ORDER BY ts, seq ROWS UNBOUNDED PRECEDING) FROM s_arr_seq "
          "WHERE wm IS NULL OR ts > wm"),
    Shape("window_top_n", "SELECT window_start, k, v, price FROM (SELECT window_start, window_end, k, v, price, "
          "ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn FROM TABLE(TUMBLE(TABLE s, "
          "DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 2",
          f"SELECT ws, k, v, price FROM (SELECT {tumble(10)} AS ws, k, v, price, row_number() OVER (PARTITION BY ws "
          "ORDER BY v DESC NULLS LAST, k NULLS FIRST, price NULLS FIRST) AS rn FROM s_arr "
          f"WHERE {OPEN.format(end=tumble(10) + ' + INTERVAL 10 SECOND')}) WHERE rn <= 2"),
    Shape("window_top_n_rank", "SELECT window_start, k, v, price FROM (SELECT window_start, window_end, k, v, price, "
          "RANK() OVER (PARTITION BY window_start, window_end ORDER BY b DESC) AS rn FROM (SELECT *, v / 30 AS b "
          "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)))) WHERE rn <= 2",
          # ties on v / 30 (an integer division, toward zero) share a rank and stay together
          f"SELECT ws, k, v, price FROM (SELECT {tumble(10)} AS ws, k, v, price, rank() OVER (PARTITION BY ws "
          "ORDER BY trunc(v / 30) DESC NULLS LAST) AS rn FROM s_arr "
          f"WHERE {OPEN.format(end=tumble(10) + ' + INTERVAL 10 SECOND')}) WHERE rn <= 2"),
    Shape("top_keys_per_window", "SELECT window_start, k, n FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "
          "window_start, window_end ORDER BY n DESC) AS rn FROM (SELECT window_start, window_end, k, COUNT(*) AS n "
          "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k)) "
          "WHERE rn <= 2",
          f"SELECT ws, k, n FROM (SELECT ws, k, n, row_number() OVER (PARTITION BY ws ORDER BY n DESC, k NULLS FIRST) "
          f"AS rn FROM (SELECT {tumble(20)} AS ws, k, COUNT(*) AS n FROM s_arr "
          f"WHERE {OPEN.format(end='ws + INTERVAL 20 SECOND')} GROUP BY ALL)) WHERE rn <= 2"),
    Shape("global_top_n", "SELECT k, v, price, rn FROM (SELECT k, v, price, ROW_NUMBER() OVER (PARTITION BY k "
          "ORDER BY price DESC) AS rn FROM s) WHERE rn <= 3",
          "SELECT k, v, price, rn FROM (SELECT k, v, price, row_number() OVER (PARTITION BY k ORDER BY price DESC "
          "NULLS LAST, v NULLS FIRST) AS rn FROM s_all) WHERE rn <= 3"),
    Shape("top_n_of_a_table", "SELECT k, rate FROM (SELECT k, rate, ROW_NUMBER() OVER (ORDER BY rate DESC) AS rn "
          "FROM t) WHERE rn <= 2",
          f"SELECT k, rate FROM ({final_state('t_changes', 'rate')}) ORDER BY rate DESC NULLS LAST, k LIMIT 2"),
    Shape("aggregate_of_a_table", "SELECT rate > 50 AS high, COUNT(*) AS n, SUM(rate) AS total FROM t "
          "GROUP BY rate > 50",
          f"SELECT rate > 50, COUNT(*), SUM(rate) FROM ({final_state('t_changes', 'rate')}) GROUP BY ALL"),
    Shape("aggregate_family", f"SELECT k, {FAMILY} FROM s GROUP BY k",
          f"SELECT k, {ORACLE_FAMILY} FROM s_all GROUP BY k"),
    Shape("aggregate_family_tumble", "SELECT window_start, k, " + FAMILY + " FROM TABLE(TUMBLE(TABLE s, "
          "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k",
          f"SELECT {tumble(10)} AS ws, k, {ORACLE_FAMILY} FROM s_arr WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} "
          "GROUP BY ws, k"),
    Shape("aggregate_family_of_a_table", "SELECT rate % 4 AS b, STDDEV_POP(rate) AS sp, BIT_OR(rate) AS bo, "
          "BIT_XOR(rate) AS bx, SUM(DISTINCT rate) AS sd, COUNT(*) FILTER (WHERE rate > 50) AS nf FROM t "
          "GROUP BY rate % 4",
          f"SELECT rate % 4, {flink_int('stddev_pop', 'rate')}, BIT_OR(rate), BIT_XOR(rate), SUM(DISTINCT rate), "
          f"COUNT(*) FILTER (WHERE rate > 50) FROM ({final_state('t_changes', 'rate')}) GROUP BY ALL"),
    Shape("ordered_aggregates", "SELECT k, FIRST_VALUE(v) AS fv, LAST_VALUE(price) AS lp, "
          "LISTAGG(CAST(v AS STRING), ';') AS lv FROM s GROUP BY k",
          "SELECT k, arg_min(v, CASE WHEN v IS NOT NULL THEN seq END), arg_max(price, seq), "
          "string_agg(CAST(v AS VARCHAR), ';' ORDER BY seq) FROM s_all GROUP BY k"),
    Shape("ordered_aggregates_tumble", "SELECT window_start, k, FIRST_VALUE(price) AS fp, LAST_VALUE(v) AS lv, "
          "LISTAGG(k) AS lk FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end, k",
          f"SELECT {tumble(10)} AS ws, k, arg_min(price, seq), arg_max(v, CASE WHEN v IS NOT NULL THEN seq END), "
          f"string_agg(k, ',' ORDER BY seq) FROM s_arr WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} "
          "GROUP BY ws, k"),
    Shape("grouping_sets_rollup", "SELECT k, v % 3 AS m, GROUPING(k, v % 3) AS g, COUNT(*) AS n, SUM(v) AS sv, "
          "STDDEV_POP(price) AS sp FROM s GROUP BY ROLLUP (k, v % 3)",
          "SELECT k, v % 3, GROUPING(k, v % 3), COUNT(*), SUM(v), STDDEV_POP(price) FROM s_all GROUP BY ROLLUP (k, v % 3)"),
    Shape("grouping_sets_cube_having", "SELECT k, v % 2 AS m, COUNT(*) AS n FROM s GROUP BY CUBE (k, v % 2) "
          "HAVING COUNT(*) > 20",
          "SELECT k, v % 2, COUNT(*) FROM s_all GROUP BY CUBE (k, v % 2) HAVING COUNT(*) > 20"),
    Shape("grouping_sets_window", "SELECT window_start, window_end, k, GROUPING(k) AS g, COUNT(*) AS n, "
          "MAX(price) AS hi FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end, GROUPING SETS ((k), ())",
          f"SELECT {tumble(10)} AS ws, ws + INTERVAL '10 seconds', k, GROUPING(k), COUNT(*), MAX(price) FROM s_arr "
          f"WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ws, GROUPING SETS ((k), ())"),
    Shape("dedup_first", "SELECT k, v, ts FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn "
          "FROM s) WHERE rn = 1",
          "SELECT k, v, ts FROM s QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts, seq) = 1"),
    Shape("dedup_last", "SELECT k, v, ts FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) "
          "AS rn FROM s) WHERE rn = 1",
          "SELECT k, v, ts FROM s QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts DESC, seq DESC) = 1"),
    Shape("interval_join_inner", "SELECT a.k, a.v, b.v AS bv FROM s a JOIN s2 b ON a.k = b.k AND b.ts BETWEEN "
          "a.ts - INTERVAL '1' SECOND AND a.ts + INTERVAL '1' SECOND",
          "SELECT a.k, a.v, b.v AS bv FROM s_arr a JOIN s2_arr b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL 1 SECOND "
          f"AND a.ts + INTERVAL 1 SECOND AND {interval_kept('a.ts + INTERVAL 1 SECOND', 'b.ts + INTERVAL 1 SECOND')}"),
    Shape("interval_self_join", "SELECT a.v, b.v AS bv FROM s a JOIN s b ON a.k = b.k AND b.ts BETWEEN "
          "a.ts + INTERVAL '1' SECOND AND a.ts + INTERVAL '3' SECOND",
          "SELECT a.v, b.v AS bv FROM s_arr a JOIN s_arr b ON a.k = b.k AND b.ts BETWEEN a.ts + INTERVAL 1 SECOND AND "
          f"a.ts + INTERVAL 3 SECOND AND {interval_kept('a.ts + INTERVAL 3 SECOND', 'b.ts - INTERVAL 1 SECOND')}"),
    Shape("interval_join_left", "SELECT a.k, a.v, b.v AS bv FROM s a LEFT JOIN s2 b ON a.k = b.k AND b.ts BETWEEN "
          "a.ts AND a.ts + INTERVAL '2' SECOND AND b.v > a.v",
          "SELECT a.k, a.v, b.v AS bv FROM s_arr a LEFT JOIN s2_arr b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
          f"a.ts + INTERVAL 2 SECOND AND b.v > a.v AND {interval_kept('a.ts + INTERVAL 2 SECOND', 'b.ts')}"),
    Shape("interval_join_full", "SELECT a.v, b.v AS bv FROM s a FULL JOIN s2 b ON a.k = b.k AND b.ts BETWEEN "
          "a.ts AND a.ts + INTERVAL '1' SECOND",
          "SELECT a.v, b.v AS bv FROM s_arr a FULL JOIN s2_arr b ON a.k = b.k AND b.ts BETWEEN a.ts AND "
          f"a.ts + INTERVAL 1 SECOND AND {interval_kept('a.ts + INTERVAL 1 SECOND', 'b.ts')}"),
    Shape("window_join_full", "SELECT l.window_start, l.k, l.n, r.k AS rk, r.n AS rn FROM (SELECT window_start, "
          "window_end, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end, k) l FULL JOIN (SELECT window_start, window_end, k, COUNT(*) AS n "
          "FROM TABLE(TUMBLE(TABLE s2, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k) r "
          "ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
          # each aggregate (and the join) judges its own source's events per window
          f"""WITH l AS (SELECT {tumble(10)} AS ws, k, COUNT(*) AS n FROM s_arr
                         WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ws, k),
                   r AS (SELECT {tumble(10)} AS ws, k, COUNT(*) AS n FROM s2_arr
                         WHERE {OPEN.format(end='ws + INTERVAL 10 SECOND')} GROUP BY ws, k)
              SELECT l.ws, l.k, l.n, r.k AS rk, r.n AS rn FROM l FULL JOIN r ON l.ws = r.ws AND l.k = r.k"""),
    # A window join drops a row only when its window had fired for the row's own source when it arrived.
    Shape("window_join_rows", "SELECT l.v, r.v AS rv, l.window_start FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
          "INTERVAL '5' SECOND)) l JOIN TABLE(TUMBLE(TABLE s2, DESCRIPTOR(ts), INTERVAL '5' SECOND)) r "
          "ON l.window_start = r.window_start AND l.window_end = r.window_end AND l.k = r.k",
          f"""WITH l AS (SELECT {tumble(5)} AS ws, k, v FROM s_arr WHERE {OPEN.format(end='ws + INTERVAL 5 SECOND')}),
                   r AS (SELECT {tumble(5)} AS ws, k, v FROM s2_arr WHERE {OPEN.format(end='ws + INTERVAL 5 SECOND')})
              SELECT l.v, r.v AS rv, l.ws FROM l JOIN r ON l.ws = r.ws AND l.k = r.k""", min_rows=50),
    Shape("temporal_join_upsert_inner", "SELECT s.k, s.v, s.ts, t.rate FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts "
          "ON s.k = t.k", temporal("", "t_changes", "rate")),
    Shape("temporal_join_upsert_left", "SELECT s.k, s.v, s.ts, t.rate FROM s LEFT JOIN t FOR SYSTEM_TIME AS OF s.ts "
          "ON s.k = t.k", temporal("LEFT", "t_changes", "rate")),
    Shape("temporal_join_with_a_condition", "SELECT s.k, s.v, s.ts, t.rate FROM s LEFT JOIN t FOR SYSTEM_TIME AS "
          "OF s.ts ON s.k = t.k AND t.rate > s.v", temporal("LEFT", "t_changes", "rate", "AND v.rate > s.v")),
    Shape("temporal_join_debezium", "SELECT s.k, s.v, s.ts, d.label FROM s LEFT JOIN d FOR SYSTEM_TIME AS OF s.ts "
          "ON s.k = d.k", temporal("LEFT", "d_changes", "label")),
    Shape("table_upsert_state", "SELECT k, rate, ts FROM t", final_state("t_changes", "rate")),
    Shape("table_debezium_state", "SELECT k, label, ts FROM d", final_state("d_changes", "label")),
    Shape("regular_join_tables", "SELECT t.k, t.rate, d.label FROM t JOIN d ON t.k = d.k",
          f"""SELECT t.k, t.rate, d.label FROM ({final_state('t_changes', 'rate')}) t
              JOIN ({final_state('d_changes', 'label')}) d ON t.k = d.k"""),
    # A plain stream-table JOIN is a regular join (as in Flink): every event with the table's final rows.
    Shape("regular_join_stream_table", "SELECT s.k, s.v, t.rate FROM s LEFT JOIN t ON s.k = t.k",
          f"SELECT s.k, s.v, t.rate FROM s_all s LEFT JOIN ({final_state('t_changes', 'rate')}) t ON s.k = t.k"),
    Shape("regular_join_stream_debezium_inner", "SELECT s.k, s.v, s.ts, d.label FROM s JOIN d ON s.k = d.k",
          f"SELECT s.k, s.v, s.ts, d.label FROM s_all s JOIN ({final_state('d_changes', 'label')}) d ON s.k = d.k"),
    Shape("regular_join_stream_debezium_right", "SELECT s.v, d.k AS dk, d.label FROM s RIGHT JOIN d ON s.k = d.k "
          "AND s.v > 40", f"SELECT s.v, d.k, d.label FROM s_all s RIGHT JOIN ({final_state('d_changes', 'label')}) d "
          "ON s.k = d.k AND s.v > 40"),
    Shape("regular_join_stream_table_full", "SELECT s.v, t.k AS tk, t.rate FROM s FULL JOIN t ON s.k = t.k "
          "AND t.rate > 50", f"SELECT s.v, t.k, t.rate FROM s_all s FULL JOIN ({final_state('t_changes', 'rate')}) t "
          "ON s.k = t.k AND t.rate > 50"),
    # Windows with a policy judge per window too: a window takes an event while its last millisecond plus
    # the allowed lateness is above the watermark when it arrived (s5_arr: wm less 2 + 3 s).
    Shape("emit_changes", TUMBLE10 + " EMIT CHANGES", TUMBLE10_OPEN.format(src="s_arr")),
    Shape("emit_changes_every", TUMBLE10 + " EMIT CHANGES EVERY INTERVAL '1' SECOND",
          TUMBLE10_OPEN.format(src="s_arr")),
    Shape("allowed_lateness", TUMBLE10 + " ALLOWED LATENESS INTERVAL '3' SECOND", TUMBLE10_OPEN.format(src="s5_arr")),
    Shape("late_events", "SELECT k, v, ts FROM LATE(s)", "SELECT k, v, ts FROM s_late"),
    Shape("cql_rstream", "RSTREAM(SELECT k, COUNT(*) AS n FROM s [RANGE 10 SECONDS SLIDE 5 SECONDS] GROUP BY k)",
          f"SELECT k, n FROM {CQL_RELATION}"),
    Shape("cql_istream", "ISTREAM(SELECT k, COUNT(*) AS n FROM s [RANGE 10 SECONDS SLIDE 5 SECONDS] GROUP BY k)",
          "cql:insert"),
    Shape("cql_dstream", "DSTREAM(SELECT k, COUNT(*) AS n FROM s [RANGE 10 SECONDS SLIDE 5 SECONDS] GROUP BY k)",
          "cql:delete"),
    Shape("cql_rows_window", "SELECT k, v, ts FROM s [PARTITION BY k ROWS 2]",
          "SELECT k, v, ts FROM s_all QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts DESC, v NULLS FIRST) <= 2"),
    Shape("cql_rows_window_aggregate_istream", "ISTREAM(SELECT k, SUM(v) AS sv FROM s [PARTITION BY k ROWS 3] "
          "GROUP BY k)",
          # an OVER ROWS frame underneath: Flink's late rule for it (see over_rows_ties_in_arrival_order)
          "SELECT k, SUM(v) OVER (PARTITION BY k ORDER BY ts, seq ROWS 2 PRECEDING) FROM s_arr_seq AS i "
          "WHERE NOT EXISTS (SELECT 1 FROM s_arr_seq AS j WHERE j.k IS NOT DISTINCT FROM i.k AND j.seq < i.seq "
          "AND j.ts BETWEEN i.ts AND i.wm AND (j.wm IS NULL OR j.wm < i.wm))"),
    Shape("cql_rows_window_aggregate", "SELECT k, MAX(v) AS hi FROM s [PARTITION BY k ROWS 3] GROUP BY k",
          # the OVER ROWS frame's late rule (as cql_rows_window_aggregate_istream), then the latest row per key
          # (keep-last deduplication drops nothing)
          "SELECT k, hi FROM (SELECT k, ts, seq, MAX(v) OVER (PARTITION BY k ORDER BY ts, seq ROWS 2 PRECEDING) AS hi "
          "FROM s_arr_seq AS i WHERE NOT EXISTS (SELECT 1 FROM s_arr_seq AS j WHERE j.k IS NOT DISTINCT FROM i.k "
          "AND j.seq < i.seq AND j.ts BETWEEN i.ts AND i.wm AND (j.wm IS NULL OR j.wm < i.wm))) "
          "QUALIFY row_number() OVER (PARTITION BY k ORDER BY ts DESC, seq DESC) = 1"),
    Shape("cql_relation", "SELECT k, COUNT(*) AS n FROM s [RANGE 10 SECONDS SLIDE 5 SECONDS] GROUP BY k",
          "SELECT 'x', 1 WHERE FALSE", min_rows=0),
]


def cql_oracle(kind: str, tables: dict) -> pa.Table:
    """ISTREAM / DSTREAM of the [RANGE 10 s SLIDE 5 s] counts per key: per instant, a multiset difference."""
    relation = duck(f"SELECT i, k, n FROM {CQL_RELATION}", **tables)
    instants = sorted(set(relation.column("i").to_pylist()))
    step = dt.timedelta(seconds=5)
    wanted = sorted(set(instants) | {i + step for i in instants})
    parts = []
    for i in wanted:
        now, before = (i, i - step) if kind == "insert" else (i - step, i)
        parts.append(duck(f"""SELECT k, n FROM r WHERE i = TIMESTAMP '{now}' EXCEPT ALL
                              SELECT k, n FROM r WHERE i = TIMESTAMP '{before}'""", r=relation))
    return pa.concat_tables(parts)


def oracle_rows(shape: Shape, tables: dict) -> pa.Table:
    if shape.oracle.startswith("cql:"):
        return cql_oracle(shape.oracle[4:], tables)
    return duck(shape.oracle, **tables)


@dataclass(frozen=True)
class Refused:
    name: str
    ddl: str
    query: str
    message: str  # what every batch route's refusal says
    routes: tuple = ("duckdb", "spark")  # the routes that refuse it


REFUSED = [
    # Sessions and RANGE OVER frames judge late events with state a batch statement does not keep (docs/time.md);
    # the runtime runs them (tests/test_sessions.py, tests/test_over.py, tests/test_late_events.py).
    Refused("session_tvf_aggregate", "", "SELECT window_start, window_end, k, COUNT(*) AS n FROM TABLE(SESSION("
            "TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY window_start, window_end, k",
            "cannot run WindowAggregate(SESSION"),
    Refused("session_tvf_rows", "", "SELECT k, v, window_start, window_end FROM TABLE(SESSION(TABLE s PARTITION BY k, "
            "DESCRIPTOR(ts), INTERVAL '2' SECOND))", "cannot run WindowTVF(SESSION"),
    Refused("group_window_session", "", "SELECT k, SESSION_START(ts, INTERVAL '3' SECOND) AS ws, COUNT(*) AS n "
            "FROM s GROUP BY SESSION(ts, INTERVAL '3' SECOND), k", "cannot run WindowAggregate(SESSION"),
    Refused("over_range", "", "SELECT k, v, ts, SUM(v) OVER (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' "
            "SECOND PRECEDING AND CURRENT ROW) AS sv FROM s", "cannot run OverAggregate("),
    Refused("processing_time", "CREATE STREAM p (k VARCHAR, pt AS PROCTIME()) WITH (connector = 'file', "
            "path = '{root}/c.csv', format = 'csv');",
            "SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE p, DESCRIPTOR(pt), INTERVAL '1' SECOND)) "
            "GROUP BY window_start, window_end", "cannot run a query on processing time"),
    Refused("memory_source", "CREATE STREAM m (k VARCHAR) WITH (connector = 'memory');", "SELECT k FROM m",
            "cannot read 'm' (connector 'memory')"),
    Refused("watched_files", "CREATE STREAM w (k VARCHAR, v BIGINT, ts TIMESTAMP(3)) WITH (connector = 'file', "
            "path = '{root}/s', format = 'json', watch = 'true');", "SELECT k FROM w",
            "cannot read 'w' (watch = 'true')", routes=("duckdb",)),  # Spark runs it continuously
    Refused("lookup_join", "", "SELECT s.k, t.rate FROM s JOIN t FOR SYSTEM_TIME AS OF PROCTIME() ON s.k = t.k",
            "cannot run the lookup join"),
    Refused("lookup_join_on_a_proctime_column", "CREATE STREAM sp (k VARCHAR, v BIGINT, pt AS PROCTIME()) WITH ("
            "connector = 'file', path = '{root}/s', format = 'json');",
            "SELECT sp.v, d.label FROM sp LEFT JOIN d FOR SYSTEM_TIME AS OF sp.pt ON sp.k = d.k",
            "cannot run the lookup join"),
    Refused("istream_of_an_updating_relation", "", "ISTREAM(SELECT k, COUNT(*) AS n FROM s GROUP BY k)",
            "cannot run IStream(changes)"),
]
