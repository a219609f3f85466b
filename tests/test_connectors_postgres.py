"""PostgreSQL CDC source and JDBC sink, end to end on a real PostgreSQL server.

The oracle is PostgreSQL itself: the aggregate the pipeline maintains is
computed again by PostgreSQL over the source table, and must equal the
table the JDBC sink wrote.
"""

from __future__ import annotations

import json
import random

import duckdb
import pyarrow as pa
import pytest

import dsms
from dsms.runtime.connectors.base import ReadRequest
from dsms.runtime.connectors.postgres_cdc import open_postgres_cdc

from postgres_helpers import (
    cdc_option_dict,
    cdc_options,
    create_orders,
    execute,
    fetch,
    jdbc_options,
    random_changes,
    unique,
    wait_for,
)

ORACLE = "SELECT cust, count(*), sum(amount) FROM {source} GROUP BY cust"


def pipeline(pg, source: str, slot: str, sink: str, **cdc) -> str:
    return f"""
        CREATE TABLE orders (id INT, cust VARCHAR, amount BIGINT, note VARCHAR, PRIMARY KEY (id) NOT ENFORCED)
          WITH ({cdc_options(pg, source, slot, **cdc)});
        CREATE SINK totals WITH ({jdbc_options(pg, sink)})
          AS SELECT cust, COUNT(*) AS n, SUM(amount) AS total FROM orders GROUP BY cust;
    """


def make_tables(pg, n: int = 200, seed: int = 0) -> tuple[str, str, str]:
    source, slot, sink = unique("orders"), unique("slot"), unique("totals")
    create_orders(pg, source, n, seed)
    execute(pg, f"CREATE TABLE {sink} (cust text PRIMARY KEY, n bigint, total bigint)")
    return source, slot, sink


def converged(pg, source: str, sink: str):
    return lambda: fetch(pg, f"SELECT * FROM {sink}") == fetch(pg, ORACLE.format(source=source))


def test_snapshot_then_changes_through_a_group_aggregate_into_the_jdbc_sink(postgres):
    source, slot, sink = make_tables(postgres, seed=1)
    with dsms.Engine() as engine:
        engine.execute(pipeline(postgres, source, slot, sink))
        assert wait_for(converged(postgres, source, sink), engine)  # the snapshot
        rng = random.Random(7)
        for _ in range(5):
            random_changes(postgres, source, rng, transactions=20)
            assert wait_for(converged(postgres, source, sink), engine), \
                (fetch(postgres, f"SELECT * FROM {sink}"), fetch(postgres, ORACLE.format(source=source)))
        execute(postgres, f"DELETE FROM {source} WHERE cust = 'c1'")  # a whole group goes: its row is deleted
        assert wait_for(converged(postgres, source, sink), engine)
    assert "c1" not in [r[0] for r in fetch(postgres, f"SELECT * FROM {sink}")]


def test_latest_offset_reads_only_the_changes_after_the_start(postgres):
    source, slot, sink = make_tables(postgres, n=50)
    with dsms.Engine() as engine:
        engine.execute(pipeline(postgres, source, slot, sink, **{"scan.startup.mode": "latest-offset"}))
        engine.run_until_idle()
        execute(postgres, f"INSERT INTO {source} VALUES (1001, 'new', 5, NULL), (1002, 'new', 7, NULL)",
                f"UPDATE {source} SET amount = 10 WHERE id = 1002")
        assert wait_for(lambda: fetch(postgres, f"SELECT * FROM {sink}") == [("new", 2, 15)], engine)


def test_a_restart_from_the_state_dir_neither_loses_nor_repeats_changes(postgres, tmp_path):
    source, slot, sink = make_tables(postgres, seed=2)
    rng = random.Random(3)
    script = pipeline(postgres, source, slot, sink)
    with dsms.Engine(state_dir=str(tmp_path)) as engine:
        engine.execute("SET 'checkpoint.interval' = '0 s'")
        engine.execute(script)
        random_changes(postgres, source, rng, transactions=30)
        assert wait_for(converged(postgres, source, sink), engine)
    random_changes(postgres, source, rng, transactions=30)  # while dsms is down
    with dsms.Engine(state_dir=str(tmp_path)) as engine:  # the sink's query comes back from its checkpoint
        random_changes(postgres, source, rng, transactions=30)
        assert wait_for(converged(postgres, source, sink), engine)


def _reader(pg, source: str, slot: str, key=("id",)):
    schema = pa.schema([("id", pa.int32()), ("cust", pa.string()), ("amount", pa.int64())])
    request = ReadRequest("orders", cdc_option_dict(pg, source, slot), None, schema, ("id",), 1000, "upsert")
    return open_postgres_cdc(request, key)


def _read_all(reader, expected: int) -> list[pa.Table]:
    """Read until ``expected`` changes came (10 s at most), then a little longer to see that no more come."""
    out = []
    wait_for(lambda: out.append(reader.read()) or sum(t.num_rows for t in out) >= expected, timeout=10)
    wait_for(lambda: out.append(reader.read()) and False, timeout=0.5)
    return out


