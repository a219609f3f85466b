"""Python table functions (LATERAL TABLE) on the runtime and the DuckDB route.

The oracle is DuckDB batch SQL that makes the same rows with built-in
functions (``string_split`` and ``unnest``), over the same events, which the
runtime gets in many small batches and the DuckDB route reads from a file;
an updating input is checked against the rows written by hand.
"""

from __future__ import annotations

import json
import textwrap

import pyarrow as pa
import pytest

import dsms
from dsms.grammar import SqlError

from oracle import duck, feed, rows


def words(s):
    """A generator: one row (word, its length) per word; none for NULL."""
    if s is None:
        return
    for w in s.split(" "):
        if w:
            yield w, len(w)


@dsms.udtf(returns="INT")
def upto(n):
    """Returns a list (not a generator): rows of one column f0."""
    return None if n is None else list(range(1, n + 1))


def sentences(n: int, seed: int) -> pa.Table:
    import random

    rng = random.Random(seed)
    vocab = ["ann", "bob", "cy", "dana", "e"]
    out = []
    for i in range(n):
        text = None if rng.random() < 0.1 else " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 4)))
        out.append({"id": i, "s": text, "n": rng.choice([None, 0, 1, 2, 3])})
    return pa.Table.from_pylist(out, schema=pa.schema([("id", pa.int64()), ("s", pa.string()), ("n", pa.int32())]))


def define(engine: dsms.Engine) -> None:
    engine.create_function("words", words, returns="ROW<word STRING, len INT>")
    engine.create_function("upto", upto)


SELECT = "SELECT id, w, l FROM ev, LATERAL TABLE(words(s)) AS t(w, l)"
ORACLE = """SELECT id, w, CAST(length(w) AS INT) AS l
            FROM (SELECT id, unnest(string_split(s, ' ')) AS w FROM ev) WHERE w <> ''"""
LEFT = "SELECT id, x FROM ev LEFT JOIN LATERAL TABLE(upto(n)) AS t(x) ON TRUE"
LEFT_ORACLE = """SELECT id, x FROM ev LEFT JOIN (SELECT id AS i, unnest(range(1, n + 1)) AS x FROM ev)
                 ON id = i"""


def test_table_functions_on_a_stream_match_duckdb_over_small_batches():
    data = sentences(400, seed=1)
    engine = dsms.Engine()
    define(engine)
    engine.execute("CREATE STREAM ev (id BIGINT, s STRING, n INT) WITH (connector = 'memory')")
    q, left = engine.query(SELECT), engine.query(LEFT)
    feed(engine, "ev", data, max_batch=13)
    assert q.changelog == "append-only"
    assert rows(q.snapshot()) == rows(duck(ORACLE, ev=data))
    assert rows(left.snapshot()) == rows(duck(LEFT_ORACLE, ev=data))


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_table_functions_over_a_file_on_both_routes(tmp_path, route):
    data = sentences(300, seed=2)
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data.to_pylist()))
    engine = dsms.Engine()
    define(engine)
    engine.execute(f"""CREATE STREAM ev (id BIGINT, s STRING, n INT) WITH (connector = 'file', path = '{path}',
                       format = 'json', 'batch.size' = '17')""")
    engine.execute(f"SET 'engine' = '{route}'")
    q = engine.query(f"SELECT w, COUNT(*) AS c, SUM(l) AS total FROM ({SELECT}) GROUP BY w")
    engine.run_until_idle()
    assert engine.explain(SELECT).startswith(f"route: {route}")
    assert rows(q.snapshot()) == rows(duck(f"SELECT w, COUNT(*) AS c, SUM(l) AS total FROM ({ORACLE}) GROUP BY w",
                                           ev=data))


def test_an_update_of_the_input_row_retracts_the_rows_of_its_old_call():
    engine = dsms.Engine()
    define(engine)
    engine.execute("CREATE TABLE notes (id BIGINT, s STRING, PRIMARY KEY (id) NOT ENFORCED) "
                   "WITH (connector = 'memory')")
    q = engine.query("SELECT id, w FROM notes CROSS JOIN LATERAL TABLE(words(s)) AS t(w, l)")
    engine.insert("notes", [(1, "ann bob"), (2, "cy")])
    engine.run_until_idle()
    assert sorted(map(tuple, (r.values() for r in q.poll().to_pylist()))) == [
        ("+I", 1, "ann"), ("+I", 1, "bob"), ("+I", 2, "cy")]
    engine.insert("notes", [(1, "dana")])
    engine.delete("notes", [(2,)])
    engine.run_until_idle()
    assert sorted(map(tuple, (r.values() for r in q.poll().to_pylist()))) == [
        ("+U", 1, "dana"), ("-D", 2, "cy"), ("-U", 1, "ann"), ("-U", 1, "bob")]
    assert sorted(q.snapshot().to_pylist(), key=str) == [{"id": 1, "w": "dana"}]


