"""MAP columns read from JSON sources (runtime/connectors/json_maps.py), against rows worked out by hand.

As Flink's JSON format: a JSON object is a MAP (its member names the keys,
its member values converted to the value type), a JSON null a NULL map;
MAP nests in ROW and ARRAY and holds ARRAY values. Each query runs on the
runtime (in micro-batches of 3 lines) and on the DuckDB route. A value that
does not read is a bad line blamed on its column: an error by default, a
dead letter with ``on_error = 'skip'``. A JSON sink writes maps that a JSON
source reads back the same, from files and from Kafka (a real broker).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

import dsms

ROUTES = ("runtime", "duckdb")
DDL = """CREATE STREAM ev (id INT, m MAP<STRING, INT>, r ROW<name STRING, attrs MAP<STRING, ARRAY<BIGINT>>>,
  ms ARRAY<MAP<STRING, DOUBLE>>, bag MULTISET<STRING>)
  WITH (connector = 'file', path = '{path}', format = 'json'{extra})"""

LINES = [
    {"id": 1, "m": {"a": 1, "b": None}, "r": {"name": "ann", "attrs": {"x": [1, 2], "y": [], "z": None}},
     "ms": [{"p": 1.5}, None, {}], "bag": {"red": 2, "blue": 1}},
    {"id": 2, "m": None, "r": {"name": "bob"}, "ms": [], "other": {"ignored": True}},
    {"id": 3, "m": {}, "r": {"attrs": {"só \"quoted\"": [7]}}, "ms": None, "bag": {}},
    {"id": 4},
    {"id": 5, "m": {"k": -7}, "r": None, "ms": [{"q": 2, "r": -0.5}]},
]
# What each line reads as (a MAP as its (key, value) pairs in the object's order).
WANT = [
    (1, [("a", 1), ("b", None)], {"name": "ann", "attrs": [("x", [1, 2]), ("y", []), ("z", None)]},
     [[("p", 1.5)], None, []], [("red", 2), ("blue", 1)]),
    (2, None, {"name": "bob", "attrs": None}, [], None),
    (3, [], {"name": None, "attrs": [("só \"quoted\"", [7])]}, None, []),
    (4, None, None, None, None),
    (5, [("k", -7)], None, [[("q", 2.0), ("r", -0.5)]], None),
]


def write(path, lines) -> None:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def run(route: str, ddl: str, sql: str) -> pa.Table:
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    engine.execute("SET 'batch.size' = '3'")  # the runtime in many micro-batches (the batch route ignores it)
    query = engine.query(sql)
    engine.run_until_idle()
    return query.snapshot()


@pytest.mark.parametrize("route", ROUTES)
def test_json_objects_read_into_maps_at_any_depth(tmp_path, route):
    path = tmp_path / "ev.jsonl"
    write(path, LINES)
    got = run(route, DDL.format(path=path, extra=""), "SELECT * FROM ev")
    assert got.schema.field("m").type == pa.map_(pa.string(), pa.int32())
    assert sorted(tuple(r.values()) for r in got.to_pylist()) == WANT


@pytest.mark.parametrize("route", ROUTES)
def test_map_access_over_the_read_values(tmp_path, route):
    # Chained subscripts are 1-based at every step: ms[1] is the first map, r.attrs['x'][2] the second element.
    path = tmp_path / "ev.jsonl"
    write(path, LINES)
    sql = ("SELECT id, m['a'] AS a, CARDINALITY(m) AS n, r.attrs['x'][2] AS x2, ms[1]['p'] AS p, "
           "ARRAY[ARRAY[1, 2], ARRAY[3]][1][2] AS c FROM ev")
    got = run(route, DDL.format(path=path, extra=""), sql)
    assert sorted(tuple(r.values()) for r in got.to_pylist()) == [
        (1, 1, 2, 2, 1.5, 2), (2, None, None, None, None, 2), (3, None, 0, None, None, 2),
        (4, None, None, None, None, 2), (5, None, 1, None, None, 2)]


BAD = [
    ({"id": 9, "m": [1, 2]}, "m"),  # an array, not an object
    ({"id": 9, "m": {"a": "x"}}, "m"),  # a value that is not an INT
    ('{"id": 9, "m": {"a": 1, "a": 2}}', "m"),  # a key twice
    ({"id": 9, "r": {"name": "x", "attrs": {"k": 5}}}, "r"),  # an ARRAY value that is a number
    ({"id": 9, "ms": [{"p": "high"}]}, "ms"),  # a DOUBLE that is a word, in a map in an array
]


@pytest.mark.parametrize("route", ROUTES)
def test_a_value_that_does_not_read_is_a_dead_letter_blamed_on_its_column(tmp_path, route):
    path = tmp_path / "ev.jsonl"
    lines = [LINES[0]] + [line for bad, _ in BAD for line in (bad, LINES[4])]
    write(path, lines)
    got = run(route, DDL.format(path=path, extra=", on_error = 'skip'"), "SELECT id, m, r, ms FROM ev")
    assert sorted(got.column("id").to_pylist()) == [1] + [5] * len(BAD)
    dead = [json.loads(line) for line in open(str(path) + ".dead-letter.jsonl")]
    assert [(d["line"], d["column"]) for d in dead] == [(2 + 2 * i, column) for i, (_, column) in enumerate(BAD)]


@pytest.mark.parametrize("route", ROUTES)
def test_by_default_a_bad_map_stops_the_query_naming_file_line_and_column(tmp_path, route):
    path = tmp_path / "ev.jsonl"
    write(path, [LINES[0], {"id": 2, "m": {"a": "x"}}])
    with pytest.raises(dsms.DsmsError, match=r"line 2, column 'm'"):
        run(route, DDL.format(path=path, extra=""), "SELECT id, m FROM ev")


@pytest.mark.parametrize("route", ROUTES)
def test_a_json_sink_and_a_json_source_round_trip_maps(tmp_path, route):
    src, out = tmp_path / "ev.jsonl", tmp_path / "out.jsonl"
    write(src, LINES)
    engine = dsms.Engine()
    engine.execute(DDL.format(path=src, extra=""))
    engine.execute(f"SET 'engine' = '{route}'")
    engine.execute(f"CREATE SINK copy WITH (connector = 'file', path = '{out}', format = 'json') "
                   "AS SELECT id, m, r, ms, bag FROM ev")
    engine.run_until_idle()
    back = run(route, DDL.format(path=out, extra=""), "SELECT * FROM ev")
    assert sorted(tuple(r.values()) for r in back.to_pylist()) == WANT


@pytest.mark.parametrize("ddl, words", [
    ("CREATE STREAM q (m MAP<INT, STRING>) WITH (connector = 'file', path = 'x.jsonl', format = 'json')",
     "reads MAP<STRING, V>"),
    ("CREATE STREAM q (r ROW<m MAP<BIGINT, INT>>) WITH (connector = 'file', path = 'x.jsonl', format = 'json')",
     "not a BIGINT key"),
    ("CREATE TABLE q (k INT, m MAP<STRING, INT>, PRIMARY KEY (k) NOT ENFORCED) "
     "WITH (connector = 'file', path = 'x.jsonl', format = 'debezium-json')", "cannot read MAP or MULTISET"),
])
def test_maps_json_cannot_hold_are_refused_at_create(ddl, words):
    with pytest.raises(dsms.SqlError, match="line 1") as info:
        dsms.Engine().execute(ddl)
    assert words in str(info.value)


# (value type, JSON values inside {"a": ...}, what each reads as: a value, or BAD for a bad line)
BAD_VALUE = object()
VALUES = [
    ("INT", ["1", "-3", "1.5", '"12"', "true", "5000000000"], [1, -3, BAD_VALUE, BAD_VALUE, BAD_VALUE, BAD_VALUE]),
    ("DOUBLE", ["1", "2.5", '"x"'], [1.0, 2.5, BAD_VALUE]),
    ("STRING", ['"hi \\"x\\""', '""', "1"], ['hi "x"', "", BAD_VALUE]),
    ("BOOLEAN", ["true", "false", "1"], [True, False, BAD_VALUE]),
    ("DECIMAL(5, 2)", ["1.25", '"3.5"', "1.255"], [decimal.Decimal("1.25"), decimal.Decimal("3.50"), BAD_VALUE]),
    ("TIMESTAMP(3)", ['"2024-01-01 10:00:00.123"', "1700000000000", '"2024-01-01T10:00:00Z"', '"nope"'],
     [dt.datetime(2024, 1, 1, 10, 0, 0, 123000), dt.datetime(2023, 11, 14, 22, 13, 20), dt.datetime(2024, 1, 1, 10),
      BAD_VALUE]),
    ("DATE", ['"2024-02-03"', "20240203"], [dt.date(2024, 2, 3), BAD_VALUE]),
]


@pytest.mark.parametrize("value_type, values, want", VALUES, ids=[v[0] for v in VALUES])
def test_values_in_a_map_convert_by_the_rules_of_json_columns(tmp_path, value_type, values, want):
    # The rules of docs/connectors.md (Values): numbers from JSON numbers, integers without a fraction, strings
    # from strings, DECIMAL without rounding, TIMESTAMP from text or epoch milliseconds.
    path = tmp_path / "m.jsonl"
    write(path, [f'{{"id": {i}, "m": {{"a": {v}}}}}' for i, v in enumerate(values)])
    ddl = (f"CREATE STREAM ev (id INT, m MAP<STRING, {value_type}>) "
           f"WITH (connector = 'file', path = '{path}', format = 'json', on_error = 'skip')")
    got = {r["id"]: r["m"] for r in run("runtime", ddl, "SELECT id, m FROM ev").to_pylist()}
    assert got == {i: [("a", w)] for i, w in enumerate(want) if w is not BAD_VALUE}
    dead = [json.loads(line) for line in open(str(path) + ".dead-letter.jsonl")]
    assert [d["line"] for d in dead] == [i + 1 for i, w in enumerate(want) if w is BAD_VALUE]
    assert all(d["column"] == "m" for d in dead)


def test_kafka_json_reads_and_writes_maps(kafka_broker):
    import time

    from kafka_helpers import consume_all, new_topic, produce  # (tests/ is on the path, as for test_kafka.py)

    src, out = new_topic(kafka_broker, "maps-in"), new_topic(kafka_broker, "maps-out")
    produce(kafka_broker, src, LINES)
    engine = dsms.Engine()
    common = f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{kafka_broker}', 'format' = 'json'"
    engine.execute(f"""CREATE STREAM ev (id INT, m MAP<STRING, INT>, r ROW<name STRING, attrs MAP<STRING, ARRAY<BIGINT>>>)
        WITH ({common}, 'topic' = '{src}', 'scan.startup.mode' = 'earliest-offset',
              'scan.bounded.mode' = 'latest-offset')""")
    engine.execute(f"CREATE SINK s WITH ({common}, 'topic' = '{out}') AS SELECT id, m, r.attrs AS attrs FROM ev")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(q.job.done for q in engine.queries.running.values()):
        engine.run_until_idle()
        time.sleep(0.05)
    got = sorted((json.loads(m[3]) for m in consume_all(kafka_broker, out, expect=len(LINES))), key=lambda r: r["id"])
    assert got == [{"id": 1, "m": {"a": 1, "b": None}, "attrs": {"x": [1, 2], "y": [], "z": None}},
                   {"id": 2, "m": None, "attrs": None}, {"id": 3, "m": {}, "attrs": {"só \"quoted\"": [7]}},
                   {"id": 4, "m": None, "attrs": None}, {"id": 5, "m": {"k": -7}, "attrs": None}]