def test_the_slot_is_confirmed_only_up_to_a_checkpoint_and_a_restart_continues_there(postgres):
    """Each insert is seen exactly once across a crash after a checkpoint (ids are the oracle)."""
    source, slot = unique("events"), unique("slot")
    execute(postgres, f"CREATE TABLE {source} (id int PRIMARY KEY, cust text, amount bigint)")
    reader = _reader(postgres, source, slot)
    assert reader.read().num_rows == 0  # the snapshot of an empty table; the slot now exists

    def confirmed():
        return fetch(postgres, f"SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '{slot}'")

    at_start = confirmed()
    for i in range(1, 21):
        execute(postgres, f"INSERT INTO {source} VALUES ({i}, 'a', {i})")
    first = _read_all(reader, 20)
    assert sorted(pa.concat_tables(first).column("id").to_pylist()) == list(range(1, 21))
    assert confirmed() == at_start  # read, but no checkpoint holds it yet
    checkpoint = reader.position
    reader.checkpoint_complete(checkpoint)
    for i in range(21, 41):
        execute(postgres, f"INSERT INTO {source} VALUES ({i}, 'b', {i})")
    assert pa.concat_tables(_read_all(reader, 20)).num_rows == 20  # read after the checkpoint: lost in the crash
    assert wait_for(lambda: confirmed() != at_start, timeout=10)
    reader.close()  # the crash

    again = _reader(postgres, source, slot)
    again.seek(checkpoint)
    assert again.read().num_rows == 0  # no snapshot: it continues from the checkpoint
    execute(postgres, f"DELETE FROM {source} WHERE id = 40")
    changes = pa.concat_tables(_read_all(again, 21))
    again.close()
    ids, ops = changes.column("id").to_pylist(), changes.column("__op").to_pylist()
    assert sorted(zip(ids, ops)) == sorted([(i, 0) for i in range(21, 41)] + [(40, 3)])


def test_updates_of_the_key_and_replica_identity_full(postgres):
    """A key change is a delete of the old key and an insert; with REPLICA IDENTITY FULL too."""
    source, slot = unique("events"), unique("slot")
    execute(postgres, f"CREATE TABLE {source} (id int PRIMARY KEY, cust text, amount bigint)",
            f"ALTER TABLE {source} REPLICA IDENTITY FULL", f"INSERT INTO {source} VALUES (1, 'a', 1)")
    reader = _reader(postgres, source, slot)
    assert reader.read().to_pylist() == [{"id": 1, "cust": "a", "amount": 1, "__op": 0}]
    execute(postgres, f"UPDATE {source} SET id = 2 WHERE id = 1", f"UPDATE {source} SET amount = 5 WHERE id = 2")
    rows = pa.concat_tables(_read_all(reader, 3)).to_pylist()
    reader.close()
    assert rows == [{"id": 1, "cust": "a", "amount": 1, "__op": 3}, {"id": 2, "cust": "a", "amount": 1, "__op": 0},
                    {"id": 2, "cust": "a", "amount": 5, "__op": 2}]


def test_a_value_that_does_not_convert_stops_the_source_with_its_lsn_or_is_dead_lettered(postgres, tmp_path):
    source = unique("big")
    execute(postgres, f"CREATE TABLE {source} (id int PRIMARY KEY, v bigint)",
            f"INSERT INTO {source} VALUES (1, 1), (2, 2)")
    ddl = ("CREATE TABLE big (id INT, v INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({options});"
           "CREATE SINK s WITH (connector = 'memory') AS SELECT id, v FROM big;")
    with dsms.Engine() as engine:
        engine.execute(ddl.format(options=cdc_options(postgres, source, unique("slot"))))
        engine.run_until_idle()
        execute(postgres, f"INSERT INTO {source} VALUES (3, 10000000000)")  # too big for INT
        with pytest.raises(dsms.DsmsError) as failure:
            wait_for(lambda: False, engine, timeout=5)
    message = str(failure.value)
    assert "source 'big'" in message and "column 'v'" in message and "LSN " in message and source in message

    dead = tmp_path / "bad.jsonl"
    options = cdc_options(postgres, source, unique("slot"), on_error="skip", dead_letter=str(dead))
    with dsms.Engine() as engine:
        engine.execute(ddl.format(options=options))
        engine.run_until_idle()  # the snapshot: row 3 is bad there
        execute(postgres, f"INSERT INTO {source} VALUES (4, 4)", f"UPDATE {source} SET v = 20000000000 WHERE id = 1")
        assert wait_for(lambda: sorted(engine.sink("s").snapshot().to_pylist(), key=str) ==
                        [{"id": 1, "v": 1}, {"id": 2, "v": 2}, {"id": 4, "v": 4}], engine)  # 1's update skipped
    records = [json.loads(line) for line in dead.read_text().splitlines()]
    assert sorted((r["raw"]["id"], r["column"]) for r in records) == [("1", "v"), ("3", "v")]  # as PostgreSQL sent them
    assert {r["source"] for r in records} == {"big"}
    assert any(r["line"] == "the snapshot" for r in records) and any(r["line"].startswith("LSN ") for r in records)


