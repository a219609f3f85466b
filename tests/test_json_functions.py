"""Flink's JSON functions over a ``raw`` file source, on the runtime and the DuckDB route.

Two oracles, neither of them dsms: results worked out by hand from Flink's
rules (``SqlJsonUtils``: strict mode by default; in strict mode a missing
key, a non-JSON input or a value of the wrong kind is an *error*, a JSON
``null`` is *empty*; in lax mode all of them are empty), and a small Python
implementation of those rules over ``json.loads`` for generated messages of
varying shape. Files are read in batches of a few rows, so results must not
depend on where batches are cut.
"""

from __future__ import annotations

import json
import random
import re

import pytest

import dsms
from dsms.grammar import SqlError
from dsms.grammar.json_path import parse_json_path

ROUTES = ["runtime", "duckdb"]

MESSAGES = [
    '{"a": {"b": 7, "s": "x"}, "n": "12", "arr": [1, 2], "f": true}',
    '{"a": {"b": "8"}, "n": "abc"}',
    'not json',
    '{"a": null, "n": null}',
    '{"a": {"b": [1]}, "n": 3.7}',
    '[10, {"k": "v"}]',
]
M1, M2, BAD, NULLS, M5, ARR = MESSAGES


def run(tmp_path, route: str, select: str, lines: list[str], batch: int = 2) -> list[tuple]:
    path = tmp_path / "events.txt"
    path.write_text("".join(line + "\n" for line in lines))
    engine = dsms.Engine()
    engine.execute(f"CREATE STREAM ev (line STRING) WITH (connector = 'file', path = '{path}', format = 'raw', "
                   f"'batch.size' = '{batch}')")
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(f"SELECT line, {select} FROM ev")
    engine.run_until_idle()
    return [tuple(r.values()) for r in q.snapshot().to_pylist()]


def by_line(rows: list[tuple]) -> dict:
    return {r[0]: r[1] if len(r) == 2 else r[1:] for r in rows}


