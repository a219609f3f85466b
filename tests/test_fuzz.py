"""No raw errors: every statement ends in a DsmsError with a position, or is accepted and works.

A seeded, grammar-aware fuzzer takes valid dsms statements (every statement
kind, every window kind, joins, OVER, Top-N, CQL windows, DDL) and mutates
them at the token level: deletions, duplications, swaps, odd tokens, deep
nesting, extreme numbers, NUL bytes. Each mutant is executed (parsed,
planned, started) in an engine holding the docs catalog, and every few
statements the engine runs what was started. Any exception that is not a
``dsms.DsmsError`` fails the test, and so does a SQL error without a line.

The known cases of issue 11 are checked one by one below it.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pyarrow as pa
import pytest

import dsms

CATALOG = (Path(__file__).parent / "docs_catalog.sql").read_text()

SEEDS = [
    "SELECT ad_id, COUNT(*) AS n FROM clicks GROUP BY ad_id",
    "SELECT window_start, ad_id, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
    "GROUP BY window_start, window_end, ad_id",
    "SELECT window_start, SUM(price) FROM TABLE(HOP(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND, "
    "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
    "SELECT window_start, k, SUM(v) FROM TABLE(SESSION(TABLE ev PARTITION BY k, DESCRIPTOR(ts), "
    "INTERVAL '5' SECOND)) GROUP BY window_start, window_end, k",
    "SELECT window_start, COUNT(*) FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND, "
    "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end",
    "SELECT auction, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, MAX(price) FROM bid "
    "GROUP BY auction, TUMBLE(ts, INTERVAL '1' MINUTE)",
    "SELECT sensor, v, AVG(v) OVER (PARTITION BY sensor ORDER BY ts RANGE BETWEEN INTERVAL '10' SECOND PRECEDING "
    "AND CURRENT ROW) AS a FROM readings",
    "SELECT k, x, SUM(x) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s FROM s",
    "SELECT * FROM (SELECT auction, price, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rn "
    "FROM bid) WHERE rn <= 3",
    "SELECT c.ad_id, i.id FROM clicks AS c JOIN impressions AS i ON c.ad_id = i.ad_id "
    "AND c.ts BETWEEN i.ts - INTERVAL '1' MINUTE AND i.ts",
    "SELECT o.id, o.amount * r.rate AS eur FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r "
    "ON o.cur = r.cur",
    "SELECT c.ad_id, a.campaign FROM clicks AS c JOIN ads AS a ON c.ad_id = a.ad_id",
    "SELECT o.id, c.name FROM orders_table AS o LEFT JOIN customers AS c ON o.customer = c.id",
    "SELECT ad_id, ts FROM clicks WHERE ad_id > 3 AND ts < TIMESTAMP '2024-05-01 12:00:30'",
    "SELECT UPPER(bidder), CAST(price AS DOUBLE) / 3, CAST(price AS DECIMAL(10, 2)), COALESCE(bidder, 'x') FROM bid",
    "SELECT CASE WHEN price > 10 THEN 'hi' ELSE 'lo' END AS c, EXTRACT(MINUTE FROM ts) FROM bid",
    "SELECT DATE_FORMAT(ts, 'yyyy-MM-dd'), FLOOR(ts TO MINUTE) FROM bid",
    "CREATE STREAM t1 (a BIGINT, b VARCHAR, c DECIMAL(10, 2), d DOUBLE, ts TIMESTAMP(3), "
    "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory')",
    "CREATE TABLE t2 (id INT, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')",
    "CREATE STREAM t3 (a BIGINT, ts TIMESTAMP(3)) WITH (connector = 'file', path = 'no/such/file.jsonl', "
    "format = 'json')",
    "CREATE VIEW v1 AS SELECT ad_id, ts FROM clicks WHERE ad_id = 7",
    "CREATE MATERIALIZED VIEW mv1 AS SELECT ad_id, COUNT(*) AS n FROM clicks GROUP BY ad_id",
    "CREATE SINK sk1 WITH (connector = 'memory') AS SELECT ad_id FROM clicks",
    "INSERT INTO clicks VALUES (7, 1, '2024-05-01 12:00:20'), (9, 2, '2024-05-01 12:00:40')",
    "INSERT INTO ads (ad_id, campaign) VALUES (11, 'fall')",
    "SHOW STREAMS", "SHOW QUERIES", "SHOW PROGRESS", "DESCRIBE clicks",
    "EXPLAIN SELECT ad_id, COUNT(*) FROM clicks GROUP BY ad_id",
    "SET 'emit' = 'changes'", "SET 'batch.size' = '100'", "RESET 'emit'",
    "DROP VIEW IF EXISTS v1", "DROP STREAM IF EXISTS t1",
    "CREATE FUNCTION f1 AS 'json.dumps' LANGUAGE PYTHON", "CREATE TEMPORARY SYSTEM FUNCTION f2 AS 'math.sqrt'",
    "DROP TEMPORARY FUNCTION IF EXISTS f2",
    "SELECT window_start, window_end, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) "
    "GROUP BY window_start, window_end EMIT CHANGES",
    "SELECT ISTREAM * FROM clicks [RANGE 1 MINUTE SLIDE 10 SECONDS]",
    "SELECT RSTREAM COUNT(*) FROM clicks [ROWS 10]",
    "SELECT ad_id FROM clicks UNION ALL SELECT ad_id FROM impressions",
    "WITH x AS (SELECT ad_id FROM clicks) SELECT * FROM x",
    # nested types, JSON, the aggregate family, subqueries, MATCH_RECOGNIZE, statement sets
    "SELECT k, LISTAGG(CAST(x AS VARCHAR), ';') FILTER (WHERE x > 1), ARRAY_AGG(x IGNORE NULLS), COLLECT(k) FROM s GROUP BY k",
    'SELECT k, STDDEV_POP(x), VAR_SAMP(x), FIRST_VALUE(x), LAST_VALUE(x), BIT_AND(x), SUM(DISTINCT x) FROM s GROUP BY k',
    "SELECT window_start, k, COUNT(*) FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, GROUPING SETS ((k), ())",
    'SELECT k, x, GROUPING(k) FROM s GROUP BY CUBE (k, x)',
    'SELECT k, ROLLUP_X FROM (SELECT k, COUNT(*) AS ROLLUP_X FROM s GROUP BY ROLLUP (k))',
    'SELECT k, LAG(x, 1) OVER (PARTITION BY k ORDER BY ts), LEAD(x) OVER (PARTITION BY k ORDER BY ts) FROM s',
    'SELECT * FROM s WHERE k IN (SELECT campaign FROM ads) AND EXISTS (SELECT 1 FROM ads WHERE ads.ad_id = s.x)',
    'SELECT k, (SELECT MAX(price) FROM bid) AS m FROM s',
    'SELECT JSON_VALUE(\'{"a": {"b": 1}}\', \'$.a.b\' RETURNING INT DEFAULT 0 ON EMPTY), JSON_QUERY(\'{"a": [1]}\', \'$.a\'), JSON_EXISTS(\'{}\', \'$.a\'), JSON_OBJECT(\'k\' VALUE k), JSON_ARRAY(x, k), JSON_STRING(x), k IS JSON FROM s',
    "SELECT ARRAY[1, 2, 3][1], MAP['a', 1]['a'], ROW(1, 'x'), CARDINALITY(ARRAY[x]), ELEMENT(ARRAY[x]), ARRAY_CONTAINS(ARRAY[1], 1), ARRAY_DISTINCT(ARRAY[1, 1]) FROM s",
    "CREATE STREAM n1 (r ROW<a INT, b STRING>, arr ARRAY<INT>, m MAP<STRING, INT>, ms MULTISET<INT>, ts TIMESTAMP(3)) WITH (connector = 'memory')",
    'SELECT k, t.y, t.o FROM s CROSS JOIN UNNEST(ARRAY[x, x + 1]) WITH ORDINALITY AS t(y, o)',
    'SELECT CAST(ts AS TIMESTAMP_LTZ(3)), TO_TIMESTAMP_LTZ(x, 3), PROCTIME() FROM s',
    "SET 'table.local-time-zone' = 'Asia/Shanghai'",
    "CREATE STREAM p1 (k VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory')",
    "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts MEASURES A.x AS ax, LAST(B.x) AS bx ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW PATTERN (A B+ C?) WITHIN INTERVAL '1' MINUTE DEFINE A AS A.x > 1, B AS B.x > A.x)",
    'EXECUTE STATEMENT SET BEGIN INSERT INTO s SELECT k, x, ts FROM s WHERE x > 100; INSERT INTO s SELECT k, x + 1, ts FROM s WHERE x > 200; END',
    'CREATE TABLE ct1 AS SELECT k, COUNT(*) AS n FROM s GROUP BY k',
    'SELECT * FROM s ORDER BY ts LIMIT 3',
    "SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end ALLOWED LATENESS INTERVAL '1' MINUTE EMIT CHANGES",
    'SELECT o.id, r.rate FROM orders AS o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur',
    "SELECT v.window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) v JOIN TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) b ON v.window_start = b.window_start AND v.window_end = b.window_end AND v.ad_id = b.ad_id GROUP BY v.window_start",
    "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY price DESC) AS rn FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECOND))) WHERE rn <= 2",
    'SELECT EXTRACT(EPOCH FROM ts), EXTRACT(MILLISECOND FROM ts), FLOOR(CAST(ts AS DATE) TO MONTH), CAST(ts AS STRING) FROM s',
    'FLUSH',
    'SHOW FUNCTIONS',
    'SHOW CONNECTORS',
    'DESCRIBE s',
    'SHOW CREATE STREAM s',
]

ODD_TOKENS = ["\x00", "*", ",", "(", ")", "''", "'NaN'", "1e308", "-1e308", "99999999999999", "NULL", "AND", "ARRAY",
              "TABLE", "PARTITION BY", "DESCRIPTOR", "INTERVAL", "o.*", "a.*", "ROWS", "RANGE", "--", "/*", '"', "`",
              "AS OF", "DECIMAL(0)", "DECIMAL(100, 200)", "TIMESTAMP_LTZ", "INT ARRAY", "1e400", "CURRENT ROW",
              "BETWEEN", "SELECT", "GROUP BY", "ON", "JOIN", "OVER", "MAP", "ROW", "∑", "'2024-13-45 99:99:99'",
              "9223372036854775808", "DAY", "SLIDE", "EMIT", "WATERMARK"]
EXTREME_NUMBERS = ["0", "-1", "1e308", "99999999999999", "'NaN'", "'inf'", "9223372036854775808", "'-5'", "0.5"]
_TOKEN = re.compile(r"'(?:[^']|'')*'|\w+|\s+|.", re.S)


def mutate(rng: random.Random, sql: str) -> str:
    """One to three token-level edits of ``sql``."""
    toks = _TOKEN.findall(sql)
    for _ in range(rng.randint(1, 3)):
        if not toks:
            break
        i, roll = rng.randrange(len(toks)), rng.random()
        if roll < 0.2:
            del toks[i]
        elif roll < 0.35:
            toks.insert(i, toks[i])
        elif roll < 0.55:
            toks.insert(i, rng.choice(ODD_TOKENS))
        elif roll < 0.7:
            toks[i] = rng.choice(ODD_TOKENS)
        elif roll < 0.8:
            if re.match(r"\w", toks[i]):
                depth = rng.choice([3, 31, 50, 300])
                toks[i] = "(" * depth + toks[i] + ")" * depth
        elif roll < 0.9:
            numbers = [k for k, t in enumerate(toks) if re.fullmatch(r"'?\d+'?", t)]
            if numbers:
                toks[rng.choice(numbers)] = rng.choice(EXTREME_NUMBERS)
        else:
            j = rng.randrange(len(toks))
            toks[i], toks[j] = toks[j], toks[i]
    return "".join(toks)


def _fresh_engine(tmp_path) -> dsms.Engine:
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(CATALOG)
    return engine


def test_fuzzed_statements_end_in_a_dsms_error_with_a_position_or_work(tmp_path):
    rng = random.Random(20261124)
    raw, unplaced = [], []
    engine = None
    for k in range(2000):
        if k % 150 == 0:
            engine = _fresh_engine(tmp_path)
        sql = mutate(rng, rng.choice(SEEDS))
        try:
            engine.execute(sql)
        except dsms.SqlError as e:
            if e.line is None:
                unplaced.append((sql, str(e)))
            continue
        except dsms.DsmsError:
            continue
        except Exception as e:  # noqa: BLE001 - what the test looks for
            raw.append((sql, f"{type(e).__name__}: {e}"[:200]))
            continue
        if k % 20 == 0:
            try:
                engine.run_until_idle()  # a query that fails at run time fails with a DsmsError
            except dsms.DsmsError:
                pass
            except Exception as e:  # noqa: BLE001
                raw.append((sql, f"at run time: {type(e).__name__}: {e}"[:200]))
    assert not raw, f"{len(raw)} raw errors, e.g. {raw[:3]}"
    assert not unplaced, f"{len(unplaced)} SQL errors without a position, e.g. {unplaced[:3]}"


def test_the_mutator_makes_what_it_should():
    rng = random.Random(1)
    mutants = [mutate(rng, rng.choice(SEEDS)) for _ in range(500)]
    assert any("\x00" in m for m in mutants)
    assert any("(" * 50 in m for m in mutants)
    assert any("1e308" in m or "9223372036854775808" in m for m in mutants)
    assert len(set(mutants)) > 400


NESTED = "SELECT " + "(" * 50 + "x" + ")" * 50 + " FROM s"

# (statement, words of the message): each must be a SqlError with a line and column.
REFUSED = [
    (NESTED, "nested too deeply"),
    ("SELECT " + " + ".join(["x"] * 20) + " FROM s WHERE " + "(" * 40 + "x > 1" + ")" * 40, "nested too deeply"),
    ("CREATE STREAM q (a DECIMAL(0)) WITH (connector = 'memory')", "precision must be 1 to 38"),
    ("CREATE STREAM q (a DECIMAL(100, 200)) WITH (connector = 'memory')", "precision must be 1 to 38"),
    ("SELECT CAST(x AS DECIMAL(5, 9)) FROM s", "scale 0 to the precision"),
    ("CREATE STREAM q (a BIGINT) WITH (connector = 'file', path = 'a\x00b.json', format = 'json')", "NUL"),
    ("SELECT ISTREAM * FROM s [ROWS 1e308]", ""),
    ("SELECT * FROM s [ROWS 1e308]", "whole number n from 1"),
    ("SELECT COUNT(*) FROM s [ROWS 99999999999999999999999]", "whole number n from 1"),
    ("SELECT ISTREAM * FROM s [RANGE 1 MINUTE SLIDE 'NaN' SECONDS]", ""),
    ("SELECT o.id FROM orders AS o JOIN rates FOR SYSTEM_TIME AS OF o.* AS r ON o.cur = r.cur",
     "'o.*' stands for all columns"),
    ("SELECT c.ad_id FROM clicks AS c JOIN impressions AS i ON c.* AND c.ts BETWEEN i.ts - INTERVAL '1' MINUTE AND i.ts",
     "'c.*' stands for all columns"),
    ("SELECT window_start, k, SUM(v) FROM TABLE(SESSION(TABLE ev PARTITION BY , DESCRIPTOR(ts), INTERVAL '5' SECOND)) "
     "GROUP BY window_start, window_end, k", "PARTITION BY needs one or more column names"),
    ("SELECT sensor, AVG(v) OVER (PARTITION BY sensor ORDER BY ts RANGE AND CURRENT ROW) FROM readings",
     "must start at a PRECEDING bound"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR((ts)), INTERVAL '1' MINUTE))", "DESCRIPTOR takes one time column"),
    ("SELECT window_start, COUNT(*) FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '99999999999999' DAY)) "
     "GROUP BY window_start, window_end", "out of range"),
    ("SELECT window_start, COUNT(*) FROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(ts), INTERVAL 'NaN' SECOND, "
     "INTERVAL '1' MINUTE)) GROUP BY window_start, window_end", "out of range"),
    ("CREATE STREAM q (x ARRAY<INT FOO>) WITH (connector = 'memory')", "unknown or unsupported type"),
    ("CREATE STREAM q (x ROW<a INT, A INT>) WITH (connector = 'memory')", "distinct names"),
    ("CREATE STREAM q (x INT FOO) WITH (connector = 'memory')", "unknown or unsupported type"),
    ("CREATE STREAM q (x TIMESTAMP(3) WITH TIME ZONE) WITH (connector = 'memory')", "not supported yet"),
    ("SET 'table.local-time-zone' = 'Mars/Olympus_Mons'", "unknown time zone 'Mars/Olympus_Mons'"),
    ("SELECT TO_TIMESTAMP_LTZ(x, 12) FROM s", "precision as a whole number from 0 to 9"),
    ("SET 'emitt' = 'changes'", "unknown setting 'emitt'"),
    ("SELECT k, x, FROM s", "expected an item after ','"),
    ("SELECT k,, x FROM s", "expected an item after ','"),
    ("SELECT  FROM s", "expected a column or an expression after SELECT"),
    ("CREATE SINK q WITH (connector = 'memory') AS SELECT FROM s WHERE x > 1",
     "expected a column or an expression after SELECT"),
    ("INSERT INTO ads (ad_id, campaign) VALUES ('inf', 'fall')", "cannot insert these rows"),
    ("SELECT ad_id, COUNT(*) FROM clicks GROUP BY 1e308", "position in the SELECT list"),
    ("SELECT * FROM s ORDER BY ts LIMIT 9223372036854775808", "larger than a BIGINT"),
    ("CREATE STREAM p2 (k VARCHAR, pt AS ()) WITH (connector = 'memory')", "computed column 'pt'"),
    ("CREATE STREAMX (k VARCHAR) WITH (connector = 'memory')", "did you mean 'STREAM X'?"),
    ("SELECT JSON_QUERY(, '$.a') FROM s", "needs the JSON text first"),
    ("SELECT TRIM(k FROM s", "expecting )"),
    ("SELECT JSON_ARRAY(x, k IS JSON FROM s", "expecting )"),
    ("SELECT " + " + ".join(["x"] * 2000) + " AS y FROM s", "nested too deeply"),
]


@pytest.mark.parametrize("sql,words", REFUSED, ids=range(len(REFUSED)))
def test_known_cases_are_sql_errors_with_a_position(sql, words, tmp_path):
    engine = _fresh_engine(tmp_path)
    with pytest.raises(dsms.SqlError) as info:
        engine.execute(sql)
        engine.run_until_idle()
    assert info.value.line is not None and info.value.column is not None, str(info.value)
    assert words in str(info.value)


def test_unknown_setting_says_did_you_mean(tmp_path):
    with pytest.raises(dsms.SqlError, match="did you mean 'emit'"):
        _fresh_engine(tmp_path).execute("SET 'emitt' = 'changes'")


def test_still_accepted_nearby(tmp_path):
    """The refusals above are narrow: the nearby valid forms still work."""
    engine = _fresh_engine(tmp_path)
    engine.execute("SET 'spark.sql.shuffle.partitions' = '4'")
    engine.execute("CREATE STREAM q (a DOUBLE PRECISION, b DECIMAL(38, 38), c TIMESTAMP(3) WITHOUT TIME ZONE, "
                   "d VARCHAR(10), e TIMESTAMP_LTZ(3), f TIMESTAMP(3) WITH LOCAL TIME ZONE) WITH (connector = 'memory')")
    assert [f.type for f in engine.catalog.get("q").schema][:2] == [pa.float64(), pa.decimal128(38, 38)]
    assert [f.type for f in engine.catalog.get("q").schema][4:] == [pa.timestamp("us", tz="UTC")] * 2
    engine.execute("SET 'table.local-time-zone' = 'Asia/Shanghai'")
    engine.execute("SELECT " + "(" * 30 + "x + 1" + ")" * 30 + " AS y FROM s")
    engine.execute("SELECT " + " + ".join(["x"] * 200) + " AS y FROM s")
    q = engine.query("SELECT window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), "
                     "INTERVAL '36500' DAY)) GROUP BY window_start, window_end")
    engine.end_input("s")
    engine.run_until_idle()
    assert q.snapshot().column("n").to_pylist() == [3]  # the catalog's three rows of s, none dropped


def test_drop_of_a_stream_a_running_query_reads_is_refused(tmp_path):
    engine = _fresh_engine(tmp_path)
    engine.query("SELECT k FROM s")
    with pytest.raises(dsms.SqlError, match="query 'query_1' reads it") as info:
        engine.execute("DROP STREAM s")
    assert info.value.line == 1
    engine.execute("DROP QUERY query_1")
    engine.execute("DROP STREAM s")
    assert engine.catalog.get("s") is None
