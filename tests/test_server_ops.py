"""Operating `dsms server`: restarts (kill -9 and SIGTERM), standing queries outliving clients, passwords,
TLS, and /metrics, /health, /ready.

Oracles: the rows the test inserted, counted by hand.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from server_helpers import DsmsServer

SETUP = ["CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory')",
         "CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad",
         "CREATE SINK out WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS SELECT ad, ts FROM clicks"]


def run(server: DsmsServer, *statements: str, password: str | None = None):
    with psycopg.connect(server.url(password=password), autocommit=True) as c:
        result = None
        for statement in statements:
            cur = c.execute(statement)
            result = cur.fetchall() if cur.description else None
        return result


def insert_clicks(server: DsmsServer, ads: list[int]) -> None:
    values = ", ".join(f"({ad}, TIMESTAMP '2024-01-01 00:00:00')" for ad in ads)
    run(server, f"INSERT INTO clicks VALUES {values}", "FLUSH")


def test_standing_queries_outlive_clients_and_a_kill_9(tmp_path):
    first, second = [1, 2, 2, 3], [3, 3, 4]
    server = DsmsServer(str(tmp_path)).start()
    try:
        run(server, *SETUP)
        insert_clicks(server, first)  # this client leaves; the queries go on
        assert sorted(run(server, "SELECT ad, n FROM per_ad")) == [(1, 1), (2, 2), (3, 1)]
    finally:
        server.stop(signal.SIGKILL)
    server = DsmsServer(str(tmp_path)).start()
    try:
        assert "restored materialized view per_ad" in server.log() and "restored sink out" in server.log()
        insert_clicks(server, second)
        assert sorted(run(server, "SELECT ad, n FROM per_ad")) == [(1, 1), (2, 2), (3, 3), (4, 1)]
    finally:
        assert server.stop(signal.SIGTERM) == 0
    written = [json.loads(line)["ad"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert sorted(written) == sorted(first + second)  # exactly once: nothing lost, nothing twice


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_cleanly_with_a_final_checkpoint(tmp_path, sig):
    server = DsmsServer(str(tmp_path), log_file="dsms.log").start()
    run(server, *SETUP[:2])
    insert_clicks(server, [5, 5])
    assert server.stop(sig) == 0
    log = server.log()
    assert "query per_ad started (materialized view)" in log
    assert "stopping: final checkpoint" in log and "final checkpoint taken" in log and "dsms server stopped" in log
    assert "Traceback" not in log
    assert (tmp_path / "server.log").read_text() == ""  # --log-file: nothing on stderr
    with DsmsServer(str(tmp_path)) as again:
        assert run(again, "SELECT ad, n FROM per_ad") == [(5, 2)]


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "users.txt"
    path.write_text("# name:password\nalice:s3cret\n")
    return str(path)


def test_wrong_password_is_refused_and_the_right_one_admitted(tmp_path, users):
    with DsmsServer(str(tmp_path), "--users", users) as server:
        with psycopg.connect(server.url("alice", "s3cret"), autocommit=True) as c:  # the file is not a client's
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("CREATE STREAM pw (line VARCHAR) WITH (connector = 'file', path = 'users.txt', "
                          "format = 'csv')")
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(server.url("alice", "wrong"))
        assert "password authentication failed" in str(info.value)
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.url("mallory", "s3cret"))
        with psycopg.connect(server.url("alice", "s3cret"), autocommit=True) as c:
            assert c.execute("SELECT current_user").fetchall() == [("alice",)]
        refused = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "alice", "-c",
                                  "SELECT 1"], env={"PGPASSWORD": "nope", "PATH": "/usr/bin:/bin"},
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode == 2 and "password authentication failed" in refused.stderr
        assert server.psql("-At", "-c", "SELECT 1", password="s3cret", check=False).returncode == 2  # user dsms
        admitted = subprocess.run(["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(server.port), "-U", "alice",
                                   "-c", "SELECT 1"], env={"PGPASSWORD": "s3cret", "PATH": "/usr/bin:/bin"},
                                  capture_output=True, text=True, timeout=60)
        assert admitted.stdout.strip() == "1", admitted.stderr


def test_tls_when_given_a_certificate(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
    with DsmsServer(str(tmp_path), "--tls-cert", str(cert), "--tls-key", str(key)) as server:
        with psycopg.connect(server.url() + "?sslmode=require", autocommit=True) as c:
            assert c.pgconn.ssl_in_use
            assert c.execute("SELECT 40 + 2").fetchall() == [(42,)]
    with DsmsServer(str(tmp_path), state_dir="plain") as server:
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(server.url() + "?sslmode=require")


def _get(server: DsmsServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}{path}", timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_metrics_health_and_ready(tmp_path):
    with DsmsServer(str(tmp_path)) as server:
        run(server, *SETUP[:2])
        insert_clicks(server, [1, 1, 2])
        assert _get(server, "/health") == (200, "ok\n")
        assert _get(server, "/ready") == (200, "ready\n")
        status, text = _get(server, "/metrics")
        assert status == 200
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(text) for s in family.samples}
        assert samples[("dsms_query_events_in_total", (("query", "per_ad"),))] == 3
        assert samples[("dsms_query_state_rows", (("query", "per_ad"),))] == 2
        assert samples[("dsms_query_status", (("kind", "materialized view"), ("query", "per_ad"),
                                              ("status", "running")))] == 1
        assert ("dsms_query_checkpoint_age_seconds", (("query", "per_ad"),)) in samples
        assert samples[("dsms_query_checkpoint_duration_seconds", (("query", "per_ad"),))] >= 0
        assert samples[("dsms_query_checkpoints_total", (("query", "per_ad"),))] >= 1
        deadline = time.time() + 30  # the engine thread logs a checkpoint after the step that took it
        while "query per_ad checkpoint " not in server.log() and time.time() < deadline:
            time.sleep(0.1)
        assert re.search(r"query per_ad checkpoint \d+ taken in \d+\.\d+ s", server.log())
        assert samples[("dsms_clients", ())] in (0, 1)  # the last client may still be leaving
        assert _get(server, "/nope")[0] == 404