def test_create_function_loads_a_generator_and_a_class_with_eval(tmp_path):
    (tmp_path / "tf.py").write_text(textwrap.dedent('''
        import dsms

        @dsms.udtf(returns="ROW<k STRING, v STRING>")
        def pairs(text):
            for item in (text or "").split(","):
                if "=" in item:
                    yield dict(zip(("k", "v"), item.split("=", 1)))

        @dsms.udtf(returns="STRING")
        class Letters:  # as PyFlink's TableFunction: an object with eval
            def eval(self, s):
                yield from s or ""

        letters = Letters()
    '''))
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""CREATE FUNCTION pairs AS 'tf.pairs' LANGUAGE PYTHON;
                      CREATE TEMPORARY FUNCTION letters AS 'tf.letters';""")
    kinds = {r["name"]: r["kind"] for r in engine.execute("SHOW FUNCTIONS").table.to_pylist()}
    assert kinds["pairs"] == "python table" and kinds["letters"] == "python table, temporary"
    engine.execute("CREATE STREAM kv (id INT, text STRING) WITH (connector = 'memory')")
    q = engine.query("SELECT id, k, v FROM kv, LATERAL TABLE(pairs(text)) AS p")
    engine.insert("kv", [(1, "a=1,b=2"), (2, "junk"), (3, None), (4, "c=x=y")])
    engine.run_until_idle()
    assert sorted(q.snapshot().to_pylist(), key=str) == [
        {"id": 1, "k": "a", "v": "1"}, {"id": 1, "k": "b", "v": "2"}, {"id": 4, "k": "c", "v": "x=y"}]
    q2 = engine.query("SELECT id, f0 FROM kv, LATERAL TABLE(letters(text))")
    engine.insert("kv", [(5, "xy")])
    engine.run_until_idle()
    assert q2.snapshot().to_pylist()[-2:] == [{"id": 5, "f0": "x"}, {"id": 5, "f0": "y"}]
    engine.execute("DROP FUNCTION pairs")
    with pytest.raises(SqlError, match="unknown function 'pairs'|LATERAL TABLE"):
        engine.query("SELECT id, k FROM kv, LATERAL TABLE(pairs(text)) AS p")


def test_letters_has_its_type_from_the_decorator_or_is_refused():
    class Letters:
        def eval(self, s):
            yield from s or ""

    engine = dsms.Engine()
    with pytest.raises(SqlError, match="result type is not declared") as e:
        engine.create_function("letters", Letters())
    assert "udtf" in str(e.value)
    engine.create_function("letters", Letters(), returns="STRING")
    engine.execute("CREATE STREAM s (w STRING) WITH (connector = 'memory')")
    q = engine.query("SELECT w, f0 FROM s, LATERAL TABLE(letters(w))")
    engine.insert("s", [("ab",), (None,)])
    engine.run_until_idle()
    assert q.snapshot().to_pylist() == [{"w": "ab", "f0": "a"}, {"w": "ab", "f0": "b"}]


def test_misuses_are_refused_with_what_to_change():
    engine = dsms.Engine()
    define(engine)
    engine.create_function("shout", lambda s: s, returns="STRING")
    engine.execute("CREATE STREAM ev (id BIGINT, s STRING, n INT) WITH (connector = 'memory')")
    with pytest.raises(SqlError, match="words is a table function") as e:
        engine.query("SELECT words(s) FROM ev")
    assert "LATERAL TABLE(words(...))" in str(e.value) and "column 8" in str(e.value)
    with pytest.raises(SqlError, match="shout is a scalar function"):
        engine.query("SELECT id FROM ev, LATERAL TABLE(shout(s)) AS t(x)")
    with pytest.raises(SqlError, match="the table function words gives 2 columns, but the alias names 1"):
        engine.query("SELECT id FROM ev, LATERAL TABLE(words(s)) AS t(x)")
    with pytest.raises(SqlError, match="takes plain values"):
        engine.create_function("bad", words, returns="STRING", vectorized=True)


def test_a_failure_or_a_bad_row_names_the_function_and_the_input_row():
    def broken(s):
        yield s, 1
        if s == "boom":
            raise ValueError("no")

    def wrong_shape(s):
        yield (s, 1, 2)

    engine = dsms.Engine()
    engine.create_function("broken", broken, returns="ROW<a STRING, b INT>")
    engine.create_function("wrong_shape", wrong_shape, returns="ROW<a STRING, b INT>")
    engine.execute("CREATE STREAM ev (s STRING) WITH (connector = 'memory')")
    q = engine.query("SELECT a FROM ev, LATERAL TABLE(broken(s)) AS t(a, b)")
    engine.insert("ev", [("ok",), ("boom",)])
    with pytest.raises(dsms.PythonFunctionError,
                       match=r"the Python function broken failed on the row broken\('boom'\): ValueError: no"):
        engine.run_until_idle()
    assert q.status == "failed"
    q2 = engine.query("SELECT a FROM ev, LATERAL TABLE(wrong_shape(s)) AS t(a, b)")
    with pytest.raises(dsms.PythonFunctionError, match=r"wrong_shape\('ok'\): it gave the row \('ok', 1, 2\), "
                                                       r"not 2 fields \(a, b\)"):
        engine.run_until_idle()
    assert q2.status == "failed"


def test_the_spark_route_refuses_a_table_function_naming_the_routes_that_run_it(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps({"id": 1, "s": "a b", "n": 1}) + "\n")
    engine = dsms.Engine()
    define(engine)
    engine.execute(f"CREATE STREAM ev (id BIGINT, s STRING, n INT) WITH (connector = 'file', path = '{path}', "
                   "format = 'json')")
    engine.execute("SET 'engine' = 'spark'")
    with pytest.raises(dsms.DsmsError, match="spark") as e:
        engine.query(SELECT)
    assert "runtime" in str(e.value) or "duckdb" in str(e.value)
