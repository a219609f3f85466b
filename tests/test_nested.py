"""ROW, ARRAY, MAP and MULTISET values: types, access, functions, nested JSON and Parquet, UNNEST.

Each query runs on the runtime (the input cut into micro-batches of 7
rows) and on the DuckDB route, and is compared with an oracle: a DuckDB
query written independently in DuckDB's own syntax over the same file
(``read_json`` with the same columns), or rows worked out by hand from
Flink's documentation where the semantics are Flink's own (1-based
subscripts, NULL out of range, ARRAY_DISTINCT keeping order ...).
"""

from __future__ import annotations

import json
import random

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsms
from dsms.render import format_rows

ROUTES = ("runtime", "duckdb")

DDL = """CREATE STREAM ev (id INT, `user` ROW<name STRING, tags ARRAY<STRING>>,
  items ARRAY<ROW<sku STRING, qty INT>>, scores ARRAY<BIGINT>,
  ts AS TIMESTAMP '2024-01-01 00:00:00' + id * INTERVAL '1' SECOND, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json'{extra})"""
ORACLE_COLUMNS = ("{'id': 'INTEGER', 'user': 'STRUCT(name VARCHAR, tags VARCHAR[])', "
                  "'items': 'STRUCT(sku VARCHAR, qty INTEGER)[]', 'scores': 'BIGINT[]'}")


def nested_events(n: int, seed: int = 1) -> list[dict]:
    """Events with NULL and empty values at every level."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        tags = None if rng.random() < 0.1 else [rng.choice(["a", "b", "c", None]) for _ in range(rng.randrange(4))]
        user = None if rng.random() < 0.1 else {"name": rng.choice(["ann", "bob", None]), "tags": tags}
        items = None if rng.random() < 0.1 else [
            {"sku": f"s{rng.randrange(5)}", "qty": rng.choice([1, 2, 3, None])} for _ in range(rng.randrange(3))]
        scores = [rng.randrange(-5, 5) for _ in range(rng.randrange(5))] if rng.random() > 0.1 else None
        rows.append({"id": i, "user": user, "items": items, "scores": scores})
    return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("nested") / "ev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in nested_events(120)))
    return path


def run(route: str, ddl: str, sql: str) -> pa.Table:
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    engine.execute("SET 'batch.size' = '7'")  # the runtime in many micro-batches (the batch route ignores it)
    query = engine.query(sql)
    engine.run_until_idle()
    return query.snapshot()


def rows(table: pa.Table) -> list[tuple]:
    """The rows as DuckDB returns them to Python (a MAP as a dict), so they compare with the oracle's."""
    con = duckdb.connect()
    con.register("result", table)
    return sorted(con.sql("SELECT * FROM result").fetchall(), key=repr)


