"""Lookup joins on a PostgreSQL table (``connector = 'jdbc'``), with Flink's lookup cache options.

Each event meets the table's row as PostgreSQL has it when the event is
processed, or as the cache has it: the expected rows are written by hand
from the changes the test makes in PostgreSQL.
"""

from __future__ import annotations

import pytest

import dsms
from dsms.runtime.clock import VirtualClock

from postgres_helpers import execute, unique


def setup(pg, cache: str = "") -> tuple[dsms.Engine, VirtualClock, str]:
    table = unique("ads")
    execute(pg, f"CREATE TABLE {table} (id int PRIMARY KEY, campaign text, bid numeric(6, 2))",
            f"INSERT INTO {table} VALUES (1, 'spring', 0.50), (2, 'summer', 1.25)")
    clock = VirtualClock(start_us=1_700_000_000_000_000)
    engine = dsms.Engine(clock=clock)
    engine.execute(f"""
        CREATE STREAM clicks (ad_id INT, user_id VARCHAR, pt AS PROCTIME()) WITH (connector = 'memory');
        CREATE TABLE ads (id INT, campaign VARCHAR, bid DECIMAL(6, 2), PRIMARY KEY (id) NOT ENFORCED)
          WITH (connector = 'jdbc', url = '{pg.jdbc_url}', 'table-name' = '{table}', username = 'dsms',
                password = 'dsms'{cache});""")
    return engine, clock, table


def joined(engine, query, rows) -> list[tuple]:
    engine.insert("clicks", rows, columns=["ad_id", "user_id"])
    engine.run_until_idle()
    return sorted((r["user_id"], r["campaign"]) for batch in query.changes() for r in batch.to_pylist())


def test_events_meet_the_rows_postgresql_has_when_they_are_processed(postgres):
    engine, _, table = setup(postgres)
    with engine:
        query = engine.query("SELECT c.user_id, a.campaign FROM clicks c LEFT JOIN ads FOR SYSTEM_TIME AS OF c.pt "
                             "AS a ON c.ad_id = a.id")
        assert joined(engine, query, [(1, "u1"), (2, "u2"), (3, "u3"), (1, "u4")]) == [
            ("u1", "spring"), ("u2", "summer"), ("u3", None), ("u4", "spring")]
        execute(postgres, f"UPDATE {table} SET campaign = 'autumn' WHERE id = 1",
                f"INSERT INTO {table} VALUES (3, 'winter', 2)")
        # No cache (Flink's default): every batch asks PostgreSQL.
        assert joined(engine, query, [(1, "u5"), (3, "u6")]) == [("u5", "autumn"), ("u6", "winter")]


def test_the_cache_serves_rows_until_their_ttl_and_keeps_at_most_max_rows(postgres):
    engine, clock, table = setup(postgres, ", 'lookup.cache.max-rows' = '10', 'lookup.cache.ttl' = '10 s'")
    with engine:
        query = engine.query("SELECT c.user_id, a.campaign FROM clicks c JOIN ads FOR SYSTEM_TIME AS OF "
                             "PROCTIME() AS a ON c.ad_id = a.id")
        assert joined(engine, query, [(1, "u1"), (3, "u2")]) == [("u1", "spring")]
        execute(postgres, f"UPDATE {table} SET campaign = 'autumn' WHERE id = 1",
                f"INSERT INTO {table} VALUES (3, 'winter', 2)")
        clock.advance(5_000_000)
        # Within the TTL: the cached row of 1, and 3 still cached as missing.
        assert joined(engine, query, [(1, "u3"), (3, "u4")]) == [("u3", "spring")]
        clock.advance(6_000_000)
        assert joined(engine, query, [(1, "u5"), (3, "u6")]) == [("u5", "autumn"), ("u6", "winter")]


def test_a_cache_of_one_row_still_joins_every_event(postgres):
    engine, _, _ = setup(postgres, ", 'lookup.cache.max-rows' = '1'")
    with engine:
        query = engine.query("SELECT c.user_id, a.campaign FROM clicks c JOIN ads FOR SYSTEM_TIME AS OF c.pt AS a "
                             "ON c.ad_id = a.id")
        for i in range(4):
            assert joined(engine, query, [(1 + i % 2, f"u{i}")]) == [(f"u{i}", ["spring", "summer"][i % 2])]
            assert query.stats()["state_rows"] == 1  # the cache holds one row
        assert joined(engine, query, [(1, "a"), (2, "b"), (9, "c")]) == [("a", "spring"), ("b", "summer")]


def test_a_jdbc_table_is_read_by_key_only(postgres):
    engine, _, _ = setup(postgres)
    with engine, pytest.raises(dsms.DsmsError, match="lookup joins only"):
        engine.query("SELECT * FROM ads")


def test_an_updating_left_side_keeps_each_change_kind(postgres):
    engine, _, table = setup(postgres)
    with engine:
        engine.execute("CREATE TABLE taps (id INT, ad_id INT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory')")
        query = engine.query("SELECT t.id, a.campaign FROM taps t LEFT JOIN ads FOR SYSTEM_TIME AS OF PROCTIME() AS a "
                             "ON t.ad_id = a.id")

        def changes(action, rows):
            getattr(engine, action)("taps", rows)
            engine.run_until_idle()
            return [tuple(r.values()) for batch in query.changes() for r in batch.to_pylist()]

        assert changes("insert", [(10, 1), (11, 2)]) == [("+I", 10, "spring"), ("+I", 11, "summer")]
        execute(postgres, f"UPDATE {table} SET campaign = 'autumn' WHERE id = 1")
        # The retraction of tap 10 is looked up now too: it meets 'autumn'.
        assert changes("insert", [(10, 2)]) == [("-U", 10, "autumn"), ("+U", 10, "summer")]
        assert changes("delete", [(11, 2)]) == [("-D", 11, "summer")]
