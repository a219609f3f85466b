"""The shell, driven through prompt-toolkit's pipe input with its screen kept by a terminal emulator.

Window results are checked against DuckDB over the same events, or rows worked out by hand.
"""

import asyncio
import json

import duckdb
import pyarrow as pa

import dsms

from oracle import events
from repl_helpers import Shell, table_rows, until

EV = """CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');"""
PER_MINUTE = """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, k;"""
CLICKS = "CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) " \
         "WITH (connector = 'memory');"


def run(scenario):
    asyncio.run(scenario())


def sql_literal(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if hasattr(value, "isoformat"):
        return f"TIMESTAMP '{value.isoformat(sep=' ', timespec='milliseconds')}'"
    return str(value)


def inserts(table: pa.Table, name: str, per_statement: int) -> list[str]:
    rows = table.to_pylist()
    return [f"INSERT INTO {name} VALUES " + ", ".join(
        "(" + ", ".join(sql_literal(r[c]) for c in table.column_names) + ")" for r in rows[i:i + per_statement]) + ";"
        for i in range(0, len(rows), per_statement)]


def closed_windows(ev: pa.Table) -> list[tuple[str, ...]]:
    """The oracle: per-minute counts and sums of the windows the watermark (max ts - 5 s) has closed."""
    rows = duckdb.sql("""
        WITH w AS (SELECT time_bucket(INTERVAL '1 minute', ts) AS ws, k, v FROM ev)
        SELECT strftime(ws, '%Y-%m-%d %H:%M:%S.000'), coalesce(k, 'NULL'), COUNT(*)::VARCHAR,
               coalesce(SUM(v)::VARCHAR, 'NULL')
        FROM w WHERE ws + INTERVAL '1 minute' <= (SELECT MAX(ts) FROM ev) - INTERVAL '5 second'
        GROUP BY ws, k""").fetchall()
    return sorted(rows)


def test_a_live_window_result_appears_after_inserts_and_ctrl_c_stops_it():
    ev = events(60, seed=3, keys=3, span_s=300, disorder_s=4).select(["k", "v", "ts"])

    async def scenario():
        async with Shell() as sh:
            await sh.run(EV)
            await sh.run(PER_MINUTE)
            assert sh.live_area()[0].split() == ["window_start", "|", "k", "|", "n", "|", "sv"]
            assert "(no rows yet)" in sh.live_area()
            statements = inserts(ev, "ev", 20)
            await sh.run(statements[0])
            first = ev.slice(0, 20)
            assert sorted(table_rows(sh.live_area())) == closed_windows(first)
            for stmt in statements[1:]:
                await sh.run(stmt)
            want = closed_windows(ev)
            assert len(want) > len(closed_windows(first)) > 0
            assert sorted(table_rows(sh.live_area())) == want
            status = sh.live_area()[-1]
            assert status.startswith(f"query_1: {len(want)} rows") and "watermark 2024-03-01 12:04:" in status \
                and "late 0" in status
            sh.send("\x03")  # Ctrl-C: the query stops, its last result stays on screen
            await sh.wait_for("query_1 stopped")
            assert not sh.engine.scheduler.jobs
            lines = sh.screen.text().split("\n")
            assert sorted(table_rows(lines, lines.index(next(ln for ln in lines if ln.startswith("query_1 stopped")))
                                     - len(want) - 3)) == want
            await sh.run("SELECT 41 + 1 AS answer;")
            await sh.wait_for("answer\n------\n42\n(1 row)")

    run(scenario)


def test_an_updating_result_changes_in_place_and_changelog_mode_prints_every_change():
    async def scenario():
        async with Shell() as sh:
            await sh.run(CLICKS)
            await sh.run("SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;")
            await sh.run("INSERT INTO clicks VALUES (1, '2024-01-01 12:00:00'), (2, '2024-01-01 12:00:01');")
            assert sorted(table_rows(sh.live_area())) == [("1", "1"), ("2", "1")]
            await sh.run("INSERT INTO clicks VALUES (1, '2024-01-01 12:00:02');")
            # Ad 1's row was retracted and replaced: still one row per ad.
            assert sorted(table_rows(sh.live_area())) == [("1", "2"), ("2", "1")]
            assert sh.live_area()[-1].startswith("query_1: 2 rows  4 changes")  # +I, +I, -U, +U
            sh.send("\x03")
            await sh.wait_for("query_1 stopped after 4 changes")

            await sh.run("SET 'result_mode' = 'changelog';")
            await sh.wait_for("Set result_mode = changelog")
            await sh.run("CREATE STREAM c2 (ad BIGINT) WITH (connector = 'memory');")
            await sh.run("SELECT ad, COUNT(*) AS n FROM c2 GROUP BY ad;")
            for ad in (1, 1, 2):
                await sh.run(f"INSERT INTO c2 VALUES ({ad});")
            text = sh.screen.text()
            printed = text[text.index("SELECT ad, COUNT(*) AS n FROM c2"):]
            changes = [tuple(c.strip() for c in line.split("|")) for line in printed.split("\n")
                       if line[:2] in ("+I", "-U", "+U", "-D")]
            assert changes == [("+I", "1", "1"), ("-U", "1", "1"), ("+U", "1", "2"), ("+I", "2", "1")]
            assert sh.live_area()[-1].startswith("query_2: 4 changes")

    run(scenario)


def test_errors_show_a_caret_and_leave_the_session_usable(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": 1}\n{"x": "one"}\n')

    async def scenario():
        async with Shell() as sh:
            await sh.run(CLICKS)
            await sh.run("SELEC 1;")
            await sh.wait_for("error: unexpected 'SELEC'\n --> line 1, column 1\n  |\n1 | SELEC 1;\n  | ^^^^^")
            await sh.run("SELECT ad,\n  nope\nFROM clicks;")
            await sh.wait_for("error: unknown column 'nope'\n --> line 2, column 3\n  |\n2 |   nope\n  |   ^^^^")
            await sh.run("SET 'result_mode' = 'fancy';")
            await sh.wait_for("error: invalid value 'fancy' for 'result_mode'")
            await sh.wait_for("= help: expected one of: table, changelog")
            # A query that fails while it runs is stopped with its error; the shell goes on.
            await sh.run(f"CREATE STREAM f (x BIGINT) WITH (connector = 'file', path = '{bad}', format = 'json');")
            await sh.run("SELECT x FROM f;")
            await sh.wait_for("error: query query_1 failed and was stopped")
            assert "line 2" in sh.screen.text() and sh.repl.live is None and not sh.engine.scheduler.jobs
            # Ctrl-C with no live query clears the line.
            sh.send("SELECT 'dropped'")
            sh.send("\x03")
            await sh.run("SELECT 7 AS seven;")
            await sh.wait_for("seven\n-----\n7\n(1 row)")
            assert "dropped" not in sh.screen.text()

    run(scenario)


def test_an_internal_error_is_one_line_naming_its_log_and_the_session_goes_on(tmp_path, monkeypatch):
    """Not a DsmsError: the shell says it is a bug and where the traceback went, and keeps running."""
    monkeypatch.setenv("DSMS_LOG_DIR", str(tmp_path / "logs"))
    real = dsms.Engine.execute_statement

    def broken(self, stmt, *args, **kwargs):
        if "boom" in str(getattr(stmt, "name", "")):
            raise RuntimeError("something internal")
        return real(self, stmt, *args, **kwargs)

    monkeypatch.setattr(dsms.Engine, "execute_statement", broken)

    async def scenario():
        async with Shell() as sh:
            await sh.run("CREATE STREAM boom (x BIGINT) WITH (connector = 'memory');")
            await sh.wait_for("internal error (a bug): RuntimeError: something internal; details are in")
            await sh.run("SELECT 7 AS seven;")
            await sh.wait_for("seven\n-----\n7\n(1 row)")
            assert "Traceback" not in sh.screen.text()

    run(scenario)
    (log,) = (tmp_path / "logs").iterdir()
    assert "Traceback" in log.read_text() and "something internal" in log.read_text()


def test_create_sink_returns_the_prompt_at_once_and_keeps_running():
    async def scenario():
        async with Shell(cols=250) as sh:  # SHOW QUERIES is wide
            await sh.run(CLICKS)
            await sh.run("""CREATE SINK per_minute WITH (connector = 'memory') AS
  SELECT window_start, ad, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, ad;""")
            await sh.wait_for("Created sink per_minute")
            assert sh.repl.live is None  # no live view: the sink runs in the background
            await sh.run("""CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;""")
            await sh.run("INSERT INTO clicks VALUES (1, '2024-01-01 12:00:05'), (2, '2024-01-01 12:00:10'), "
                         "(1, '2024-01-01 12:00:50');")
            await sh.run("INSERT INTO clicks VALUES (3, '2024-01-01 12:01:30');")
            await sh.run("SHOW QUERIES;")
            lines = sh.screen.text().split("\n")
            shown = {row[0]: row for row in table_rows(lines, lines.index("dsms> SHOW QUERIES;"))}
            assert set(shown) == {"per_minute", "per_ad"}
            assert shown["per_minute"][1:3] == ("sink", "running") and shown["per_ad"][1:3] == ("materialized view", "running")
            assert shown["per_minute"][4] == "4"  # rows in
            # The 12:00 window closed when the 12:01:30 event moved the watermark past 12:01:00.
            import datetime as dt

            window = dt.datetime(2024, 1, 1, 12, 0)
            assert sorted(sh.engine.sink("per_minute").snapshot().to_pylist(), key=lambda r: r["ad"]) == [
                {"window_start": window, "ad": 1, "n": 2}, {"window_start": window, "ad": 2, "n": 1}]
            assert sorted(sh.engine.sink("per_ad").snapshot().to_pylist(), key=lambda r: r["ad"]) == [
                {"ad": 1, "n": 2}, {"ad": 2, "n": 1}, {"ad": 3, "n": 1}]

    run(scenario)


def test_backslash_d_lists_and_describes():
    async def scenario():
        async with Shell() as sh:
            await sh.run("\\d")
            await sh.wait_for("No streams, tables, views or sinks yet")
            await sh.run(CLICKS)
            await sh.run("CREATE VIEW ones AS SELECT ad FROM clicks WHERE ad = 1;")
            await sh.run("\\d")
            lines = sh.screen.text().split("\n")
            rows = table_rows(lines, len(lines) - 5)
            assert rows == [("clicks", "stream", "memory", "ad, ts"), ("ones", "view", "", "ad")]
            await sh.run("\\d clicks")
            await sh.wait_for("column | type         | nullable | extra")
            await sh.wait_for("ts     | TIMESTAMP(3) | True     | WATERMARK AS ts - INTERVAL '1' SECOND")
            await sh.wait_for("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts")
            await sh.run("\\d clickz")
            await sh.wait_for("view 'clickz'\n --> line 1, column 4\n  |\n1 | \\d clickz\n  |    ^^^^^^\n"
                              "  = help: did you mean 'clicks'?")
            await sh.run("\\help")
            await sh.wait_for("\\d name             describe one")

    run(scenario)


def test_tab_completes_the_columns_of_the_relation_in_use():
    async def scenario():
        async with Shell() as sh:
            await sh.run(CLICKS)
            await sh.run("CREATE TABLE ads (id BIGINT, title VARCHAR, PRIMARY KEY (id) NOT ENFORCED) "
                         "WITH (connector = 'memory');")
            text = "SELECT a. FROM clicks c JOIN ads a ON c.ad = a.id"
            sh.send(text + "\x1b[D" * (len(text) - len("SELECT a.")) + "\t")
            await until(lambda: any("title" in line and "column" in line for line in sh.screen.display()),
                        what="the completion menu", screen=sh.screen)
            menu = [line.split() for line in sh.screen.display() if line.rstrip().endswith("column")]
            assert [m[0] for m in menu] == ["id", "title"]
            sh.send("\t")  # the first completion goes in
            await until(lambda: sh.repl.session.default_buffer.text.startswith("SELECT a.id FROM"))
            sh.send("\x03")

    run(scenario)


def test_a_select_over_bounded_sources_ends_by_itself(tmp_path):
    (tmp_path / "ev.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"k": "a", "ts": "2024-01-01 00:00:01"}, {"k": "b", "ts": "2024-01-01 00:00:04"},
        {"k": "a", "ts": "2024-01-01 00:00:12"}]) + "\n")

    async def scenario():
        async with Shell() as sh:
            await sh.run(f"""CREATE STREAM ev (k VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH (connector = 'file', path = '{tmp_path / "ev.jsonl"}', format = 'json');""")
            await sh.run("""SELECT window_start, COUNT(*) AS n
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;""")
            await sh.wait_for("(2 rows)\n")  # in any order: over bounded files it may run as one DuckDB statement
            lines = sh.screen.text().split("\n")
            assert sorted(table_rows(lines, lines.index("window_start            | n"))) == [
                ("2024-01-01 00:00:00.000", "2"), ("2024-01-01 00:00:10.000", "1")]
            assert sh.repl.live is None and not sh.engine.scheduler.jobs

    run(scenario)


