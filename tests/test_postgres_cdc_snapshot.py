"""postgres-cdc on a real PostgreSQL: the snapshot read in pieces, a restore inside it, and reconnecting.

Oracles are PostgreSQL's own rows (``fetch``) taken at the right moments:
the table before the changes made while the snapshot is read (what a
consistent snapshot must show), and the table at the end (what the
snapshot plus the stream must add up to, each change applied by key).
"""

from __future__ import annotations

import pyarrow as pa

from dsms.runtime.connectors.base import ReadRequest
from dsms.runtime.connectors.postgres_cdc import open_postgres_cdc

from postgres_helpers import cdc_option_dict, create_orders, execute, fetch, unique, wait_for

SCHEMA = pa.schema([("id", pa.int32()), ("cust", pa.string()), ("amount", pa.int64())])
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3


def reader(pg, table: str, slot: str, batch_rows: int):
    request = ReadRequest("orders", cdc_option_dict(pg, table, slot), None, SCHEMA, ("id",), batch_rows, "upsert")
    return open_postgres_cdc(request, ("id",))


def in_snapshot(r) -> bool:
    return "snapshot" in r.position


def read_snapshot(r, batches: list[pa.Table]) -> None:
    """Read pieces until the snapshot has ended (the reader then streams)."""
    batches.append(r.read())
    while in_snapshot(r):
        batches.append(r.read())


def apply(state: dict, changes: pa.Table) -> dict:
    """Changes by key applied to {id: (cust, amount)}, written per row on purpose (the oracle side)."""
    for row in changes.to_pylist():
        if row["__op"] in (INSERT, UPDATE_AFTER):
            state[row["id"]] = (row["cust"], row["amount"])
        elif row["__op"] == DELETE:
            state.pop(row["id"], None)
    return state


def table_now(pg, table: str) -> dict:
    return {i: (c, a) for i, c, a in fetch(pg, f"SELECT id, cust, amount FROM {table}")}


def read_until(r, pg, table: str, state: dict, timeout: float = 15) -> dict:
    """Stream until ``state`` (with the changes applied) equals the table as PostgreSQL has it now."""
    want = table_now(pg, table)
    assert wait_for(lambda: apply(state, r.read()) == want, timeout=timeout), "the stream did not catch up"
    return state


def test_the_snapshot_is_read_in_pieces_that_all_see_the_consistent_point(postgres):
    table, slot = unique("snap"), unique("slot")
    create_orders(postgres, table, 1000)
    before = table_now(postgres, table)
    r = reader(postgres, table, slot, batch_rows=64)
    pieces = [r.read()]
    assert 0 < pieces[0].num_rows <= 64 and in_snapshot(r)
    # Committed while the snapshot is being read: the pieces must not see these, the stream must.
    execute(postgres, f"UPDATE {table} SET amount = amount + 5000 WHERE id % 7 = 0",
            f"DELETE FROM {table} WHERE id > 990", f"INSERT INTO {table} VALUES (5000, 'new', 1, NULL)")
    read_snapshot(r, pieces)
    snapshot = pa.concat_tables(pieces)
    assert max(p.num_rows for p in pieces) <= 64 and len(pieces) >= 1000 // 64
    assert set(snapshot.column("__op").to_pylist()) == {INSERT}
    assert sorted(snapshot.column("id").to_pylist()) == sorted(before)  # each row once
    assert apply({}, snapshot) == before  # as the table was when the slot was made
    state = read_until(r, postgres, table, apply({}, snapshot))
    r.close()
    assert 5000 in state and 995 not in state and state[7][1] == before[7][1] + 5000


