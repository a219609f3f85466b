"""Completion as a pure function of the text, the cursor (marked ``|``) and the catalog."""

import pytest

import dsms
from dsms.repl import suggest
from dsms.repl.tokens import statement_complete


@pytest.fixture(scope="module")
def catalog():
    engine = dsms.Engine()
    engine.execute("""
      CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH (connector = 'memory');
      CREATE TABLE ads (id BIGINT, title VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
      CREATE VIEW ones AS SELECT ad AS one_ad FROM clicks WHERE ad = 1;
      CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;
      CREATE SINK out WITH (connector = 'memory') AS SELECT ad FROM clicks;
    """)
    return engine.catalog


def texts(catalog, marked: str, **kw) -> list[str]:
    text = marked.replace("|", "", 1)
    return [s.text for s in suggest(text, marked.index("|"), catalog, **kw)]


RELATIONS = ["clicks", "ads", "ones", "per_ad"]
WINDOWED = ["ad", "ts", "window_start", "window_end", "window_time"]


@pytest.mark.parametrize("marked, want", [
    # a qualifier names an alias or a relation: its columns, in declaration order
    ("SELECT c.| FROM clicks c", ["ad", "ts"]),
    ("SELECT c.a| FROM clicks AS c", ["ad"]),
    ("SELECT a.| FROM clicks c JOIN ads a ON c.ad = a.id", ["id", "title"]),
    ("SELECT clicks.| FROM clicks", ["ad", "ts"]),
    ("SELECT o.| FROM ones o", ["one_ad"]),
    ("SELECT r.| FROM clicks c JOIN ads FOR SYSTEM_TIME AS OF c.ts AS r ON c.ad = r.id", ["id", "title"]),
    ("SELECT w.| FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) AS w", WINDOWED),
    ("SELECT x.| FROM clicks c", []),
    # window TVFs: the function, TABLE, the relation, then its columns for DESCRIPTOR
    ("SELECT * FROM TABLE(|", ["TUMBLE", "HOP", "SESSION", "CUMULATE"]),
    ("SELECT * FROM TABLE(TUMBLE(|", ["TABLE"]),
    ("SELECT * FROM TABLE(TUMBLE(TABLE |", RELATIONS),
    ("SELECT * FROM TABLE(HOP(TABLE clicks, DESCRIPTOR(|", WINDOWED),
    # unqualified: the columns of every relation in FROM (typed after the cursor too), then functions
    ("SELECT | FROM clicks", ["ad", "ts", "ABS", ...]),
    ("SELECT * FROM clicks, ads WHERE t|", ["ts", "title", "timestampadd", ...]),
    ("SELECT COUNT(*) FROM clicks GROUP BY a|", ["ad", "abs", ...]),
    ("SELECT * FROM clicks; SELECT ti| FROM ads", ["title", "timestampadd", ...]),
    # relations after FROM and JOIN; sinks are not relations
    ("SELECT * FROM |", RELATIONS + ["TABLE"]),
    ("SELECT * FROM clicks JOIN a|", ["ads"]),
    ("SELECT * FROM clicks c, |", RELATIONS),
    ("SELECT * FROM clicks c |", None),  # the next clause: keywords only
    # statements and their objects
    ("|", ["SELECT", "CREATE", "INSERT INTO", "SHOW", "DESCRIBE", "EXPLAIN", "DROP", "SET", "RESET", "PAUSE QUERY",
           "RESUME QUERY", "FLUSH", "WITH", "VALUES", "\\d", "\\i", "\\x", "\\pset", "\\help", "\\q"]),
    ("sh|", ["show"]),
    ("\\|", ["\\d", "\\i", "\\x", "\\pset", "\\help", "\\q"]),
    ("\\d |", RELATIONS + ["out"]),
    ("DESCRIBE o|", ["ones", "out"]),
    ("SHOW |", ["STREAMS", "TABLES", "VIEWS", "MATERIALIZED VIEWS", "SINKS", "QUERIES", "FUNCTIONS", "PROGRESS",
                "CONNECTORS"]),
    ("DROP SINK |", ["out", "IF EXISTS"]),
    ("DROP MATERIALIZED VIEW |", ["per_ad", "IF EXISTS"]),
    ("DROP TABLE IF EXISTS |", ["ads"]),
    ("INSERT INTO |", ["clicks", "ads"]),
    ("INSERT INTO ads (|", ["id", "title"]),
    ("INSERT INTO ads (id, |", ["id", "title"]),
    ("INSERT INTO ads |", ["VALUES", "SELECT"]),
    ("CREATE |", ["STREAM", "TABLE", "VIEW", "MATERIALIZED VIEW", "SINK", "FUNCTION", "TEMPORARY FUNCTION",
                  "OR REPLACE"]),
    ("CREATE STREAM s (a BIGINT, b TIMESTAMP(3), WATERMARK FOR |", ["a", "b"]),
    ("CREATE STREAM s (a B|", ["BIGINT", "BOOLEAN", "BYTES"]),
    # Options come from the connector's descriptor (planner/connectors/), once the connector is named.
    ("CREATE STREAM s (a BIGINT) WITH (|", ["connector"]),
    ("CREATE STREAM s (a BIGINT) WITH (connector = |", ["'datagen'", "'file'", "'filesystem'", "'kafka'", "'memory'",
                                                        "'postgres-cdc'", "'upsert-kafka'"]),
    ("CREATE SINK k WITH (connector = |", ["'blackhole'", "'file'", "'filesystem'", "'jdbc'", "'kafka'", "'memory'",
                                           "'print'", "'upsert-kafka'"]),
    ("CREATE SINK k WITH (connector = 'pr|", ["'print'"]),
    ("CREATE STREAM s (a BIGINT) WITH (connector = 'file', |", ["format", "path", "watch", "on_error", "dead_letter",
                                                             "batch.size", "csv.delimiter", "idle_timeout",
                                                             "allowed_lateness"]),
    ("CREATE STREAM s (a BIGINT) WITH (connector = 'file', path = 'x', format = 'json', 'on_error' = |",
     ["'fail'", "'skip'"]),
    ("CREATE STREAM s (a BIGINT) WITH (connector = 'filesystem', format = |",
     ["'json'", "'csv'", "'parquet'", "'raw'", "'debezium-json'"]),
    ("CREATE SINK k WITH (connector = 'file', |", ["format", "path", "csv.delimiter", "sink.mode"]),
    ("CREATE SINK k WITH (connector = 'print', |", ["'print-identifier'", "'standard-error'"]),
    ("CREATE STREAM s (id BIGINT, ts TIMESTAMP(3)) WITH (connector = 'datagen', 'number-of-rows' = '5', 'fields.i|",
     ["'fields.id.kind'", "'fields.id.min'", "'fields.id.max'", "'fields.id.length'", "'fields.id.start'",
      "'fields.id.end'", "'fields.id.step'", "'fields.id.max-past'"]),
    ("CREATE SINK k WITH (connector = 'memory') AS SELECT | FROM ads", ["id", "title", "ABS", ...]),
    ("EXPLAIN SELECT * FROM a|", ["ads"]),
    ("SELECT CAST(ad AS V|", ["VARBINARY", "VARCHAR"]),
    ("SELECT * FROM clicks WHERE ts > TIMESTAMP '2024-01-01' - INTERVAL '1' |", ["SECOND", "MINUTE", "HOUR", "DAY"]),
    # nothing inside strings and comments
    ("SELECT 'a|", []),
    ("SELECT 'ab|c'", []),
    ("SELECT -- a|", []),
    ("SELECT /* a|", []),
])
def test_suggestions(catalog, marked, want):
    got = texts(catalog, marked)
    if want is None:
        assert got and "ad" not in got and "WHERE" in got and "JOIN" in got
    elif want and want[-1] is ...:  # these first, then more
        assert got[:len(want) - 1] == want[:-1]
    else:
        assert got == want


