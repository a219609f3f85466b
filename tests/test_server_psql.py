"""psql against a real `dsms server`: a session script (psql -f), errors with a caret, \\d and friends.

The expected rows are computed by hand from the inserted events.
"""

from __future__ import annotations

import os

import pytest

from server_helpers import DsmsServer

SESSION = """\
CREATE STREAM clicks (ad BIGINT, price DOUBLE, ok BOOLEAN, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH (connector = 'memory');
INSERT INTO clicks VALUES (1, 0.1, TRUE, TIMESTAMP '2024-01-01 12:00:00.250'),
  (2, 0.2, FALSE, TIMESTAMP '2024-01-01 12:00:01'), (1, 0.7, TRUE, TIMESTAMP '2024-01-01 12:00:02');
CREATE MATERIALIZED VIEW per_ad AS SELECT ad, COUNT(*) AS n, SUM(price) AS total FROM clicks GROUP BY ad;
FLUSH;
\\pset format unaligned
\\pset tuples_only on
SELECT ad, n, total FROM per_ad ORDER BY ad;
SELECT ad, ok, ts FROM clicks WHERE ad = 1;
SET 'emit' = 'changes';
SHOW QUERIES;
DESCRIBE clicks;
PAUSE QUERY per_ad;
RESUME QUERY per_ad;
SHOW PROGRESS per_ad;
CREATE TABLE ads (ad BIGINT, name VARCHAR, PRIMARY KEY (ad) NOT ENFORCED) WITH (connector = 'memory');
INSERT INTO ads VALUES (1, 'shoes'), (2, 'hats');
CREATE VIEW cheap AS SELECT ad, price FROM clicks WHERE price < 0.5;
SELECT ad, name FROM ads;
SELECT ad, price FROM cheap;
EXPLAIN SELECT ad, COUNT(*) AS n FROM clicks GROUP BY ad;
DROP QUERY per_ad;
SHOW QUERIES;
SELECT INTERVAL '1' HOUR AS h, INTERVAL '14' MONTH AS m, INTERVAL '2' DAY AS d;
"""


@pytest.fixture
def server(tmp_path):
    with DsmsServer(str(tmp_path)) as s:
        yield s


def test_a_session_script_runs_every_kind_of_statement(server, tmp_path):
    script = tmp_path / "session.sql"
    script.write_text(SESSION)
    done = server.psql("-v", "ON_ERROR_STOP=1", "-f", str(script))
    out = done.stdout
    lines = out.splitlines()
    # per_ad by hand: ad 1 has two clicks (0.1 + 0.7), ad 2 one (0.2); doubles at full precision.
    assert "1|2|0.7999999999999999" in lines and "2|1|0.2" in lines
    assert "1|t|2024-01-01 12:00:00.25" in lines and "1|t|2024-01-01 12:00:02" in lines
    assert any(line.startswith("per_ad|materialized view|running") for line in lines)
    assert any(line.startswith("ts|TIMESTAMP(3)|") for line in lines)
    assert "NOTICE:  Paused query per_ad" in done.stderr and "NOTICE:  Resumed query per_ad" in done.stderr
    assert any(line.startswith("per_ad|#1 Aggregate(keys=[ad]") for line in lines)
    assert "1|shoes" in lines and "2|hats" in lines  # the table, then the view: the clicks priced under 0.5
    assert "1|0.1" in lines and "2|0.2" in lines and "1|0.7" not in lines
    plan = lines.index(next(line for line in lines if line.startswith("route: runtime")))  # EXPLAIN's plan
    assert "#1 Aggregate(keys=[ad], aggs=[COUNT(*) AS agg0])" in lines[plan + 2]
    assert "NOTICE:  Dropped materialized view per_ad" in done.stderr
    assert not any(line.startswith("per_ad|") for line in lines[lines.index("2|0.2"):])  # gone from SHOW QUERIES
    assert lines[-1] == "01:00:00|1 year 2 mons|2 days"  # intervals as PostgreSQL prints them


def test_set_belongs_to_the_connection(server):
    default = server.psql("-At", "-c", "SET").stdout
    assert "batch.size|65536" in default.splitlines()
    mine = server.psql("-At", "-c", "SET 'batch.size' = '7'", "-c", "SET").stdout
    assert "batch.size|7" in mine.splitlines()
    assert server.psql("-At", "-c", "SET").stdout == default  # another connection still has the defaults


