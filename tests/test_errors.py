"""SQL errors point at the user's line and column, with a caret, and say what to change.

Each case marks the expected span in its SQL with /*a*/ ... /*a*/ tags
(tests/spans.py).
"""

import re

import pytest
from spans import assert_error_at

import dsms
from dsms.grammar import parse_script

DDL = """CREATE STREAM bid (auction BIGINT, price DOUBLE, bidder VARCHAR, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');
CREATE STREAM plain (x BIGINT, t TIMESTAMP(3)) WITH (connector = 'memory');
"""


CASES = [
    # (sql with the expected span tagged, words the message must contain, help must contain)
    ("SELECT /*a*/pricee/*a*/ FROM bid", "unknown column 'pricee'", "did you mean 'price'"),
    ("SELECT price FROM /*a*/bids/*a*/", "unknown relation 'bids'", "did you mean 'bid'"),
    ("SELECT /*a*/b/*a*/.price FROM bid AS a", "unknown table or alias 'b'", "'a'"),
    ("SELECT price\nFROM bid\nWHERE /*a*/price/*a*/", "must be BOOLEAN", None),
    ("SELECT /*a*/bidder/*a*/, COUNT(*) FROM bid GROUP BY auction", "must appear in GROUP BY", None),
    ("SELECT /*a*/foo/*a*/(price) FROM bid", "unknown function 'foo'", "FLOOR"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE plain, DESCRIPTOR(/*a*/t/*a*/), INTERVAL '1' MINUTE))",
     "not an event-time attribute", "WATERMARK FOR"),
    ("SELECT * FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(ts), INTERVAL /*a*/'1'/*a*/ MONTH))",
     "unsupported interval unit 'MONTH'", None),
    ("SELECT price FROM bid ORDER BY /*a*/price/*a*/", "must start with an event-time attribute", "ROW_NUMBER"),
    ("SELECT\n  price,\n  /*a*/)/*a*/ FROM bid", "", None),
    ("CREATE STREAM s (a BIGINT, b /*a*/WIBBLE/*a*/) WITH (connector = 'memory')", "unknown or unsupported type", None),
    ("CREATE STREAM s (a BIGINT, WATERMARK FOR /*a*/b/*a*/ AS b) WITH (connector = 'memory')",
     "unknown column 'b' in WATERMARK", None),
    ("CREATE STREAM s (t TIMESTAMP(3), WATERMARK FOR t AS t, /*a*/WATERMARK FOR t AS t/*a*/) "
     "WITH (connector = 'memory')", "a source can declare only one WATERMARK", None),
    ("SHOW /*a*/STREAMZ/*a*/", "unexpected 'STREAMZ'", "STREAMS"),
]


@pytest.mark.parametrize("sql,message,help_", CASES)
def test_error_points_at_the_span(sql, message, help_):
    engine = dsms.Engine()
    engine.execute(DDL)
    assert_error_at(engine, sql, message, help_)


def test_errors_in_a_later_statement_of_a_script_use_script_positions():
    script = DDL + "CREATE VIEW v AS\n  SELECT auction,\n         nope\n  FROM bid;"
    with pytest.raises(dsms.SqlError) as info:
        dsms.Engine().execute(script)
    assert info.value.line == DDL.count("\n") + 3
    assert info.value.column == 10
    assert "3 |" not in str(info.value) and f"{info.value.line} |          nope" in str(info.value)


def test_an_error_leaves_the_engine_usable():
    engine = dsms.Engine()
    engine.execute(DDL)
    with pytest.raises(dsms.SqlError):
        engine.execute("SELECT nope FROM bid")
    q = engine.query("SELECT price FROM bid")
    engine.insert("bid", [{"auction": 1, "price": 2.5, "bidder": "a", "ts": "2024-01-01 00:00:00"}])
    engine.run_until_idle()
    assert q.snapshot().column("price").to_pylist() == [2.5]


def test_source_options_are_checked_when_declared():
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError, match="unknown option 'pth'") as info:
        engine.execute("CREATE STREAM s (a BIGINT) WITH (connector = 'file', pth = 'x.json', format = 'json')")
    assert "did you mean 'path'" in str(info.value)
    with pytest.raises(dsms.SqlError, match="invalid value 'xml' for option 'format'"):
        engine.execute("CREATE STREAM s (a BIGINT) WITH (connector = 'file', path = 'x', format = 'xml')")
    with pytest.raises(dsms.SqlError, match="the file connector needs 'path'"):
        engine.execute("CREATE STREAM s (a BIGINT) WITH (connector = 'file', format = 'json')")


def test_statement_grammar_round_trip():
    stmts = parse_script("""
      CREATE STREAM s (a BIGINT NOT NULL, b DECIMAL(10, 2), ts TIMESTAMP(3), c AS a * 2,
        WATERMARK FOR ts AS ts - INTERVAL '2' SECOND) WITH (connector = 'memory', 'x.y' = 'z');
      -- a comment; with a semicolon
      CREATE VIEW v AS SELECT a, ';' AS semi FROM s /* ; */;
      SET 'emit' = 'changes'; SHOW MATERIALIZED VIEWS; DESCRIBE s; EXPLAIN SELECT 1;
      INSERT INTO s (a, ts) VALUES (1, '2024-01-01 00:00:00');
      DROP VIEW IF EXISTS v;
    """)
    kinds = [type(s).__name__ for s in stmts]
    assert kinds == ["CreateSource", "CreateView", "SetOption", "Show", "Describe", "Explain", "Insert", "Drop"]
    src = stmts[0]
    assert [c.name.value for c in src.columns] == ["a", "b", "ts"] and src.columns[0].not_null
    assert src.options == {"connector": "memory", "x.y": "z"}
    assert stmts[1].query.text.endswith("/* ; */")
    assert stmts[2].key == "emit" and stmts[2].value == "changes"
    assert re.fullmatch(r"INSERT INTO s \(a, ts\) VALUES .*", stmts[6].text)


def test_a_value_that_does_not_convert_fails_the_query_with_a_message_not_internal_sql():
    # As in Flink, CAST of a bad value fails the query (TRY_CAST gives NULL); the message says what and
    # where, in the user's terms, and the other queries go on.
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k VARCHAR, ts TIMESTAMP(3), n AS CAST(k AS INT)) WITH (connector = 'memory')")
    bad = engine.query("SELECT CAST(k AS BIGINT) AS n FROM s")
    computed = engine.query("SELECT n FROM s")
    safe = engine.query("SELECT TRY_CAST(k AS BIGINT) AS n FROM s")
    engine.insert("s", [("1", None), ("a", None)])
    with pytest.raises(dsms.EvaluationError) as err:
        engine.run_until_idle()
    message = str(err.value)
    assert "Could not convert string 'a' to INT64" in message and "CAST(k AS BIGINT)" in message
    assert "TRY_CAST" in message and "__input" not in message and "LINE 1" not in message
    shown = {r["id"]: r for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert shown[bad.name]["status"] == "failed" and shown[computed.name]["status"] == "failed"
    assert "__input" not in shown[computed.name]["error"] and "'a'" in shown[computed.name]["error"]
    assert safe.snapshot().column("n").to_pylist() == [1, None]
