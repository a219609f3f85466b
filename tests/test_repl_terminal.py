"""The `dsms` command as a user meets it: in a pseudo-terminal (the screen kept by a terminal emulator),
and with statements piped in."""

import os
import signal
import subprocess

from repl_helpers import DSMS, Terminal


def test_the_shell_in_a_terminal_shows_a_window_fire_and_survives_ctrl_c(tmp_path):
    state = tmp_path / "state"
    term = Terminal(["--state-dir", str(state)], home=tmp_path)
    try:
        term.wait_for("dsms>")
        term.send("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3),\r"
                  "  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');\r")
        term.wait_for("Created stream clicks")
        term.send("SELECT window_start, ad, COUNT(*) AS n\r"
                  "  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\r"
                  "  GROUP BY window_start, window_end, ad;\r")
        term.wait_for("(no rows yet)")
        term.send("INSERT INTO clicks VALUES (7, '2024-05-01 09:00:03'), (7, '2024-05-01 09:00:41'),"
                  " (8, '2024-05-01 09:00:59');\r")
        term.wait_for("Inserted 3 rows into clicks")
        # The 09:00 window is still open: the watermark is 09:00:58.
        term.wait_for("watermark 2024-05-01 09:00:58.000")
        assert "2024-05-01 09:00:00.000 | 7" not in term.text()
        term.send("INSERT INTO clicks VALUES (7, '2024-05-01 09:01:01.5');\r")
        # 09:01:00.5 passes the window's end: it fires, drawn in place above the prompt.
        term.wait_for("2024-05-01 09:00:00.000 | 7  | 2\n2024-05-01 09:00:00.000 | 8  | 1\n"
                      "query_1: 2 rows  2 changes  watermark 2024-05-01 09:01:00.500")
        term.send("\x03")
        term.wait_for("(2 rows)\nquery_1 stopped after 2 changes\n")
        term.send("SELECT 41 + 1 AS answer;\r")
        term.wait_for("answer\n------\n42\n(1 row)")
        term.child.kill(signal.SIGINT)  # a signal at the prompt clears the line, nothing more
        term.send("SELECT 'still here' AS s;\r")
        term.wait_for("still here\n(1 row)")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)
    history = (state / "history").read_text()
    assert "SELECT 41 + 1 AS answer;" in history and "INSERT INTO clicks VALUES (7, '2024-05-01 09:01:01.5');" \
        in history


def test_statements_piped_into_dsms_run_as_a_script(tmp_path):
    out = subprocess.run([DSMS], input="SELECT 6 * 7 AS answer;", capture_output=True, text=True, timeout=60,
                         cwd=tmp_path, env=dict(os.environ, HOME=str(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["answer", "------------", "42"]
    help_ = subprocess.run([DSMS, "--help"], capture_output=True, text=True, timeout=60)
    assert "With no command, opens the interactive shell" in " ".join(help_.stdout.split())
    assert "--state-dir DIR" in help_.stdout


def test_standing_queries_in_the_shell_pause_resume_and_come_back_after_a_restart(tmp_path):
    state = tmp_path / "state"

    def shell():
        term = Terminal(["--state-dir", str(state)], home=tmp_path, rows=50, cols=250)
        term.wait_for("dsms>")
        return term

    def pulled(term, marker):
        """The rows of `SELECT ad, n FROM per_ad ORDER BY ad`, a pull query answered from the view now."""
        term.send(f"SELECT ad, n, '{marker}' AS m FROM per_ad ORDER BY ad;\r")
        term.wait_for(f"| {marker}\n")
        lines = term.text().split("\n")
        start = max(i for i, ln in enumerate(lines) if ln.startswith("ad ") and "| m" in ln) + 2
        out = []
        for ln in lines[start:]:
            if not ln or ln.startswith("("):
                break
            out.append(tuple(c.strip() for c in ln.split("|"))[:2])
        return out

    term = shell()
    try:
        term.send("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');\r")
        term.wait_for("Created stream clicks")
        term.send("CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;\r")
        term.wait_for("Created materialized view per_ad")
        term.send("CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n FROM clicks;\r")
        term.wait_for("Created materialized view total")
        term.send("INSERT INTO clicks VALUES (1, '2024-05-01 09:00:00'), (2, '2024-05-01 09:00:01'), "
                  "(1, '2024-05-01 09:00:02');\r")
        term.wait_for("Inserted 3 rows")
        assert pulled(term, "a") == [("1", "2"), ("2", "1")]
        term.send("SHOW QUERIES;\r")
        term.wait_for("total")
        shown = [ln for ln in term.text().split("\n") if ln.startswith(("per_ad ", "total "))]
        assert len(shown) == 2 and all("| running" in ln for ln in shown)
        term.send("PAUSE QUERY per_ad;\r")
        term.wait_for("Paused query per_ad")
        term.send("INSERT INTO clicks VALUES (2, '2024-05-01 09:00:03');\r")
        term.wait_for("Inserted 1 row")
        assert pulled(term, "b") == [("1", "2"), ("2", "1")]  # paused: the view stands still
        term.send("RESUME QUERY per_ad;\r")
        term.wait_for("Resumed query per_ad")
        assert pulled(term, "c") == [("1", "2"), ("2", "2")]  # and catches up, nothing lost
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)

    term = shell()  # the same state directory: the catalog and both views are back, running
    try:
        term.send("SHOW QUERIES;\r")
        term.wait_for("total")
        shown = [ln for ln in term.text().split("\n") if ln.startswith(("per_ad ", "total "))]
        assert len(shown) == 2 and all("| running" in ln for ln in shown)
        term.send("INSERT INTO clicks VALUES (3, '2024-05-01 09:00:04');\r")
        term.wait_for("Inserted 1 row")
        assert pulled(term, "d") == [("1", "2"), ("2", "2"), ("3", "1")]
        term.send("SELECT n AS everything FROM total;\r")
        term.wait_for("everything\n----------\n5\n")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)