# (expression, {message: Flink's result}); messages not listed give NULL.
HAND = [
    ("JSON_VALUE(line, '$.a.b')", {M1: "7", M2: "8"}),
    ("JSON_VALUE(line, '$.a.b' RETURNING INT)", {M1: 7, M2: 8}),
    ("JSON_VALUE(line, '$.a.b' RETURNING INT DEFAULT -1 ON EMPTY DEFAULT -2 ON ERROR)",
     {M1: 7, M2: 8, BAD: -2, NULLS: -2, M5: -2, ARR: -2}),
    ("JSON_VALUE(line, 'lax $.a.b' RETURNING INT DEFAULT -1 ON EMPTY DEFAULT -2 ON ERROR)",
     {M1: 7, M2: 8, BAD: -1, NULLS: -1, M5: -1, ARR: -1}),
    ("JSON_VALUE(line, '$.n' RETURNING BIGINT DEFAULT 0 ON ERROR)", {M1: 12, M2: 0, BAD: 0, M5: 3, ARR: 0}),
    ("JSON_VALUE(line, '$.n' DEFAULT 'none' ON EMPTY)", {M1: "12", M2: "abc", NULLS: "none", M5: "3.7"}),
    ("JSON_VALUE(line, '$.f' RETURNING BOOLEAN)", {M1: True}),
    ("JSON_VALUE(line, '$[1].k')", {ARR: "v"}),
    ("JSON_VALUE(line, '$[''a''].s')", {M1: "x"}),
    ("JSON_EXISTS(line, '$.a')", {M1: True, M2: True, BAD: False, NULLS: False, M5: True, ARR: False}),
    ("JSON_EXISTS(line, '$.a' UNKNOWN ON ERROR)", {M1: True, M2: True, NULLS: False, M5: True}),
    ("JSON_EXISTS(line, 'lax $.a.b' TRUE ON ERROR)", {M1: True, M2: True, BAD: False, NULLS: False, M5: True,
                                                     ARR: False}),
    ("JSON_QUERY(line, '$.a')", {M1: '{"b":7,"s":"x"}', M2: '{"b":"8"}', M5: '{"b":[1]}'}),
    ("JSON_QUERY(line, '$.arr' WITH CONDITIONAL ARRAY WRAPPER)", {M1: "[1,2]"}),
    ("JSON_QUERY(line, '$.n' WITH UNCONDITIONAL ARRAY WRAPPER)", {M1: '["12"]', M2: '["abc"]', M5: "[3.7]"}),
    ("JSON_QUERY(line, '$.n' EMPTY OBJECT ON EMPTY EMPTY ARRAY ON ERROR)",
     {M1: "[]", M2: "[]", BAD: "[]", NULLS: "{}", M5: "[]", ARR: "[]"}),
    ("JSON_QUERY(line, 'lax $.n' EMPTY OBJECT ON EMPTY EMPTY ARRAY ON ERROR)",
     {M1: "{}", M2: "{}", BAD: "{}", NULLS: "{}", M5: "{}", ARR: "{}"}),
    # a wildcard path gives the list of its matches; no match is an empty list, not an error
    ("JSON_QUERY(line, '$.arr[*]')", {M1: "[1,2]", M2: "[]", NULLS: "[]", M5: "[]", ARR: "[]"}),
    ("line IS JSON", {M1: True, M2: True, BAD: False, NULLS: True, M5: True, ARR: True}),
    ("line IS JSON ARRAY", {M1: False, M2: False, BAD: False, NULLS: False, M5: False, ARR: True}),
    ("line IS NOT JSON OBJECT", {M1: False, M2: False, BAD: True, NULLS: False, M5: False, ARR: True}),
    ("JSON_VALUE(line, '$.n') IS JSON SCALAR", {M1: True, M2: False, BAD: False, NULLS: False, M5: True,
                                                 ARR: False}),
    # keys sorted, nested constructors inserted as JSON, NULL ON NULL by default for objects
    ("JSON_OBJECT('k' VALUE JSON_VALUE(line, '$.n'), 'a' VALUE JSON_ARRAY(1, JSON_VALUE(line, '$.n')))",
     {M1: '{"a":[1,"12"],"k":"12"}', M2: '{"a":[1,"abc"],"k":"abc"}', BAD: '{"a":[1],"k":null}',
      NULLS: '{"a":[1],"k":null}', M5: '{"a":[1,"3.7"],"k":"3.7"}', ARR: '{"a":[1],"k":null}'}),
    ("JSON_OBJECT(KEY 'k' VALUE JSON_VALUE(line, '$.n' RETURNING DOUBLE) ABSENT ON NULL)",
     {M1: '{"k":12.0}', M2: "{}", BAD: "{}", NULLS: "{}", M5: '{"k":3.7}', ARR: "{}"}),
    ("JSON_ARRAY(JSON_VALUE(line, '$.f' RETURNING BOOLEAN) NULL ON NULL)",
     {M1: "[true]", M2: "[null]", BAD: "[null]", NULLS: "[null]", M5: "[null]", ARR: "[null]"}),
    ("JSON_OBJECT('raw' VALUE JSON(JSON_QUERY(line, '$.a')))",
     {M1: '{"raw":{"b":7,"s":"x"}}', M2: '{"raw":{"b":"8"}}', BAD: '{"raw":null}', NULLS: '{"raw":null}',
      M5: '{"raw":{"b":[1]}}', ARR: '{"raw":null}'}),
    ("JSON_ARRAY()", {m: "[]" for m in MESSAGES}),
    ("JSON_STRING(JSON_VALUE(line, '$.a.b'))", {M1: '"7"', M2: '"8"'}),
    ("JSON_STRING(JSON_VALUE(line, '$.a.b' RETURNING INT) + 1)", {M1: "8", M2: "9"}),
]


@pytest.mark.parametrize("route", ROUTES)
def test_json_functions_give_flinks_results(tmp_path, route):
    select = ", ".join(f"{expr} AS c{i}" for i, (expr, _) in enumerate(HAND))
    rows = by_line(run(tmp_path, route, select, MESSAGES))
    assert sorted(rows) == sorted(MESSAGES)
    for i, (expr, expected) in enumerate(HAND):
        got = {m: rows[m][i] for m in MESSAGES}
        want = {m: expected.get(m) for m in MESSAGES}
        assert got == want, expr


@pytest.mark.parametrize("route", ROUTES)
def test_json_value_returning_an_integer_keeps_zero(tmp_path, route):
    # Truncating toward zero once turned an exact 0 into -1 (ROUND(0 - 0.5) rounds half away from zero).
    rows = by_line(run(tmp_path, route, "JSON_VALUE(line, '$.n' RETURNING INT), TRUNCATE(CAST(0 AS DOUBLE), 1)",
                       ['{"n": 0}', '{"n": 0.0}', '{"n": 5}']))
    assert rows == {'{"n": 0}': (0, 0.0), '{"n": 0.0}': (0, 0.0), '{"n": 5}': (5, 0.0)}


