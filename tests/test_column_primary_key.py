"""The column form of a primary key, ``k VARCHAR PRIMARY KEY NOT ENFORCED``, as Flink accepts it.

It declares the same table as ``PRIMARY KEY (k) NOT ENFORCED`` after the
columns; a table has one key, so a second declaration is an error at it.
"""

import pytest
from spans import assert_error_at

import dsms

TABLE_FORM = "CREATE TABLE t (k VARCHAR, v INT, PRIMARY KEY (k) NOT ENFORCED) WITH (connector = 'memory')"


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE t (k VARCHAR PRIMARY KEY NOT ENFORCED, v INT) WITH (connector = 'memory')",
    "CREATE TABLE t (k VARCHAR PRIMARY KEY, v INT) WITH (connector = 'memory')",
    "CREATE TABLE t (k VARCHAR NOT NULL primary key not enforced, v INT) WITH (connector = 'memory')",
])
def test_the_column_form_declares_the_same_table(ddl):
    column_form, table_form = dsms.Engine(), dsms.Engine()
    column_form.execute(ddl)
    table_form.execute(TABLE_FORM)
    assert str(column_form.execute("DESCRIBE t")) == str(table_form.execute("DESCRIBE t"))
    source = column_form.catalog.get("t")
    assert (source.kind, source.primary_key) == ("table", ("k",))
    # It upserts by key: the second row of 'a' replaces the first, the delete removes 'b'.
    q = column_form.query("SELECT k, v FROM t")
    column_form.insert("t", [("a", 1), ("b", 2), ("a", 3)])
    column_form.delete("t", [("b", 2)])
    column_form.run_until_idle()
    assert q.snapshot().to_pylist() == [{"k": "a", "v": 3}]


def test_a_keyed_column_of_a_file_table(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"k": "a", "v": 1}\n{"k": "b", "v": 2}\n{"k": "a", "v": 5}\n')
    engine = dsms.Engine()
    engine.execute(f"CREATE TABLE t (k VARCHAR PRIMARY KEY NOT ENFORCED, v INT) "
                   f"WITH (connector = 'file', path = '{path}', format = 'json')")
    assert engine.plan("SELECT * FROM t").changelog == "updating"
    q = engine.query("SELECT k, v FROM t")
    engine.run_until_idle()
    assert sorted(q.snapshot().to_pylist(), key=lambda r: r["k"]) == [{"k": "a", "v": 5}, {"k": "b", "v": 2}]


@pytest.mark.parametrize("sql, help_", [
    ("CREATE TABLE t (k VARCHAR PRIMARY KEY NOT ENFORCED, v INT /*a*/PRIMARY KEY NOT ENFORCED/*a*/) "
     "WITH (connector = 'memory')", "PRIMARY KEY (a, b) NOT ENFORCED"),
    ("CREATE TABLE t (k VARCHAR PRIMARY KEY NOT ENFORCED,\n  v INT,\n  /*a*/PRIMARY KEY (v) NOT ENFORCED/*a*/) "
     "WITH (connector = 'memory')", "declare the key once"),
    ("CREATE TABLE t (k VARCHAR, v INT PRIMARY KEY, /*a*/PRIMARY KEY (k)/*a*/) WITH (connector = 'memory')",
     "declare the key once"),
])
def test_a_second_key_is_refused_where_it_is(sql, help_):
    assert_error_at(dsms.Engine(), sql, "a source can declare only one PRIMARY KEY", help_)


def test_a_metadata_column_cannot_be_the_key():
    assert_error_at(dsms.Engine(), "CREATE TABLE t (p INT /*a*/PRIMARY KEY NOT ENFORCED/*a*/ METADATA FROM 'partition', "
                    "v INT) WITH (connector = 'memory')", "a METADATA column cannot be the PRIMARY KEY")


def test_a_stream_cannot_have_one():
    with pytest.raises(dsms.SqlError, match="a STREAM is append-only and cannot have a PRIMARY KEY"):
        dsms.Engine().execute("CREATE STREAM s (k VARCHAR PRIMARY KEY NOT ENFORCED) WITH (connector = 'memory')")
