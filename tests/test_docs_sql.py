"""The SQL examples of the user guide run: every ```sql block of docs/ (and README.md).

Per page, the blocks run in order in one fresh engine, so a block's DDL
serves the blocks after it. Before them the engine gets the docs catalog
(tests/docs_catalog.sql: memory streams and tables such as ``clicks`` and
``bid``), minus every name the page declares itself. Each statement is
executed as a user pasting the page into ``dsms`` would run it; queries,
views, sinks and materialized views are also EXPLAINed (planned and
routed). A file source whose file does not exist gets an empty one in the
temp folder, so the DDL runs as written. Then the catalog's sample rows
go in and every query runs to the end of its input without failing.

The examples that show a result on their page are then run over a few
rows, and their rows compared with the ones the page shows (hand-computed,
never the engine's own earlier output).

Blocks that are not statements (grammar synopses) are fenced ```text.

A page whose examples read or write PostgreSQL (``postgres-cdc``, ``jdbc``)
runs them on the test server (the ``postgres`` fixture) in a database of
its own: its ```postgresql blocks (the PostgreSQL side: tables, rows) run
there first, and the examples' connection options are pointed at it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re

import pytest

import dsms
from dsms.grammar import (
    CreateMaterializedView,
    CreateSink,
    CreateSource,
    CreateView,
    Explain,
    Insert,
    QueryStatement,
    SetOption,
    parse_script,
)
from dsms.runtime.clock import VirtualClock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CATALOG = os.path.join(ROOT, "tests", "docs_catalog.sql")
SQL_BLOCK = re.compile(r"^```sql\n(.*?)^```", re.S | re.M)
PAGES = sorted(["README.md"] + [os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                                if name.endswith(".md")])
PAGES = [page for page in PAGES if SQL_BLOCK.search(open(os.path.join(ROOT, page)).read())]
CREATES = (CreateSource, CreateView, CreateSink, CreateMaterializedView)
POSTGRES_BLOCK = re.compile(r"^```postgresql\n(.*?)^```", re.S | re.M)
POSTGRES_CONNECTORS = ("postgres-cdc", "jdbc")


def sql_blocks(page: str) -> list[tuple[int, str]]:
    """The ```sql blocks of a page: (line number of the block's first line, text)."""
    text = open(os.path.join(ROOT, page)).read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in SQL_BLOCK.finditer(text)]


def block(page: str, containing: str) -> str:
    """The one ```sql block of ``page`` that contains ``containing``."""
    found = [text for _, text in sql_blocks(page) if containing in text]
    assert len(found) == 1, f"{page}: {len(found)} sql blocks contain {containing!r}"
    return found[0]


def page_statements(page: str) -> list[tuple[str, object]]:
    """Every statement of the page's sql blocks, in order, with its place (``page:line``)."""
    out = []
    for line, text in sql_blocks(page):
        try:
            statements = parse_script(text)
        except dsms.DsmsError as e:
            error = e
        else:
            error = None
        if error is not None:
            pytest.fail(f"{page}:{line}: the sql block is not a script of statements:\n{error}", pytrace=False)
        out += [(f"{page}:{line + text.count(chr(10), 0, s.span.start)}", s) for s in statements]
    return out


def catalog(skip: set[str] = frozenset()) -> tuple[list, list]:
    """The docs catalog's CREATE statements and its sample-row INSERTs, without the names in ``skip``."""
    statements = parse_script(open(CATALOG).read())
    creates = [s for s in statements if isinstance(s, CreateSource) and s.name.value.lower() not in skip]
    inserts = [s for s in statements if isinstance(s, Insert) and s.target.value.lower() not in skip]
    return creates, inserts


def engine_with_catalog(**kwargs) -> dsms.Engine:
    engine = dsms.Engine(**kwargs)
    for stmt in catalog()[0]:
        engine.execute_statement(stmt)
    return engine


def provide_input(stmt: CreateSource, folder: str) -> None:
    """An empty file (or folder, for a path ending in /) where a file source's path points at nothing."""
    if (stmt.options.get("connector") or "").lower() != "file":
        return
    path = os.path.join(folder, stmt.options["path"])
    if os.path.exists(path):
        return
    if path.endswith("/"):
        os.makedirs(path)
    else:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "w").close()


def run_or_fail(engine: dsms.Engine, stmt, what: str) -> None:
    """Execute ``stmt`` (None: run every query to the end of its input); an error fails the test with ``what``."""
    try:
        if stmt is not None:
            engine.execute_statement(stmt)
        else:
            engine.run_until_idle()
            engine.end_input()
            engine.run_until_idle()
    except dsms.DsmsError as e:
        error = e
    except Exception as e:  # not a user error: keep its traceback
        pytest.fail(f"{what}: {type(e).__name__}: {e}")
    else:
        return
    pytest.fail(f"{what}:\n{error}", pytrace=False)


