"""engine.insert holds back when the queries reading a memory stream fall behind ('insert.max_pending'):
it gives them turns itself and waits ('block'), or raises ('error'), instead of buffering without limit."""

import threading
import time

import pytest

import dsms

DDL = """
CREATE STREAM s (x BIGINT) WITH (connector = 'memory');
CREATE MATERIALIZED VIEW total AS SELECT COUNT(*) AS n, SUM(x) AS sx FROM s;
SET 'insert.max_pending' = '4KB';
"""
BATCH = [(i,) for i in range(400)]  # 3.2 KB of BIGINT


def test_error_mode_refuses_an_insert_while_queries_are_behind():
    engine = dsms.Engine()
    engine.execute(DDL + "SET 'insert.backpressure' = 'error';")
    engine.insert("s", BATCH)
    engine.insert("s", BATCH)  # 3.2 KB behind: still within 4 KB
    with pytest.raises(dsms.BackpressureError, match=r"'s' are 6\.2 KiB behind .*'insert.max_pending' = 4KB"):
        engine.insert("s", BATCH)
    engine.run_until_idle()  # the query catches up: inserts are taken again
    engine.insert("s", BATCH)
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM total").table.to_pylist() == [{"n": 1200, "sx": 3 * sum(range(400))}]


def test_block_mode_gives_the_queries_turns_and_never_lets_them_fall_far_behind():
    engine = dsms.Engine()
    engine.execute(DDL)
    log = engine.scheduler.memory["s"]
    behind = []
    for _ in range(50):  # nobody calls run_until_idle: the inserts drive the query themselves
        engine.insert("s", BATCH)
        behind.append(log.pending_bytes())
    assert max(behind) <= 4096 + 3200  # at most the limit plus the insert just taken
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM total").table.to_pylist() == [{"n": 20000, "sx": 50 * sum(range(400))}]


def test_without_backpressure_the_backlog_would_grow():
    """The same feed as above with a limit nobody reaches: the backlog is the whole feed."""
    engine = dsms.Engine()
    engine.execute(DDL + "SET 'insert.max_pending' = '1GB';")
    log = engine.scheduler.memory["s"]
    for _ in range(50):
        engine.insert("s", BATCH)
    assert log.pending_bytes() == 50 * 3200


def test_block_mode_times_out_when_a_query_cannot_catch_up():
    engine = dsms.Engine()
    engine.execute(DDL + "SET 'insert.timeout' = '200 ms'; PAUSE QUERY total;")
    engine.insert("s", BATCH)
    engine.insert("s", BATCH)
    started = time.monotonic()
    with pytest.raises(dsms.BackpressureError, match="may be paused .*SHOW QUERIES"):
        engine.insert("s", BATCH)
    assert time.monotonic() - started >= 0.2
    engine.execute("RESUME QUERY total")
    engine.insert("s", BATCH)  # the resumed query catches up within the insert
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM total").table.to_pylist()[0]["n"] == 1200


def test_block_mode_waits_for_a_thread_that_drives_the_engine():
    engine = dsms.Engine()
    engine.execute(DDL + "SET 'insert.timeout' = '20 s'; PAUSE QUERY total;")
    engine.insert("s", BATCH)
    engine.insert("s", BATCH)
    resumed = threading.Timer(0.3, lambda: engine.execute("RESUME QUERY total"))
    resumed.start()
    engine.insert("s", BATCH)  # blocks until the query is resumed and has caught up
    resumed.join()
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM total").table.to_pylist()[0]["n"] == 1200


def test_the_settings_are_checked():
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError, match="expected one of: block, error"):
        engine.execute("SET 'insert.backpressure' = 'drop'")
    with pytest.raises(dsms.SqlError, match="invalid size"):
        engine.execute("SET 'insert.max_pending' = 'lots'")
    with pytest.raises(dsms.SqlError, match="e.g. SET 'insert.timeout'"):
        engine.execute("SET 'insert.timeout' = 'soon'")