def test_an_error_comes_back_with_its_sqlstate_and_caret(server):
    server.psql("-c", "CREATE STREAM s (price DOUBLE) WITH (connector = 'memory')")
    out = server.psql("-v", "VERBOSITY=verbose", "-c", "SELECT pricee FROM s", check=False)
    assert out.returncode == 1
    err = out.stderr.splitlines()
    assert "ERROR:  42703: unknown column 'pricee'" in err
    # psql draws the caret under the position the server sent.
    line = next(i for i, text in enumerate(err) if text.startswith("LINE 1: SELECT pricee FROM s"))
    assert err[line + 1].index("^") == len("LINE 1: SELECT ")
    assert "HINT:  did you mean 'price'?" in err


def test_describe_meta_commands_list_streams_views_and_columns(server):
    server.psql("-c", "CREATE STREAM s (id BIGINT, amount DECIMAL(10, 2), ts TIMESTAMP(3)) WITH (connector = 'memory')")
    server.psql("-c", "CREATE MATERIALIZED VIEW totals AS SELECT id, SUM(amount) AS total FROM s GROUP BY id")
    listing = server.psql("-c", "\\d").stdout
    assert "public | s      | table             | dsms" in listing
    assert "public | totals | materialized view | dsms" in listing
    assert "public | s    | table | dsms" in server.psql("-c", "\\dt").stdout
    columns = server.psql("-c", "\\d s").stdout
    assert 'Table "public.s"' in columns
    assert " id     | bigint                      |" in columns
    assert " amount | numeric                     |" in columns
    assert " ts     | timestamp without time zone |" in columns
    assert 'Materialized view "public.totals"' in server.psql("-c", "\\d totals").stdout
    version = server.psql("-c", "SELECT version()").stdout.splitlines()
    assert version[0].strip() == "version" and "PostgreSQL 16.0 (dsms" in version[2]  # named as PostgreSQL does
    roles = server.psql("-c", "\\du").stdout
    assert "List of roles" in roles and " dsms      | Superuser" in roles
    databases = server.psql("-c", "\\l").stdout
    assert " dsms | dsms  | UTF8     |" in databases


def test_a_file_path_outside_the_data_roots_is_refused(server, tmp_path):
    outside = os.path.dirname(str(tmp_path))
    out = server.psql("-c", f"CREATE STREAM f (x INT) WITH (connector = 'file', path = '{outside}/x.jsonl', "
                            "format = 'json')", check=False)
    assert out.returncode == 1 and "is outside the server's data roots" in out.stderr
    out = server.psql("-c", "CREATE STREAM g (x INT) WITH (connector = 'file', path = '../x.jsonl', format = 'json')",
                      check=False)
    assert "is outside the server's data roots" in out.stderr
    # Nor through a catalog query (they run on DuckDB, whose file functions are turned off for clients).
    secret = tmp_path.parent / f"{tmp_path.name}-secret.csv"
    secret.write_text("name,password\nalice,hunter2\n")
    out = server.psql("-v", "VERBOSITY=verbose", "-c", f"SELECT s.* FROM pg_namespace n, read_csv('{secret}') s",
                      check=False)
    assert out.returncode == 1 and "ERROR:  42501: a catalog query cannot read or write files" in out.stderr
    secret.unlink()
    assert "hunter2" not in out.stdout + out.stderr
    # Nor a dead-letter file outside them.
    out = server.psql("-c", "CREATE STREAM d (x INT) WITH (connector = 'file', path = 'in.jsonl', format = 'json', "
                            f"dead_letter = '{outside}/bad.jsonl')", check=False)
    assert "is outside the server's data roots" in out.stderr
    # The server's own files are not the clients', though its state directory is inside the data root.
    for path in ("state/catalog.json", "*/catalog.json", "state"):
        out = server.psql("-c", f"CREATE STREAM s (x VARCHAR) WITH (connector = 'file', path = '{path}', "
                                "format = 'csv')", check=False)
        assert "reaches the server's own files" in out.stderr, path
    out = server.psql("-c", "CREATE SINK w WITH (connector = 'file', path = 'state/x.jsonl', format = 'json') "
                            "AS SELECT 1 AS x", check=False)
    assert "reaches the server's own files" in out.stderr and not (tmp_path / "state" / "x.jsonl").exists()
    # Nor a Kafka client's file settings; and no Kafka client setting that loads or runs code.
    kafka = "CREATE STREAM k (x INT) WITH (connector = 'kafka', topic = 't', format = 'json', " \
            "'properties.bootstrap.servers' = '127.0.0.1:1', "
    out = server.psql("-c", kafka + f"'properties.ssl.ca.location' = '{outside}/ca.pem')", check=False)
    assert "is outside the server's data roots" in out.stderr
    out = server.psql("-c", kafka + "'properties.sasl.kerberos.kinit.cmd' = 'touch pwned')", check=False)
    assert "would load or run code in the server's process" in out.stderr
    (tmp_path / "in.jsonl").write_text('{"x": 5}\n')
    server.psql("-c", "CREATE STREAM h (x INT) WITH (connector = 'file', path = 'in.jsonl', format = 'json')")
    assert server.psql("-At", "-c", "SELECT x FROM h").stdout.strip() == "5"


