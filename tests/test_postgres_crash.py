"""Crash tests: ``dsms run --state-dir`` killed with SIGKILL at random (seeded) points, then restarted.

Two pipelines on a real PostgreSQL server:

* postgres-cdc -> group aggregate -> jdbc (upserts and deletes), while
  the source table keeps changing between and during the runs; the sink
  table must end equal to PostgreSQL's own aggregate over the source;
* a watched file -> jdbc (inserts into a table without a key), so that a
  row committed twice or never would show; the table must end holding
  exactly the file's rows (a DuckDB oracle over the file).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import duckdb

from crash_helpers import newest_checkpoint, wait_past_checkpoint
from postgres_helpers import cdc_options, create_orders, execute, fetch, jdbc_options, random_changes, unique, wait_for

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
KILLS = 10


def start(script, state) -> subprocess.Popen:
    return subprocess.Popen([DSMS, "run", str(script), "--state-dir", str(state), "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def kill(proc: subprocess.Popen) -> None:
    assert proc.poll() is None, f"dsms run ended by itself ({proc.returncode}): {proc.stderr.read()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()


def test_cdc_to_jdbc_killed_at_random_points_ends_equal_to_postgresql_own_aggregate(postgres, tmp_path):
    source, slot, sink = unique("orders"), unique("slot"), unique("totals")
    create_orders(postgres, source, 300, seed=11)
    execute(postgres, f"CREATE TABLE {sink} (cust text PRIMARY KEY, n bigint, total bigint)")
    script = tmp_path / "cdc.sql"
    script.write_text(f"""
        SET 'checkpoint.interval' = '200 ms';
        CREATE TABLE orders (id INT, cust VARCHAR, amount BIGINT, note VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
          WITH ({cdc_options(postgres, source, slot)});
        CREATE SINK totals WITH ({jdbc_options(postgres, sink)})
          AS SELECT cust, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY cust;
    """)
    rng = random.Random(2024)
    for _ in range(KILLS):
        before = newest_checkpoint(tmp_path / "state")
        proc = start(script, tmp_path / "state")
        random_changes(postgres, source, rng, transactions=rng.randrange(5, 40))  # while it starts and runs
        wait_past_checkpoint(tmp_path / "state", before, proc)
        time.sleep(rng.uniform(0.0, 1.5))
        kill(proc)
        random_changes(postgres, source, rng, transactions=rng.randrange(0, 10))  # while it is down
    proc = start(script, tmp_path / "state")
    try:
        oracle = f"SELECT cust, count(*), sum(amount) FROM {source} GROUP BY cust"
        same = wait_for(lambda: fetch(postgres, f"SELECT * FROM {sink}") == fetch(postgres, oracle), timeout=60)
        assert same, (fetch(postgres, f"SELECT * FROM {sink}"), fetch(postgres, oracle))
    finally:
        kill(proc)


def test_an_append_only_jdbc_sink_killed_at_random_points_holds_each_row_exactly_once(postgres, tmp_path):
    target = unique("clicks")
    execute(postgres, f"CREATE TABLE {target} (seq bigint, ad int, note text)")
    events = tmp_path / "clicks.jsonl"
    events.touch()
    script = tmp_path / "append.sql"
    script.write_text(f"""
        SET 'checkpoint.interval' = '100 ms';
        CREATE STREAM clicks (seq BIGINT, ad INT, note VARCHAR)
          WITH (connector = 'file', path = '{events}', format = 'json', watch = 'true', 'batch.size' = '300');
        CREATE SINK out WITH ({jdbc_options(postgres, target)}) AS SELECT seq, ad, note FROM clicks WHERE ad <> 3;
    """)
    rng = random.Random(99)
    seq = 0

    def append(n: int) -> None:
        nonlocal seq
        with open(events, "a") as f:
            for _ in range(n):
                seq += 1
                f.write(json.dumps({"seq": seq, "ad": rng.randrange(10), "note": rng.choice(["a", "", None])}) + "\n")

    for _ in range(KILLS):
        append(rng.randrange(500, 3000))
        before = newest_checkpoint(tmp_path / "state")
        proc = start(script, tmp_path / "state")
        wait_past_checkpoint(tmp_path / "state", before, proc)
        time.sleep(rng.uniform(0.0, 1.5))
        append(rng.randrange(0, 1000))
        time.sleep(rng.uniform(0.0, 1.0))
        kill(proc)
    proc = start(script, tmp_path / "state")
    try:
        oracle = duckdb.sql(f"SELECT seq, ad, note FROM read_json('{events}', columns = "
                            "{seq: 'BIGINT', ad: 'INT', note: 'VARCHAR'}) WHERE ad <> 3 ORDER BY seq").fetchall()
        assert wait_for(lambda: fetch(postgres, f"SELECT count(*) FROM {target}")[0][0] >= len(oracle), timeout=60)
        time.sleep(0.5)  # a duplicate committed late would still show
        assert fetch(postgres, f"SELECT * FROM {target} ORDER BY seq") == oracle
    finally:
        kill(proc)
