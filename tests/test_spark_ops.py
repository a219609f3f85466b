"""The Spark route as a terminal user meets it: the JVM's logs go to a file, never to the terminal, and
a running Spark statement stops when its query is dropped (Ctrl-C in the shell)."""

import os
import re
import subprocess
import sys
import time

import pytest

import dsms

pytest.importorskip("pyspark")

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")


def write_rows(path, n: int) -> None:
    with open(path, "w") as f:
        f.write("k,v\n" + "".join(f"{i % 3},{i}\n" for i in range(n)))


def test_spark_logs_go_to_a_file_not_to_the_terminal(tmp_path):
    write_rows(tmp_path / "a.csv", 30)
    logs = tmp_path / "logs"
    script = ("CREATE STREAM a (k INT, v BIGINT) WITH (connector = 'file', path = 'a.csv', format = 'csv');"
              "SELECT k, COUNT(*) AS n, SUM(v) AS sv FROM a GROUP BY k;")
    out = subprocess.run([DSMS, "--engine", "spark", "-c", script], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, HOME=str(tmp_path), DSMS_LOG_DIR=str(logs)), timeout=300)
    assert out.returncode == 0, out.stderr
    # k = i % 3 over i < 30: ten rows each, sums 135, 145, 155 (hand-computed)
    rows = sorted(tuple(c.strip() for c in line.split("|"))[-3:] for line in out.stdout.splitlines()[2:] if "|" in line)
    assert rows == [("0", "10", "135"), ("1", "10", "145"), ("2", "10", "155")]
    # What dsms itself says goes to stderr; nothing of the JVM's does.
    for line in filter(None, out.stderr.splitlines()):  # (the progress line starts with "events")
        assert line.startswith(("Created", "events ", "done:", "late events", "warning:")), out.stderr
    (log,) = logs.glob("spark-*.log")
    assert "log4j" in log.read_text()  # the JVM had things to say: they are here


def test_dropping_a_running_spark_query_cancels_its_jobs(tmp_path):
    from dsms.runtime import spark_route

    write_rows(tmp_path / "a.csv", 40_000)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("SET 'engine' = 'spark'; "
                   "CREATE STREAM a (k INT, v BIGINT) WITH (connector = 'file', path = 'a.csv', format = 'csv');")
    query = engine.query("SELECT COUNT(*) AS n, SUM(x.v * y.v) AS s FROM a x JOIN a y ON x.k = y.k")
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:  # until Spark runs the statement's jobs
        assert engine.step()
        session = spark_route._session
        if session is not None and session.sparkContext.statusTracker().getActiveJobsIds():
            break
    else:
        pytest.fail("the Spark statement never started")
    thread = query.job._thread
    engine.execute(f"DROP QUERY {query.name}")
    assert not thread.is_alive()  # its jobs were cancelled: the statement ended
    assert not session.sparkContext.statusTracker().getActiveJobsIds()


def test_ctrl_c_stops_a_spark_statement_in_the_shell_and_the_next_one_runs(tmp_path):
    from repl_helpers import Terminal

    write_rows(tmp_path / "a.csv", 40_000)
    logs = tmp_path / "logs"
    term = Terminal(["--engine", "spark"], home=tmp_path, cwd=str(tmp_path), rows=40, cols=120,
                    env={"DSMS_LOG_DIR": str(logs)})
    try:
        term.wait_for("dsms>")
        term.send("CREATE STREAM a (k INT, v BIGINT) WITH (connector = 'file', path = 'a.csv', format = 'csv');\r")
        term.wait_for("Created stream a")
        # 40 000 rows in three keys: 533 M joined pairs, far longer than the test waits.
        term.send("SELECT COUNT(*) AS n, SUM(x.v * y.v) AS s FROM a x JOIN a y ON x.k = y.k;\r")
        term.wait_for("query_1: 0 rows", timeout=120)
        term.pump(5)  # Spark is at work on it by now
        term.send("\x03")  # Ctrl-C: the statement's Spark jobs are cancelled, the live result ends
        term.wait_for("query_1 stopped", timeout=60)
        term.send("SHOW QUERIES;\r")
        term.wait_for("(0 rows)", timeout=60)
        term.send("SELECT k, COUNT(*) AS n FROM a WHERE v < 7 GROUP BY k;\r")  # the next one runs
        term.wait_for("(3 rows)", timeout=180)
        text = term.text()
        # v < 7: k = 0 has v 0, 3, 6; k = 1 has 1, 4; k = 2 has 2, 5 (hand-computed)
        after = text.split("GROUP BY k;")[-1]
        assert sorted(re.findall(r"^\s*(\d)\s*\|\s*(\d+)\s*$", after, re.M)) == [("0", "3"), ("1", "2"), ("2", "2")], text
        assert "__op" not in text  # the live result of the updating query showed only its columns
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)
    for jvm in ("WARN", "ERROR", "log4j", "Exception", "SparkContext", "Stage "):
        assert jvm not in text, text  # the JVM's output went to its log file
    assert list(logs.glob("spark-*.log"))