def test_raw_format_reads_whole_lines(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b'{"a": 1}\r\n\n  spaced  \nlast')
    for route in ROUTES:
        engine = dsms.Engine()
        engine.execute(f"CREATE STREAM ev (line STRING) WITH (connector = 'file', path = '{path}', format = 'raw')")
        engine.execute(f"SET 'engine' = '{route}'")
        q = engine.query("SELECT line FROM ev")
        engine.run_until_idle()
        assert q.snapshot().column("line").to_pylist() == ['{"a": 1}', "  spaced  ", "last"]


def test_raw_format_takes_one_string_column(tmp_path):
    engine = dsms.Engine()
    with pytest.raises(SqlError, match="one STRING column"):
        engine.execute(f"CREATE STREAM ev (line STRING, n INT) WITH (connector = 'file', path = '{tmp_path}/in.txt', "
                       "format = 'raw')")


# -- differential: generated messages against a Python implementation of Flink's rules ----------

MISSING, ERROR = object(), object()


def flink_lookup(message: str, path: str):
    """What a definite path finds: a Python value, None (JSON null), MISSING or ERROR (not JSON)."""
    try:
        doc = json.loads(message)
    except ValueError:
        return ERROR
    steps = parse_json_path(path).duckdb[1:]
    for key, index in [(k or None, int(i) if i else None) for k, i in
                       re.findall(r'\."([^"]*)"|\[(\d+)\]', steps)]:
        if index is not None:
            if not isinstance(doc, list) or index >= len(doc):
                return MISSING
            doc = doc[index]
        else:
            if not isinstance(doc, dict) or key not in doc:
                return MISSING
            doc = doc[key]
    return doc


def flink_json_value(message, path, returning=str, on_empty=None, on_error=None):
    mode = "lax" if path.startswith("lax") else "strict"
    found = flink_lookup(message, path)
    if found is ERROR or found is MISSING or isinstance(found, (dict, list)):
        return on_error if mode == "strict" else on_empty
    if found is None:
        return on_empty
    text = ("true" if found else "false") if isinstance(found, bool) else str(found)
    if returning is int:
        try:
            return int(float(text)) if not isinstance(found, bool) else on_error
        except ValueError:
            return on_error
    return text


def flink_json_exists(message, path):
    found = flink_lookup(message, path)
    return found is not ERROR and found is not MISSING and found is not None


def messages(n: int, seed: int = 14) -> list[str]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        kind = rnd.randrange(8)
        user = rnd.choice([{"id": i, "name": f"u{i % 7}"}, {"id": str(i)}, {"name": None}, None, [i], "x" * 3])
        doc = {"user": user, "v": rnd.choice([i, -i / 4, f"{i}", None, True, {"deep": i}])}
        if kind == 0:
            out.append("garbage " + str(i))
        elif kind == 1:
            out.append(json.dumps([doc, i]))
        elif kind == 2:
            out.append(json.dumps({"other": i}))
        else:
            out.append(json.dumps(doc))
    return out


@pytest.mark.parametrize("route", ROUTES)
def test_json_value_and_exists_agree_with_flinks_rules_on_varied_messages(tmp_path, route):
    lines = messages(600)
    select = ("JSON_VALUE(line, '$.user.id'), "
              "JSON_VALUE(line, '$.v' RETURNING BIGINT DEFAULT -1 ON EMPTY DEFAULT -2 ON ERROR), "
              "JSON_VALUE(line, 'lax $.user.name' DEFAULT 'anon' ON EMPTY), "
              "JSON_EXISTS(line, '$.user.name'), "
              "JSON_VALUE(line, '$[0].user.id' RETURNING INT)")
    rows = run(tmp_path, route, select, lines, batch=7)
    expected = [(m,
                 flink_json_value(m, "$.user.id"),
                 flink_json_value(m, "$.v", int, on_empty=-1, on_error=-2),
                 flink_json_value(m, "lax $.user.name", on_empty="anon"),
                 flink_json_exists(m, "$.user.name"),
                 flink_json_value(m, "$[0].user.id", int))
                for m in lines]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)


# -- errors and refusals -----------------------------------------------------------------------

@pytest.mark.parametrize("route", ROUTES)
def test_error_on_error_fails_the_query_naming_the_function(tmp_path, route):
    with pytest.raises(dsms.DsmsError, match=r"JSON_VALUE: .*\(ERROR ON ERROR\)"):
        run(tmp_path, route, "JSON_VALUE(line, '$.a.b' ERROR ON ERROR)", [M1, BAD])