def oracle(path, sql: str) -> list[tuple]:
    """``sql`` over a relation ``ev`` read by DuckDB itself from the JSON file."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW ev AS SELECT * FROM read_json('{path}', format = 'newline_delimited', "
                f"columns = {ORACLE_COLUMNS})")
    return sorted(con.sql(sql).fetchall(), key=repr)


# (dsms query, the same question in DuckDB's own SQL)
ACCESS = [
    ("SELECT id, `user`.name AS name, ev.`user`.tags AS tags, `user`['name'] AS n2 FROM ev",
     "SELECT id, \"user\".name, \"user\".tags, \"user\".name FROM ev"),
    ("SELECT id, scores[1] AS first, scores[3] AS third, items[2].sku AS sku, `user`.tags[1] AS tag FROM ev",
     "SELECT id, scores[1], scores[3], items[2].sku, \"user\".tags[1] FROM ev"),
    ("SELECT id, CARDINALITY(scores) AS n, CARDINALITY(items) AS m FROM ev",
     "SELECT id, len(scores), len(items) FROM ev"),
    ("SELECT id, ARRAY_CONTAINS(scores, 0) AS has0, ARRAY_REVERSE(scores) AS rev, "
     "ARRAY_JOIN(`user`.tags, '|') AS joined FROM ev",
     "SELECT id, list_contains(scores, 0), list_reverse(scores), "
     "array_to_string(list_filter(\"user\".tags, lambda x: x IS NOT NULL), '|') FROM ev"),
    ("SELECT id, ARRAY[id, id + 1] AS pair, ROW(id, `user`.name) AS r, MAP['id', id] AS m FROM ev WHERE id < 50",
     "SELECT id, [id, id + 1], {'EXPR$0': id, 'EXPR$1': \"user\".name}, MAP {'id': id} FROM ev WHERE id < 50"),
    ("SELECT id, CAST(scores AS ARRAY<INT>) AS s, CAST(`user` AS ROW<name STRING, tags ARRAY<STRING>>) AS u FROM ev",
     "SELECT id, CAST(scores AS INTEGER[]), \"user\" FROM ev"),
    ("SELECT id FROM ev WHERE CARDINALITY(items) >= 2 AND items[1].qty > 1",
     "SELECT id FROM ev WHERE len(items) >= 2 AND items[1].qty > 1"),
    # A chain of subscripts is 1-based at every step.
    ("SELECT id, items[2]['sku'] AS sku, `user`['tags'][1] AS tag, ARRAY[scores, ARRAY[id]][2][1] AS i FROM ev",
     "SELECT id, items[2].sku, \"user\".tags[1], id FROM ev"),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("sql, duck", ACCESS, ids=range(len(ACCESS)))
def test_access_and_constructors_agree_with_duckdb(data, route, sql, duck):
    got = rows(run(route, DDL.format(path=data, extra=""), sql))
    assert got == oracle(data, duck)


UNNEST = [
    ("SELECT id, tag FROM ev CROSS JOIN UNNEST(`user`.tags) AS t(tag)",
     "SELECT id, tag FROM ev, unnest(\"user\".tags) AS t(tag)"),
    ("SELECT id, tag, pos FROM ev CROSS JOIN UNNEST(ev.`user`.tags) WITH ORDINALITY AS t(tag, pos)",
     "SELECT id, \"user\".tags[i], i FROM ev, range(1, len(\"user\".tags) + 1) AS r(i)"),
    ("SELECT id, sku, qty FROM ev CROSS JOIN UNNEST(items) AS t(sku, qty) WHERE qty IS NOT NULL",
     "SELECT id, it.sku, it.qty FROM ev, unnest(items) AS u(it) WHERE it.qty IS NOT NULL"),
    ("SELECT id, s FROM ev LEFT JOIN UNNEST(scores) AS t(s) ON TRUE",
     "SELECT id, s FROM ev, unnest(scores) AS t(s) UNION ALL SELECT id, NULL FROM ev WHERE len(scores) = 0 "
     "OR scores IS NULL"),
    ("SELECT id, k, v FROM ev CROSS JOIN UNNEST(MAP['a', id, 'b', CARDINALITY(scores)]) AS m(k, v)",
     "SELECT id, 'a', id FROM ev UNION ALL SELECT id, 'b', len(scores) FROM ev"),
    ("SELECT tag, COUNT(*) AS n FROM ev CROSS JOIN UNNEST(`user`.tags) AS t(tag) GROUP BY tag",
     "SELECT tag, COUNT(*) FROM ev, unnest(\"user\".tags) AS t(tag) GROUP BY tag"),
    ("SELECT window_start, sku, SUM(qty) AS q, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE (SELECT ts, sku, qty FROM ev "
     "CROSS JOIN UNNEST(items) AS t(sku, qty)), DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
     "GROUP BY window_start, window_end, sku",
     "SELECT time_bucket(INTERVAL 10 SECOND, TIMESTAMP '2024-01-01' + id * INTERVAL 1 SECOND) AS ws, it.sku, "
     "SUM(it.qty), COUNT(*) FROM ev, unnest(items) AS u(it) GROUP BY ws, it.sku"),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("sql, duck", UNNEST, ids=range(len(UNNEST)))
def test_unnest_agrees_with_duckdb(data, route, sql, duck):
    got = rows(run(route, DDL.format(path=data, extra=""), sql))
    assert got == oracle(data, duck)


# Flink's own semantics, worked out by hand: (expression over a = [3, 1, NULL, 3, 2], m = {'k': 5}), result
FLINK = [
    ("a[1]", 3), ("a[5]", 2), ("a[6]", None), ("a[0]", None), ("a[-1]", None),
    ("CARDINALITY(a)", 5), ("CARDINALITY(m)", 1), ("m['k']", 5), ("m['x']", None),
    ("ARRAY_DISTINCT(a)", [3, 1, None, 2]),
    ("ARRAY_POSITION(a, 3)", 1), ("ARRAY_POSITION(a, 7)", 0), ("ARRAY_POSITION(a, CAST(NULL AS INT))", None),
    ("ARRAY_REMOVE(a, 3)", [1, None, 2]),
    ("ARRAY_SLICE(a, 2, 4)", [1, None, 3]), ("ARRAY_SLICE(a, -2)", [3, 2]), ("ARRAY_SLICE(a, 0, 1)", [3]),
    ("ARRAY_SLICE(a, 4, 2)", []),
    ("ARRAY_CONCAT(a, ARRAY[9])", [3, 1, None, 3, 2, 9]), ("ARRAY_CONCAT(a, CAST(NULL AS ARRAY<INT>))", None),
    ("ARRAY_JOIN(CAST(a AS ARRAY<STRING>), '-')", "3-1-3-2"),
    ("ARRAY_JOIN(CAST(a AS ARRAY<STRING>), '-', 'n')", "3-1-n-3-2"),
    ("ARRAY_JOIN(ARRAY[CAST(NULL AS STRING)], '-')", ""), ("ARRAY_REVERSE(ARRAY_SLICE(a, 3))", [2, 3, None]),
    ("ELEMENT(ARRAY_SLICE(a, 2, 2))", 1), ("ELEMENT(ARRAY_SLICE(a, 4, 2))", None),
    ("MAP_KEYS(m)", ["k"]), ("MAP_VALUES(m)", [5]), ("MAP_ENTRIES(m)", [{"key": "k", "value": 5}]),
    ("ARRAY_CONTAINS(a, 2)", True), ("ARRAY_CONTAINS(a, 7)", False), ("ARRAY_CONTAINS(a, CAST(NULL AS INT))", True),
]


@pytest.mark.parametrize("route", ROUTES)
def test_functions_have_flink_semantics(tmp_path, route):
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"a": [3, 1, None, 3, 2]}) + "\n")
    ddl = f"CREATE STREAM f (a ARRAY<INT>) WITH (connector = 'file', path = '{path}', format = 'json')"
    select = ", ".join(f"{e} AS c{i}" for i, (e, _) in enumerate(FLINK))
    got = run(route, ddl, f"SELECT {select} FROM (SELECT a, MAP['k', 5] AS m FROM f)").to_pylist()[0]
    want = {f"c{i}": v for i, (_, v) in enumerate(FLINK)}
    assert got == want


def test_element_of_more_than_one_element_fails():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM f (a ARRAY<INT>) WITH (connector = 'memory')")
    engine.query("SELECT ELEMENT(a) AS e FROM f")
    engine.insert("f", [{"a": [1, 2]}])
    with pytest.raises(dsms.DsmsError, match="more than one element"):
        engine.run_until_idle()


def test_types_in_ddl_and_describe():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM t (r ROW<a INT, b STRING>, r2 ROW(x DOUBLE, `y z` ARRAY<BIGINT>), "
                   "m MAP<STRING, ARRAY<ROW<c DECIMAL(10, 2)>>>, ms MULTISET<STRING>, x INT ARRAY) "
                   "WITH (connector = 'memory')")
    text = str(engine.execute("DESCRIBE t"))
    for want in ("ROW<a INT, b VARCHAR>", "ROW<x DOUBLE, `y z` ARRAY<BIGINT>>",
                 "MAP<VARCHAR, ARRAY<ROW<c DECIMAL(10, 2)>>>", "MAP<VARCHAR, INT>", "ARRAY<INT>"):
        assert want in text, text


@pytest.mark.parametrize("ddl, words", [
    ("CREATE STREAM q (x ARRAY<INT FOO>) WITH (connector = 'memory')", "unknown or unsupported type"),
    ("CREATE STREAM q (x MAP<INT>) WITH (connector = 'memory')", "unknown or unsupported type"),
    ("CREATE STREAM q (x ROW<a INT, a STRING>) WITH (connector = 'memory')", "distinct names"),
    ("CREATE STREAM q (x ARRAY<INT>) WITH (connector = 'file', path = 'x.csv', format = 'csv')",
     "format 'csv' cannot hold column 'x' of type ARRAY<INT>"),
    ("CREATE STREAM q (x ROW<m MAP<INT, INT>>) WITH (connector = 'file', path = 'x.jsonl', format = 'json')",
     "reads MAP<STRING, V>"),
    ("CREATE STREAM q (x ARRAY<INT>) WITH (connector = 'kafka', topic = 't', "
     "'properties.bootstrap.servers' = '127.0.0.1:1', format = 'avro')", "format 'avro' cannot hold column 'x'"),
])
def test_unsupported_types_and_formats_are_refused_at_create(ddl, words):
    with pytest.raises(dsms.SqlError, match="line 1") as info:
        dsms.Engine().execute(ddl)
    assert words in str(info.value)


@pytest.mark.parametrize("sql, words", [
    ("SELECT r.c FROM t", "unknown field 'c'"),
    ("SELECT a.b FROM t", "is not a field"),
    ("SELECT x FROM t CROSS JOIN UNNEST(r) AS u(x)", "UNNEST takes an ARRAY or a MAP"),
    ("SELECT x FROM t CROSS JOIN UNNEST(a) AS u(x, y)", "the alias names 2"),
    ("SELECT x FROM t LEFT JOIN UNNEST(a) AS u(x) ON x > 1", "ON TRUE only"),
])
def test_bad_access_is_a_sql_error(sql, words):
    engine = dsms.Engine()
    engine.execute("CREATE STREAM t (r ROW<a INT, b STRING>, a ARRAY<INT>) WITH (connector = 'memory')")
    with pytest.raises(dsms.SqlError) as info:
        engine.query(sql)
    assert words in str(info.value)


@pytest.mark.parametrize("route", ROUTES)
def test_a_bad_json_shape_is_a_bad_row_blamed_on_its_column(tmp_path, route):
    path = tmp_path / "ev.jsonl"
    good = {"id": 1, "user": {"name": "ann", "tags": ["a"]}, "items": [], "scores": [1]}
    bad = {"id": 2, "user": {"name": "bob", "tags": "oops"}, "items": [], "scores": [2]}
    path.write_text("".join(json.dumps(r) + "\n" for r in (good, bad, good)))
    ddl = DDL.format(path=path, extra=", on_error = 'skip'")
    got = run(route, ddl, "SELECT id, `user`.tags AS tags FROM ev")
    assert rows(got) == [(1, ["a"]), (1, ["a"])]
    dead = [json.loads(line) for line in open(str(path) + ".dead-letter.jsonl")]
    assert [(d["line"], d["column"]) for d in dead] == [(2, "user")], dead


@pytest.mark.parametrize("route", ROUTES)
def test_parquet_nested_columns_are_read_natively(tmp_path, route):
    struct = pa.struct([("a", pa.int32()), ("b", pa.string())])
    table = pa.table({"id": pa.array([1, 2, 3], pa.int32()),
                      "r": pa.array([{"a": 1, "b": "x"}, None, {"a": 3, "b": None}], struct),
                      "m": pa.array([[("k", 1.5)], [], None], pa.map_(pa.string(), pa.float64()))})
    pq.write_table(table, tmp_path / "n.parquet")
    ddl = (f"CREATE STREAM n (id INT, r ROW<a INT, b STRING>, m MAP<STRING, DOUBLE>) "
           f"WITH (connector = 'file', path = '{tmp_path / 'n.parquet'}', format = 'parquet')")
    got = run(route, ddl, "SELECT id, r.a AS a, m['k'] AS k, CARDINALITY(m) AS n FROM n")
    assert rows(got) == [(1, 1, 1.5, 1), (2, None, None, 0), (3, 3, None, None)]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("fmt", ["json", "changelog-json"])
def test_sinks_write_nested_json(tmp_path, route, fmt):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": 1, "user": {"name": "ann", "tags": ["a", None]},
                               "items": [{"sku": "s", "qty": 2}], "scores": []}) + "\n")
    engine = dsms.Engine()
    engine.execute(DDL.format(path=src, extra=""))
    engine.execute(f"SET 'engine' = '{route}'")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{tmp_path / 'out.jsonl'}', format = '{fmt}') "
                   "AS SELECT id, `user`, items, scores, MAP['k', id] AS m FROM ev")
    engine.run_until_idle()
    line = json.loads((tmp_path / "out.jsonl").read_text())
    line.pop("op", None)
    assert line == {"id": 1, "user": {"name": "ann", "tags": ["a", None]}, "items": [{"sku": "s", "qty": 2}],
                    "scores": [], "m": {"k": 1}}


def test_unnest_of_an_updating_table_retracts_the_old_elements():
    engine = dsms.Engine()
    engine.execute("CREATE TABLE t (id INT, tags ARRAY<STRING>, PRIMARY KEY (id) NOT ENFORCED) "
                   "WITH (connector = 'memory')")
    query = engine.query("SELECT id, tag, n FROM t CROSS JOIN UNNEST(tags) WITH ORDINALITY AS u(tag, n)")
    engine.insert("t", [{"id": 1, "tags": ["a", "b"]}, {"id": 2, "tags": ["c"]}])
    engine.run_until_idle()
    engine.insert("t", [{"id": 1, "tags": ["z"]}, {"id": 2, "tags": []}])
    engine.run_until_idle()
    changes = [(r["op"], r["id"], r["tag"], r["n"]) for c in query.changes() for r in c.to_pylist()]
    assert changes == [("+I", 1, "a", 1), ("+I", 1, "b", 2), ("+I", 2, "c", 1),
                       ("-U", 1, "a", 1), ("-U", 1, "b", 2), ("+U", 1, "z", 1), ("-U", 2, "c", 1)]
    assert rows(query.snapshot()) == [(1, "z", 1)]


def test_nested_values_print_as_flink_prints_them():
    t = pa.table({"r": pa.array([{"a": 1, "b": None}], pa.struct([("a", pa.int32()), ("b", pa.string())])),
                  "l": pa.array([[1, None]], pa.list_(pa.int32())),
                  "m": pa.array([[("k", [1])]], pa.map_(pa.string(), pa.list_(pa.int32())))})
    lines, _ = format_rows(t)
    assert lines == ["(1, NULL) | [1, NULL] | {k=[1]}"]


# -- Spark (slow: one session for these tests) -------------------------------------------------------------

def test_spark_route_computes_the_access_and_functions_as_the_others(data, tmp_path, spark_session):
    ddl = DDL.format(path=data, extra="")
    for sql, duck in ACCESS:
        assert rows(run("spark", ddl, sql)) == oracle(data, duck), sql
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps({"a": [3, 1, None, 3, 2]}) + "\n")
    fddl = f"CREATE STREAM f (a ARRAY<INT>) WITH (connector = 'file', path = '{path}', format = 'json')"
    cases = [(e, v) for e, v in FLINK if not e.startswith("ELEMENT")]
    select = ", ".join(f"{e} AS c{i}" for i, (e, _) in enumerate(cases))
    got = run("spark", fddl, f"SELECT {select} FROM (SELECT a, MAP['k', 5] AS m FROM f)").to_pylist()[0]
    assert got == {f"c{i}": v for i, (_, v) in enumerate(cases)}


def test_unnest_on_spark_is_refused_naming_the_routes_that_can(data, spark_session):
    engine = dsms.Engine()
    engine.execute(DDL.format(path=data, extra=""))
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="cannot run CROSS JOIN UNNEST.*SET 'engine' = 'runtime'"):
        engine.query(UNNEST[0][0])


# -- Kafka (a real broker) -----------------------------------------------------------------------------------

def test_kafka_json_reads_and_writes_nested_values(kafka_broker):
    import time

    from kafka_helpers import consume_all, new_topic, produce  # (tests/ is on the path, as for test_kafka.py)

    src, out = new_topic(kafka_broker, "nested-in"), new_topic(kafka_broker, "nested-out")
    records = nested_events(20, seed=5)
    produce(kafka_broker, src, records)
    engine = dsms.Engine()
    common = f"'connector' = 'kafka', 'properties.bootstrap.servers' = '{kafka_broker}', 'format' = 'json'"
    engine.execute(f"""CREATE STREAM ev (id INT, `user` ROW<name STRING, tags ARRAY<STRING>>,
        items ARRAY<ROW<sku STRING, qty INT>>, scores ARRAY<BIGINT>)
        WITH ({common}, 'topic' = '{src}', 'scan.startup.mode' = 'earliest-offset',
              'scan.bounded.mode' = 'latest-offset')""")
    engine.execute(f"CREATE SINK s WITH ({common}, 'topic' = '{out}') "
                   "AS SELECT id, `user`, items, CARDINALITY(scores) AS n FROM ev")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(q.job.done for q in engine.queries.running.values()):
        engine.run_until_idle()
        time.sleep(0.05)
    got = sorted((json.loads(m[3]) for m in consume_all(kafka_broker, out, expect=20)), key=lambda r: r["id"])
    want = [{"id": r["id"], "user": r["user"], "items": r["items"],
             "n": None if r["scores"] is None else len(r["scores"])} for r in records]
    assert got == want


def test_insert_values_cast_rows_by_position_and_updates_keep_nested_columns():
    engine = dsms.Engine()
    engine.execute("CREATE TABLE t (id INT, r ROW<a INT, b STRING>, arr ARRAY<INT>, m MAP<STRING, INT>, "
                   "PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')")
    query = engine.query("SELECT id, r, arr, m, CAST(ROW(id, 'z') AS ROW<x BIGINT, y STRING>) AS c FROM t")
    engine.execute("INSERT INTO t VALUES (1, ROW(1, 'x'), ARRAY[1, 2], MAP['k', 3])")
    engine.execute("INSERT INTO t VALUES (2, CAST(NULL AS ROW<a INT, b STRING>), NULL, NULL)")
    engine.run_until_idle()
    engine.execute("INSERT INTO t VALUES (1, ROW(5, 'y'), ARRAY[7], MAP['k', 9])")  # an update of key 1
    engine.run_until_idle()
    assert rows(query.snapshot()) == [(1, {"a": 5, "b": "y"}, [7], {"k": 9}, {"x": 1, "y": "z"}),
                                      (2, None, None, None, {"x": 2, "y": "z"})]