def test_the_pages_with_sql_examples_are_all_found():
    assert {"README.md", "docs/sql.md", "docs/joins.md", "docs/cql.md", "docs/emission.md", "docs/time.md",
            "docs/connectors.md", "docs/routes.md"} <= set(PAGES)


def _connector(stmt) -> str:
    return (stmt.options.get("connector") or "").lower() if isinstance(stmt, (CreateSource, CreateSink)) else ""


def on_test_server(statements: list, page: str, request) -> list:
    """The page's statements with their PostgreSQL options pointed at the test server, after the page's
    ```postgresql blocks ran there in a fresh database (unchanged if the page uses no PostgreSQL)."""
    if not any(_connector(s) in POSTGRES_CONNECTORS for _, s in statements):
        return statements
    pg = request.getfixturevalue("postgres")
    database = "docs_" + re.sub(r"\W", "_", os.path.basename(page)[:-3])
    with pg.connect(autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {database}")
    import psycopg

    with psycopg.connect(pg.url.rsplit("/", 1)[0] + "/" + database, autocommit=True) as conn:
        for block in POSTGRES_BLOCK.findall(open(os.path.join(ROOT, page)).read()):
            conn.execute(block)
    server = {"postgres-cdc": {"hostname": "127.0.0.1", "port": str(pg.port), "username": "dsms",
                               "password": "dsms", "database-name": database},
              "jdbc": {"url": f"jdbc:postgresql://127.0.0.1:{pg.port}/{database}", "username": "dsms",
                       "password": "dsms"}}
    return [(where, dataclasses.replace(s, options={**s.options, **server[_connector(s)]})
             if _connector(s) in server else s) for where, s in statements]


def on_test_broker(statements: list, request) -> list:
    """Kafka examples point at the test broker (the ``kafka_broker`` fixture), their topics created first."""
    kafka = [(w, s) for w, s in statements if isinstance(s, (CreateSource, CreateSink))
             and (s.options.get("connector") or "").lower() in ("kafka", "upsert-kafka")]
    if not kafka:
        return statements
    bootstrap = request.getfixturevalue("kafka_broker")
    from kafka_broker import create_topic

    created = set()
    for _, stmt in kafka:
        topic = stmt.options.get("topic")
        if topic and topic not in created:
            create_topic(bootstrap, topic, 3, exist_ok=True)
            created.add(topic)
    return [(w, dataclasses.replace(s, options={**s.options, "properties.bootstrap.servers": bootstrap}))
            if (w, s) in kafka else (w, s) for w, s in statements]


@pytest.mark.parametrize("page", PAGES)
def test_the_sql_examples_of_a_page_run(page, tmp_path, monkeypatch, request):
    monkeypatch.chdir(tmp_path)
    statements = on_test_broker(on_test_server(page_statements(page), page, request), request)
    assert statements
    declared = {s.name.value.lower() for _, s in statements if isinstance(s, CREATES)}
    creates, inserts = catalog(skip=declared)
    with dsms.Engine() as engine:
        for stmt in creates:
            engine.execute_statement(stmt)
        for where, stmt in statements:
            if isinstance(stmt, SetOption) and stmt.key == "spark.master":
                stmt = dataclasses.replace(stmt, value="local[1]")  # the example's cluster is not reachable here
            if isinstance(stmt, CreateSource):
                provide_input(stmt, str(tmp_path))
            if isinstance(stmt, (*CREATES[1:], QueryStatement)):
                explain = Explain(stmt.span, stmt.source, statement=stmt)
                run_or_fail(engine, explain, f"{where}: the example does not plan")
            run_or_fail(engine, stmt, f"{where}: the example does not run")
        # The examples' queries over a few rows, to the end of their input.
        for stmt in inserts:
            engine.execute_statement(stmt)
        run_or_fail(engine, None, f"{page}: an example's query failed on the catalog's sample rows")
        failed = [q for q in engine.execute("SHOW QUERIES").table.to_pylist() if q["status"] == "failed"]
        assert not failed, f"{page}: queries failed: {failed}"


# -- the examples that show their result -------------------------------------------------------------

def at(seconds: float, day: str = "2024-05-01 12:00:00") -> dt.datetime:
    return dt.datetime.fromisoformat(day) + dt.timedelta(seconds=seconds)


def without_op(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "op"} for r in rows]


def changes(handle) -> list[list[dict]]:
    return [batch.to_pylist() for batch in handle.changes()]


