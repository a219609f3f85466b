"""CREATE TABLE … AS SELECT: the table declared from the query, then filled by it as a standing INSERT.

Results are checked against DuckDB batch SQL over the same input.
"""

from __future__ import annotations

import json
import re

import pytest

import dsms

from insert_helpers import clicks, memory_engine, oracle, rows_of

# -- CREATE TABLE … AS SELECT --------------------------------------------------------------------


def test_create_table_as_select_declares_the_table_and_fills_it(tmp_path):
    engine = memory_engine(base_dir=str(tmp_path))
    result = engine.execute("CREATE TABLE big WITH (connector = 'file', path = 'big.jsonl', format = 'json') "
                            "AS SELECT ad, cost * 2 AS doubled FROM clicks WHERE cost > 20")
    assert result.message == "Created stream big and started query big: INSERT INTO big"
    assert engine.execute("DESCRIBE big").table.to_pylist()[0]["column"] == "ad"
    engine.execute("CREATE STREAM copy AS SELECT ad, ts FROM clicks")  # no WITH: a memory stream
    q = engine.query("SELECT * FROM copy")
    data = clicks(100, seed=5)
    engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in data])
    engine.run_until_idle()
    engine.close()
    written = [tuple(json.loads(line).values()) for line in (tmp_path / "big.jsonl").read_text().splitlines()]
    assert sorted(written) == oracle(data, "SELECT ad, cost * 2 FROM clicks WHERE cost > 20")
    assert len(q.snapshot()) == len(data)


def test_dropping_a_ctas_query_keeps_its_table_and_its_rows(tmp_path):
    state = str(tmp_path / "state")
    with memory_engine(state_dir=state) as engine:
        engine.execute("CREATE TABLE copy AS SELECT ad FROM clicks;"
                       "CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM copy;"  # declared after it
                       "INSERT INTO clicks VALUES (1, 5, TIMESTAMP '2024-05-01 09:00:00')")
        engine.run_until_idle()
        with pytest.raises(dsms.SqlError, match="materialized view .n. reads it"):
            engine.execute("DROP STREAM copy")
        engine.execute("DROP QUERY copy")
        engine.execute("INSERT INTO clicks VALUES (2, 5, TIMESTAMP '2024-05-01 09:00:01')")  # not copied
        engine.run_until_idle()
    with dsms.Engine(state_dir=state) as engine:
        assert [r["id"] for r in engine.execute("SHOW QUERIES").table.to_pylist()] == ["n"]
        engine.execute("INSERT INTO copy VALUES (3)")
        assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 2}]


def test_create_table_as_with_a_primary_key_takes_an_updating_query_across_restarts(tmp_path):
    """Flink 2's CTAS with a key: ``CREATE TABLE t (PRIMARY KEY (k) NOT ENFORCED) AS SELECT`` upserts by k."""
    state = str(tmp_path / "state")
    sql = "SELECT ad, COUNT(*) AS n, SUM(cost) AS total FROM clicks GROUP BY ad"
    first, second = clicks(60, seed=11), clicks(40, seed=12)
    with memory_engine(state_dir=state) as engine:
        result = engine.execute(f"CREATE TABLE per_ad (PRIMARY KEY (ad) NOT ENFORCED) AS {sql}")
        assert result.message == "Created table per_ad and started query per_ad: INSERT INTO per_ad"
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in first])
        engine.run_until_idle()
        assert rows_of(_current(engine, "per_ad")) == oracle(first, sql)
    with dsms.Engine(state_dir=state) as engine:
        assert engine.execute("DESCRIBE per_ad").table.to_pylist()[0]["extra"] == "PRIMARY KEY"
        engine.insert("clicks", [(r["ad"], r["cost"], r["ts"]) for r in second])
        engine.run_until_idle()
        assert rows_of(_current(engine, "per_ad")) == oracle(first + second, sql)


def _current(engine: dsms.Engine, table: str):
    """A memory table's rows now: a query over it, run until idle."""
    q = engine.query(f"SELECT * FROM {table}")
    engine.run_until_idle()
    return q.snapshot()


@pytest.mark.parametrize("sql,message", [
    ("CREATE TABLE t (PRIMARY KEY (nope) NOT ENFORCED) AS SELECT ad FROM clicks",
     "the primary key column 'nope' is not a column of the query"),
    ("CREATE TABLE t (ad INT, PRIMARY KEY (ad) NOT ENFORCED) AS SELECT ad FROM clicks",
     "only a PRIMARY KEY goes in parentheses"),
    ("CREATE TABLE t AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad",
     "insert into a memory TABLE with a PRIMARY KEY"),
])
def test_create_table_as_refusals_name_the_place(sql, message):
    with pytest.raises(dsms.SqlError, match=re.escape(message)) as info:
        memory_engine().execute(sql)
    assert info.value.line == 1 and info.value.column is not None
