"""The Flink conformance cases (conformance.py runs them): each a query for both engines, with a ``known``
note for each difference that is understood (by kind: ``types``, ``rows``, ``error``, ...).

A case is a dict: ``name``, ``sql``, and optionally ``known``, ``zone`` (the session time zone),
``views`` (statements run first, e.g. CREATE FUNCTION) and ``python`` (it calls Python functions of
conformance_udfs.py). The sources it reads are declared in conformance_data.py.
"""

from __future__ import annotations


def tvf(kind: str, source: str, *args: str) -> str:
    return f"TABLE({kind}(TABLE {source}, DESCRIPTOR(ts), {', '.join(args)}))"


S10, S5, S15, M1 = "INTERVAL '10' SECOND", "INTERVAL '5' SECOND", "INTERVAL '15' SECOND", "INTERVAL '1' MINUTE"
GROUP_W = "GROUP BY window_start, window_end"
WELFORD = ("Flink 2.3 computes STDDEV/VAR with Welford's update, row by row in arrival order (its VAR_SAMP of a "
           "DOUBLE gives 2326.9999999999995 where the exact value is 2327); dsms adds up sums and sums of squares "
           "per batch (the formula Flink documents): the last bits differ, which truncating an INT result turns "
           "into 1 (2326 vs 2327) and cancellation into 1e-8 relative (10.7794847 vs 10.7794848)")
AGG_FAMILY = """STDDEV_POP(price) AS sp, STDDEV_SAMP(price) AS ss, VAR_POP(price) AS vp, VAR_SAMP(price) AS vs,
  STDDEV_POP(v) AS spv, VAR_SAMP(v) AS vsv, SUM(DISTINCT v) AS sdv, AVG(DISTINCT v) AS adv, MAX(DISTINCT price) AS mdp,
  COUNT(DISTINCT v) AS cdv, COUNT(*) FILTER (WHERE price > 5) AS nf, SUM(v) FILTER (WHERE price < 3) AS sf,
  COUNT(DISTINCT v) FILTER (WHERE v > 0) AS dvf, MIN(price) FILTER (WHERE v IS NULL OR v < 0) AS mf"""

SUM_INT = "SUM of an INT column is INT in Flink (it can overflow), BIGINT in dsms (docs/sql.md says so)"
RANK_TOP_N = ("Flink 2.3 refuses RANK() and DENSE_RANK() in a streaming Top-N ('RANK() on streaming table is not "
              "supported currently') and in a window Top-N ('only ROW_NUMBER() is supported'); dsms runs them "
              "(ties share a rank and stay together; tests/test_topn_rank.py checks the rows against DuckDB)")
DECIMAL_LITERAL = ("a literal with a decimal point (3.0) is a DECIMAL in Flink, so INT / 3.0 is a DECIMAL(p, 6) "
                   "rounded to 6 places and INT * 1.5 a DECIMAL; dsms reads the literal as a DOUBLE")
LTZ_WINDOW_LOSS = ("Flink bug FLINK-38075 (apache/flink PR #28006, 'data loss in tumble/hop/cumulate windows with "
                   "LTZ for non-DST timezones'): Flink's window TVF aggregate over a TIMESTAMP_LTZ rowtime in a "
                   "non-UTC zone drops windows of day-long sizes; its rows of the windowing TVF alone, its 1-hour "
                   "windows, its UTC windows and its group-window TUMBLE (ltz_group_window_shanghai) all agree "
                   "with dsms, which counts every event in its local-midnight window")
JSON_VALUE_CAST = ("Flink 2.3 fails the job on JSON_VALUE(j, '$.k' RETURNING INT DEFAULT -1 ON ERROR) of a string "
                   "that is not a number (ClassCastException: String cannot be cast to Integer) instead of giving "
                   "the ON ERROR default, which its docs describe; dsms gives -1")
MULTISET_AS_MAP = ("COLLECT gives a MULTISET<T> in Flink; dsms keeps a MULTISET as the MAP<T, INT> of each value's "
                   "count (docs/types.md), the same pairs")
HOLD = ["CREATE TEMPORARY SYSTEM FUNCTION py_hold AS 'conformance_udfs.hold' LANGUAGE PYTHON"]
DISTINCT_IN_WINDOW = ("Flink 2.3 merges a window's pieces (local and global window aggregation) through its distinct "
                      "map, so ARRAY_AGG(DISTINCT x) in a window lists the values in that hash map's order ([0, -1, "
                      "NULL, 1, -2, 2, ...]); dsms lists them where they first arrived (docs/sql.md): the same "
                      "values, in another order. The group aggregates agree exactly")
PYTHON_TVF_AGGREGATE = ("Flink 2.3 plans a window TVF aggregate that calls a Python aggregate function as a group "
                        "aggregate over the TVF's rows (an updating result, no window operator), so an event behind "
                        "the watermark still updates its window; dsms runs it as a window aggregate, which drops "
                        "such events as Flink's window operator does (the group-window form, "
                        "python_aggregate_in_a_tumble, agrees)")
PYTHON_FUNCTIONS = ["CREATE TEMPORARY SYSTEM FUNCTION py_label AS 'conformance_udfs.label' LANGUAGE PYTHON",
                    "CREATE TEMPORARY SYSTEM FUNCTION py_scaled AS 'conformance_udfs.scaled' LANGUAGE PYTHON",
                    "CREATE TEMPORARY SYSTEM FUNCTION py_url_parts AS 'conformance_udfs.url_parts' LANGUAGE PYTHON",
                    "CREATE TEMPORARY SYSTEM FUNCTION py_wsum AS 'conformance_udfs.weighted_sum' LANGUAGE PYTHON",
                    "CREATE TEMPORARY SYSTEM FUNCTION py_spread AS 'conformance_udfs.spread' LANGUAGE PYTHON"]