def test_emit_changes_every_gives_the_changelog_shown_in_emission_md():
    """The table under "Updating results": +I (12:00, 7, 2), then -U/+U to 5 and +I for ad 9."""
    clock = VirtualClock(start_us=1_000_000_000_000_000)  # a multiple of 10 s: firings at +10 s, +20 s
    with engine_with_catalog(clock=clock) as engine:
        query = engine.query(block("docs/emission.md", "EMIT CHANGES EVERY"))
        w = at(0)

        engine.insert("clicks", [(7, at(1)), (7, at(2))], columns=["ad_id", "ts"])
        engine.run_until_idle()
        assert changes(query) == []  # nothing before the firing
        clock.advance(10_000_000)
        engine.run_until_idle()
        assert changes(query) == [[{"op": "+I", "window_start": w, "ad_id": 7, "clicks": 2}]]

        engine.insert("clicks", [(7, at(3)), (7, at(4)), (7, at(5)), (9, at(6))], columns=["ad_id", "ts"])
        engine.run_until_idle()
        clock.advance(10_000_000)
        engine.run_until_idle()
        assert changes(query) == [[{"op": "-U", "window_start": w, "ad_id": 7, "clicks": 2},
                                   {"op": "+U", "window_start": w, "ad_id": 7, "clicks": 5},
                                   {"op": "+I", "window_start": w, "ad_id": 9, "clicks": 1}]]


def test_allowed_lateness_follows_the_timeline_in_emission_md():
    """window [0 s, 10 s), lateness 1 min, watermark = max time - 5 s (ev's bound), event by event."""
    day = "2024-05-01 00:00:00"  # the epoch-aligned windows start at whole 10 s
    with engine_with_catalog() as engine:
        query = engine.query("""SELECT window_start, k, COUNT(*) AS n
            FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND))
            GROUP BY window_start, window_end, k ALLOWED LATENESS INTERVAL '1' MINUTE""")
        late = engine.query("SELECT k, ts FROM LATE(ev)")

        def event(k: str, seconds: int) -> list[dict]:
            engine.insert("ev", [{"k": k, "ts": at(seconds, day)}])
            engine.run_until_idle()
            return [r for batch in changes(query) for r in batch if r["window_start"] == at(0, day)]

        def row(op: str, k: str, n: int) -> dict:
            return {"op": op, "window_start": at(0, day), "k": k, "n": n}

        assert event("a", 1) + event("a", 2) + event("b", 3) == []
        assert sorted(event("c", 16), key=str) == [row("+I", "a", 2), row("+I", "b", 1)]
        assert event("a", 4) == [row("-U", "a", 2), row("+U", "a", 3)]
        assert event("c", 80) == []
        assert event("a", 6) == []
        assert query.stats()["late"] == 1  # the event at 6, dropped at the source and counted
        # LATE(ev) lists the events late by the source's declaration: the one the query's own
        # lateness accepted (at 4) too.
        assert without_op([r for batch in changes(late) for r in batch]) == [
            {"k": "a", "ts": at(4, day)}, {"k": "a", "ts": at(6, day)}]
        engine.end_input()
        engine.run_until_idle()
        assert [r for batch in changes(query) for r in batch if r["window_start"] == at(0, day)] == []


def test_late_clicks_are_the_late_events_of_the_table_in_time_md(tmp_path):
    """time.md's arrival table (bound 5 s): the events at 3 and 9 are late; emission.md's LATE query counts them."""
    # ads: the events at 3 and 9 are the only ones of ads 2 and 3; ad 1's are all on time.
    arrivals = [(1, 10), (1, 14), (1, 12), (2, 3), (1, 20), (3, 9)]
    with open(tmp_path / "clicks.jsonl", "w") as f:
        for ad, seconds in arrivals:
            f.write(json.dumps({"ad_id": ad, "ts": str(at(seconds))}) + "\n")
    with dsms.Engine(base_dir=str(tmp_path)) as engine:
        engine.execute(block("docs/time.md", "path = 'clicks.jsonl'"))
        query = engine.query(block("docs/emission.md", "LATE(clicks)"))
        engine.run_until_idle()
        assert sorted(query.snapshot().to_pylist(), key=lambda r: r["ad_id"]) == [
            {"ad_id": 2, "late_clicks": 1}, {"ad_id": 3, "late_clicks": 1}]


def test_explain_of_the_interval_join_shows_what_joins_md_shows():
    shown = re.search(r"^```\n(#2 IntervalJoin.*?)^```", open(os.path.join(ROOT, "docs/joins.md")).read(),
                      re.S | re.M).group(1)
    with engine_with_catalog() as engine:
        plan = engine.execute("EXPLAIN " + block("docs/joins.md", "LEFT JOIN clicks c")).message
    assert " ".join(shown.split()) in [" ".join(line.lstrip("└─├│ ").split()) for line in plan.split("\n")]


