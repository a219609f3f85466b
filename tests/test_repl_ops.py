"""The shell for long work: a DuckDB query that runs long leaves the prompt usable and stops on Ctrl-C,
long results go through the pager, and SHOW QUERIES / SHOW PROGRESS read well at 80 columns. Run in a
pseudo-terminal, as a user meets them (and the rendering, at a given width, directly)."""

import os
import re

import pyarrow as pa

import dsms
from dsms.render import format_value
from dsms.repl.display import Display

from repl_helpers import Terminal

SLOW = "SELECT COUNT(*) AS n, SUM(x.v * y.v) AS s FROM a x JOIN a y ON x.k = y.k;"  # 900 M joined rows


def write_rows(path, n: int) -> None:
    with open(path, "w") as f:
        f.write("k,v\n" + "".join(f"1,{i}\n" for i in range(n)))


def test_ctrl_c_stops_a_duckdb_query_and_the_prompt_stays_usable_while_it_runs(tmp_path):
    write_rows(tmp_path / "a.csv", 30_000)
    term = Terminal(["--engine", "duckdb"], home=tmp_path, cwd=str(tmp_path), rows=40, cols=120)
    try:
        term.wait_for("dsms>")
        term.send("CREATE STREAM a (k INT, v BIGINT) WITH (connector = 'file', path = 'a.csv', format = 'csv');\r")
        term.wait_for("Created stream a")
        term.send(SLOW + "\r")
        term.wait_for("query_1: 0 rows")
        # The statement runs on DuckDB; meanwhile the shell takes statements and answers them.
        term.send("SHOW QUERIES;\r")
        term.wait_for("(1 row)")
        assert re.search(r"^query_1 \| query \| running ", term.text(), re.M)
        term.send("\x03")  # Ctrl-C: the statement is interrupted, the live result ends
        term.wait_for("query_1 stopped after 0 changes")
        term.send("SHOW QUERIES;\r")
        term.wait_for("(0 rows)")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)


def test_dropping_a_running_duckdb_query_interrupts_its_statement(tmp_path):
    write_rows(tmp_path / "a.csv", 30_000)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("SET 'engine' = 'duckdb'; "
                   "CREATE STREAM a (k INT, v BIGINT) WITH (connector = 'file', path = 'a.csv', format = 'csv');")
    query = engine.query(SLOW)
    for _ in range(10):
        assert engine.step()  # each turn waits a moment for the statement, which is still running
    thread = query.job._thread
    assert thread.is_alive()
    engine.execute(f"DROP QUERY {query.name}")
    assert not thread.is_alive()  # interrupted, not left running in the background


def test_long_results_go_through_the_pager_and_pset_turns_it_off(tmp_path):
    env = {"PAGER": "sed 's/^/paged: /'"}
    term = Terminal([], home=tmp_path, cwd=str(tmp_path), rows=24, cols=100, env=env)
    try:
        term.wait_for("dsms>")
        term.send("SELECT 'short' AS s;\r")  # fits the screen: printed as it is
        term.wait_for("short\n(1 row)")
        term.send("SHOW FUNCTIONS;\r")
        term.wait_for("paged: (")
        assert "paged: name" in term.text()
        term.send("\\pset pager off\r")
        term.wait_for("Pager usage is off.")
        term.send("SHOW CONNECTORS;\r")
        term.wait_for("datagen")
        assert "paged: " not in term.text().split("Pager usage is off.")[1]
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)


def show_tables(tmp_path) -> tuple[pa.Table, pa.Table]:
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("""
      CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
        WITH (connector = 'memory');
      CREATE MATERIALIZED VIEW per_minute AS SELECT window_start, ad, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) GROUP BY window_start, window_end, ad;
      CREATE SINK spend WITH (connector = 'blackhole') AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;
      INSERT INTO clicks VALUES (7, '2024-05-01 09:00:03'), (8, '2024-05-01 09:01:41');
    """)
    engine.run_until_idle()
    return engine.execute("SHOW QUERIES").table, engine.execute("SHOW PROGRESS").table


def test_show_queries_and_show_progress_fit_80_columns(tmp_path):
    for table in show_tables(tmp_path):
        wide = Display(expanded="off").render(table, 80)
        assert max(len(line) for line in wide.split("\n")) > 80  # as a table they would not fit
        text = Display().render(table, 80)
        assert max(len(line) for line in text.split("\n")) <= 80
        # Every value is there, under its column's name, one block per row.
        assert blocks(text) == [{k: format_value(v) for k, v in row.items()} for row in table.to_pylist()]