def test_the_jdbc_sink_inserts_an_append_only_result_and_upserts_an_updating_one(postgres, tmp_path):
    rng = random.Random(5)
    path = tmp_path / "clicks.jsonl"
    events = [{"ad": rng.randrange(20), "cost": rng.randrange(100), "note": rng.choice(["", "x, \"y\"", None])}
              for _ in range(3000)]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    raw, agg = unique("clicks"), unique("per_ad")
    execute(postgres, f"CREATE TABLE {raw} (ad int, cost bigint, note text)",
            f"CREATE TABLE {agg} (ad int PRIMARY KEY, n bigint, cost bigint)")
    with dsms.Engine() as engine:
        engine.execute(f"""
            CREATE STREAM clicks (ad INT, cost BIGINT, note VARCHAR)
              WITH (connector = 'file', path = '{path}', format = 'json', 'batch.size' = '500');
            CREATE SINK raw WITH ({jdbc_options(postgres, raw)}) AS SELECT ad, cost, note FROM clicks;
            CREATE SINK agg WITH ({jdbc_options(postgres, agg)})
              AS SELECT ad, COUNT(*) AS n, SUM(cost) AS cost FROM clicks GROUP BY ad;""")
        engine.run_until_idle()
    oracle = duckdb.sql(f"SELECT ad, cost, note FROM read_json('{path}', columns = "
                        "{ad: 'INT', cost: 'BIGINT', note: 'VARCHAR'})").fetchall()
    assert fetch(postgres, f"SELECT * FROM {raw}") == sorted(oracle, key=lambda r: tuple((v is not None, v) for v in r))
    assert fetch(postgres, f"SELECT * FROM {agg}") == sorted(duckdb.sql(
        f"SELECT ad, count(*), sum(cost) FROM read_json('{path}') GROUP BY ad").fetchall())


@pytest.mark.parametrize("ddl, message", [
    ("CREATE STREAM o (id INT) WITH ({cdc})", "needs a TABLE"),
    ("CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({cdc}, 'decoding.plugin.name' = 'wal2json')",
     "'wal2json' is not supported"),
    ("CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'postgres-cdc', hostname = 'h')",
     "needs 'username'"),
    ("CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({cdc}, 'scan.startup.mode' = 'timestamp')",
     "invalid value 'timestamp'"),
    ("CREATE SINK s WITH (connector = 'jdbc', url = 'jdbc:postgresql://h/db') AS SELECT 1 AS x",
     "needs 'table-name'"),
])
def test_declarations_are_checked(ddl, message):
    cdc = "connector = 'postgres-cdc', hostname = 'h', username = 'u', 'database-name' = 'd', " \
          "'table-name' = 't', 'slot.name' = 's'"
    with dsms.Engine() as engine, pytest.raises(dsms.DsmsError, match=message):
        engine.execute(ddl.replace("{cdc}", cdc))
        engine.run_until_idle()


def test_what_the_server_side_lacks_is_said_plainly(postgres):
    missing, nothing, no_key, user = unique("missing"), unique("nothing"), unique("nokey"), unique("plain")
    execute(postgres, f"CREATE TABLE {nothing} (id int PRIMARY KEY)", f"ALTER TABLE {nothing} REPLICA IDENTITY NOTHING",
            f"CREATE TABLE {no_key} (id int, n bigint)", f"CREATE ROLE {user} LOGIN PASSWORD 'p'",
            f"CREATE TABLE {user}_t (id int PRIMARY KEY)", f"ALTER TABLE {user}_t OWNER TO {user}",
            f"GRANT CREATE ON DATABASE dsms TO {user}")
    plain = cdc_options(postgres, f"{user}_t", "s3").replace("'username' = 'dsms', 'password' = 'dsms'",
                                                             f"'username' = '{user}', 'password' = 'p'")
    cases = [
        (f"CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({cdc_options(postgres, missing, 's1')});"
         "SELECT * FROM o", f"no table public.{missing}"),
        (f"CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({cdc_options(postgres, nothing, 's2')});"
         "SELECT * FROM o", "REPLICA IDENTITY NOTHING"),
        (f"CREATE TABLE o (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH ({plain}); SELECT * FROM o",
         f"ALTER ROLE {user} REPLICATION"),
        (f"CREATE SINK s WITH ({jdbc_options(postgres, missing)}) AS SELECT 1 AS id", "create it first"),
        (f"CREATE TABLE m (id INT, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');"
         f"CREATE SINK s WITH ({jdbc_options(postgres, no_key)}) AS SELECT id, COUNT(*) AS n FROM m GROUP BY id",
         "needs a PRIMARY KEY"),
        (f"CREATE SINK s WITH (connector = 'jdbc', url = 'jdbc:postgresql://127.0.0.1:{postgres.port}/dsms', "
         f"'table-name' = '{no_key}', username = 'dsms', password = 'wrong') AS SELECT 1 AS id",
         "cannot connect to PostgreSQL"),
    ]
    for ddl, message in cases:
        with dsms.Engine() as engine, pytest.raises(dsms.DsmsError, match=message):
            for result in [engine.execute(ddl)]:
                if result.query is not None:
                    wait_for(lambda: False, engine, timeout=1)