CASES = [
    {"name": "tumble_count_sum_avg", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, window_end, k, COUNT(*) AS n, COUNT(v) AS nv, SUM(v) AS sv, AVG(v) AS av,
                       SUM(price) AS sp, AVG(price) AS ap, SUM(amount) AS sa, MAX(amount) AS ma
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    {"name": "tumble_avg_decimal",
     "sql": f"SELECT window_start, k, AVG(amount) AS aa FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"},
    {"name": "group_by_avg_decimal", "sql": "SELECT k, AVG(amount) AS aa, SUM(amount) AS sa FROM ev2 GROUP BY k"},
    {"name": "tumble_min_max",
     "sql": f"""SELECT window_start, window_end, window_time, k, MIN(v) AS mn, MAX(v) AS mx, MIN(price) AS mnp,
                       MAX(price) AS mxp, MIN(amount) AS mna, MAX(ts) AS last_ts, MIN(url) AS first_url
                FROM {tvf('TUMBLE', 'ev', S10)} GROUP BY window_start, window_end, window_time, k"""},
    {"name": "tumble_offset",
     "sql": f"""SELECT window_start, window_end, COUNT(*) AS n, MAX(v) AS mx
                FROM {tvf('TUMBLE', 'ev', S10, "INTERVAL '3' SECOND")} {GROUP_W}"""},
    {"name": "count_distinct",
     "sql": f"""SELECT window_start, window_end, COUNT(DISTINCT k) AS keys, COUNT(DISTINCT v) AS vals,
                       COUNT(*) AS n FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}"""},
    {"name": "having", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k HAVING COUNT(*) >= 20 AND SUM(v) > 550"""},
    {"name": "hop", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv, MAX(price) AS mp
                FROM {tvf('HOP', 'ev', S5, S15)} {GROUP_W}, k"""},
    {"name": "cumulate", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv, MIN(v) AS mn
                FROM {tvf('CUMULATE', 'ev', S10, M1)} {GROUP_W}, k"""},
    {"name": "union_all", "known": {"types": SUM_INT},
     "views": ["CREATE VIEW both_streams AS SELECT k, v, ts FROM ev2 UNION ALL SELECT k, v, ts FROM ev3"],
     "sql": f"""SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv
                FROM {tvf('TUMBLE', 'both_streams', S10)} {GROUP_W}, k"""},
    {"name": "group_window_tumble", "known": {"types": SUM_INT},
     "sql": f"""SELECT TUMBLE_START(ts, {S10}) AS ws, TUMBLE_END(ts, {S10}) AS we, k, COUNT(*) AS n, SUM(v) AS sv
                FROM ev GROUP BY TUMBLE(ts, {S10}), k"""},
    {"name": "group_window_hop",
     "sql": f"""SELECT HOP_START(ts, {S5}, {S15}) AS ws, HOP_END(ts, {S5}, {S15}) AS we, COUNT(*) AS n
                FROM ev GROUP BY HOP(ts, {S5}, {S15})"""},
    {"name": "cascade", "known": {"types": SUM_INT},
     "views": [f"""CREATE VIEW per_10s AS
                   SELECT window_start AS start_10s, window_time AS rowtime, k, COUNT(*) AS n, SUM(v) AS sv
                   FROM {tvf('TUMBLE', 'ev', S10)} GROUP BY window_start, window_end, window_time, k"""],
     "sql": f"""SELECT window_start, window_end, k, SUM(n) AS n, SUM(sv) AS sv, COUNT(*) AS windows,
                       MIN(start_10s) AS first_10s
                FROM TABLE(TUMBLE(TABLE per_10s, DESCRIPTOR(rowtime), {M1})) {GROUP_W}, k"""},
    {"name": "tvf_rows",
     "sql": f"SELECT id, window_start, window_end, window_time FROM {tvf('HOP', 'ev2', S5, S10)}"},
    {"name": "scalar_functions",
     "sql": r"""SELECT id,
                  CASE WHEN v IS NULL THEN 'none' WHEN v >= 50 THEN 'high' WHEN v >= 0 THEN 'low'
                       ELSE 'negative' END AS band,
                  COALESCE(k, 'none') AS k2, UPPER(k) AS uk,
                  DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss.SSS') AS t_text, DATE_FORMAT(ts, 'HH:mm') AS hm,
                  TIMESTAMPDIFF(SECOND, TIMESTAMP '2024-03-01 12:00:00', ts) AS secs,
                  TIMESTAMPDIFF(MINUTE, ts, TIMESTAMP '2024-03-01 12:00:00') AS minus_minutes,
                  SPLIT_INDEX(url, '/', 2) AS host, SPLIT_INDEX(url, '/', 9) AS no_part,
                  REGEXP_EXTRACT(url, 'id=(\d+)', 1) AS item, REGEXP_EXTRACT(url, '[a-z]+\.example') AS site,
                  v / 7 AS v_div, v % 7 AS v_mod, -v / 7 AS neg_div, id / 1000 AS id_div
                FROM ev2"""},
    {"name": "more_scalar_functions",
     "sql": """SELECT id, CAST(ts AS STRING) AS ts_text, CAST(price AS INT) AS price_int, ROUND(price, 1) AS p1,
                      CONCAT(k, '-', CAST(v AS STRING)) AS kv, SUBSTRING(url, 9, 5) AS sub, CHAR_LENGTH(url) AS url_len,
                      FLOOR(ts TO MINUTE) AS minute_start, EXTRACT(SECOND FROM ts) AS sec_part, HOUR(ts) AS hour_part,
                      TIMESTAMPADD(SECOND, v, ts) AS shifted, IF(v > 10, 'big', 'small') AS v_size,
                      NULLIF(k, 'k0') AS not_k0, ABS(v) % 4 AS abs_mod, POSITION('id=' IN url) AS id_pos,
                      REGEXP_REPLACE(url, '[0-9]+', '#') AS masked, LOWER(k) || '!' AS shout
               FROM ev2"""},
    {"name": "tumble_filtered", "views": ["CREATE VIEW busy AS SELECT * FROM ev2 WHERE v > 20 AND k IS NOT NULL"],
     "sql": f"""SELECT window_start, window_end, k, COUNT(*) AS n, MAX(v) AS mx
                FROM {tvf('TUMBLE', 'busy', S10)} {GROUP_W}, k"""},
    {"name": "decimal_literal", "known": {"types": DECIMAL_LITERAL, "rows": DECIMAL_LITERAL},
     "sql": "SELECT id, v / 3.0 AS v_third, v * 1.5 AS v_and_half FROM ev2 WHERE v < 0"},
    {"name": "scalar_in_window", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, UPPER(COALESCE(k, 'none')) AS uk, COUNT(*) AS n, SUM(v / 7) AS s7,
                       SUM(CASE WHEN v > 0 THEN 1 ELSE 0 END) AS id_pos, MAX(DATE_FORMAT(ts, 'ss.SSS')) AS last_s
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, UPPER(COALESCE(k, 'none'))"""},
    {"name": "group_by", "known": {"types": SUM_INT},
     "sql": """SELECT k, COUNT(*) AS n, SUM(v) AS sv, MIN(v) AS mn, MAX(v) AS mx, COUNT(DISTINCT v) AS dv,
                      AVG(v) AS av, MAX(price) AS mp FROM ev2 GROUP BY k"""},
    {"name": "group_by_expression",
     "sql": """SELECT SPLIT_INDEX(url, '/', 2) AS host, v % 3 AS r, COUNT(*) AS n FROM ev2
               GROUP BY SPLIT_INDEX(url, '/', 2), v % 3"""},
    {"name": "select_distinct", "sql": "SELECT DISTINCT k, v / 25 AS bucket FROM ev2"},
    # Queries without a window keep late events, in both (only operators that fire on the watermark drop).
    {"name": "group_by_late_events", "known": {"types": SUM_INT},
     "sql": "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM ev GROUP BY k"},
    {"name": "projection_late_events",
     "sql": "SELECT id, k, ts FROM ev"},
    # An event at the watermark in a window's last millisecond (edge.jsonl, id 3): both fire the window when
    # the watermark reaches window_end - 1 ms, and drop it.
    {"name": "edge_at_watermark", "known": {"types": SUM_INT},
     "sql": f"""SELECT window_start, window_end, COUNT(*) AS n, SUM(v) AS sv
                FROM {tvf('TUMBLE', 'edge', S10)} {GROUP_W}"""},
    # A stream joined with a table is a regular join: the final rows are the stream with the table's final state.
    {"name": "stream_table_join_left",
     "sql": "SELECT e.id, e.k, e.v, r.rate, r.label FROM ev2 AS e LEFT JOIN rates AS r ON e.k = r.k"},
    {"name": "stream_table_join_inner",
     "sql": "SELECT e.id, r.k, r.label FROM ev3 AS e JOIN rates AS r ON e.k = r.k AND e.v < r.rate"},
    # Late events judged per window (ooo.jsonl): an event behind the watermark counts in open windows.
    {"name": "late_per_window_tumble",
     "sql": f"SELECT window_start, window_end, COUNT(*) AS n FROM {tvf('TUMBLE', 'ooo', M1)} {GROUP_W}"},
    {"name": "late_per_window_tumble_offset",
     "sql": f"""SELECT window_start, window_end, COUNT(*) AS n
                FROM {tvf('TUMBLE', 'ooo', M1, "INTERVAL '15' SECOND")} {GROUP_W}"""},
    {"name": "late_per_window_hop",
     "sql": f"""SELECT window_start, window_end, COUNT(*) AS n, MAX(v) AS mx
                FROM {tvf('HOP', 'ooo', "INTERVAL '30' SECOND", M1)} {GROUP_W}"""},
    {"name": "late_per_window_cumulate",
     "sql": f"""SELECT window_start, window_end, COUNT(*) AS n
                FROM {tvf('CUMULATE', 'ooo', "INTERVAL '20' SECOND", M1)} {GROUP_W}"""},
    {"name": "late_per_window_keyed_group_window",
     "sql": f"""SELECT TUMBLE_START(ts, {M1}) AS ws, k, COUNT(*) AS n FROM ooo GROUP BY TUMBLE(ts, {M1}), k"""},
    {"name": "late_per_window_top_n",
     "sql": f"""SELECT window_start, window_end, id, v FROM (
                  SELECT window_start, window_end, id, v, ROW_NUMBER() OVER (
                    PARTITION BY window_start, window_end ORDER BY v DESC) AS rn
                  FROM {tvf('TUMBLE', 'ooo', M1)}) WHERE rn <= 2"""},
    # Allowed lateness (docs/time.md): Flink's group window operator with table.exec.emit.allow-lateness drops an
    # event only when its window's last millisecond plus the lateness is at or below the watermark, and late-fires
    # an update otherwise: :40 (watermark :65) and :65 (:125) update fired windows; :178 and :150 (:195) are dropped.
    {"name": "late_allow_lateness_group_window",
     "flink_config": {"table.exec.emit.allow-lateness": "10 s", "table.exec.emit.late-fire.enabled": "true",
                      "table.exec.emit.late-fire.delay": "0 s"},
     "sql": f"SELECT TUMBLE_START(ts, {M1}) AS ws, COUNT(*) AS n, MAX(v) AS mx FROM ooo GROUP BY TUMBLE(ts, {M1})",
     "dsms_sql": f"""SELECT TUMBLE_START(ts, {M1}) AS ws, COUNT(*) AS n, MAX(v) AS mx FROM ooo GROUP BY TUMBLE(ts, {M1})
                     ALLOWED LATENESS INTERVAL '10' SECOND"""},
    # Nested JSON (docs/types.md): ROW and ARRAY access, constructors and functions, UNNEST.
    {"name": "nested_json_access",
     "sql": """SELECT id, customer.name AS name, customer.tags[1] AS first_tag, customer.tags[4] AS fourth,
                      CARDINALITY(items) AS n, items[1].sku AS sku, orders.items[2].qty AS qty
               FROM orders"""},
    {"name": "nested_array_constructors",
     "sql": """SELECT id, CARDINALITY(ARRAY[id, id + 1]) AS n, ARRAY[customer.name, 'x'][2] AS x2,
                      ARRAY_JOIN(ARRAY_DISTINCT(customer.tags), ',') AS tags, ARRAY_POSITION(customer.tags, 'b') AS pos,
                      ARRAY_CONTAINS(customer.tags, 'a') AS has_a, MAP['k', id]['k'] AS mk,
                      CARDINALITY(ARRAY_SLICE(customer.tags, 2)) AS rest
               FROM orders"""},
    # JSON objects read as MAPs (profiles.jsonl): whole, by key, nested in a ROW, holding ARRAYs, unnested.
    {"name": "nested_json_map_columns", "sql": "SELECT id, attrs, labels, info.extra AS extra FROM profiles"},
    {"name": "nested_json_map_access",
     "sql": """SELECT id, attrs['a'] AS a, CARDINALITY(attrs) AS n, labels['x'][1] AS x1,
                      CARDINALITY(labels['y']) AS ny, info.name AS name, info.extra['p'] AS p FROM profiles"""},
    {"name": "nested_json_map_unnest",
     "sql": "SELECT id, k, v FROM profiles CROSS JOIN UNNEST(attrs) AS t(k, v)"},
    {"name": "nested_unnest_rows",
     "sql": "SELECT id, sku, qty FROM orders CROSS JOIN UNNEST(items) AS t(sku, qty)"},
    {"name": "nested_unnest_ordinality",
     "sql": "SELECT id, tag, pos FROM orders AS o CROSS JOIN UNNEST(o.customer.tags) WITH ORDINALITY AS t(tag, pos)"},
    {"name": "nested_left_join_unnest",
     "sql": "SELECT id, tag FROM orders AS o LEFT JOIN UNNEST(o.customer.tags) AS t(tag) ON TRUE"},
    {"name": "nested_unnest_group_agg", "known": {"types": SUM_INT},
     "sql": """SELECT sku, COUNT(*) AS n, SUM(qty) AS q FROM orders CROSS JOIN UNNEST(items) AS t(sku, qty)
               GROUP BY sku"""},
    {"name": "late_tvf_rows_kept", "sql": f"SELECT id, window_start FROM {tvf('TUMBLE', 'ooo', M1)}"},
    # Late events under sessions and OVER aggregates (lsess.jsonl, lover.jsonl), as Flink judges them.
    {"name": "late_session_tvf",
     "sql": """SELECT k, window_start, window_end, COUNT(*) AS n, MAX(v) AS mx FROM TABLE(SESSION(TABLE lsess
               PARTITION BY k, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""},
    {"name": "late_session_group_window",
     "sql": """SELECT k, SESSION_START(ts, INTERVAL '10' SECOND) AS ws, SESSION_END(ts, INTERVAL '10' SECOND) AS we,
               COUNT(*) AS n FROM lsess GROUP BY SESSION(ts, INTERVAL '10' SECOND), k"""},
    {"name": "late_over_unbounded",
     "sql": """SELECT k, v, COUNT(*) OVER w AS n, MAX(v) OVER w AS mx FROM lover
               WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"""},
    {"name": "late_over_rows",
     "sql": """SELECT k, v, COUNT(*) OVER w AS n, MIN(v) OVER w AS mn FROM lover
               WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"""},
    {"name": "late_over_range",
     "sql": """SELECT k, v, COUNT(*) OVER w AS n, MIN(v) OVER w AS mn FROM lover
               WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW)"""},
    {"name": "late_over_range_random",
     "sql": """SELECT id, COUNT(*) OVER w AS n, MAX(v) OVER w AS mx FROM ev
               WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '3' SECOND PRECEDING AND CURRENT ROW)"""},
    {"name": "late_session_random",
     "sql": """SELECT k, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE ev PARTITION BY k,
               DESCRIPTOR(ts), INTERVAL '2' SECOND)) GROUP BY window_start, window_end, k"""},
    # Accepted by Flink 2.3, refused or different in dsms before.
    {"name": "hop_size_not_a_multiple_of_slide",
     "sql": """SELECT HOP_START(ts, INTERVAL '4' SECOND, INTERVAL '10' SECOND) AS ws, k, COUNT(*) AS n
               FROM ev GROUP BY HOP(ts, INTERVAL '4' SECOND, INTERVAL '10' SECOND), k"""},
    {"name": "interval_join_bounds_never_hold",
     "sql": """SELECT a.id AS aid, b.id AS bid FROM ev2 AS a FULL JOIN ev3 AS b ON a.k = b.k
               AND b.ts BETWEEN a.ts + INTERVAL '2' SECOND AND a.ts - INTERVAL '2' SECOND"""},
    {"name": "top_n_expression_partition_key",
     "sql": """SELECT id, v, price FROM (SELECT id, v, price, ROW_NUMBER() OVER (PARTITION BY v / 25
               ORDER BY price DESC, id) AS rn FROM ev2) WHERE rn <= 2"""},
    {"name": "top_n_rank_ties", "known": {"error": RANK_TOP_N},
     "sql": """SELECT k, v, id, rk FROM (SELECT k, v, id, RANK() OVER (PARTITION BY k ORDER BY b DESC) AS rk
               FROM (SELECT k, v, id, v / 20 AS b FROM ev2)) WHERE rk <= 2"""},
    {"name": "top_n_dense_rank_window", "known": {"error": RANK_TOP_N},
     "sql": f"""SELECT window_start, k, n, rk FROM (SELECT *, DENSE_RANK() OVER (
                  PARTITION BY window_start, window_end ORDER BY n DESC) AS rk
                FROM (SELECT window_start, window_end, k, COUNT(*) AS n FROM {tvf('TUMBLE', 'ev2', S10)}
                      {GROUP_W}, k)) WHERE rk <= 2"""},
    {"name": "extract_and_floor_units",
     "sql": """SELECT id, EXTRACT(MILLISECOND FROM ts) AS ms, EXTRACT(EPOCH FROM ts) AS ep,
                      EXTRACT(DECADE FROM ts) AS de, EXTRACT(CENTURY FROM ts) AS ce, EXTRACT(MILLENNIUM FROM ts) AS mi,
                      EXTRACT(ISOYEAR FROM ts) AS iy, FLOOR(CAST(ts AS DATE) TO MONTH) AS fm,
                      CEIL(CAST(ts AS DATE) TO YEAR) AS cy, FLOOR(CAST(ts AS DATE) TO WEEK) AS fw,
                      CAST(ts AS STRING) AS t FROM ev2"""},
    # Window properties survive renames and regrouping: append-only results.
    {"name": "regrouped_window_renamed",
     "views": [f"""CREATE VIEW per_key AS SELECT window_start AS ws, window_end AS we, k, COUNT(*) AS n,
                   SUM(v) AS sv FROM {tvf('TUMBLE', 'ev2', S10)} {GROUP_W}, k"""],
     "sql": "SELECT ws, we, SUM(n) AS n, MAX(n) AS most, COUNT(*) AS keys FROM per_key GROUP BY ws, we"},
    # TIMESTAMP_LTZ in a session zone (case["zone"]): windows from local midnight, casts and parts in local time.
    {"name": "ltz_tumble_day_shanghai", "zone": "Asia/Shanghai", "known": {"rows": LTZ_WINDOW_LOSS},
     "sql": """SELECT window_start, window_end, CAST(window_time AS STRING) AS wt, k, COUNT(*) AS n, MAX(v) AS mx
               FROM TABLE(TUMBLE(TABLE evz, DESCRIPTOR(ts), INTERVAL '1' DAY))
               GROUP BY window_start, window_end, window_time, k"""},
    {"name": "ltz_hop_cumulate_kolkata", "zone": "Asia/Kolkata", "known": {"rows": LTZ_WINDOW_LOSS},
     "views": ["""CREATE VIEW evz_hop AS SELECT window_start, window_end, COUNT(*) AS n
                  FROM TABLE(HOP(TABLE evz, DESCRIPTOR(ts), INTERVAL '6' HOUR, INTERVAL '1' DAY))
                  GROUP BY window_start, window_end""",
               """CREATE VIEW evz_cumulate AS SELECT window_start, window_end, COUNT(*) AS n
                  FROM TABLE(CUMULATE(TABLE evz, DESCRIPTOR(ts), INTERVAL '8' HOUR, INTERVAL '1' DAY))
                  GROUP BY window_start, window_end"""],
     "sql": "SELECT 'hop' AS kind, * FROM evz_hop UNION ALL SELECT 'cumulate' AS kind, * FROM evz_cumulate"},
    {"name": "ltz_group_window_shanghai", "zone": "Asia/Shanghai",
     "sql": """SELECT TUMBLE_START(ts, INTERVAL '1' DAY) AS ws, TUMBLE_END(ts, INTERVAL '1' DAY) AS we, COUNT(*) AS n
               FROM evz GROUP BY TUMBLE(ts, INTERVAL '1' DAY)"""},
    {"name": "ltz_scalar_shanghai", "zone": "Asia/Shanghai",
     "sql": """SELECT id, CAST(ts AS STRING) AS local_text, CAST(ts AS TIMESTAMP(3)) AS local_ts, HOUR(ts) AS h,
                      DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm') AS fmt, CAST(FLOOR(ts TO DAY) AS STRING) AS day_start,
                      CAST(TO_TIMESTAMP_LTZ(id * 1000, 0) AS STRING) AS from_epoch,
                      CAST(CAST(ts AS TIMESTAMP(3)) AS TIMESTAMP_LTZ(3)) = ts AS round_trip
               FROM evz WHERE id % 10 = 0"""},
    # The aggregate family (planner/aggregate_kinds.py): STDDEV/VAR, DISTINCT, FILTER, GROUPING SETS.
    {"name": "aggfam_group", "known": {"types": SUM_INT},
     "sql": f"""SELECT k, {AGG_FAMILY} FROM ev2 GROUP BY k"""},
    {"name": "aggfam_tumble", "known": {"types": SUM_INT, "rows": WELFORD},
     "sql": f"""SELECT window_start, window_end, k, {AGG_FAMILY} FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    {"name": "aggfam_hop_filter",
     "sql": f"""SELECT window_start, window_end, COUNT(*) FILTER (WHERE v > 0) AS pos,
                       MAX(price) FILTER (WHERE k = 'k1') AS mp1, VAR_SAMP(price) AS vs
                FROM {tvf('HOP', 'ev', S5, S15)} {GROUP_W}"""},
    {"name": "aggfam_updating_table", "known": {"types": SUM_INT},
     "sql": """SELECT label, COUNT(*) AS n, SUM(DISTINCT rate) AS sdr, VAR_POP(rate) AS vr, STDDEV_SAMP(rate) AS sr,
                      MAX(rate) FILTER (WHERE rate > 10) AS mr FROM rates GROUP BY label"""},
    {"name": "aggfam_grouping_sets_window",
     "sql": f"""SELECT window_start, window_end, k, GROUPING(k) AS g, COUNT(*) AS n, MAX(price) AS mp,
                       STDDEV_POP(price) AS sp FROM {tvf('TUMBLE', 'ev', S10)}
                GROUP BY window_start, window_end, GROUPING SETS ((k), ())"""},
    {"name": "aggfam_rollup_group",
     "sql": """SELECT k, MOD(v, 3) AS m, GROUPING(k, MOD(v, 3)) AS g, COUNT(*) AS n, MIN(price) AS mn
               FROM ev2 GROUP BY ROLLUP (k, MOD(v, 3))"""},
    {"name": "aggfam_ordered_group",
     "sql": """SELECT k, FIRST_VALUE(v) AS fv, LAST_VALUE(price) AS lp, LISTAGG(url) AS lu, LISTAGG(k, '|') AS lk
               FROM ev2 GROUP BY k"""},
    {"name": "aggfam_ordered_tumble",
     "sql": f"""SELECT window_start, window_end, k, FIRST_VALUE(price) AS fp, LAST_VALUE(v) AS lv, LISTAGG(url, ';') AS lu
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    # ARRAY_AGG (arrival order, NULLs kept unless IGNORE NULLS) and COLLECT (a MULTISET, dsms's MAP of counts).
    # (PyFlink 2.3 cannot collect an array that holds a NULL, 'Ran out of input': those are compared as text.)
    {"name": "aggfam_array_agg_group",
     "sql": "SELECT k, CAST(ARRAY_AGG(v) AS STRING) AS av, ARRAY_AGG(url IGNORE NULLS) AS au FROM ev2 GROUP BY k"},
    {"name": "aggfam_collect_group", "known": {"types": MULTISET_AS_MAP},
     "sql": "SELECT k, COLLECT(v) AS cv FROM ev2 GROUP BY k"},
    {"name": "aggfam_array_agg_collect_tumble", "known": {"types": MULTISET_AS_MAP},
     "sql": f"""SELECT window_start, window_end, k, CAST(ARRAY_AGG(v) AS STRING) AS av, COLLECT(price) AS cp
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    {"name": "aggfam_panes_array_agg_collect_hop", "known": {"types": MULTISET_AS_MAP},
     "sql": f"""SELECT window_start, window_end, CAST(ARRAY_AGG(v) AS STRING) AS av, COLLECT(k) AS ck
                FROM {tvf('HOP', 'ev', S5, S15)} {GROUP_W}"""},
    {"name": "aggfam_panes_array_agg_cumulate",
     "sql": f"""SELECT window_start, window_end, CAST(ARRAY_AGG(v) AS STRING) AS av
                FROM {tvf('CUMULATE', 'ev', S5, S15)} {GROUP_W}"""},
    {"name": "aggfam_panes_listagg_hop",
     "sql": f"""SELECT window_start, window_end, LISTAGG(k) AS lk FROM {tvf('HOP', 'ev', S5, S15)} {GROUP_W}"""},
    {"name": "aggfam_array_agg_collect_updating_table", "known": {"types": MULTISET_AS_MAP},
     "sql": "SELECT label, ARRAY_AGG(rate) AS ar, COLLECT(k) AS ck, COUNT(*) AS n FROM rates GROUP BY label"},
    # ARRAY_AGG(DISTINCT) and COLLECT(DISTINCT): Flink's distinct map feeds each value once, at its first copy,
    # and takes it away with its last (an updating input).
    {"name": "aggfam_distinct_array_agg_collect_group", "known": {"types": MULTISET_AS_MAP},
     "sql": """SELECT k, CAST(ARRAY_AGG(DISTINCT MOD(v, 7)) AS STRING) AS av, ARRAY_AGG(DISTINCT url IGNORE NULLS) AS au,
               COLLECT(DISTINCT MOD(v, 7)) AS cv FROM ev2 GROUP BY k"""},
    {"name": "aggfam_distinct_array_agg_collect_updating_table", "known": {"types": MULTISET_AS_MAP},
     "sql": """SELECT MOD(rate, 2) AS m, ARRAY_AGG(DISTINCT MOD(rate, 6)) AS am, COLLECT(DISTINCT MOD(rate, 6)) AS cm,
               COUNT(*) AS n FROM rates GROUP BY MOD(rate, 2)"""},
    {"name": "aggfam_distinct_array_agg_collect_tumble", "known": {"types": MULTISET_AS_MAP, "rows": DISTINCT_IN_WINDOW},
     "sql": f"""SELECT window_start, window_end, k, CAST(ARRAY_AGG(DISTINCT MOD(v, 7)) AS STRING) AS av,
                       COLLECT(DISTINCT url) AS cu
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    {"name": "aggfam_cube_table",
     "sql": "SELECT label, MOD(rate, 2) AS odd, COUNT(*) AS n, MAX(rate) AS mx FROM rates GROUP BY CUBE (label, MOD(rate, 2))"},
    {"name": "nexmark_q5_window_join",
     "sql": f"""SELECT AuctionBids.k, AuctionBids.num, AuctionBids.starttime
                FROM (SELECT k, COUNT(*) AS num, window_start AS starttime, window_end AS endtime
                      FROM {tvf('HOP', 'ev2', S5, S15)} GROUP BY k, window_start, window_end) AS AuctionBids
                JOIN (SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
                      FROM (SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
                            FROM {tvf('HOP', 'ev2', S5, S15)} GROUP BY k, window_start, window_end) AS CountBids
                      GROUP BY CountBids.starttime, CountBids.endtime) AS MaxBids
                ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
                   AND AuctionBids.num >= MaxBids.maxn"""},
    # JSON functions (docs/functions.md#json-functions) over JSON text built from the columns.
    {"name": "json_construct",
     "sql": """SELECT id, JSON_OBJECT('k' VALUE k, 'v' VALUE v) AS o, JSON_OBJECT('k' VALUE k ABSENT ON NULL) AS oa,
                      JSON_ARRAY(k, v) AS a, JSON_ARRAY(k, v NULL ON NULL) AS an, JSON_STRING(k) AS s FROM ev2"""},
    {"name": "json_value_query_exists",
     "sql": """SELECT id, JSON_VALUE(j, '$.v' RETURNING INT) AS v, JSON_VALUE(j, '$.p' RETURNING DOUBLE) AS p,
                      JSON_VALUE(j, '$.nope' DEFAULT 'anon' ON EMPTY) AS d,
                      JSON_EXISTS(j, '$.tags') AS has_tags, JSON_EXISTS(j, '$.v') AS has_v,
                      JSON_QUERY(j, '$.tags') AS tags, JSON_QUERY(j, '$.k' WITH CONDITIONAL ARRAY WRAPPER) AS kw,
                      j IS JSON OBJECT AS is_obj, k IS JSON AS k_json, JSON_VALUE(j, '$.tags[1]') AS second_tag
               FROM (SELECT id, k, JSON_OBJECT('k' VALUE k, 'v' VALUE v, 'p' VALUE price,
                                               'tags' VALUE JSON_ARRAY(k, url)) AS j FROM ev2)"""},
    {"name": "json_value_returning_int_default_on_error", "known": {"error": JSON_VALUE_CAST},
     "sql": """SELECT id, JSON_VALUE(j, '$.k' RETURNING INT DEFAULT -1 ON ERROR) AS bad
               FROM (SELECT id, JSON_OBJECT('k' VALUE k) AS j FROM ev2)"""},
    # MATCH_RECOGNIZE: rows matched in event-time order per key; greedy B+, WITHIN, measures. (dsms's PREV
    # is not here: Flink refuses physical offsets.)
    {"name": "match_recognize_greedy_within", "known": {"types": SUM_INT},
     "sql": """SELECT * FROM ev MATCH_RECOGNIZE (
                 PARTITION BY k ORDER BY ts
                 MEASURES FIRST(A.ts) AS start_ts, LAST(B.v) AS last_b, C.v AS c_v, COUNT(B.v) AS nb,
                          SUM(B.v) AS sum_b, FIRST(B.v, 1) AS second_b, LAST(B.price, 1) AS b_price,
                          MATCH_ROWTIME() AS mt
                 ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW
                 PATTERN (A B+ C) WITHIN INTERVAL '10' SECOND
                 DEFINE A AS A.v < 30, B AS B.v BETWEEN 30 AND 80, C AS C.v > 80) AS m"""},
    # Reluctant and counted quantifiers, an optional variable, skipping to the next row and to the last B.
    {"name": "match_recognize_reluctant_skip",
     "sql": """SELECT * FROM ev MATCH_RECOGNIZE (
                 PARTITION BY k ORDER BY ts
                 MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts, COUNT(*) AS n, AVG(B.v) AS avg_b
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B{1,3}? C? D) WITHIN INTERVAL '20' SECOND
                 DEFINE A AS A.v > 60, B AS B.v <= 60, C AS C.v > 90, D AS D.price > 0.5) AS m"""},
    {"name": "match_recognize_greedy_counted",
     "sql": """SELECT * FROM ev MATCH_RECOGNIZE (
                 PARTITION BY k ORDER BY ts
                 MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts, COUNT(B.v) AS nb
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A B{1,3} D) WITHIN INTERVAL '15' SECOND
                 DEFINE A AS A.v > 50, B AS B.v <= 50, D AS D.v > 70) AS m"""},
    {"name": "match_recognize_greedy_star",
     "sql": """SELECT * FROM ev MATCH_RECOGNIZE (
                 PARTITION BY k ORDER BY ts
                 MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts, COUNT(C.v) AS nc, MIN(C.price) AS min_c
                 AFTER MATCH SKIP TO NEXT ROW
                 PATTERN (A C* D) WITHIN INTERVAL '15' SECOND
                 DEFINE A AS A.v > 50, C AS C.price < 0.5, D AS D.v > 70) AS m"""},
    {"name": "match_recognize_skip_to_last",
     "sql": """SELECT * FROM ev MATCH_RECOGNIZE (
                 PARTITION BY k ORDER BY ts
                 MEASURES FIRST(ts) AS start_ts, LAST(ts) AS end_ts, MAX(B.price) AS max_b
                 AFTER MATCH SKIP TO LAST B
                 PATTERN (A B{2} C) WITHIN INTERVAL '30' SECOND
                 DEFINE B AS B.price > 0.4, C AS C.price < 0.3) AS m"""},
    # Subqueries: Flink decorrelates them into (semi / anti) regular joins; updating results.
    {"name": "subquery_in_table", "sql": "SELECT id, k, v FROM ev2 WHERE k IN (SELECT k FROM rates WHERE rate > 40)"},
    {"name": "subquery_not_exists_correlated",
     "sql": "SELECT id, k FROM ev2 WHERE NOT EXISTS (SELECT 1 FROM rates r WHERE r.k = ev2.k AND r.rate > 40)"},
    {"name": "subquery_not_in_nulls", "sql": "SELECT id, k FROM ev2 WHERE k NOT IN (SELECT k FROM rates WHERE rate < 0)"},
    {"name": "subquery_in_correlated_streams",
     "sql": "SELECT id, v FROM ev2 WHERE v IN (SELECT v FROM ev3 WHERE ev3.k = ev2.k AND ev3.price > 5)"},
    {"name": "subquery_scalar_correlated",
     "sql": "SELECT id, k, (SELECT MAX(rate) FROM rates r WHERE r.k = ev2.k) AS top FROM ev2 WHERE v > 50"},
    {"name": "subquery_scalar_count_where",
     "sql": "SELECT id, v FROM ev2 WHERE v < (SELECT COUNT(*) FROM rates)"},
    # OVER window functions (LEAD: refused by both in stream mode).
    {"name": "over_lag_first_last_value",
     "sql": """SELECT id, k, v, LAG(v) OVER w AS p, LAG(v, 2, -1) OVER w AS p2, FIRST_VALUE(v) OVER w AS f,
                      LAST_VALUE(url) OVER w AS lu FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts)"""},
    {"name": "over_rows_first_last_value", "known": {"types": SUM_INT},
     "sql": """SELECT id, k, FIRST_VALUE(url) OVER w AS fu, LAST_VALUE(v) OVER w AS lv, SUM(v) OVER w AS sv
               FROM ev WINDOW w AS (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW)"""},
    {"name": "over_range_first_last_value",
     "sql": """SELECT id, FIRST_VALUE(v) OVER w AS fv, LAST_VALUE(v) OVER w AS lv FROM ev2
               WINDOW w AS (PARTITION BY k ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW)"""},
    {"name": "over_row_number", "sql": "SELECT id, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM ev2"},
    {"name": "over_rank_lag_count",
     "sql": """SELECT id, k, RANK() OVER w AS r, DENSE_RANK() OVER w AS dr, LAG(id, 3) OVER w AS p3,
                      COUNT(*) OVER w AS n FROM ev2 WINDOW w AS (PARTITION BY k ORDER BY ts)"""},
    # Python scalar functions (conformance_udfs.py): the same Python code, called by Flink's Python worker and
    # by dsms over Arrow batches.
    {"name": "python_scalar_functions", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": "SELECT id, k, py_label(k, v) AS l, py_scaled(v) AS s FROM ev WHERE py_scaled(v) > 20"},
    {"name": "python_twin_builtin_tumble",
     "sql": f"""SELECT window_start, window_end, CONCAT(k, ':0') AS l, SUM(CAST(v AS BIGINT) * 3 - 1) AS s, COUNT(*) AS n
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, CONCAT(k, ':0')"""},
    # A Python table function (LATERAL TABLE) and Python aggregate functions (accumulate, retract, merge).
    {"name": "python_table_function", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": "SELECT id, part, n FROM ev, LATERAL TABLE(py_url_parts(url)) AS t(part, n) WHERE id % 3 = 0"},
    {"name": "python_aggregate_in_a_tumble", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": """SELECT TUMBLE_START(ts, INTERVAL '10' SECOND) AS ws, TUMBLE_END(ts, INTERVAL '10' SECOND) AS we, k,
                      py_wsum(v, price) AS ws2, py_spread(v) AS sp, COUNT(*) AS n
               FROM ev GROUP BY TUMBLE(ts, INTERVAL '10' SECOND), k"""},
    {"name": "python_aggregate_in_a_hop", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": """SELECT HOP_START(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS ws, k, py_wsum(v, price) AS ws2
               FROM ev GROUP BY HOP(ts, INTERVAL '5' SECOND, INTERVAL '15' SECOND), k"""},
    {"name": "python_aggregate_in_a_tumble_tvf", "python": True, "views": PYTHON_FUNCTIONS,
     "known": {"rows": PYTHON_TVF_AGGREGATE},
     "sql": f"""SELECT window_start, window_end, k, py_wsum(v, price) AS ws, py_spread(v) AS sp, COUNT(*) AS n
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, k"""},
    {"name": "python_aggregate_over_updates", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": "SELECT label, py_wsum(rate, CAST(1.5 AS DOUBLE)) AS ws, COUNT(*) AS n FROM rates GROUP BY label"},
    {"name": "python_functions_in_a_tumble", "python": True, "views": PYTHON_FUNCTIONS,
     "sql": f"""SELECT window_start, window_end, py_label(k, 0) AS l, SUM(py_scaled(v)) AS s, COUNT(*) AS n
                FROM {tvf('TUMBLE', 'ev', S10)} {GROUP_W}, py_label(k, 0)"""},
    # Late rows in interval and temporal joins (lija/lijb, ltjo/ltjrates: conformance_data.py), as Flink's
    # TimeIntervalJoin and TemporalRowTimeJoinOperator judge them. The left side passes py_hold, which pauses
    # on its first row, so that the other (small) input has finished when the left rows reach the join: the
    # join's watermark is then the left input's own, as dsms judges each row (docs/time.md).
    {"name": "late_interval_join_inner", "python": True, "views": HOLD,
     "sql": """SELECT a.id AS aid, b.id AS bid FROM (SELECT * FROM lija WHERE py_hold(id) >= 0) AS a
               JOIN lijb AS b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND"""},
    {"name": "late_interval_join_left", "python": True, "views": HOLD,
     "sql": """SELECT a.id AS aid, b.id AS bid FROM (SELECT * FROM lija WHERE py_hold(id) >= 0) AS a
               LEFT JOIN lijb AS b ON a.k = b.k AND a.ts BETWEEN b.ts - INTERVAL '10' SECOND AND b.ts + INTERVAL '10' SECOND"""},
    {"name": "late_temporal_join_inner", "python": True, "views": HOLD,
     "sql": """SELECT o.id, r.rate FROM (SELECT * FROM ltjo WHERE py_hold(id) >= 0) AS o
               JOIN ltjrates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k"""},
    {"name": "late_temporal_join_left", "python": True, "views": HOLD,
     "sql": """SELECT o.id, r.rate FROM (SELECT * FROM ltjo WHERE py_hold(id) >= 0) AS o
               LEFT JOIN ltjrates FOR SYSTEM_TIME AS OF o.ts AS r ON o.k = r.k"""},
]
