"""Push queries over the wire: SUBSCRIBE, SELECT … EMIT CHANGES, cursors, cancel, slow and many clients.

Expected changes are hand-computed from the inserts.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time

import asyncpg
import pexpect
import psycopg
import pytest

from server_helpers import PSQL, DsmsServer

DDL = ["CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory')",
       "CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad"]


@pytest.fixture
def server(tmp_path):
    with DsmsServer(str(tmp_path), "--subscriber-buffer", "20000") as s:
        with psycopg.connect(s.url(), autocommit=True) as c:
            for statement in DDL:
                c.execute(statement)
            c.execute("INSERT INTO clicks VALUES (1, TIMESTAMP '2024-01-01 00:00:00'), (2, TIMESTAMP '2024-01-01 00:00:01')")
            c.execute("FLUSH")
        yield s


def insert(server, sql: str) -> None:
    with psycopg.connect(server.url(), autocommit=True) as c:
        c.execute(sql)


def test_subscribe_streams_the_snapshot_then_changes_until_cancelled(server):
    got = []
    with psycopg.connect(server.url(), autocommit=True) as c:
        def feed_then_cancel():
            while len(got) < 2:
                time.sleep(0.02)
            insert(server, "INSERT INTO clicks VALUES (1, TIMESTAMP '2024-01-01 00:00:02')")
            while len(got) < 4:
                time.sleep(0.02)
            c.cancel()  # a CancelRequest with the connection's backend key, as psql's Ctrl-C sends

        helper = threading.Thread(target=feed_then_cancel)
        helper.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            for row in c.cursor().stream("SUBSCRIBE TO per_ad"):
                got.append(row)
        helper.join()
        assert sorted(got[:2]) == [("+I", 1, 1), ("+I", 2, 1)]
        assert got[2:] == [("-U", 1, 1), ("+U", 1, 2)]
        assert c.execute("SELECT n FROM per_ad WHERE ad = 1").fetchall() == [(2,)]  # the connection goes on


def test_psql_ctrl_c_ends_a_copy_of_a_subscription(server):
    psql = pexpect.spawn(PSQL, ["-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "dsms", "-c",
                                "COPY (SUBSCRIBE TO per_ad) TO STDOUT"], encoding="utf-8", timeout=30,
                         env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
    try:
        first = sorted(psql.readline().strip() for _ in range(2))
        assert first == ["+I\t1\t1", "+I\t2\t1"]  # rows arrive while the statement runs
        insert(server, "INSERT INTO clicks VALUES (2, TIMESTAMP '2024-01-01 00:00:03')")
        assert [psql.readline().strip() for _ in range(2)] == ["-U\t2\t1", "+U\t2\t2"]
        psql.sendintr()  # Ctrl-C: psql sends a cancel request with the connection's backend key
        psql.expect("canceling statement due to user request")
        psql.expect(pexpect.EOF)
    finally:
        psql.close(force=True)
    assert "cancel request" in server.log()


def test_select_emit_changes_is_a_push_query(server):
    with psycopg.connect(server.url(), autocommit=True) as c:
        got = []

        def feed_then_cancel():
            while len(got) < 2:
                time.sleep(0.02)
            insert(server, "INSERT INTO clicks VALUES (7, TIMESTAMP '2024-01-01 00:00:05')")
            while len(got) < 3:
                time.sleep(0.02)
            insert(server, "INSERT INTO clicks VALUES (7, TIMESTAMP '2024-01-01 00:00:06')")
            while len(got) < 5:
                time.sleep(0.02)
            c.cancel()

        helper = threading.Thread(target=feed_then_cancel)
        helper.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            for row in c.cursor().stream("SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad EMIT CHANGES"):
                got.append(row)
        helper.join()
        # the two clicks already there, then ad 7 counted once, then updated to two
        assert sorted(got[:2]) == [("+I", 1, 1), ("+I", 2, 1)]
        assert got[2:] == [("+I", 7, 1), ("-U", 7, 1), ("+U", 7, 2)]
        assert c.execute("SHOW QUERIES").fetchall()[-1][0] == "per_ad"  # the push query is gone with its client


def test_a_cursor_over_a_subscription_fetches_what_arrived(server):
    with psycopg.connect(server.url()) as c:  # a transaction, as DECLARE wants
        c.execute("DECLARE c CURSOR FOR SUBSCRIBE TO per_ad")
        assert sorted(c.execute("FETCH ALL c").fetchall()) == [("+I", 1, 1), ("+I", 2, 1)]
        assert c.execute("FETCH 10 c WITH (timeout = '200ms')").fetchall() == []
        insert(server, "INSERT INTO clicks VALUES (3, TIMESTAMP '2024-01-01 00:00:04')")
        assert c.execute("FETCH 10 c").fetchall() == [("+I", 3, 1)]  # waits for the change
        c.execute("CLOSE c")
        c.commit()


def _raw_subscriber(port: int, query: str) -> socket.socket:
    """A client that sends a query and then never reads: its receive buffer stays full."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    body = struct.pack("!I", 196608) + b"user\0dsms\0database\0dsms\0\0"
    sock.sendall(struct.pack("!I", len(body) + 4) + body)
    time.sleep(0.3)
    text = query.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!I", len(text) + 4) + text)
    return sock


