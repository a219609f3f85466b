"""CREATE USER / ALTER USER / DROP USER over the wire: SCRAM-SHA-256 verifiers in the state directory.

Oracles: psql and psycopg themselves (they run the client side of SCRAM), and a verifier computed here
from RFC 5802 with hashlib, as psql's \\password computes it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import subprocess

import psycopg
import pytest

from server_helpers import PSQL, DsmsServer


def _psql(server: DsmsServer, user: str, password: str) -> subprocess.CompletedProcess:
    return subprocess.run([PSQL, "-X", "-At", "-h", "127.0.0.1", "-p", str(server.port), "-U", user, "-d", "dsms",
                           "-c", "SELECT current_user"], env={"PGPASSWORD": password, "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=60)


def _refused(server: DsmsServer, user: str, password: str | None) -> bool:
    try:
        _connect(server, user, password).close()
    except psycopg.OperationalError as e:
        assert "password authentication failed" in str(e) or "password" in str(e)
        return True
    return False


def _connect(server: DsmsServer, user: str, password: str | None) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=server.port, dbname="dsms", user=user, password=password or "",
                           connect_timeout=10, autocommit=True)


def _verifier(password: str, salt: bytes, iterations: int = 4096) -> str:
    """A PostgreSQL SCRAM-SHA-256 verifier (RFC 5802 / 7677), computed independently of the server."""
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    stored = hashlib.sha256(hmac.digest(salted, b"Client Key", "sha256")).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server_key)}"


def test_created_users_log_in_with_scram_and_survive_a_kill_9(tmp_path):
    server = DsmsServer(str(tmp_path)).start()
    try:
        with psycopg.connect(server.url(), autocommit=True) as c:  # no users yet: everyone is admitted
            notices = []
            c.add_notice_handler(lambda d: notices.append(d.message_primary))
            c.execute("CREATE USER alice WITH PASSWORD 'it''s s3cret'")
            assert any("password authentication is now on" in n for n in notices)
            c.execute("CREATE ROLE bob LOGIN PASSWORD 'b0b'")
            with pytest.raises(psycopg.errors.DuplicateObject):
                c.execute("CREATE USER alice PASSWORD 'again'")
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                c.execute("CREATE USER carol")
        assert _refused(server, "dsms", None)
        assert _refused(server, "alice", "wrong")
        assert _refused(server, "mallory", "it's s3cret")
        with _connect(server, "alice", "it's s3cret") as c:
            assert c.execute("SELECT current_user").fetchall() == [("alice",)]
            roles = c.execute("SELECT rolname, rolcanlogin FROM pg_catalog.pg_roles ORDER BY 1").fetchall()
            assert roles == [("alice", True), ("bob", True), ("dsms", True)]  # what psql's \du lists
        assert _psql(server, "bob", "b0b").stdout.strip() == "bob"
        refused = _psql(server, "bob", "nope")
        assert refused.returncode == 2 and "password authentication failed" in refused.stderr
        server.kill()  # kill -9
        stored = (tmp_path / "state" / "users").read_text()
        assert "s3cret" not in stored and "b0b" not in stored and stored.count("SCRAM-SHA-256$4096:") == 2
        assert oct(os.stat(tmp_path / "state" / "users").st_mode & 0o777) == "0o600"
        server = DsmsServer(str(tmp_path)).start()
        assert _psql(server, "alice", "it's s3cret").stdout.strip() == "alice"
        assert _refused(server, "dsms", None)
    finally:
        server.kill()


def test_alter_user_password_and_drop_user(tmp_path):
    with DsmsServer(str(tmp_path)) as server:
        with psycopg.connect(server.url(), autocommit=True) as c:
            c.execute("CREATE USER alice PASSWORD 'one'")
            c.execute("CREATE USER bob PASSWORD 'b0b'")
        with psycopg.connect(server.url("alice", "one"), autocommit=True) as c:
            c.execute("ALTER USER alice WITH PASSWORD 'two'")
            verifier = _verifier("three", os.urandom(16))
            c.execute(f"ALTER ROLE bob PASSWORD '{verifier}'")  # what psql's \password sends: a verifier
            with pytest.raises(psycopg.errors.UndefinedObject):
                c.execute("ALTER USER nobody PASSWORD 'x'")
            notices = []
            c.add_notice_handler(lambda d: notices.append(d.message_primary))
            c.execute("DROP USER IF EXISTS nobody")
            assert notices == ['role "nobody" does not exist, skipping']
        assert _refused(server, "alice", "one")
        assert _psql(server, "alice", "two").stdout.strip() == "alice"
        assert _psql(server, "bob", "three").stdout.strip() == "bob"
        with psycopg.connect(server.url("bob", "three"), autocommit=True) as c:
            c.execute("DROP USER alice")
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                c.execute("DROP USER bob")  # the last one: the server would be open to all again
        assert _refused(server, "alice", "two")


def test_users_of_the_users_file_belong_to_it(tmp_path):
    users = tmp_path / "users.txt"
    users.write_text("admin:adm1n\n")
    with DsmsServer(str(tmp_path), "--users", str(users)) as server:
        with psycopg.connect(server.url("admin", "adm1n"), autocommit=True) as c:
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="--users file"):
                c.execute("ALTER USER admin PASSWORD 'x'")
            c.execute("CREATE USER eve PASSWORD 'ev3'")
        assert _psql(server, "eve", "ev3").stdout.strip() == "eve"
        assert _psql(server, "admin", "adm1n").stdout.strip() == "admin"
