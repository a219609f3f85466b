"""`dsms shell --connect` (and DSMS_URL) in a pseudo-terminal against a real `dsms server` process: the
statements, live results, completion from the server's catalog and meta commands of the shell over the
wire. Oracles: the rows written out by hand, and what psycopg reads from the same server.
"""

from __future__ import annotations

import re
import socket

import psycopg

from repl_helpers import Terminal
from server_helpers import DsmsServer


def test_the_shell_connected_to_a_server(tmp_path):
    with DsmsServer(str(tmp_path)) as server:
        url = f"postgresql://dsms@127.0.0.1:{server.port}/dsms"
        term = Terminal(["shell", "--connect", url], home=tmp_path)
        try:
            term.wait_for(f"connected to {url}")
            term.send("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3),\r"
                      "  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');\r")
            term.wait_for("CREATE STREAM")
            term.send("CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;\r")
            term.wait_for("CREATE MATERIALIZED VIEW")
            # Completion reads the catalog the server gave: the stream's column, the view's name.
            term.send("SELECT * FROM per_")
            term.wait_for("per_ad  materialized view")
            term.send("\x03")  # Ctrl-C: clear the line
            term.send("SELECT * FROM clicks WHERE t")
            term.wait_for(" column")
            assert re.search(r"\bts +column", term.text())
            term.send("\x03")
            # A continuous SELECT is a live result, updated as another client inserts.
            term.send("SELECT window_start, ad, COUNT(*) AS n\r"
                      "  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\r"
                      "  GROUP BY window_start, window_end, ad;\r")
            term.wait_for("(no rows yet)")
            with psycopg.connect(server.url(), autocommit=True) as other:
                other.execute("INSERT INTO clicks VALUES (7, '2024-05-01 09:00:03'), (7, '2024-05-01 09:00:41'), "
                              "(8, '2024-05-01 09:01:59')")
            # (EMIT CHANGES: a window's row as it changes, so the open 09:01 window shows too)
            term.wait_for("2024-05-01 09:00:00.000 | 7  | 2\n2024-05-01 09:01:00.000 | 8  | 1")
            term.wait_for("watermark 2024-05-01 09:01:58.000")  # the server's, for this query
            term.send("\x03")  # Ctrl-C: a cancel request; the last result stays
            term.wait_for("(2 rows)\nlive_1 stopped after 2 changes")
            # A pull query answers once; a server error comes back with its caret.
            term.send("SELECT ad, n FROM per_ad;\r")
            term.wait_for("(2 rows)")
            assert "7  | 2" in term.text() and "8  | 1" in term.text()
            term.send("SELECT nope FROM per_ad;\r")
            term.wait_for("error: unknown column 'nope'")
            term.wait_for("LINE 1: SELECT nope FROM per_ad\n               ^")
            term.send("\\d\r")
            term.wait_for("per_ad")
            term.send("\\d clicks\r")
            term.wait_for("ts")
            term.send("SUBSCRIBE TO per_ad;\r")  # a statement only the server knows, as a live result
            term.wait_for("live_2: 2 rows")
            term.send("\x03")
            term.wait_for("live_2 stopped")
            term.send("\\q\r")
            assert term.close() == 0
        finally:
            term.child.terminate(force=True)
        with psycopg.connect(server.url(), autocommit=True) as c:  # the cancelled queries are gone
            assert [r[0] for r in c.execute("SHOW QUERIES").fetchall()] == ["per_ad"]


def test_dsms_url_and_no_server(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("DSMS_URL", f"postgresql://dsms@127.0.0.1:{port}/dsms")
    term = Terminal([], home=tmp_path)
    monkeypatch.delenv("DSMS_URL")
    try:
        term.wait_for("cannot connect to the dsms server at postgresql://dsms@127.0.0.1")
        assert term.close() == 1
    finally:
        term.child.terminate(force=True)
    term = Terminal([], home=tmp_path)  # without a URL: the embedded engine, as before
    try:
        term.wait_for("dsms>")
        term.send("SELECT 40 + 2 AS answer;\r")
        term.wait_for("42")
        term.send("\\q\r")
        assert term.close() == 0
    finally:
        term.child.terminate(force=True)
