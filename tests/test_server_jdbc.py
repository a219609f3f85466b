"""PostgreSQL's JDBC driver (pgjdbc, Debian's libpostgresql-jdbc-java) against a real `dsms server`.

tests/jdbc/DsmsJdbc.java runs as a single-file Java program: DDL, parameters bound by
PreparedStatement (past pgjdbc's prepareThreshold, so named server-side statements too),
pull queries, typed columns, DatabaseMetaData (what JDBC tools such as DBeaver call) and an
error's SQLSTATE. Oracle: the rows the program inserts, summed by hand.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from server_helpers import DsmsServer

JAR = "/usr/share/java/postgresql.jar"
PROGRAM = os.path.join(os.path.dirname(__file__), "jdbc", "DsmsJdbc.java")

pytestmark = pytest.mark.skipif(shutil.which("java") is None or not os.path.exists(JAR),
                                reason="needs Java and PostgreSQL's JDBC driver (make install-jdbc)")


def test_jdbc_prepared_statements_pulls_and_metadata(tmp_path):
    with DsmsServer(str(tmp_path)) as server:
        done = subprocess.run(["java", "-Duser.timezone=UTC", "-cp", JAR, PROGRAM,
                               f"jdbc:postgresql://127.0.0.1:{server.port}/dsms"],
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    # Inserted: qty i + 1 for i in 0..7; even i as 'a' (1 + 3 + 5 + 7), odd i as "o'b" (2 + 4 + 6 + 8).
    assert [line for line in lines if line.startswith("pull ")] == \
        [f"pull {i} {16 if i % 2 == 0 else 20} 4" for i in range(6)]
    assert "row o'b 3.25 2024-01-01 00:00:03.0 numeric" in lines  # qty 4 is i = 3
    assert "product PostgreSQL 16" in lines
    assert sorted(line for line in lines if line.startswith("table ")) == \
        ["table per_sym MATERIALIZED VIEW", "table trades TABLE"]
    assert [line for line in lines if line.startswith("column ")] == \
        ["column sym text", "column qty int8", "column price numeric", "column ts timestamp"]
    assert "error 42703 ERROR: unknown column 'nope'" in lines
