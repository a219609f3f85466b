"""The route matrix: every query shape on the runtime, DuckDB and Spark, over the same files.

Each shape (tests/route_shapes.py, over the files of tests/route_data.py) runs through ``dsms.Engine`` with
``SET 'engine'`` set to each route; the final rows (an updating result's
changelog applied) must equal each other and the shape's oracle, plain
DuckDB SQL written in route_shapes.py. The data has NULLs, repeated times,
epoch-millisecond and text timestamps, several files per source, and
events late by their source's watermark. Shapes a batch route refuses are
checked for the refusal message (and run on the runtime under ``auto``).
Spark runs in local mode, one session for the whole test run; without
PySpark the Spark column is skipped and the others run
(``test_the_matrix_runs_without_pyspark`` shows it).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pyarrow as pa
import pytest

import dsms

from route_data import generate
from route_shapes import REFUSED, SHAPES, oracle_rows

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


@pytest.fixture(scope="module")
def oracles(data):
    """Each shape's oracle rows, computed once for all its routes."""
    found: dict[str, list[tuple]] = {}

    def of(shape) -> list[tuple]:
        if shape.name not in found:
            found[shape.name] = sorted_rows(oracle_rows(shape, data.tables))
        return found[shape.name]

    return of


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_route_gives_the_oracle_rows(shape, route, data, oracles, request):
    """Each route against the oracle (so the routes equal each other). The Spark column needs PySpark; the
    others run without it."""
    if route == "spark":
        request.getfixturevalue("spark_session")  # skips this column where PySpark is not installed
    want = oracles(shape)
    assert len(want) >= shape.min_rows, f"{shape.name}: the oracle finds {len(want)} rows"
    got = sorted_rows(run(data.ddl(), shape.query, route, shape.settings))
    assert same(got, want), f"{shape.name} on {route} vs the oracle: {_diff(got, want)}"


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


# A finder that makes ``import pyspark`` fail, as where PySpark is not installed.
_NO_PYSPARK = """
import sys
class NoPySpark:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError("No module named 'pyspark'", name=name)
sys.meta_path.insert(0, NoPySpark())
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


def test_the_matrix_runs_without_pyspark(tmp_path):
    """Without PySpark, the runtime and DuckDB columns of the matrix run and only the Spark column is skipped."""
    shape = SHAPES[0].name
    out = subprocess.run(
        [sys.executable, "-c", _NO_PYSPARK, __file__, "-q", "-p", "no:cacheprovider", "-k",
         f"test_every_route_gives_the_oracle_rows and {shape}-"],
        cwd=os.path.dirname(os.path.dirname(__file__)), capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 passed, 1 skipped" in out.stdout, out.stdout