def test_python_functions_only_when_the_server_allows_them(tmp_path):
    (tmp_path / "shop.py").write_text("def tax(price) -> float:\n    return round(price * 0.2, 2)\n")
    create = "CREATE FUNCTION tax AS 'shop.tax' LANGUAGE PYTHON"
    with DsmsServer(str(tmp_path)) as server:  # a function is Python code run in the server's process
        out = server.psql("-v", "VERBOSITY=verbose", "-c", create, check=False)
        assert out.returncode == 1 and "ERROR:  42501: CREATE FUNCTION imports and runs Python code" in out.stderr
        assert "--allow-python-functions" in out.stderr
    with DsmsServer(str(tmp_path), "--allow-python-functions", state_dir="trusting") as server:
        server.psql("-c", create, "-c", "CREATE STREAM sales (price DOUBLE) WITH (connector = 'memory')",
                    "-c", "INSERT INTO sales VALUES (12.5)")
        assert server.psql("-At", "-c", "SELECT tax(price) AS t FROM sales").stdout.strip() == "2.5"  # 12.5 * 0.2
        # without FROM too: DuckDB (which answers constant SELECTs) does not know it, so the engine answers
        assert server.psql("-At", "-c", "SELECT tax(CAST(12.5 AS DOUBLE)) AS t").stdout.strip() == "2.5"
        out = server.psql("-c", "SELECT nope(1) AS x", check=False)
        assert "ERROR:  unknown function 'nope'" in out.stderr and "LINE 1: SELECT nope(1) AS x" in out.stderr


def test_df_lists_the_built_in_and_the_python_functions(tmp_path):
    (tmp_path / "shop.py").write_text("def tax(price) -> float:\n    return round(price * 0.2, 2)\n")
    with DsmsServer(str(tmp_path), "--allow-python-functions") as server:
        server.psql("-c", "CREATE FUNCTION tax AS 'shop.tax' LANGUAGE PYTHON")
        listing = server.psql("-c", "\\df").stdout
        lines = listing.splitlines()
        assert lines[0].strip() == "List of functions"
        assert [c.strip() for c in lines[1].split("|")] == ["Schema", "Name", "Result data type",
                                                            "Argument data types", "Type"]
        rows = {tuple(c.strip() for c in line.split("|")) for line in lines[3:] if "|" in line}
        assert ("public", "tax", "DOUBLE", "", "func") in rows  # the Python function, with its result type
        assert ("dsms", "upper", "", "", "func") in rows and ("dsms", "count", "", "", "agg") in rows
        assert ("dsms", "tumble", "", "", "func") not in rows  # a table-valued window is not a function
        # one row per function dsms has: SHOW FUNCTIONS' scalar and Python ones, and the aggregates
        shown = server.psql("-At", "-c", "SHOW FUNCTIONS").stdout.splitlines()
        aggregates = {r for r in rows if r[4] == "agg"}
        assert len(rows) == len(shown) + len(aggregates) and f"({len(rows)} rows)" in listing
        # a pattern, and \df+ with the language and the Python it runs
        one = server.psql("-At", "-c", "\\df+ tax").stdout.strip().split("|")
        assert one[:5] == ["public", "tax", "DOUBLE", "", "func"] and "python" in one and "shop.tax" in one
        assert server.psql("-At", "-c", "\\df upper").stdout.strip() == "dsms|upper|||func"
        server.psql("-c", "DROP FUNCTION tax")
        assert "tax" not in server.psql("-At", "-c", "\\df t*").stdout.split("|")
