"""Python scalar functions (CREATE FUNCTION, Engine.create_function, @dsms.udf) on the runtime and the DuckDB route.

The oracle is DuckDB batch SQL that computes what each function computes
with built-in expressions, over the same events, which the runtime gets in
many small batches and the DuckDB route reads from a file in batches of a
few rows.
"""

from __future__ import annotations

import json
import sys
import textwrap

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import dsms
from dsms.grammar import SqlError
from dsms.repl.completion import suggest

from oracle import duck, events, feed, rows, tumble_on_time

DDL = """CREATE STREAM ev (k STRING, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
           WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory')"""


@dsms.udf(returns="BIGINT")
def twice(v: pa.Array) -> pa.Array:
    """Vectorized: takes and returns a pyarrow array."""
    return pc.multiply(v, 2)


def label(k, v):
    """Plain values, two arguments: NULL arrives as None."""
    return None if k is None else f"{k}:{v}"


def shout(k: str) -> str:
    """Plain values, one argument; the result type comes from the annotation."""
    return "NONE" if k is None else k.upper() + "!"


def define(engine: dsms.Engine) -> None:
    engine.create_function("twice", twice)
    engine.create_function("label", label, returns="STRING")
    engine.create_function("shout", shout)


SELECT = "SELECT k, v, twice(v) AS t, label(k, v) AS l, shout(k) AS s FROM ev WHERE twice(v) > 10"
ORACLE = """SELECT k, v, v * 2 AS t, CASE WHEN k IS NULL THEN NULL ELSE k || ':' || COALESCE(CAST(v AS VARCHAR), 'None')
            END AS l, COALESCE(UPPER(k) || '!', 'NONE') AS s FROM ev WHERE v * 2 > 10"""


def test_scalar_functions_on_the_runtime_match_duckdb_over_small_batches():
    data = events(600, seed=3)
    engine = dsms.Engine()
    define(engine)
    engine.execute(DDL)
    q = engine.query(SELECT)
    feed(engine, "ev", data, max_batch=17)
    assert rows(q.snapshot()) == rows(duck(ORACLE, ev=data))


def write_events(tmp_path, data: pa.Table) -> str:
    path = tmp_path / "ev.jsonl"
    with open(path, "w") as f:
        for r in data.to_pylist():
            f.write(json.dumps({**r, "ts": r["ts"].isoformat(sep=" ")}) + "\n")
    return str(path)