def test_queries_and_options(catalog):
    assert texts(catalog, "DROP QUERY |", queries=("query-3", "out")) == ['"query-3"', "out", "IF EXISTS"]
    assert texts(catalog, "PAUSE QUERY |", queries=("out",)) == ["out"]
    assert texts(catalog, "SHOW PROGRESS |", queries=("query-1",)) == ['"query-1"']
    assert texts(catalog, "SET 'r|", options=("result_mode",)) == ["'result_mode'"]
    assert texts(catalog, "SET |", options=("result_mode",))[:3] == ["'result_mode'", "'batch.max_bytes'",
                                                                     "'batch.size'"]
    assert texts(catalog, "SET 'result_mode' = |") == ["'table'", "'changelog'"]


def test_case_follows_what_is_typed(catalog):
    assert texts(catalog, "select * from clicks where ad > 1 gr|") == ["greatest", "group by"]
    assert texts(catalog, "SELECT * FROM clicks WHERE ad > 1 GR|") == ["GREATEST", "GROUP BY"]
    assert texts(catalog, "SELECT * FROM Cli|") == ["clicks"]


def test_quoted_names_are_offered_quoted():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM `my events` (`event id` BIGINT) WITH (connector = 'memory')")
    assert texts(engine.catalog, "SELECT * FROM |")[0] == '"my events"'
    assert texts(engine.catalog, 'SELECT e.| FROM "my events" e') == ['"event id"']


@pytest.mark.parametrize("text, complete", [
    ("", True), ("   ", True), ("SELECT 1", False), ("SELECT 1;", True), ("SELECT 1;  -- done", True),
    ("SELECT ';'", False), ("SELECT ';", False), ("SELECT 1 /* ; */", False), ("SELECT 1; /* open", False),
    ("SELECT 'it''s';", True), ("\\d clicks", True), ("quit", True), ("exit;", True),
    ("CREATE STREAM s (\n  a INT\n) WITH (connector = 'memory');", True),
])
def test_enter_runs_only_a_complete_statement(text, complete):
    assert statement_complete(text) is complete


def test_highlighting_colours_by_token_and_keeps_multi_line_tokens_whole():
    from prompt_toolkit.document import Document

    from dsms.repl.highlight import SqlLexer, highlight

    styles = {text: style for style, text in highlight("SELECT COUNT(*), 'a;b', 42 FROM TABLE(TUMBLE(TABLE s")
              if text.strip()}
    assert styles["SELECT"] == styles["FROM"] == styles["TABLE"] == "class:sql.keyword"
    assert styles["COUNT"] == styles["TUMBLE"] == "class:sql.function"
    assert styles["'a;b'"] == "class:sql.string" and styles["42"] == "class:sql.number" and styles["s"] == ""
    lines = SqlLexer().lex_document(Document("SELECT /* a\nb */ 1"))
    assert lines(0)[-1] == ("class:sql.comment", "/* a") and lines(1)[0] == ("class:sql.comment", "b */")
