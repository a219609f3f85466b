"""The route matrix: every query shape on the runtime, DuckDB and Spark, over the same files.

Each shape (tests/route_shapes.py) runs through ``dsms.Engine`` with
``SET 'engine'`` set to each route; the final rows (an updating result's
changelog applied) must equal each other and the shape's oracle, plain
DuckDB SQL written in route_shapes.py. The data has NULLs, repeated times,
epoch-millisecond and text timestamps, several files per source, and
events late by their source's watermark. Shapes a batch route refuses are
checked for the refusal message (and run on the runtime under ``auto``).
Spark runs in local mode, one session for the whole test run.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

import dsms

from route_shapes import REFUSED, SHAPES, generate, oracle_rows

ROUTES = ("runtime", "duckdb", "spark")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return generate(str(tmp_path_factory.mktemp("route-data")))


def run(ddl: str, query: str, route: str, settings=()) -> pa.Table:
    """The final rows of ``query`` on ``route`` (an updating result's changes applied)."""
    engine = dsms.Engine()
    engine.execute(ddl)
    engine.execute(f"SET 'engine' = '{route}'")
    for key, value in settings:
        engine.execute(f"SET '{key}' = '{value}'")
    handle = engine.query(query)
    engine.run_until_idle()
    assert handle.done
    assert getattr(handle.job, "route", "runtime") == route
    table = handle.snapshot()
    return table.drop_columns([c for c in table.column_names if c in ("__op", "op")])


def _key(value):
    if isinstance(value, float):
        return (2, round(value, 3))
    return (0, 0) if value is None else (1, str(type(value)), value)


def sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=lambda r: tuple(_key(v) for v in r))


def same(a: list[tuple], b: list[tuple]) -> bool:
    """Equal rows, floats equal to 1e-9 (sums in another order round differently)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if len(x) != len(y):
            return False
        for u, v in zip(x, y):
            if isinstance(u, float) and isinstance(v, float):
                if not math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif u != v:
                return False
    return True


def _diff(a: list[tuple], b: list[tuple]) -> str:
    only_a = [r for r in a if r not in b][:3]
    only_b = [r for r in b if r not in a][:3]
    return f"{len(a)} vs {len(b)} rows; only in the first: {only_a}; only in the second: {only_b}"


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_route_gives_the_oracle_rows(shape, data, spark_session):
    want = sorted_rows(oracle_rows(shape, data.tables))
    assert len(want) >= shape.min_rows, f"{shape.name}: the oracle finds {len(want)} rows"
    got = {route: sorted_rows(run(data.ddl(), shape.query, route, shape.settings)) for route in ROUTES}
    for route in ROUTES:
        assert same(got[route], want), f"{shape.name} on {route} vs the oracle: {_diff(got[route], want)}"
    assert same(got["duckdb"], got["spark"]) and same(got["runtime"], got["duckdb"])


@pytest.mark.parametrize("case", REFUSED, ids=[r.name for r in REFUSED])
def test_batch_routes_refuse_what_depends_on_arrival_and_auto_runs_it_on_the_runtime(case, data):
    ddl = data.ddl() + case.ddl.format(root=data.root)
    for route in case.routes:
        engine = dsms.Engine()
        engine.execute(ddl)
        engine.execute(f"SET 'engine' = '{route}'")
        with pytest.raises(dsms.UnsupportedPlan) as info:
            engine.query(case.query)
        message = str(info.value)
        assert f"the {route} route {case.message}" in message and "the runtime can" in message, message
    engine = dsms.Engine()
    engine.execute(ddl)
    explained = engine.execute("EXPLAIN " + case.query).message
    assert explained.splitlines()[0].startswith("route: runtime (the batch routes " + case.message), explained
    assert getattr(engine.query(case.query).job, "route", "runtime") == "runtime"