def test_set_lists_the_shell_options_with_the_engine_options_and_reset_restores_them():
    async def scenario():
        async with Shell() as sh:
            await sh.run("SET 'result_mode' = 'changelog';")
            await sh.run("SET;")
            await sh.wait_for("result_mode           | changelog")
            await sh.run("RESET 'result_mode';")
            assert sh.repl.options["result_mode"] == "table"
            await sh.run("SET 'emit' = 'changes';")
            assert sh.engine.catalog.settings["emit"] == "changes"

    run(scenario)


def test_history_is_kept_in_a_file_and_recalled(tmp_path):
    from prompt_toolkit.history import FileHistory

    path = str(tmp_path / "history")

    async def scenario():
        async with Shell(history=FileHistory(path)) as sh:
            await sh.run("SELECT 1 AS one;")
            await sh.run("SELECT 2 AS two;")
        async with Shell(history=FileHistory(path)) as sh:
            sh.send("\x1b[A\x1b[A")  # Up, Up: before the \q that ended the last session
            await until(lambda: sh.repl.session.default_buffer.text == "SELECT 2 AS two;")
            sh.send("\x03")

    run(scenario)
    assert "SELECT 1 AS one;" in open(path).read()


def test_import_dsms_does_not_load_prompt_toolkit():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", "import sys, dsms, dsms.cli; "
                          "print('prompt_toolkit' in sys.modules or 'dsms.repl' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_standing_query_keeps_running_while_a_live_select_is_shown():
    engine = dsms.Engine()

    async def scenario():
        async with Shell(engine) as sh:
            await sh.run(CLICKS)
            await sh.run("CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n FROM clicks;")
            await sh.run("SELECT ad FROM clicks WHERE ad > 1;")
            await sh.run("INSERT INTO clicks VALUES (1, '2024-01-01 12:00:00'), (2, '2024-01-01 12:00:01');")
            assert table_rows(sh.live_area()) == [("2",)]
            assert engine.sink("total").snapshot().to_pylist() == [{"n": 2}]

    run(scenario)
