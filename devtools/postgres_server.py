"""A PostgreSQL server for tests, benchmarks and demos, from Debian's ``postgresql`` package.

It runs in a temporary data directory on a free 127.0.0.1 port with
``wal_level = logical`` (so logical replication slots, the postgres-cdc
source, work), a user ``dsms`` with password ``dsms`` and a database
``dsms``. initdb refuses to run as root, so under root the server runs as
the ``postgres`` system user (created by the Debian package) or ``nobody``,
and the temporary directory is handed to that user.

From Python::

    with PostgresServer() as pg:
        print(pg.url)            # 'postgresql://dsms:dsms@127.0.0.1:PORT/dsms'
        print(pg.jdbc_url)       # 'jdbc:postgresql://127.0.0.1:PORT/dsms'

As a script, ``python devtools/postgres_server.py`` prints the URL on its
first line and serves until it is killed (``make demo-kafka``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

USER = PASSWORD = DATABASE = "dsms"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed or cannot start here (tests skip with this reason)."""


def postgres_bindir() -> str:
    """The folder of PostgreSQL's server programs (initdb, postgres), newest version first.

    Looks where Debian installs them (``/usr/lib/postgresql/<version>/bin``),
    then asks ``pg_config --bindir`` (which the client package may point elsewhere).

    Raises:
        PostgresUnavailable: no initdb was found.
    """
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            candidates.append(subprocess.run([pg_config, "--bindir"], capture_output=True, text=True,
                                             timeout=10, check=True).stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    for folder in candidates:
        if os.access(os.path.join(folder, "initdb"), os.X_OK) and os.access(os.path.join(folder, "postgres"), os.X_OK):
            return folder
    raise PostgresUnavailable("PostgreSQL's server programs (initdb, postgres) are not installed: "
                              "apt-get install postgresql postgresql-client (make test does it as root)")


def _version(folder: str) -> int:
    name = os.path.basename(os.path.dirname(folder))
    return int(name) if name.isdigit() else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: None (the current user) unless that is root, which initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable("running as root, and there is no 'postgres' or 'nobody' user to run PostgreSQL as")


class PostgresServer:
    """A throwaway PostgreSQL server on 127.0.0.1, started and stopped by its owner."""

    def __init__(self, port: int | None = None, startup_timeout: float = 60.0):
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self.folder: str | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{DATABASE}"

    @property
    def options(self) -> dict:
        """Connection options as the postgres-cdc connector takes them."""
        return {"hostname": "127.0.0.1", "port": str(self.port), "username": USER, "password": PASSWORD,
                "database-name": DATABASE}

    def start(self) -> PostgresServer:
        if self.process is not None:
            return self  # already running (``with server:`` after ``start()``)
        bindir = postgres_bindir()
        owner = _server_user()
        self.folder = tempfile.mkdtemp(prefix="dsms-pg-")
        data = os.path.join(self.folder, "data")
        pwfile = os.path.join(self.folder, "pw")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        as_owner = {}
        if owner is not None:
            for path in (self.folder, pwfile):
                os.chown(path, owner.pw_uid, owner.pw_gid)
            as_owner = {"user": owner.pw_uid, "group": owner.pw_gid, "extra_groups": []}
        env = dict(os.environ, LC_ALL="C", LANG="C")
        init = subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-U", USER, "--pwfile", pwfile,
                               "-E", "UTF8", "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256",
                               "--no-sync"],
                              capture_output=True, text=True, env=env, cwd=self.folder, **as_owner)
        if init.returncode != 0:
            self._remove()
            raise PostgresUnavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-1500:]}")
        with open(os.path.join(data, "postgresql.conf"), "a") as f:
            f.write("\n".join([
                "listen_addresses = '127.0.0.1'", f"port = {self.port}",
                f"unix_socket_directories = '{self.folder}'",
                "wal_level = logical", "max_replication_slots = 20", "max_wal_senders = 20",
                "max_prepared_transactions = 20",
                # A test server: durability against power loss is not what is tested.
                "fsync = off", "full_page_writes = off", "synchronous_commit = off",
                "shared_buffers = 64MB", "log_min_messages = warning", ""]))
        self._launch = (bindir, data, env, as_owner)
        self._run_postgres()
        self._wait_ready()
        return self

    def _run_postgres(self) -> None:
        bindir, data, env, as_owner = self._launch
        log = open(os.path.join(self.folder, "server.log"), "ab")
        self.process = subprocess.Popen([os.path.join(bindir, "postgres"), "-D", data], stdout=log,
                                        stderr=subprocess.STDOUT, env=env, cwd=self.folder,
                                        start_new_session=True, **as_owner)
        log.close()

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the server at once (an immediate shutdown, as a crash: it recovers from its WAL when it starts),
        stay down ``down_seconds``, start it again on the same data and port, and wait until it answers (tests
        of reconnecting clients). Not a fast shutdown: that waits for every walsender's client to confirm all
        WAL it was sent, which a CDC reader confirms only at its checkpoints (up to wal_sender_timeout)."""
        import psycopg

        self.process.send_signal(signal.SIGQUIT)
        self.process.wait(timeout=30)
        time.sleep(down_seconds)
        self._run_postgres()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            try:
                with psycopg.connect(self.url, connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise PostgresUnavailable(f"PostgreSQL did not come back after a restart: {self.log()}") from None
                time.sleep(0.1)

    def _wait_ready(self) -> None:
        import psycopg

        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                message = f"PostgreSQL exited with code {self.process.returncode}: {self.log()}"
                self.stop()
                raise PostgresUnavailable(message)
            try:
                # initdb makes only the database 'postgres': the first connection creates ours.
                with psycopg.connect(self.url.rsplit("/", 1)[0] + "/postgres", connect_timeout=2,
                                     autocommit=True) as conn:
                    conn.execute(f"CREATE DATABASE {DATABASE}")
                return
            except psycopg.OperationalError:
                time.sleep(0.1)
            except psycopg.Error as e:  # e.g. another server answers on the port: not ours
                self.stop()
                raise PostgresUnavailable(f"PostgreSQL on 127.0.0.1:{self.port} could not be set up: {e}") from None
        self.stop()
        raise PostgresUnavailable(f"PostgreSQL did not answer on 127.0.0.1:{self.port} within "
                                  f"{self.startup_timeout:.0f} s")

    def log(self) -> str:
        try:
            with open(os.path.join(self.folder, "server.log"), errors="replace") as f:
                return f.read()[-2000:]
        except (OSError, TypeError):
            return ""

    def connect(self, **kwargs):
        """A psycopg (3) connection to the server's database."""
        import psycopg

        return psycopg.connect(self.url, **kwargs)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # fast shutdown: open sessions are disconnected
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        self._remove()

    def _remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main() -> int:
    from serve import serve

    return serve("postgres_server", __doc__, lambda: PostgresServer().start(), lambda server: server.url, PostgresUnavailable)


if __name__ == "__main__":
    sys.exit(main())