def test_a_subscriber_that_stops_reading_is_dropped_and_nobody_waits_for_it(server):
    insert(server, "CREATE MATERIALIZED VIEW every_click AS SELECT ad, ts FROM clicks")
    slow = _raw_subscriber(server.port, "SUBSCRIBE TO every_click")
    got = []
    with psycopg.connect(server.url(), autocommit=True) as reader, psycopg.connect(server.url(), autocommit=True) as w:
        def write_then_cancel():
            for batch in range(80):
                rows = "\n".join(f"{batch * 5000 + i},2024-01-01 00:00:00" for i in range(5000)) + "\n"
                with w.cursor().copy("COPY clicks FROM STDIN WITH (FORMAT csv)") as copy:
                    copy.write(rows)
            w.execute("FLUSH")
            deadline = time.time() + 60
            while len(got) < 400002 and time.time() < deadline:
                time.sleep(0.05)
            reader.cancel()

        helper = threading.Thread(target=write_then_cancel)
        helper.start()
        with pytest.raises(psycopg.errors.QueryCanceled):
            for row in reader.cursor().stream("SUBSCRIBE TO every_click"):
                got.append(row)
        helper.join()
        assert len(got) == 400002  # the reading subscriber got every change: 2 before, 400 000 copied
        assert w.execute("SELECT n FROM per_ad WHERE ad = 399999").fetchall() == [(1,)]
    assert "fell" in server.log() and "behind and was dropped" in server.log()
    slow.settimeout(30)
    while slow.recv(1 << 20):  # what was in flight, then the end: the server closed the connection
        pass
    slow.close()


def test_fifty_clients_read_while_inserts_flow(server):
    total_batches, per_batch = 10, 50

    async def reader(url: str, seen: list) -> None:
        conn = await asyncpg.connect(url)
        try:
            last = -1
            while last < total_batches * per_batch + 2:
                n = await conn.fetchval("SELECT SUM(n) FROM per_ad")
                assert n is not None and n >= last  # every read is a consistent, advancing total
                last = n
                seen.append(n)
                await asyncio.sleep(0.01)
        finally:
            await conn.close()

    async def writer(url: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            for b in range(total_batches):
                values = ", ".join(f"({(b * per_batch + i) % 13}, TIMESTAMP '2024-01-01 00:00:00')"
                                   for i in range(per_batch))
                await conn.execute(f"INSERT INTO clicks VALUES {values}")
                await asyncio.sleep(0.01)
            await conn.execute("FLUSH")
        finally:
            await conn.close()

    async def main():
        seen = [[] for _ in range(50)]
        await asyncio.wait_for(asyncio.gather(writer(server.url()), *(reader(server.url(), s) for s in seen)), 120)
        return seen

    seen = asyncio.run(main())
    assert all(s[-1] == total_batches * per_batch + 2 for s in seen)


def test_subscribers_and_readers_at_once_while_inserts_flow(server):
    """50 readers and 10 subscribers at once; every subscriber rebuilds the view from its changes."""
    batches, per_batch = 10, 50
    # the view by hand: the fixture's clicks on ads 1 and 2, then ad (b * per_batch + i) % 13 per insert
    expected = {1: 1, 2: 1}
    for k in range(batches * per_batch):
        expected[k % 13] = expected.get(k % 13, 0) + 1

    async def subscriber(url: str) -> dict:
        view: dict = {}
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            async for op, ad, n in conn.cursor().stream("SUBSCRIBE TO per_ad"):
                if op in ("+I", "+U"):
                    view[ad] = n
                else:
                    view.pop(ad, None)
                if view == expected:
                    break  # leaving the stream ends the subscription (the connection closes)
        return view

    async def reader(url: str) -> None:
        conn = await asyncpg.connect(url)
        try:
            while (await conn.fetchval("SELECT SUM(n) FROM per_ad")) < sum(expected.values()):
                await asyncio.sleep(0.01)
        finally:
            await conn.close()

    async def writer(url: str) -> None:
        await asyncio.sleep(0.5)  # the subscribers are in before the first insert
        conn = await asyncpg.connect(url)
        try:
            for b in range(batches):
                values = ", ".join(f"({(b * per_batch + i) % 13}, TIMESTAMP '2024-01-01 00:00:00')"
                                   for i in range(per_batch))
                await conn.execute(f"INSERT INTO clicks VALUES {values}")
        finally:
            await conn.close()

    async def main():
        url = server.url()
        subscribers = [asyncio.create_task(subscriber(url)) for _ in range(10)]
        await asyncio.wait_for(asyncio.gather(writer(url), *(reader(url) for _ in range(50))), 120)
        return await asyncio.wait_for(asyncio.gather(*subscribers), 60)

    assert all(view == expected for view in asyncio.run(main()))