def test_the_cql_sliding_window_is_the_hop_window_aggregate_cql_md_names():
    """RSTREAM over [RANGE 1 MINUTE SLIDE 10 SECONDS] gives the HOP aggregate's rows, hand-counted here."""
    rstream = block("docs/cql.md", "RSTREAM(")
    hop = block("docs/cql.md", "TABLE(HOP(")
    clicks = [(7, at(5)), (9, at(15)), (7, at(25))]
    # Each click is in the six 1-minute windows that start in the minute before it, on 10 s marks.
    # Windows start at -50, -40, ..., 20 s: ad 7 at 5 s is in starts -50..0, ad 7 at 25 s in -30..20,
    # ad 9 at 15 s in -40..10.
    expected = sorted([(7, 1)] * 2 + [(7, 2)] * 4 + [(7, 1)] * 2      # starts -50, -40 | -30..0 | 10, 20
                      + [(9, 1)] * 6)
    results = []
    for sql in (rstream, hop):
        with engine_with_catalog() as engine:
            query = engine.query(sql)
            engine.insert("clicks", clicks, columns=["ad_id", "ts"])
            engine.end_input()
            engine.run_until_idle()
            rows = [r for batch in changes(query) for r in batch]
            assert {r.get("op", "+I") for r in rows} == {"+I"}
            results.append(sorted((r["ad_id"], r["clicks"]) for r in rows))
    assert results == [expected, expected]


def test_sessions_are_the_ones_sql_md_shows():
    """gap 30 min; events at 13:02, 13:14, 13:57 (in any order) -> [13:02, 13:44) with 2, [13:57, 14:27) with 1."""
    times = ["13:02", "13:14", "13:57"]
    for order in (times, times[::-1], [times[2], times[0], times[1]]):
        with dsms.Engine() as engine:
            # "Any order" within the watermark bound: a bound that covers the hour.
            engine.execute("""CREATE STREAM visits (k VARCHAR, ts TIMESTAMP(3),
                WATERMARK FOR ts AS ts - INTERVAL '1' HOUR) WITH (connector = 'memory')""")
            query = engine.query("""SELECT window_start, window_end, COUNT(*) AS n
                FROM TABLE(SESSION(TABLE visits PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' MINUTE))
                GROUP BY window_start, window_end, k""")
            engine.insert("visits", [{"k": "u", "ts": f"2024-05-01 {t}:00"} for t in order])
            engine.end_input()
            engine.run_until_idle()
            assert sorted(query.snapshot().to_pylist(), key=lambda r: r["window_start"]) == [
                {"window_start": at(0, "2024-05-01 13:02"), "window_end": at(0, "2024-05-01 13:44"), "n": 2},
                {"window_start": at(0, "2024-05-01 13:57"), "window_end": at(0, "2024-05-01 14:27"), "n": 1}]


def test_the_changelog_json_sink_of_connectors_md_writes_the_lines_it_shows(tmp_path):
    """Two bids of auction 1 (10, then 2), in two files of the watched folder: +I 10, then -U 10 and +U 12."""
    (tmp_path / "bids").mkdir()
    with dsms.Engine(base_dir=str(tmp_path)) as engine:
        engine.execute(block("docs/connectors.md", "CREATE SINK out"))
        for i, price in enumerate([10, 2]):
            (tmp_path / "bids" / f"{i}.jsonl").write_text(
                json.dumps({"auction": 1, "price": price, "ts": str(at(i))}) + "\n")
            engine.run_until_idle()
    lines = (tmp_path / "out" / "result.jsonl").read_text().splitlines()
    assert lines == ['{"op":"+I","auction":1,"total":10}', '{"op":"-U","auction":1,"total":10}',
                     '{"op":"+U","auction":1,"total":12}']
    assert lines[1] in open(os.path.join(ROOT, "docs/connectors.md")).read()  # the line the page shows


def test_the_postgresql_example_of_connectors_md_writes_the_totals_it_shows(request):
    import decimal
    import time

    page = "docs/connectors.md"
    statements = on_test_server([(page, s) for s in parse_script(block(page, "'postgres-cdc'"))], page, request)
    pg = request.getfixturevalue("postgres")
    url = pg.url.rsplit("/", 1)[0] + "/docs_connectors"
    import psycopg

    def totals():
        with psycopg.connect(url) as conn:
            return sorted(conn.execute("SELECT * FROM customer_totals").fetchall())

    shown = [("ada", 2, decimal.Decimal("19.75")), ("bob", 1, decimal.Decimal("3.00"))]
    with dsms.Engine() as engine:
        for _, stmt in statements:
            engine.execute_statement(stmt)
        deadline = time.monotonic() + 30
        while totals() != shown and time.monotonic() < deadline:
            engine.run_until_idle()
            time.sleep(0.05)
    assert totals() == shown