def file_engine(tmp_path, data: pa.Table, route: str) -> dsms.Engine:
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM ev (k STRING, v BIGINT, price DOUBLE, ts TIMESTAMP(3),
        WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'file', path = '{write_events(tmp_path, data)}',
        format = 'json', 'batch.size' = '23')""")
    engine.execute(f"SET 'engine' = '{route}'")
    return engine


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_scalar_functions_over_a_file_on_both_routes(tmp_path, route):
    data = events(500, seed=4)
    engine = file_engine(tmp_path, data, route)
    define(engine)
    q = engine.query(SELECT)
    engine.run_until_idle()
    assert q.done
    assert rows(q.snapshot()) == rows(duck(ORACLE, ev=data))


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_a_function_inside_a_tumble_aggregate_on_both_routes(tmp_path, route):
    data = events(700, seed=5)
    engine = file_engine(tmp_path, data, route)
    define(engine)
    q = engine.query("""SELECT window_start, shout(k) AS s, SUM(twice(v)) AS total, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, shout(k)""")
    engine.run_until_idle()
    kept = tumble_on_time(data, 5, 10) if route == "runtime" else data
    expected = duck("""SELECT time_bucket(INTERVAL '10 seconds', ts) AS window_start, COALESCE(UPPER(k) || '!', 'NONE')
        AS s, SUM(v * 2) AS total, COUNT(*) AS n FROM ev GROUP BY ALL""", ev=kept)
    assert rows(q.snapshot()) == rows(expected)


def test_create_function_imports_a_module_of_the_scripts_folder_and_python_files(tmp_path):
    (tmp_path / "shop_udfs.py").write_text(textwrap.dedent("""
        import dsms

        @dsms.udf(returns="DOUBLE")
        def with_tax(price):
            return round(price * 1.2, 2)
        """))
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "shop_units.py").write_text("def cents(price) -> int:\n    return round(price * 100)\n")
    engine = dsms.Engine()
    engine.execute(DDL)
    base = str(tmp_path)
    assert engine.execute("CREATE FUNCTION with_tax AS 'shop_udfs.with_tax' LANGUAGE PYTHON", base).message == \
        "Created function with_tax"
    with pytest.raises(SqlError, match="cannot load Python function 'shop_units.cents': ModuleNotFoundError"):
        engine.execute("CREATE TEMPORARY SYSTEM FUNCTION cents AS 'shop_units.cents'", base)
    engine.execute("SET 'python.files' = 'lib/shop_units.py'")
    engine.execute("CREATE TEMPORARY SYSTEM FUNCTION cents AS 'shop_units.cents'", base)
    q = engine.query("SELECT price, with_tax(price) AS gross, cents(price) AS c FROM ev")
    data = events(200, seed=6)
    feed(engine, "ev", data)
    expected = duck("SELECT price, ROUND(price * 1.2, 2) AS gross, CAST(ROUND(price * 100) AS BIGINT) AS c FROM ev",
                    ev=data)
    assert rows(q.snapshot()) == rows(expected)
    listed = {r["name"]: r for r in engine.execute("SHOW FUNCTIONS").table.to_pylist()}
    assert listed["with_tax"] == {"name": "with_tax", "kind": "python", "definition": "shop_udfs.with_tax RETURNS DOUBLE"}
    assert listed["cents"]["kind"] == "python, temporary"
    assert listed["UPPER"]["kind"] == "built-in"


def test_a_catalog_function_survives_a_restart_and_a_temporary_one_does_not(tmp_path):
    module = f"restart_udfs_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{module}.py").write_text("def plus_one(v) -> int:\n    return None if v is None else v + 1\n")
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(DDL)
    engine.execute(f"CREATE FUNCTION plus_one AS '{module}.plus_one'")
    engine.execute(f"CREATE TEMPORARY FUNCTION plus_two AS '{module}.plus_one'")
    engine.execute("CREATE MATERIALIZED VIEW bumped AS SELECT k, plus_one(v) AS w FROM ev")
    data = events(300, seed=7)
    first, second = data.slice(0, 120), data.slice(120)
    engine.insert("ev", first)
    engine.run_until_idle()
    engine.close()
    sys.modules.pop(module, None)  # the restart imports it again, from the folder it was created in

    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path / "elsewhere"))
    assert set(engine.catalog.functions) == {"plus_one"}
    engine.insert("ev", second)
    engine.run_until_idle()
    assert rows(engine.execute("SELECT * FROM bumped").table) == rows(duck("SELECT k, v + 1 AS w FROM ev", ev=data))
    with pytest.raises(SqlError, match="cannot drop function 'plus_one': materialized view 'bumped' calls it"):
        engine.execute("DROP FUNCTION plus_one")
    engine.execute("DROP MATERIALIZED VIEW bumped")
    assert engine.execute("DROP FUNCTION plus_one").message == "Dropped function plus_one"
    engine.close()
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    assert engine.catalog.functions == {}
    engine.close()


def test_an_error_inside_a_vectorized_function_names_the_function_and_the_row():
    def inverse(v: pa.Array) -> pa.Array:
        if pc.any(pc.equal(v, 0)).as_py():
            raise ZeroDivisionError("division by zero")
        return pc.divide(1.0, v)

    engine = dsms.Engine()
    engine.create_function("inverse", inverse, returns="DOUBLE")
    engine.execute(DDL)
    engine.query("SELECT inverse(v) AS i FROM ev")
    engine.insert("ev", [{"k": "a", "v": 4, "ts": 0}, {"k": "b", "v": 0, "ts": 1}, {"k": "c", "v": 2, "ts": 2}])
    with pytest.raises(dsms.PythonFunctionError,
                       match=r"the Python function inverse failed on the row inverse\(0\): ZeroDivisionError: "
                             r"division by zero \(in Calc"):
        engine.run_until_idle()


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_an_error_inside_a_mapped_function_names_the_row_on_both_routes(tmp_path, route):
    data = pa.table({"k": ["a", "b", "bad", "c"], "v": [1, 2, 3, 4], "price": [1.0, 2.0, 3.0, 4.0],
                     "ts": pa.array([0, 1, 2, 3], pa.timestamp("us"))})
    engine = file_engine(tmp_path, data, route)

    def checked(k, v):
        if k == "bad":
            raise ValueError(f"no such key {k}")
        return v

    engine.create_function("checked", checked, returns="BIGINT")
    with pytest.raises(dsms.PythonFunctionError,
                       match=r"the Python function checked failed on the row checked\('bad', 3\): ValueError: "
                             r"no such key bad"):
        engine.query("SELECT checked(k, v) AS c FROM ev")
        engine.run_until_idle()


def test_a_result_that_is_not_the_declared_type_or_length_is_an_error():
    engine = dsms.Engine()
    engine.create_function("word", lambda v: "x" if v == 2 else 1.5, returns="DOUBLE")
    engine.create_function("short", lambda v: v.slice(1), returns="BIGINT", vectorized=True)
    engine.execute(DDL)
    engine.query("SELECT word(v) AS w FROM ev")
    engine.insert("ev", [{"v": 1, "ts": 0}, {"v": 2, "ts": 1}])
    with pytest.raises(dsms.PythonFunctionError, match=r"word failed on the row word\(2\): it returned values "
                                                        r"that are not DOUBLE"):
        engine.run_until_idle()
    engine = dsms.Engine()
    engine.create_function("short", lambda v: v.slice(1), returns="BIGINT", vectorized=True)
    engine.execute(DDL)
    engine.query("SELECT short(v) AS s FROM ev")
    engine.insert("ev", [{"v": 1, "ts": 0}, {"v": 2, "ts": 1}])
    with pytest.raises(dsms.PythonFunctionError, match=r"short failed on the row short\(1\): it returned 0 values "
                                                        r"for 1 rows"):
        engine.run_until_idle()


def test_explain_shows_the_call_as_written():
    engine = dsms.Engine()
    define(engine)
    engine.execute(DDL)
    plan = engine.explain("SELECT twice(v) AS t FROM ev WHERE shout(k) = 'A!'")
    assert "TWICE(v) AS t" in plan and "SHOUT(k) = 'A!'" in plan and "__py" not in plan


def test_a_function_without_arguments_is_called_once_per_row():
    import itertools

    ticket = itertools.count(1)
    engine = dsms.Engine()
    engine.create_function("next_ticket", lambda: next(ticket), returns="BIGINT")
    engine.execute(DDL)
    q = engine.query("SELECT v, next_ticket() AS t FROM ev")
    feed(engine, "ev", events(300, seed=8), max_batch=50)
    assert sorted(q.snapshot().column("t").to_pylist()) == list(range(1, 301))
    assert "NEXT_TICKET() AS t" in engine.explain("SELECT next_ticket() AS t FROM ev")


def test_the_spark_route_refuses_python_functions_naming_the_routes_that_run_them(tmp_path):
    engine = file_engine(tmp_path, events(10), "spark")
    define(engine)
    with pytest.raises(dsms.DsmsError, match="spark route cannot call the Python function twice.*duckdb route"):
        engine.query("SELECT twice(v) AS t FROM ev")


def test_auto_routes_a_large_input_to_duckdb_not_to_spark_which_cannot_call_them(tmp_path):
    data = events(300, seed=10)
    engine = file_engine(tmp_path, data, "auto")
    define(engine)
    engine.execute("SET 'batch.max_bytes' = '100'")  # "large": Spark's, were it not for the function
    assert engine.explain(SELECT).splitlines()[0].startswith("route: duckdb (")
    assert "the spark route cannot call the Python function" in engine.explain(SELECT).splitlines()[0]
    q = engine.query(SELECT)
    engine.run_until_idle()
    assert rows(q.snapshot()) == rows(duck(ORACLE, ev=data))


def test_bad_definitions_are_refused_with_what_to_change():
    engine = dsms.Engine()
    with pytest.raises(SqlError, match="'upper' cannot name a Python function: it is a built-in function"):
        engine.create_function("upper", shout)
    with pytest.raises(SqlError, match="function f: its result type is not declared"):
        engine.create_function("f", label)
    with pytest.raises(SqlError, match="function f: unknown or unsupported type 'NUMBERS'"):
        engine.create_function("f", label, returns="NUMBERS")
    with pytest.raises(SqlError, match="LANGUAGE JAVA is not supported"):
        engine.execute("CREATE FUNCTION f AS 'a.b' LANGUAGE JAVA")
    with pytest.raises(SqlError, match="'nowhere' is not 'module.function'"):
        engine.execute("CREATE FUNCTION f AS 'nowhere'")
    class Total:  # an aggregate function (tests/test_udaf.py) needs its type too
        def create_accumulator(self):
            return [0]

        def accumulate(self, acc, v):
            acc[0] += v

        def get_value(self, acc):
            return acc[0]

    with pytest.raises(SqlError, match="aggregate function total: its result type is not declared"):
        engine.create_function("total", Total())

    def explode(s):  # a table function (tests/test_udtf.py) likewise
        yield from s.split(",")

    with pytest.raises(SqlError, match="function explode_csv: its result type is not declared"):
        engine.create_function("explode_csv", explode)
    with pytest.raises(SqlError, match="unknown function 'f'"):
        engine.execute("DROP FUNCTION f")
    assert engine.execute("DROP TEMPORARY FUNCTION IF EXISTS f").message == "function f does not exist"
    engine.create_function("shout", shout)
    with pytest.raises(SqlError, match="function 'shout' already exists"):
        engine.execute("CREATE FUNCTION shout AS 'test_udf.shout'")
    assert engine.execute("CREATE FUNCTION IF NOT EXISTS shout AS 'test_udf.shout'").message == \
        "function shout already exists"


def test_the_shell_completes_python_functions():
    engine = dsms.Engine()
    engine.execute(DDL)
    define(engine)
    assert "shout" in [s.text for s in suggest("SELECT sh", 9, engine.catalog)]
    assert [s.text for s in suggest("DROP FUNCTION ", 14, engine.catalog)] == ["label", "shout", "twice", "IF EXISTS"]


def test_dsms_run_imports_a_function_from_the_scripts_folder_and_reports_its_failure(tmp_path):
    import os
    import subprocess

    dsms_cli = os.path.join(os.path.dirname(sys.executable), "dsms")
    (tmp_path / "ev.jsonl").write_text('{"k": "a", "v": 1}\n{"k": "b", "v": 4}\n{"k": null, "v": 9}\n')
    (tmp_path / "script_udfs.py").write_text(textwrap.dedent("""
        def cubed(v) -> int:
            if v == 9:
                raise OverflowError("too big")
            return v ** 3
        """))
    script = tmp_path / "script.sql"
    script.write_text(textwrap.dedent("""
        CREATE STREAM ev (k STRING, v BIGINT) WITH (connector = 'file', path = 'ev.jsonl', format = 'json');
        CREATE FUNCTION cubed AS 'script_udfs.cubed';
        CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = 'json')
          AS SELECT k, cubed(v) AS c FROM ev WHERE k IS NOT NULL;
        """))
    out = subprocess.run([dsms_cli, "run", str(script)], capture_output=True, text=True, cwd="/", timeout=300)
    assert out.returncode == 0, out.stderr
    written = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(written, key=lambda r: r["k"]) == [{"k": "a", "c": 1}, {"k": "b", "c": 64}]

    script.write_text(script.read_text().replace(" WHERE k IS NOT NULL", "").replace("out.jsonl", "all.jsonl"))
    out = subprocess.run([dsms_cli, "run", str(script)], capture_output=True, text=True, cwd="/", timeout=300)
    assert out.returncode != 0
    assert "the Python function cubed failed on the row cubed(9): OverflowError: too big" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_function_over_an_updating_table_retracts_what_it_emitted():
    import random

    from changes import ACCT_DDL, churn_acct, final_table, ops

    rng = random.Random(9)
    engine = dsms.Engine()
    define(engine)
    engine.execute(ACCT_DDL)
    q = engine.query("SELECT shout(k) AS s, SUM(twice(v)) AS total, COUNT(*) AS n FROM acct GROUP BY shout(k)")
    collected, current = churn_acct(engine, q, rng, ["a", "b", "c", None], range(-9, 30))
    assert {"-U", "+U"} <= ops(collected)
    final = final_table(collected)
    expected = duck("SELECT COALESCE(UPPER(k) || '!', 'NONE') AS s, SUM(v * 2) AS total, COUNT(*) AS n FROM acct "
                    "GROUP BY ALL", acct=current)
    assert rows(final) == rows(expected)


def test_a_function_created_over_psql_serves_a_view_and_survives_a_server_restart(tmp_path):
    from server_helpers import DsmsServer

    module = f"served_udfs_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{module}.py").write_text("def half(v) -> float:\n    return None if v is None else v / 2\n")
    script = tmp_path / "session.sql"
    script.write_text(textwrap.dedent(f"""\
        CREATE STREAM clicks (ad BIGINT, price DOUBLE) WITH (connector = 'memory');
        CREATE FUNCTION half AS '{module}.half' LANGUAGE PYTHON;
        INSERT INTO clicks VALUES (1, 3.0), (2, 5.0), (1, 1.0);
        CREATE MATERIALIZED VIEW per_ad AS SELECT ad, SUM(half(price)) AS h FROM clicks GROUP BY ad;
        FLUSH;
        \\pset format unaligned
        \\pset tuples_only on
        SELECT ad, h FROM per_ad ORDER BY ad;
        """))
    with DsmsServer(str(tmp_path), "--allow-python-functions") as server:  # clients may create functions
        done = server.psql("-v", "ON_ERROR_STOP=1", "-f", str(script))
        assert "CREATE FUNCTION" in done.stdout.splitlines()
        assert "1|2" in done.stdout.splitlines() and "2|2.5" in done.stdout.splitlines()
    with DsmsServer(str(tmp_path)) as server:  # the saved function is imported again without the option
        shown = server.psql("-A", "-t", "-c", "SHOW FUNCTIONS").stdout.splitlines()
        assert f"half|python|{module}.half RETURNS DOUBLE" in shown
        done = server.psql("-A", "-t", "-c", "SELECT ad, h FROM per_ad ORDER BY ad")
        assert done.stdout.splitlines() == ["1|2", "2|2.5"]