def blocks(text: str) -> list[dict]:
    """Expanded display read back: a dict per record, wrapped values joined."""
    out, name = [], None
    for line in text.split("\n"):
        found = re.match(r"^(\S*)\s*\|(?: (.*))?$", line)
        if line.startswith("-[ RECORD"):
            out.append({})
        elif found and out:
            key, value = found.group(1), found.group(2) or ""
            if key:
                name = key
                out[-1][name] = value
            else:
                out[-1][name] += " " + value
    return out


def test_a_long_value_wraps_under_itself_at_80_columns():
    error = "the file is shorter than the saved position (it was replaced or rotated); " * 3
    text = Display().render(pa.table({"id": ["per_ad"], "status": ["failed"], "error": [error]}), 80)
    lines = text.split("\n")
    assert max(map(len, lines)) <= 80
    wrapped = [ln for ln in lines if ln.startswith("error") or re.match(r"^\s+\| ", ln)]
    assert len(wrapped) >= 3 and " ".join(ln.split("| ", 1)[1] for ln in wrapped) == error.strip()


def test_show_queries_in_an_80_column_terminal(tmp_path):
    term = Terminal([], home=tmp_path, cwd=str(tmp_path), rows=60, cols=80)
    try:
        term.wait_for("dsms>")
        term.send("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');\r")
        term.wait_for("Created stream clicks")
        term.send("CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;\r")
        term.wait_for("Created materialized view per_ad")
        term.send("SHOW QUERIES;\r")
        term.wait_for("(1 row)")
        text = term.text()
        assert "-[ RECORD 1 ]-" in text
        assert re.search(r"^id\s+\| per_ad$", text, re.M) and re.search(r"^status\s+\| running$", text, re.M)
        term.send("\\x off\r")
        term.wait_for("Expanded display is off.")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)


def test_shell_options_c_f_i_x_and_engine(tmp_path):
    import subprocess

    from repl_helpers import DSMS

    (tmp_path / "script.sql").write_text("SELECT 6 * 7 AS answer;")
    env = dict(os.environ, HOME=str(tmp_path))
    out = subprocess.run([DSMS, "-c", "SELECT 41 + 1 AS answer;"], capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=60)
    assert out.returncode == 0 and out.stdout.split()[-1] == "42", out.stderr
    out = subprocess.run([DSMS, "-f", "script.sql"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.split()[-1] == "42", out.stderr
    out = subprocess.run([DSMS, "--engine", "runtime", "-c", "SET;"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=60)
    assert re.search(r"^engine\s+\| runtime$", out.stdout, re.M), out.stdout
    out = subprocess.run([DSMS, "-f", "missing.sql"], capture_output=True, text=True, cwd=tmp_path, env=env,
                         timeout=60)
    assert out.returncode == 1 and "cannot read script missing.sql" in out.stderr and "Traceback" not in out.stderr

    term = Terminal(["--engine", "duckdb"], home=tmp_path, cwd=str(tmp_path), rows=40, cols=100,
                    env={"PAGER": ""})  # an empty PAGER: never paged
    try:
        term.wait_for("dsms>")
        term.send("\\i script.sql\r")
        term.wait_for("42\n(1 row)")
        term.send("\\x on\r")
        term.wait_for("Expanded display is on.")
        term.send("SET;\r")
        term.wait_for("-[ RECORD 1 ]-")
        assert re.search(r"^value\s+\| duckdb$", term.text(), re.M)
        term.send("\\x\r")
        term.wait_for("Expanded display is off.")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)


def test_the_result_of_an_updating_query_has_only_its_columns_before_any_row():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k VARCHAR, v INT) WITH (connector = 'memory')")
    query = engine.query("SELECT k, COUNT(*) AS n FROM s GROUP BY k")
    assert query.snapshot().column_names == ["k", "n"]  # what the shell's live table shows: no __op
    engine.insert("s", [("a", 1)])
    engine.run_until_idle()
    assert query.snapshot().to_pylist() == [{"k": "a", "n": 1}]


def test_arrays_print_as_lists_in_the_shell(tmp_path):
    import subprocess

    from repl_helpers import DSMS

    out = subprocess.run([DSMS, "-c", "SELECT ARRAY[1, 2] AS a, ARRAY['x', 'y z'] AS b, ARRAY[CAST(NULL AS INT), 3] "
                          "AS c;"], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, HOME=str(tmp_path)), timeout=60)
    assert out.returncode == 0, out.stderr
    row = [c.strip() for c in out.stdout.splitlines()[2].split("|")]
    assert row == ["[1, 2]", "[x, y z]", "[NULL, 3]"]  # as Flink's SQL client prints them
