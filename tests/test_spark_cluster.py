"""The Spark route on a standalone cluster whose workers do not have dsms: the driver ships it.

A master and a worker are started on 127.0.0.1 (devtools/spark_cluster.py).
The executors' Python is a bare virtual environment that has dsms's
dependencies (a ``.pth`` naming this venv's site-packages, which is not a
site directory there, so the editable dsms install in it is not loaded) but
not dsms: the test first shows that it cannot ``import dsms``. It runs
through a wrapper that leaves a mark, so the test also knows the executors
used it. ``dsms run --engine spark`` then runs a window aggregate over a
directory of JSON files on the cluster (dsms's readers run in the
executors), and the sink must equal a DuckDB oracle over the same events.
"""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
import random
import subprocess
import sys
import sysconfig

import duckdb
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "devtools"))
from spark_cluster import ClusterUnavailable, SparkCluster  # noqa: E402

BASE = dt.datetime(2024, 3, 1, 12, 0, 0)
DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")


@pytest.fixture(scope="module")
def cluster():
    try:
        c = SparkCluster(cores=1, worker_memory="1g").start()
    except ClusterUnavailable as e:
        pytest.skip(f"no Spark standalone cluster here: {e}")
    yield c
    c.cleanup()


def bare_python(folder) -> tuple[str, str]:
    """A Python without dsms but with its dependencies, and a wrapper that marks each start: (wrapper, mark)."""
    env_dir = os.path.join(folder, "bare")
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", env_dir], check=True)
    site = glob.glob(os.path.join(env_dir, "lib", "python*", "site-packages"))[0]
    with open(os.path.join(site, "dependencies.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")  # a path entry: its own .pth files stay unread
    python = os.path.join(env_dir, "bin", "python")
    mark = os.path.join(folder, "executor-python-started")
    wrapper = os.path.join(folder, "executor-python")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\ntouch {mark}\nexec {python} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    return wrapper, mark


def write_events(folder) -> list[dict]:
    rng = random.Random(7)
    rows = [{"k": f"k{rng.randrange(4)}", "v": rng.randrange(100),
             "ts": (BASE + dt.timedelta(milliseconds=i * 250 + rng.randrange(2000))).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}
            for i in range(1200)]
    os.makedirs(folder)
    for part in range(4):  # four files: four tasks, read by dsms's readers in the executors
        with open(os.path.join(folder, f"part-{part}.jsonl"), "w") as f:
            for r in rows[part * 300:(part + 1) * 300]:
                f.write(json.dumps(r) + "\n")
    return rows


def test_a_query_runs_on_a_cluster_whose_workers_lack_dsms(tmp_path, cluster):
    python, mark = bare_python(str(tmp_path))
    probe = subprocess.run([python, "-c", "import pyarrow, duckdb, sqlglot, lark\nimport dsms"],
                           capture_output=True, text=True, cwd=str(tmp_path))
    assert "No module named 'dsms'" in probe.stderr  # the dependencies import; dsms does not
    os.remove(mark)
    rows = write_events(str(tmp_path / "events"))
    script = tmp_path / "cluster.sql"
    script.write_text(f"""
CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'events/', format = 'json');
SET 'spark.master' = '{cluster.master_url}';
SET 'spark.pyspark.python' = '{python}';
SET 'spark.driver.host' = '127.0.0.1';
SET 'spark.executor.memory' = '512m';
SET 'spark.ui.enabled' = 'false';
SET 'spark.sql.shuffle.partitions' = '2';
CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS
  SELECT window_start, k, COUNT(*) AS n, SUM(v) AS total
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end, k;
""")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    run = subprocess.run([DSMS, "run", "--engine", "spark", str(script)], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "(spark)" in run.stdout + run.stderr
    assert os.path.exists(mark)  # the executors ran the bare Python
    shipped = [f for f in cluster.executor_files() if os.path.basename(f).startswith("dsms-executors-")]
    assert shipped  # and got dsms from the driver

    with open(tmp_path / "out.jsonl") as f:
        got = sorted((r["window_start"], r["k"], r["n"], r["total"]) for r in map(json.loads, f))
    con = duckdb.connect()
    con.execute("CREATE TABLE ev (k VARCHAR, v BIGINT, ts TIMESTAMP)")
    con.executemany("INSERT INTO ev VALUES (?, ?, ?)", [(r["k"], r["v"], r["ts"]) for r in rows])
    want = con.execute("""
        SELECT strftime(time_bucket(INTERVAL 10 SECOND, ts), '%Y-%m-%d %H:%M:%S.%g') AS ws, k, COUNT(*), SUM(v)
        FROM ev GROUP BY ws, k ORDER BY ws, k""").fetchall()
    assert got == [tuple(r) for r in want]
