"""Routes are plug-ins: the registry finds them, SET 'engine' and EXPLAIN know them, nothing else names them.

A route made here (one class and its registration, as a new route module
would be) runs a query end to end: SET accepts its name, the query's job is
the route's, its stats and SHOW QUERIES come from the job protocol.
"""

import os

import pytest

import dsms
from dsms.runtime import routes
from dsms.runtime.batch_job import BatchJob
from dsms.runtime.duckdb_route import DuckDBExecutor

DDL = """CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json')"""


class EchoRoute:
    """A batch route under its own name that runs DuckDB's statement and remembers what it started."""

    name = engine = "echo"
    backfills = False
    lowers = True

    def __init__(self):
        self.started = []

    def serves(self, choice):
        return choice.engine == self.engine

    def start(self, ctx, planned, choice, output):
        job = BatchJob(DuckDBExecutor(ctx.settings), planned.lowered("duckdb"), output, planned.output_schema,
                       choice.reason)
        job.route = self.name
        ctx.scheduler.add(ctx.name, job)
        self.started.append(ctx.name)
        return job

    def explain(self, planned, choice):
        return "-- echo runs DuckDB's statement\n" + planned.lowered("duckdb").explain()


@pytest.fixture
def echo(monkeypatch):
    route = EchoRoute()
    registered = routes.routes()
    monkeypatch.setattr(routes, "routes", lambda: (*registered, route))
    return route


@pytest.fixture
def events(tmp_path):
    path = tmp_path / "ev.jsonl"
    path.write_text("".join(f'{{"k": "{k}", "v": {v}, "ts": "2024-01-01 00:00:{s:02d}"}}\n'
                            for k, v, s in [("a", 1, 1), ("b", 2, 3), ("a", 4, 12), ("a", 8, 30)]))
    return str(path)


def test_every_route_module_registers_one_route():
    assert [r.name for r in routes.routes()] == ["runtime", "backfill", "duckdb", "spark", "spark-streaming"]
    assert dsms.Engine.engine_names() == ("auto", "runtime", "duckdb", "spark")
    assert routes.backfill_names() == ("off", "duckdb", "spark")


def test_a_registered_route_runs_queries_by_its_name(echo, events):
    engine = dsms.Engine()
    engine.execute(DDL.format(path=events))
    engine.execute("SET 'engine' = 'echo'")
    assert dsms.Engine.engine_names()[-1] == "echo"
    explained = engine.explain("SELECT k, SUM(v) AS total FROM ev WHERE v > 1 GROUP BY k")
    assert explained.startswith("route: echo (SET 'engine' = 'echo')\n-- echo runs DuckDB's statement\n")
    q = engine.query("SELECT k, SUM(v) AS total FROM ev WHERE v > 1 GROUP BY k")
    engine.run_until_idle()
    assert echo.started == ["query_1"]
    assert sorted(q.snapshot().to_pylist(), key=lambda r: r["k"]) == [{"k": "a", "total": 12}, {"k": "b", "total": 2}]
    stats = q.job.stats()
    assert (stats.route, stats.status, stats.rows_in, stats.rows_out) == ("echo", "finished", 4, 2)
    shown = engine.execute("SHOW QUERIES").table.to_pylist()
    assert [(r["id"], r["status"], r["rows_in"]) for r in shown] == [("query_1", "finished", 4)]


def test_an_engine_no_route_serves_is_refused_with_the_names(events):
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError, match="invalid value 'flink' for 'engine'") as info:
        engine.execute("SET 'engine' = 'flink'")
    assert "expected one of: auto, runtime, duckdb, spark" in str(info.value)
    engine.execute(DDL.format(path=events))
    with pytest.raises(dsms.SqlError, match="no engine named 'sprak'") as info:
        engine.execute("EXPLAIN LOWERED SELECT k FROM ev FOR sprak")
    assert "did you mean 'spark'" in str(info.value)


def test_auto_routing_asks_the_routes_what_their_engines_do(monkeypatch, events):
    """``auto`` names no engine: with the batch engine for small files declared by another route, it takes that one."""
    from dsms.planner.analysis.routing import EngineTraits

    route = EchoRoute()
    route.traits = EngineTraits("echo", max_bytes_setting="batch.max_bytes")
    runtime = routes.route_named("runtime")
    monkeypatch.setattr(routes, "routes", lambda: (runtime, route))
    engine = dsms.Engine()
    engine.execute(DDL.format(path=events))
    size = f"about {os.path.getsize(events)} B"  # a JSON file is sized by its bytes
    assert engine.explain("SELECT k, v FROM ev WHERE v > 1").startswith(
        f"route: echo (bounded files, {size}, within batch.max_bytes (2.0 GiB))\n")
    engine.execute("SET 'batch.max_bytes' = '100'")  # no engine for large inputs is declared: still echo
    assert engine.explain("SELECT k, v FROM ev").startswith("route: echo (bounded files, ")
    # An updating result stays on the incremental engine, and the hint names the batch engines there are.
    assert engine.explain("SELECT k, SUM(v) AS total FROM ev GROUP BY k").startswith(
        "route: runtime (the result is updating: the runtime emits its changes, a batch route only its final rows "
        "(SET 'engine' = 'echo' for those))\n")
