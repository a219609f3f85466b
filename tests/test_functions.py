"""Flink scalar functions, end to end: parse -> bind -> DuckDB, and the same expression on Spark.

Each case is an expression over a few input rows of stream ``s`` with the
result Flink gives (worked out by hand from Flink's documentation and
runtime code) and Flink's result type. The case is planned with
``plan_query``, its Calc SQL run by DuckDB over an Arrow batch, and the bound
expression rendered with ``sqlgen.typed(...).sql(dialect='spark')`` and run by
PySpark over a DataFrame with the same rows. ``docs/functions.md`` lists
where dsms knowingly differs from Flink.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pytest

from dsms.grammar import SqlError, parse_statement
from dsms.grammar.dialect import Dsms
from dsms.planner import Catalog, plan_query
from dsms.planner.ddl import bind_create_source
from dsms.planner.logical import nodes as L
from dsms.planner.lower.sqlgen import typed

INT, BIGINT, DOUBLE, STR, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.string(), pa.bool_()
TS, DATE = pa.timestamp("us"), pa.date32()

COLUMNS = {"i": INT, "j": INT, "b": BIGINT, "d": DOUBLE, "s": STR, "t": STR, "ts": TS, "ts2": TS, "dt": DATE, "f": BOOL}
DDL = ("CREATE STREAM s (i INT, j INT, b BIGINT, d DOUBLE, s VARCHAR, t VARCHAR, ts TIMESTAMP(3), ts2 TIMESTAMP(3), "
       "dt DATE, f BOOLEAN) WITH (connector = 'memory')")


def T(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text)


def D(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


@dataclass
class Case:
    expr: str
    rows: dict  # column -> values (all the same length)
    expected: list
    type: pa.DataType
    approx: bool = False  # floating-point results of transcendental functions
    spark: bool = True


def C(expr, rows, expected, type_, **kw) -> Case:
    return Case(expr, rows, expected, type_, **kw)


A, B, SUN = T("2024-02-29 13:45:30.123"), T("1969-12-31 23:59:59"), T("2021-01-03 00:00:00")
TS3 = {"ts": [A, B, SUN, None]}  # a leap day (Thursday), before 1970 (Wednesday), a Sunday in ISO week 53

CASES = [
    # -- arithmetic and math ------------------------------------------------------------
    C("i + j", {"i": [1, -7, None], "j": [2, 3, 4]}, [3, -4, None], INT),
    C("i - j", {"i": [1, -7, None], "j": [2, 3, 4]}, [-1, -10, None], INT),
    C("i * j", {"i": [1, -7, None], "j": [2, 3, 4]}, [2, -21, None], INT),
    C("i / j", {"i": [7, -7, 1, None], "j": [2, 2, 3, 1]}, [3, -3, 0, None], INT),  # INT / INT truncates
    C("d / 2", {"d": [5.0, -2.5, None]}, [2.5, -1.25, None], DOUBLE),
    C("i % j", {"i": [7, -7, 7, None], "j": [3, 3, -3, 3]}, [1, -1, 1, None], INT),  # sign of the dividend
    C("MOD(i, j)", {"i": [7, -7, 7, None], "j": [3, 3, -3, 3]}, [1, -1, 1, None], INT),
    C("ABS(i)", {"i": [-5, 0, 7, None]}, [5, 0, 7, None], INT),
    C("ABS(d)", {"d": [-2.5, None]}, [2.5, None], DOUBLE),
    C("CEIL(d)", {"d": [2.1, -2.1, 3.0, None]}, [3.0, -2.0, 3.0, None], DOUBLE),
    C("CEILING(d)", {"d": [2.1, -2.1]}, [3.0, -2.0], DOUBLE),
    C("FLOOR(d)", {"d": [2.1, -2.1, 3.0, None]}, [2.0, -3.0, 3.0, None], DOUBLE),
    C("ROUND(d)", {"d": [2.5, -2.5, 1.4, None]}, [3.0, -3.0, 1.0, None], DOUBLE),  # HALF_UP
    # Flink rounds the decimal a double prints as: 1.005 -> 1.01 (DuckDB alone would give 1.0).
    C("ROUND(d, 2)", {"d": [1.005, 0.285, -0.285, 2.675, 1234.5678, None]}, [1.01, 0.29, -0.29, 2.68, 1234.57, None], DOUBLE),
    C("ROUND(d, -2)", {"d": [1250.0, -1249.9]}, [1300.0, -1200.0], DOUBLE),
    C("ROUND(i, -1)", {"i": [15, -15, 14, None]}, [20, -20, 10, None], INT),
    C("TRUNCATE(d, 2)", {"d": [42.324, -42.326, 0.29, 1.999, None]}, [42.32, -42.32, 0.29, 1.99, None], DOUBLE),
    C("TRUNCATE(d)", {"d": [42.9, -42.9]}, [42.0, -42.0], DOUBLE),
    C("TRUNCATE(d, 1)", {"d": [0.0, 0.04, -0.04, 0.05, None]}, [0.0, 0.0, 0.0, 0.0, None], DOUBLE),  # 0 stays 0
    C("TRUNCATE(i, -1)", {"i": [129, -129, 5, None]}, [120, -120, 0, None], INT),
    C("POWER(d, 2)", {"d": [3.0, -2.0, None]}, [9.0, 4.0, None], DOUBLE),
    C("POWER(i, 2)", {"i": [3]}, [9.0], DOUBLE),
    C("SQRT(d)", {"d": [16.0, 2.0, None]}, [4.0, math.sqrt(2.0), None], DOUBLE, approx=True),
    C("EXP(d)", {"d": [0.0, 1.0]}, [1.0, math.e], DOUBLE, approx=True),
    C("LN(d)", {"d": [1.0, math.e]}, [0.0, 1.0], DOUBLE, approx=True),
    C("LOG10(d)", {"d": [1000.0, 0.1]}, [3.0, -1.0], DOUBLE, approx=True),
    C("LOG2(d)", {"d": [8.0, 0.5]}, [3.0, -1.0], DOUBLE, approx=True),
    C("LOG(d)", {"d": [1.0, math.e]}, [0.0, 1.0], DOUBLE, approx=True),  # one argument: natural log
    C("LOG(2, d)", {"d": [8.0, 1024.0]}, [3.0, 10.0], DOUBLE, approx=True),
    C("SIGN(d)", {"d": [-2.5, 0.0, 3.0, None]}, [-1.0, 0.0, 1.0, None], DOUBLE),
    C("SIGN(i)", {"i": [-5, 0, 7, None]}, [-1, 0, 1, None], INT),
    C("GREATEST(i, j)", {"i": [1, 5, None], "j": [3, 2, 1]}, [3, 5, None], INT),  # NULL if any is NULL
    C("LEAST(i, j, 0)", {"i": [1, -5, None], "j": [3, 2, 1]}, [0, -5, None], INT),
    # -- conditions and conversions -----------------------------------------------------
    C("CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'zero' END", {"i": [5, -5, 0, None]},
      ["pos", "neg", "zero", "zero"], STR),
    C("CASE i WHEN 1 THEN 'one' END", {"i": [1, 2, None]}, ["one", None, None], STR),
    C("IF(i > 0, 'p', 'n')", {"i": [1, -1, None]}, ["p", "n", "n"], STR),
    C("COALESCE(s, t, 'x')", {"s": ["a", None, None], "t": ["b", "c", None]}, ["a", "c", "x"], STR),
    C("NULLIF(i, 0)", {"i": [0, 5, None]}, [None, 5, None], INT),
    C("IFNULL(i, -1)", {"i": [None, 3]}, [-1, 3], INT),
    C("i IS NULL", {"i": [1, None]}, [False, True], BOOL),
    C("i IS NOT NULL", {"i": [1, None]}, [True, False], BOOL),
    C("i IS DISTINCT FROM j", {"i": [1, 1, None, None], "j": [1, 2, 1, None]}, [False, True, True, False], BOOL),
    C("i IS NOT DISTINCT FROM j", {"i": [1, 1, None, None], "j": [1, 2, 1, None]}, [True, False, False, True], BOOL),
    C("i BETWEEN 1 AND 3", {"i": [0, 1, 3, 4, None]}, [False, True, True, False, None], BOOL),
    C("i NOT BETWEEN 1 AND 3", {"i": [0, 1, 3, 4, None]}, [True, False, False, True, None], BOOL),
    C("i IN (1, 2)", {"i": [1, 3, None]}, [True, False, None], BOOL),
    C("i NOT IN (1, 2)", {"i": [1, 3, None]}, [False, True, None], BOOL),
    C("s LIKE 'a%'", {"s": ["abc", "xab", "a", None]}, [True, False, True, None], BOOL),
    C("s LIKE '_b%'", {"s": ["abc", "b"]}, [True, False], BOOL),
    C("s NOT LIKE 'a%'", {"s": ["abc", "xab", None]}, [False, True, None], BOOL),
    C("CAST(s AS INT)", {"s": ["42", " -7 ", None]}, [42, -7, None], INT),
    C("TRY_CAST(s AS INT)", {"s": ["42", "x", None]}, [42, None, None], INT),
    C("CAST(d AS INT)", {"d": [2.7, -2.7, None]}, [2, -2, None], INT),  # truncates (DuckDB alone rounds)
    C("CAST(i AS DOUBLE)", {"i": [3, None]}, [3.0, None], DOUBLE),
    C("CAST(i AS VARCHAR)", {"i": [-7, None]}, ["-7", None], STR),
    C("CAST(ts AS VARCHAR)", {"ts": [A, T("1970-01-01 00:00:00"), T("1969-12-31 23:59:59.500"), None]},
      ["2024-02-29 13:45:30.123", "1970-01-01 00:00:00.000", "1969-12-31 23:59:59.500", None], STR),
    C("CAST(f AS VARCHAR)", {"f": [True, False, None]}, ["TRUE", "FALSE", None], STR),
    C("CAST(ts AS DATE)", TS3, [D("2024-02-29"), D("1969-12-31"), D("2021-01-03"), None], DATE),
    C("CAST(s AS TIMESTAMP(3))", {"s": ["2024-02-29 13:45:30.123", "1969-12-31 23:59:59", None]}, [A, B, None], TS),
    # -- strings --------------------------------------------------------------------------
    C("UPPER(s)", {"s": ["aBc", "", None]}, ["ABC", "", None], STR),
    C("LOWER(s)", {"s": ["aBc", "", None]}, ["abc", "", None], STR),
    C("TRIM(s)", {"s": ["  a b  ", "", "   ", None]}, ["a b", "", "", None], STR),
    C("LTRIM(s)", {"s": ["  a b  ", None]}, ["a b  ", None], STR),
    C("RTRIM(s)", {"s": ["  a b  ", None]}, ["  a b", None], STR),
    C("TRIM(BOTH 'xy' FROM s)", {"s": ["xyaxbyx", "yyy", None]}, ["axb", "", None], STR),  # a set of characters
    C("TRIM(LEADING 'x' FROM s)", {"s": ["xxaxx"]}, ["axx"], STR),
    C("TRIM(TRAILING 'x' FROM s)", {"s": ["xxaxx"]}, ["xxa"], STR),
    C("CHAR_LENGTH(s)", {"s": ["abc", "", "héllo", None]}, [3, 0, 5, None], INT),
    C("CHARACTER_LENGTH(s)", {"s": ["abc", None]}, [3, None], INT),
    C("SUBSTRING(s FROM 2 FOR 3)", {"s": ["abcdef", "ab", "", None]}, ["bcd", "b", "", None], STR),
    C("SUBSTRING(s FROM 3)", {"s": ["abcdef", "ab"]}, ["cdef", ""], STR),
    C("SUBSTRING(s, 2, 3)", {"s": ["abcdef"]}, ["bcd"], STR),
    C("SUBSTR(s, 0, 2)", {"s": ["abcdef"]}, ["ab"], STR),  # 0 is read as 1
    C("SUBSTR(s, -2)", {"s": ["abcdef", "a", ""]}, ["ef", "", ""], STR),  # from the end; too far is ''
    C("SUBSTR(s, -3, 2)", {"s": ["abcdef"]}, ["de"], STR),
    C("SUBSTR(s, 10)", {"s": ["abc"]}, [""], STR),
    C("SUBSTR(s, i, j)", {"s": ["abcdef"] * 4, "i": [2, -2, 0, 2], "j": [2, 5, 3, -1]}, ["bc", "ef", "abc", None], STR),
    C("CONCAT(s, '-', t)", {"s": ["a", "a", None], "t": ["b", None, "b"]}, ["a-b", None, None], STR),
    C("CONCAT_WS('~', s, t, 'z')", {"s": ["a", None, ""], "t": ["b", "b", None]}, ["a~b~z", "b~z", "~z"], STR),
    C("CONCAT_WS(s, 'a', 'b')", {"s": ["-", None]}, ["a-b", None], STR),
    C("s || t", {"s": ["a", None], "t": ["b", "b"]}, ["ab", None], STR),
    C("REPLACE(s, 'ab', 'z')", {"s": ["ababab", "xyz", None]}, ["zzz", "xyz", None], STR),
    C("POSITION('b' IN s)", {"s": ["abcb", "xyz", "", None]}, [2, 0, 0, None], INT),
    C("POSITION('' IN s)", {"s": ["abc"]}, [1], INT),
    C("LOCATE('b', s)", {"s": ["abcb", "xyz", None]}, [2, 0, None], INT),
    C("LOCATE('b', s, 3)", {"s": ["abcb", "abc"]}, [4, 0], INT),
    C("LPAD(s, 5, 'xy')", {"s": ["ab", "abcdefg", "", None]}, ["xyxab", "abcde", "xyxyx", None], STR),
    C("LPAD(s, i, 'x')", {"s": ["ab", "ab", "ab"], "i": [-1, 0, 3]}, [None, "", "xab"], STR),
    C("LPAD(s, 4, '')", {"s": ["ab"]}, [None], STR),
    C("RPAD(s, 5, 'xy')", {"s": ["ab", "abcdefg", None]}, ["abxyx", "abcde", None], STR),
    C("REPEAT(s, i)", {"s": ["ab", "ab", "ab", None], "i": [3, 0, -1, 2]}, ["ababab", "", "", None], STR),
    C("REVERSE(s)", {"s": ["abc", "", None]}, ["cba", "", None], STR),
    C("INITCAP(s)", {"s": ["hello wORLD", "foo-bar_baz", "o'neil 9lives", "", None]},
      ["Hello World", "Foo-Bar_Baz", "O'Neil 9lives", "", None], STR),
    C("LEFT(s, 2)", {"s": ["abc", "a", None]}, ["ab", "a", None], STR),
    C("LEFT(s, -1)", {"s": ["abc"]}, [""], STR),
    C("RIGHT(s, 2)", {"s": ["abc", "a", None]}, ["bc", "a", None], STR),
    C("RIGHT(s, -1)", {"s": ["abc"]}, [""], STR),
    C("REGEXP_EXTRACT(s, '([a-z]+)-([0-9]+)', 2)", {"s": ["ab-12 cd-34", "nothing", None]}, ["12", None, None], STR),
    C("REGEXP_EXTRACT(s, '([a-z]+)-([0-9]+)', 0)", {"s": ["ab-12 cd-34"]}, ["ab-12"], STR),
    C("REGEXP_EXTRACT(s, '[0-9]+')", {"s": ["ab12cd34", "xyz"]}, ["12", None], STR),  # default: the whole match
    C("REGEXP_REPLACE(s, '[0-9]+', '#')", {"s": ["a1b22c", "abc", None]}, ["a#b#c", "abc", None], STR),
    C("REGEXP_REPLACE(s, 'b', '$1\\')", {"s": ["abc"]}, ["a$1\\c"], STR),  # the replacement is plain text
    C("REGEXP_REPLACE(s, 'b', t)", {"s": ["abc"], "t": ["$0"]}, ["a$0c"], STR),
    C("SPLIT_INDEX(s, ',', 1)", {"s": ["a,b,c", "a,,c", "a", "", ",", None]}, ["b", "", None, None, "", None], STR),
    C("SPLIT_INDEX(s, '.', 1)", {"s": ["a.b|c"]}, ["b|c"], STR),  # the separator is plain text
    C("SPLIT_INDEX(s, '::', i)", {"s": ["a::b::c"] * 4, "i": [0, 2, 3, -1]}, ["a", "c", None, None], STR),
    C("MD5(s)", {"s": ["", "abc", None]},
      ["d41d8cd98f00b204e9800998ecf8427e", "900150983cd24fb0d6963f7d28e17f72", None], STR),
    # -- date and time ----------------------------------------------------------------------
    C("EXTRACT(YEAR FROM ts)", TS3, [2024, 1969, 2021, None], BIGINT),
    C("YEAR(ts)", TS3, [2024, 1969, 2021, None], BIGINT),
    C("QUARTER(ts)", TS3, [1, 4, 1, None], BIGINT),
    C("MONTH(ts)", TS3, [2, 12, 1, None], BIGINT),
    C("WEEK(ts)", TS3, [9, 1, 53, None], BIGINT),  # ISO 8601
    C("DAYOFYEAR(ts)", TS3, [60, 365, 3, None], BIGINT),
    C("DAYOFMONTH(ts)", TS3, [29, 31, 3, None], BIGINT),
    C("EXTRACT(DAY FROM ts)", TS3, [29, 31, 3, None], BIGINT),
    C("DAYOFWEEK(ts)", TS3, [5, 4, 1, None], BIGINT),  # 1 = Sunday
    C("EXTRACT(DOW FROM ts)", TS3, [5, 4, 1, None], BIGINT),
    C("EXTRACT(ISODOW FROM ts)", TS3, [4, 3, 7, None], BIGINT),
    C("HOUR(ts)", TS3, [13, 23, 0, None], BIGINT),
    C("MINUTE(ts)", TS3, [45, 59, 0, None], BIGINT),
    C("SECOND(ts)", TS3, [30, 59, 0, None], BIGINT),
    C("EXTRACT(MILLISECOND FROM ts)", {"ts": [A, T("1969-12-31 23:59:59.250"), None]}, [123, 250, None], BIGINT),
    # Truncated, not rounded (Flink keeps milliseconds: .987654 is 987; DuckDB's epoch_ms would give 988).
    C("EXTRACT(MILLISECOND FROM ts)", {"ts": [T("2024-03-01 12:34:56.987654")]}, [987], BIGINT),
    C("CAST(ts AS STRING)", {"ts": [T("2024-03-01 12:34:56.987654")]}, ["2024-03-01 12:34:56.987"], STR),
    C("DATE_FORMAT(ts, 'ss.SSS')", {"ts": [T("2024-03-01 12:34:56.999900")]}, ["56.999"], STR),
    C("EXTRACT(EPOCH FROM ts)", TS3, [1709214330, -1, 1609632000, None], BIGINT),
    C("EXTRACT(EPOCH FROM dt)", {"dt": [D("2024-05-17"), None]}, [1715904000, None], BIGINT),
    C("EXTRACT(DECADE FROM ts)", TS3, [202, 196, 202, None], BIGINT),
    C("EXTRACT(CENTURY FROM ts)", {"ts": [A, B, T("2000-12-31 00:00:00"), T("2001-01-01 00:00:00")]}, [21, 20, 20, 21], BIGINT),
    C("EXTRACT(MILLENNIUM FROM ts)", {"ts": [A, B, T("2000-06-01 00:00:00"), T("2001-01-01 00:00:00")]}, [3, 2, 2, 3], BIGINT),
    # The ISO week-numbering year: 1969-12-31 is in week 1 of 1970, 2021-01-03 in week 53 of 2020.
    C("EXTRACT(ISOYEAR FROM ts)", TS3, [2024, 1970, 2020, None], BIGINT),
    C("EXTRACT(ISOYEAR FROM dt)", {"dt": [D("2021-01-02"), D("2024-12-30")]}, [2020, 2025], BIGINT),
    # FLOOR/CEIL of a DATE are DATEs (Flink).
    C("FLOOR(dt TO MONTH)", {"dt": [D("2024-05-17"), None]}, [D("2024-05-01"), None], DATE),
    C("FLOOR(dt TO WEEK)", {"dt": [D("2024-05-17"), D("2024-05-12")]}, [D("2024-05-12"), D("2024-05-12")], DATE),
    C("CEIL(dt TO MONTH)", {"dt": [D("2024-05-17"), D("2024-06-01")]}, [D("2024-06-01"), D("2024-06-01")], DATE),
    C("CEIL(dt TO YEAR)", {"dt": [D("2024-06-01"), D("2024-01-01")]}, [D("2025-01-01"), D("2024-01-01")], DATE),
    C("YEAR(dt)", {"dt": [D("2024-02-29"), None]}, [2024, None], BIGINT),
    C("EXTRACT(DOY FROM dt)", {"dt": [D("2024-12-31")]}, [366], BIGINT),
    C("ts + INTERVAL '5' SECOND", TS3, [T("2024-02-29 13:45:35.123"), T("1970-01-01 00:00:04"), T("2021-01-03 00:00:05"), None], TS),
    C("ts - INTERVAL '1' DAY", TS3, [T("2024-02-28 13:45:30.123"), T("1969-12-30 23:59:59"), T("2021-01-02 00:00:00"), None], TS),
    C("ts + INTERVAL '1' MONTH", {"ts": [T("2024-01-31 10:00:00")]}, [T("2024-02-29 10:00:00")], TS),
    C("FLOOR(ts TO MINUTE)", TS3, [T("2024-02-29 13:45:00"), T("1969-12-31 23:59:00"), SUN, None], TS),
    C("FLOOR(ts TO HOUR)", TS3, [T("2024-02-29 13:00:00"), T("1969-12-31 23:00:00"), SUN, None], TS),
    C("FLOOR(ts TO DAY)", TS3, [T("2024-02-29 00:00:00"), T("1969-12-31 00:00:00"), SUN, None], TS),
    C("FLOOR(ts TO WEEK)", TS3, [T("2024-02-25 00:00:00"), T("1969-12-28 00:00:00"), SUN, None], TS),  # Sunday
    C("FLOOR(ts TO MONTH)", TS3, [T("2024-02-01 00:00:00"), T("1969-12-01 00:00:00"), T("2021-01-01 00:00:00"), None], TS),
    C("FLOOR(ts TO YEAR)", TS3, [T("2024-01-01 00:00:00"), T("1969-01-01 00:00:00"), T("2021-01-01 00:00:00"), None], TS),
    C("CEIL(ts TO HOUR)", TS3, [T("2024-02-29 14:00:00"), T("1970-01-01 00:00:00"), SUN, None], TS),
    C("CEIL(ts TO DAY)", TS3, [T("2024-03-01 00:00:00"), T("1970-01-01 00:00:00"), SUN, None], TS),
    C("CEIL(ts TO WEEK)", TS3, [T("2024-03-03 00:00:00"), T("1970-01-04 00:00:00"), SUN, None], TS),
    C("CEIL(ts TO MONTH)", TS3, [T("2024-03-01 00:00:00"), T("1970-01-01 00:00:00"), T("2021-02-01 00:00:00"), None], TS),
    C("DATE_FORMAT(ts, 'yyyy-MM-dd HH:mm:ss')", TS3,
      ["2024-02-29 13:45:30", "1969-12-31 23:59:59", "2021-01-03 00:00:00", None], STR),
    C("DATE_FORMAT(ts, 'yyyy-MM-dd''T''HH:mm:ss.SSS')", TS3,
      ["2024-02-29T13:45:30.123", "1969-12-31T23:59:59.000", "2021-01-03T00:00:00.000", None], STR),
    C("DATE_FORMAT(ts, 'EEE dd MMM yy, h:mm a')", TS3,
      ["Thu 29 Feb 24, 1:45 PM", "Wed 31 Dec 69, 11:59 PM", "Sun 03 Jan 21, 12:00 AM", None], STR),
    C("DATE_FORMAT(s, 'yyyy/MM/dd')", {"s": ["2024-02-29 13:45:30", "garbage", None]}, ["2024/02/29", None, None], STR),
    C("TO_TIMESTAMP(s)", {"s": ["2024-02-29 13:45:30.123", "2024-02-29 13:45:30.12345", "2024-02-29", "2024-2-9 1:2:3",
                                "2024-02-29T13:45:30", "garbage", None]},
      [A, A, T("2024-02-29 00:00:00"), T("2024-02-09 01:02:03"), None, None, None], TS),
    C("TO_TIMESTAMP(s, 'dd/MM/yyyy HH:mm')", {"s": ["29/02/2024 13:45", "1/2/2024 13:45", "2024-02-29 13:45:30", None]},
      [T("2024-02-29 13:45:00"), None, T("2024-02-29 13:45:30"), None], TS),  # falls back to the default layout
    C("TO_TIMESTAMP(s, 'yyyyMMddHHmmssSSS')", {"s": ["20240229134530123"]}, [A], TS),
    C("TO_DATE(s)", {"s": ["2024-02-29", "2024-02-29 10:00:00", "2024-2-9", "garbage", None]},
      [D("2024-02-29"), D("2024-02-29"), D("2024-02-09"), None, None], DATE),
    C("TO_DATE(s, 'yyyyMMdd')", {"s": ["20240229", None]}, [D("2024-02-29"), None], DATE),
    C("FROM_UNIXTIME(b)", {"b": [0, 1709214330, -1, None]},
      ["1970-01-01 00:00:00", "2024-02-29 13:45:30", "1969-12-31 23:59:59", None], STR),
    C("FROM_UNIXTIME(b, 'yyyy-MM-dd')", {"b": [86399, 86400]}, ["1970-01-01", "1970-01-02"], STR),
    # SimpleDateFormat reads a prefix; an unparseable string gives Long.MIN_VALUE (documented by Flink).
    C("UNIX_TIMESTAMP(s)", {"s": ["2024-02-29 13:45:30", "1969-12-31 23:59:59", "2024-02-29 13:45:30.999", "garbage", None]},
      [1709214330, -1, 1709214330, -(2**63), None], BIGINT),
    C("UNIX_TIMESTAMP(s, 'yyyy/MM/dd')", {"s": ["2024/02/29"]}, [1709164800], BIGINT),
    C("TIMESTAMPADD(HOUR, 2, ts)", TS3, [T("2024-02-29 15:45:30.123"), T("1970-01-01 01:59:59"), T("2021-01-03 02:00:00"), None], TS),
    C("TIMESTAMPADD(MONTH, 1, ts)", {"ts": [T("2024-01-31 10:00:00"), T("2024-02-29 00:00:00")]},
      [T("2024-02-29 10:00:00"), T("2024-03-29 00:00:00")], TS),
    C("TIMESTAMPADD(WEEK, -1, ts)", {"ts": [A]}, [T("2024-02-22 13:45:30.123")], TS),
    C("TIMESTAMPDIFF(SECOND, ts, ts2)", {"ts": [A, B, T("2024-02-29 13:45:31")], "ts2": [T("2024-02-29 13:45:31"), T("1970-01-01 00:00:00"), A]},
      [0, 1, 0], INT),  # truncated toward zero
    C("TIMESTAMPDIFF(DAY, ts, ts2)", {"ts": [T("2024-02-28 12:00:00"), T("2024-03-01 12:00:00"), T("1969-12-31 23:00:00"), None],
                                      "ts2": [T("2024-03-01 11:59:00"), T("2024-02-28 12:00:00"), T("1970-01-01 01:00:00"), A]},
      [1, -2, 0, None], INT),  # whole days, not midnights crossed
    C("TIMESTAMPDIFF(MINUTE, ts, ts2)", {"ts": [T("1969-12-31 23:59:59.500")], "ts2": [T("1970-01-01 00:01:00")]}, [1], INT),
    C("TIMESTAMPDIFF(MONTH, ts, ts2)",
      {"ts": [T("2024-01-31 00:00:00"), T("2024-01-15 10:00:00"), T("2024-03-31 00:00:00"), T("2024-02-15 10:00:00"),
              T("2024-02-15 10:00:00"), T("2023-02-28 00:00:00")],
       "ts2": [T("2024-02-29 00:00:00"), T("2024-02-15 09:59:00"), T("2024-02-29 00:00:00"), T("2024-01-15 11:00:00"),
               T("2024-01-15 09:00:00"), T("2024-02-29 00:00:00")]},
      [1, 0, -1, -1, -2, 12], INT),  # Calcite's algorithm: rounds toward -infinity
    C("TIMESTAMPDIFF(YEAR, ts, ts2)", {"ts": [T("2020-02-29 00:00:00"), T("2024-03-01 00:00:00")],
                                       "ts2": [T("2024-02-28 00:00:00"), T("2023-03-02 00:00:00")]}, [3, 0], INT),
]

# -- planning and running ----------------------------------------------------------------

@pytest.fixture(scope="module")
def catalog() -> Catalog:
    cat = Catalog()
    cat.add(bind_create_source(parse_statement(DDL)))
    return cat


def _plan(case: Case, catalog: Catalog):
    p = plan_query(f"SELECT {case.expr} AS x FROM s", catalog)
    node = p.optimized
    assert isinstance(node, L.Project), node
    return p, node.exprs[0][1], node.inputs[0].schema


def _batch(case: Case) -> pa.Table:
    n = len(next(iter(case.rows.values())))
    return pa.table({c: pa.array(case.rows.get(c, [None] * n), type=t) for c, t in COLUMNS.items()})


def _same(got, want, approx: bool) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want  # True must not pass for 1
    if isinstance(want, float) and isinstance(got, (int, float)):
        return math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12) if approx else got == want
    return got == want


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


@pytest.mark.parametrize("case", CASES, ids=[c.expr for c in CASES])
def test_duckdb(case: Case, catalog, duck):
    p, _, _ = _plan(case, catalog)
    assert p.schema.fields[0].type == case.type, f"result type of {case.expr}"
    duck.register("__input", _batch(case))
    got = duck.sql(p.physical.ops[-1].sql).to_arrow_table().column(0).cast(case.type).to_pylist()
    assert len(got) == len(case.expected)
    assert all(_same(g, w, case.approx) for g, w in zip(got, case.expected)), f"{case.expr}: {got} != {case.expected}"


# -- the same expressions on Spark ---------------------------------------------------------

_SPARK_TYPES = {"i": "INT", "j": "INT", "b": "BIGINT", "d": "DOUBLE", "s": "STRING", "t": "STRING",
                "ts": "TIMESTAMP", "ts2": "TIMESTAMP", "dt": "DATE", "f": "BOOLEAN"}


@pytest.fixture(scope="module")
def spark(spark_session):
    session = spark_session
    # All cases' rows in one DataFrame; timestamps travel as text so no Python time zone is involved.
    rows = []
    for k, case in enumerate(CASES):
        n = len(case.expected)
        for r in range(n):
            row = [k, r]
            for c in COLUMNS:
                v = case.rows.get(c, [None] * n)[r]
                row.append(v.isoformat(sep=" ") if isinstance(v, dt.datetime) else v)
            rows.append(tuple(row))
    raw_types = {**_SPARK_TYPES, "ts": "STRING", "ts2": "STRING"}
    schema = ", ".join(["case_id INT", "row_no INT"] + [f"{c} {raw_types[c]}" for c in COLUMNS])
    session.createDataFrame(rows, schema).createOrReplaceTempView("raw_cases")
    cols = ", ".join(f"CAST({c} AS TIMESTAMP) AS {c}" if _SPARK_TYPES[c] == "TIMESTAMP" else c for c in COLUMNS)
    session.sql(f"SELECT case_id, row_no, {cols} FROM raw_cases").cache().createOrReplaceTempView("cases")
    yield session


SPARK_CASES = [c for c in CASES if c.spark]


def _spark_sql(case: Case, catalog: Catalog) -> str:
    _, expr, schema = _plan(case, catalog)
    sql = typed(expr, schema).sql(dialect="spark")
    return f"CAST(({sql}) AS STRING)" if pa.types.is_timestamp(case.type) else sql


def _run_spark(spark, sql: str, where: str) -> list:
    return spark.sql(f"SELECT case_id, row_no, {sql} FROM cases WHERE {where} ORDER BY case_id, row_no").collect()


@pytest.fixture(scope="module")
def spark_results(spark, catalog) -> dict:
    """Every case's Spark result from one query (one column per case), to keep Spark's fixed cost once."""
    sqls = {}
    for k, case in enumerate(CASES):
        if case.spark:
            try:
                sqls[k] = _spark_sql(case, catalog)
            except Exception:  # reported by the case's own test
                pass
    columns = ", ".join(f"CASE WHEN case_id = {k} THEN {sql} END AS c{k}" for k, sql in sqls.items())
    try:
        rows = _run_spark(spark, columns, f"case_id IN ({', '.join(map(str, sqls))})")
    except Exception:  # one case breaks the batch: each test then runs its case alone
        return {}
    results: dict = {k: [] for k in sqls}
    for r in rows:
        results[r["case_id"]].append(r[f"c{r['case_id']}"])
    return results


@pytest.mark.parametrize("case", SPARK_CASES, ids=[c.expr for c in SPARK_CASES])
def test_spark(case: Case, catalog, spark, spark_results):
    k = CASES.index(case)
    sql = _spark_sql(case, catalog)
    got = spark_results.get(k)
    if got is None:
        got = [r["x"] for r in _run_spark(spark, f"{sql} AS x", f"case_id = {k}")]
    if pa.types.is_timestamp(case.type):
        got = [T(v) if v is not None else None for v in got]
    assert len(got) == len(case.expected) and all(_same(g, w, case.approx) for g, w in zip(got, case.expected)), \
        f"{case.expr}: Spark {sql}\n gave {got} != {case.expected}"


# -- refusals ---------------------------------------------------------------------------------

def _error(sql: str, catalog: Catalog) -> str:
    with pytest.raises(SqlError) as info:
        plan_query(f"SELECT {sql} AS x FROM s", catalog)
    return str(info.value)


@pytest.mark.parametrize("sql, fragments", [
    ("UPPPER(s)", ["unknown function 'UPPPER'", "did you mean 'UPPER'"]),
    ("SPLIT_INDX(s, ',', 0)", ["unknown function 'SPLIT_INDX'", "SPLIT_INDEX"]),
    ("RAND()", ["RAND", "not supported", "replay"]),
    ("RAND(42)", ["RAND", "not supported"]),
    ("UUID()", ["UUID", "not supported"]),
    ("RAND_INTEGER(10)", ["RAND_INTEGER is not supported"]),
    ("UNIX_TIMESTAMP()", ["UNIX_TIMESTAMP() reads the wall clock"]),
    ("SPLIT_INDEX(s, ',')", ["SPLIT_INDEX takes (string, separator, index)"]),
    ("DATE_FORMAT(ts, s)", ["DATE_FORMAT needs its format as a string literal"]),
    ("DATE_FORMAT(ts, 'yyyy G')", ["DATE_FORMAT does not support the pattern letters 'G'"]),
    ("TO_TIMESTAMP(s, 'dd MMM yyyy')", ["TO_TIMESTAMP does not support the pattern letters 'MMM'"]),
    ("TRUNCATE(d, i)", ["TRUNCATE needs an integer literal"]),
    ("TIMESTAMPDIFF(DECADE, ts, ts2)", ["TIMESTAMPDIFF(DECADE, ...) is not supported"]),
])
def test_refused(sql, fragments, catalog):
    message = _error(sql, catalog)
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("sql, fragment", [
    ("EXTRACT(NANOSECOND FROM ts)", "EXTRACT(NANOSECOND FROM ...) is not supported"),
    ("FLOOR(ts TO DECADE)", "FLOOR(... TO DECADE) is not supported"),
])
def test_refused_units(sql, fragment, catalog):
    assert fragment in _error(sql, catalog)


def test_error_points_at_the_call(catalog):
    message = _error("1 + UPPPER(s)", catalog)
    assert "line 1, column 12" in message and "^^^^^^" in message, message


def test_scalar_functions_are_known_to_the_parser():
    """SHOW FUNCTIONS and suggestions list only names the dialect parses as functions."""
    from dsms.planner.functions import SCALAR_FUNCTIONS
    known = set(Dsms.Parser.FUNCTIONS) | set(Dsms.Parser.FUNCTION_PARSERS)
    assert [name for name in SCALAR_FUNCTIONS if name not in known] == []
