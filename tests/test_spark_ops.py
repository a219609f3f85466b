"""The Spark route as a terminal user meets it: the JVM's logs go to a file, never to the terminal, and
a running Spark statement stops when its query is dropped (Ctrl-C in the shell)."""

import os
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
