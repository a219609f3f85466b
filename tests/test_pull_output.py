"""Pull queries read their writes (and FLUSH waits for the standing queries); results print as users
expect: doubles at full precision, one row for an aggregate over an empty view, no internal columns."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import dsms

from repl_helpers import Shell

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")

DDL = """CREATE STREAM s (k VARCHAR, x DOUBLE) WITH (connector = 'memory');
CREATE MATERIALIZED VIEW per_k AS SELECT k, SUM(x) AS total, COUNT(*) AS n FROM s GROUP BY k;
CREATE MATERIALIZED VIEW rows_of_s AS SELECT k, x FROM s;
"""


def test_a_pull_query_in_the_same_script_sees_the_insert_before_it():
    engine = dsms.Engine()
    result = engine.execute(DDL + "INSERT INTO s VALUES ('a', 1.5), ('a', 2.0), ('b', 4.0);"
                                  "SELECT k, total, n FROM per_k")
    assert sorted(result.table.to_pylist(), key=lambda r: r["k"]) == [
        {"k": "a", "total": 3.5, "n": 2}, {"k": "b", "total": 4.0, "n": 1}]
    # Inserted through Python, then read: the same.
    engine.insert("s", [("c", 1.0)])
    assert engine.execute("SELECT COUNT(*) AS n FROM rows_of_s").table.to_pylist() == [{"n": 4}]


def test_flush_waits_until_the_standing_queries_have_taken_everything_in():
    engine = dsms.Engine()
    engine.execute(DDL)
    engine.insert("s", [("a", 1.0), ("b", 2.0)])
    assert engine.queries.get("per_k").handle.snapshot().num_rows == 0  # nothing ran yet
    assert engine.execute("FLUSH").message == "Flushed"
    assert engine.queries.get("per_k").handle.snapshot().num_rows == 2
    engine.execute("FLUSH;")  # nothing left: returns at once


def test_an_aggregate_over_an_empty_view_is_one_row_without_internal_columns():
    engine = dsms.Engine()
    engine.execute(DDL)
    got = engine.execute("SELECT COUNT(*) AS n, SUM(total) AS t, COUNT(*) + 1 AS m FROM per_k").table
    assert got.column_names == ["n", "t", "m"] and got.to_pylist() == [{"n": 0, "t": None, "m": 1}]
    assert engine.execute("SELECT COUNT(*) AS n FROM rows_of_s WHERE x > 3").table.to_pylist() == [{"n": 0}]
    # With GROUP BY or no aggregate, no rows is no rows; the op column of updating views never shows.
    for sql in ("SELECT k, COUNT(*) AS c FROM rows_of_s GROUP BY k", "SELECT * FROM per_k",
                "SELECT COUNT(*) AS c FROM per_k HAVING COUNT(*) > 0"):
        table = engine.execute(sql).table
        assert table.num_rows == 0 and "__op" not in table.column_names, sql
    engine.execute("INSERT INTO s VALUES ('a', 1.0)")
    got = engine.execute("SELECT COUNT(*) AS n, SUM(total) AS t FROM per_k").table
    assert got.column_names == ["n", "t"] and got.to_pylist() == [{"n": 1, "t": 1.0}]


SCRIPT = """CREATE STREAM s (k VARCHAR, x DOUBLE, f FLOAT) WITH (connector = 'memory');
CREATE MATERIALIZED VIEW per_k AS SELECT k, SUM(x) AS total FROM s GROUP BY k;
INSERT INTO s VALUES ('a', 5993790.123, 0.1), ('b', 0.1, 2.5);
SELECT k, total FROM per_k;
SELECT COUNT(*) AS n FROM per_k WHERE total > 1e9;
SELECT x, f FROM s;
"""


def test_dsms_run_prints_doubles_at_full_precision_and_reads_its_writes(tmp_path):
    (tmp_path / "job.sql").write_text(SCRIPT)
    done = subprocess.run([DSMS, "run", str(tmp_path / "job.sql"), "-q"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "5993790.123" in out and "e+06" not in out
    cells = {cell.strip() for line in out.splitlines() for cell in line.split("|")}
    assert {"5993790.123", "0.1", "2.5"} <= cells
    assert "0.10000000149011612" not in out  # a FLOAT prints at its own precision
    assert "__op" not in out
    lines = [line.strip() for line in out.splitlines()]
    assert "n" in lines and "0" in lines  # COUNT(*) over no matching rows: one row, 0


def test_the_shell_prints_full_precision_and_reads_its_writes_on_one_line():
    async def scenario():
        async with Shell() as sh:
            await sh.run("CREATE STREAM s (k VARCHAR, x DOUBLE) WITH (connector = 'memory');")
            await sh.run("CREATE MATERIALIZED VIEW per_k AS SELECT k, SUM(x) AS total FROM s GROUP BY k;")
            await sh.run("INSERT INTO s VALUES ('a', 5993790.123); SELECT * FROM per_k;")
            await sh.wait_for("5993790.123")
            await sh.run("SELECT COUNT(*) AS n FROM per_k WHERE total < 0;")
            await sh.wait_for("(1 row)")
            assert "e+06" not in sh.screen.text() and "__op" not in sh.screen.text()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_dsms_c_and_f_run_statements_and_engine_picks_the_route(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"x": 1.5}\n{"x": 2.25}\n')
    (tmp_path / "q.sql").write_text("CREATE STREAM s (x DOUBLE) WITH (connector = 'file', path = 'in.jsonl', "
                                    "format = 'json');\nSELECT SUM(x) AS total FROM s;\n")
    done = subprocess.run([DSMS, "-f", str(tmp_path / "q.sql")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| 3.75" in done.stdout
    done = subprocess.run([DSMS, "--engine", "duckdb", "-c", "SET;"], capture_output=True, text=True, timeout=120)
    assert any(line.split() == ["engine", "|", "duckdb"] for line in done.stdout.splitlines()), done.stdout
    done = subprocess.run([DSMS, "-c", "SHOW STREAMS; SELECT nope FROM x;"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "unknown relation 'x'" in done.stderr and "line 1, column" in done.stderr


def test_the_shell_runs_a_file_with_backslash_i_and_expands_rows_with_backslash_x(tmp_path):
    (tmp_path / "setup.sql").write_text("CREATE STREAM s (k VARCHAR, x DOUBLE) WITH (connector = 'memory');\n"
                                        "CREATE MATERIALIZED VIEW per_k AS SELECT k, SUM(x) AS total FROM s GROUP BY k;\n"
                                        "INSERT INTO s VALUES ('a', 0.5);\n")

    async def scenario():
        async with Shell() as sh:
            await sh.run(f"\\i {tmp_path / 'setup.sql'}")
            await sh.wait_for("Inserted 1 row into s")
            await sh.run("\\x")
            await sh.wait_for("Expanded display is on.")
            await sh.run("SELECT * FROM per_k;")
            await sh.wait_for("-[ RECORD 1 ]-\nk     | a\ntotal | 0.5\n(1 row)")
            await sh.run("\\i no/such/file.sql")
            await sh.wait_for("cannot read no/such/file.sql")

    asyncio.run(asyncio.wait_for(scenario(), 60))