@pytest.mark.parametrize("route", ROUTES)
def test_error_on_empty_fails_only_when_empty(tmp_path, route):
    assert by_line(run(tmp_path, route, "JSON_VALUE(line, '$.a.b' ERROR ON EMPTY)", [M1, BAD])) == {M1: "7", BAD: None}
    with pytest.raises(dsms.DsmsError, match=r"JSON_VALUE: .*\(ERROR ON EMPTY\)"):
        run(tmp_path, route, "JSON_VALUE(line, '$.a' ERROR ON EMPTY)", [NULLS])


@pytest.mark.parametrize("expr, message", [
    ("JSON_VALUE(line, line)", "JSON path as a string literal"),
    ("JSON_VALUE(line, '$.a[*]')", "wildcard"),
    ("JSON_VALUE(line, '$..a')", "deep scan"),
    ("JSON_VALUE(line, 'a.b')", "must start with '\\$'"),
    ("JSON_VALUE(line, '$.a[?(@.b)]')", "no filters"),
    ("JSON_VALUE(line, '$.a' RETURNING TIMESTAMP)", "cannot return TIMESTAMP"),
    ("JSON_OBJECT(line VALUE 1)", "keys must be string literals"),
    ("JSON(line)", "only be used as a value inside JSON_OBJECT"),
    ("JSON_STRING(line, line)", "JSON_STRING takes"),
])
def test_calls_dsms_cannot_evaluate_are_refused_with_the_reason(tmp_path, expr, message):
    (tmp_path / "e.txt").write_text("")
    engine = dsms.Engine()
    engine.execute(f"CREATE STREAM ev (line STRING) WITH (connector = 'file', path = '{tmp_path / 'e.txt'}', "
                   "format = 'raw')")
    with pytest.raises(SqlError, match=message):
        engine.query(f"SELECT {expr} FROM ev")


def test_spark_route_refuses_json_functions_at_planning_naming_the_routes_that_can(tmp_path):
    (tmp_path / "e.txt").write_text("{}\n")
    engine = dsms.Engine()
    engine.execute(f"CREATE STREAM ev (line STRING) WITH (connector = 'file', path = '{tmp_path / 'e.txt'}', "
                   "format = 'raw')")
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="spark route cannot evaluate the JSON functions.*duckdb route.*runtime"):
        engine.query("SELECT JSON_VALUE(line, '$.a') AS a FROM ev")


# -- docs/functions.md ---------------------------------------------------------------------------

def shown_rows(page_text: str, after: str) -> list[list[str]]:
    """The rows of the first ```text table after ``after`` (a header, a rule, then rows)."""
    block = re.search(r"```text\n(user_id.*?)```", page_text[page_text.index(after):], re.S).group(1)
    return [[cell.strip() for cell in line.split("|")] for line in block.strip().splitlines()[2:]]


@pytest.mark.parametrize("route", ROUTES)
def test_the_json_example_of_functions_md_gives_the_rows_shown(tmp_path, route):
    from test_docs_sql import ROOT, block
    page = open(f"{ROOT}/docs/functions.md").read()
    lines = re.search(r"Over these lines of `events.txt`:\n\n```text\n(.*?)```", page, re.S).group(1)
    (tmp_path / "events.txt").write_text(lines)
    script = block("docs/functions.md", "JSON_VALUE(line").replace("'events.txt'", f"'{tmp_path / 'events.txt'}'")
    create, select = [part.strip() for part in script.split(";") if part.strip()]
    engine = dsms.Engine()
    engine.execute(create)
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(select)
    engine.run_until_idle()

    def text(v):
        return "NULL" if v is None else str(v).upper() if isinstance(v, bool) else str(v)

    got = sorted([text(v) for v in row.values()] for row in q.snapshot().to_pylist())
    assert got == sorted(shown_rows(page, "the query gives:"))


@pytest.mark.parametrize("route", ROUTES)
def test_defaults_may_be_expressions_over_columns(tmp_path, route):
    rows = by_line(run(tmp_path, route, "JSON_VALUE(line, '$.a.b' DEFAULT UPPER(line) ON ERROR)", [M1, BAD, ARR]))
    assert rows == {M1: "7", BAD: "NOT JSON", ARR: UPPER_ARR}


UPPER_ARR = ARR.upper()