def test_a_restore_inside_the_snapshot_reads_the_rest_and_converges_to_the_table(postgres):
    table, slot = unique("snap"), unique("slot")
    create_orders(postgres, table, 600)
    first = reader(postgres, table, slot, batch_rows=100)
    taken = [first.read(), first.read()]
    checkpoint = first.position  # inside the snapshot: the consistent point and the last key read
    assert checkpoint["lsn"] is None and checkpoint["snapshot"]["after"] == ["200"]
    first.close()  # the crash

    execute(postgres, f"DELETE FROM {table} WHERE id IN (50, 400)", f"UPDATE {table} SET amount = -1 WHERE id = 450",
            f"UPDATE {table} SET cust = 'moved' WHERE id = 60", f"INSERT INTO {table} VALUES (7000, 'new', 7, NULL)")
    again = reader(postgres, table, slot, batch_rows=100)
    again.seek(checkpoint)
    rest: list[pa.Table] = []
    read_snapshot(again, rest)
    rest_ids = pa.concat_tables(rest).column("id").to_pylist()
    assert min(rest_ids) > 200  # the keys before the checkpoint are not read again
    state = apply(apply({}, pa.concat_tables(taken)), pa.concat_tables(rest))
    state = read_until(again, postgres, table, state)  # the stream from the consistent point brings the rest
    again.close()
    assert state == table_now(postgres, table)


def test_the_stream_reconnects_after_its_backend_is_terminated_without_losing_or_repeating(postgres):
    table, slot = unique("events"), unique("slot")
    execute(postgres, f"CREATE TABLE {table} (id int PRIMARY KEY, cust text, amount bigint)")
    r = reader(postgres, table, slot, batch_rows=1000)
    assert r.read().num_rows == 0  # the (empty) snapshot; streaming from here
    seen: list[pa.Table] = []

    def count() -> int:
        seen.append(r.read())
        return sum(t.num_rows for t in seen)

    for i in range(1, 21):
        execute(postgres, f"INSERT INTO {table} VALUES ({i}, 'a', {i})")
    assert wait_for(lambda: count() >= 20, timeout=10)
    for round_ in range(2):  # kill the walsender twice (more than 5 s apart), with changes on both sides
        killed = fetch(postgres, f"SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                                 f"WHERE slot_name = '{slot}'")
        assert killed == [(True,)]
        base = 100 * (round_ + 1)
        with postgres.connect() as conn:  # one transaction of 10 rows: handed on whole or not at all
            for i in range(base, base + 10):
                conn.execute(f"INSERT INTO {table} VALUES ({i}, 'b', {i})")
        execute(postgres, f"UPDATE {table} SET amount = -amount WHERE id = {round_ + 1}")
        assert wait_for(lambda n=20 + 11 * (round_ + 1): count() >= n, timeout=40)
        wait_for(lambda: count() and False, timeout=5.5)  # nothing more comes; and the next kill is > 5 s later
    r.close()
    changes = pa.concat_tables(seen)
    got = sorted(zip(changes.column("id").to_pylist(), changes.column("__op").to_pylist()))
    want = sorted([(i, INSERT) for i in range(1, 21)] + [(i, INSERT) for i in range(100, 110)]
                  + [(i, INSERT) for i in range(200, 210)] + [(1, UPDATE_AFTER), (2, UPDATE_AFTER)])
    assert got == want
    assert apply({}, changes) == table_now(postgres, table)


def test_the_stream_reconnects_after_the_server_restarts(postgres):
    table, slot = unique("events"), unique("slot")
    execute(postgres, f"CREATE TABLE {table} (id int PRIMARY KEY, cust text, amount bigint)")
    r = reader(postgres, table, slot, batch_rows=1000)
    assert r.read().num_rows == 0
    seen: list[pa.Table] = []

    def count() -> int:
        seen.append(r.read())
        return sum(t.num_rows for t in seen)

    execute(postgres, *[f"INSERT INTO {table} VALUES ({i}, 'a', {i})" for i in range(1, 11)])
    assert wait_for(lambda: count() >= 10, timeout=10)
    postgres.restart(down_seconds=2)  # the reader finds the server gone, then back
    execute(postgres, *[f"INSERT INTO {table} VALUES ({i}, 'b', {i})" for i in range(11, 21)],
            f"DELETE FROM {table} WHERE id = 3")
    assert wait_for(lambda: count() >= 21, timeout=60)
    wait_for(lambda: count() and False, timeout=1.5)  # and nothing more
    r.close()
    changes = pa.concat_tables(seen)
    got = sorted(zip(changes.column("id").to_pylist(), changes.column("__op").to_pylist()))
    assert got == sorted([(i, INSERT) for i in range(1, 21)] + [(3, DELETE)])
    assert apply({}, changes) == table_now(postgres, table)
