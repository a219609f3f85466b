"""INSERT ... VALUES: each value cast to its column, as SQL does, fast for long VALUES lists.

Literal cells take a short path (``planner/literal_cells.py``) that skips
sqlglot's type annotation; the results are checked against hand-computed
rows and DuckDB, and the short path's types against the annotation's.
"""

import datetime as dt
from decimal import Decimal

import duckdb
import pyarrow as pa
import pytest
from sqlglot import exp

import dsms
from dsms.grammar.dialect import Dsms
from dsms.planner.bind.expressions import infer_type
from dsms.planner.literal_cells import plain_cast_type
from dsms.planner.types import Schema

DDL = """CREATE STREAM t (i INT, b BIGINT, d DOUBLE, m DECIMAL(10, 2), s VARCHAR, f BOOLEAN, day DATE,
  ts TIMESTAMP(3), ti TINYINT, txt VARCHAR) WITH (connector = 'memory')"""


def test_each_kind_of_literal_lands_as_its_column_type():
    engine = dsms.Engine()
    engine.execute(DDL)
    q = engine.query("SELECT * FROM t")
    engine.execute("""INSERT INTO t VALUES
      (1, -5, 2.5, 3.14159, 'x', TRUE, DATE '2024-02-29', TIMESTAMP '2024-01-01 10:00:00.123', 7, TRUE),
      (2.9, 9000000000, 1e3, -1.5, NULL, FALSE, NULL, TIMESTAMP '2024-01-01 10:00:00', -3,
       TIMESTAMP '2024-01-01 10:00:00'),
      (-2.9, NULL, -4, 0, '', NULL, DATE '1999-12-31', NULL, NULL, 12)""")
    engine.run_until_idle()
    rows = q.snapshot().to_pylist()
    assert rows == [
        {"i": 1, "b": -5, "d": 2.5, "m": Decimal("3.14"), "s": "x", "f": True, "day": dt.date(2024, 2, 29),
         "ts": dt.datetime(2024, 1, 1, 10, 0, 0, 123000), "ti": 7, "txt": "TRUE"},
        # A DOUBLE into an INT truncates toward zero, as in Flink; a TIMESTAMP as text has 3 fractional digits.
        {"i": 2, "b": 9000000000, "d": 1000.0, "m": Decimal("-1.50"), "s": None, "f": False, "day": None,
         "ts": dt.datetime(2024, 1, 1, 10, 0, 0), "ti": -3, "txt": "2024-01-01 10:00:00.000"},
        {"i": -2, "b": None, "d": -4.0, "m": Decimal("0.00"), "s": "", "f": None, "day": dt.date(1999, 12, 31),
         "ts": None, "ti": None, "txt": "12"},
    ]


def test_a_long_values_list_matches_duckdb():
    n = 2000
    values = ", ".join(f"({i}, {i * 7 - 3000}, {i}.25, 'k{i % 13}', TIMESTAMP '2024-01-01 00:{i // 60 % 60:02d}:"
                       f"{i % 60:02d}')" for i in range(n))
    engine = dsms.Engine()
    engine.execute("CREATE STREAM v (i INT, b BIGINT, d DOUBLE, k VARCHAR, ts TIMESTAMP(3)) WITH (connector = 'memory')")
    q = engine.query("SELECT * FROM v")
    engine.execute(f"INSERT INTO v VALUES {values}")
    engine.run_until_idle()
    got = q.snapshot()
    want = duckdb.sql(f"SELECT CAST(c1 AS INT) AS i, CAST(c2 AS BIGINT) AS b, CAST(c3 AS DOUBLE) AS d, "
                      f"c4 AS k, CAST(c5 AS TIMESTAMP_MS) AS ts FROM (VALUES {values}) AS x(c1, c2, c3, c4, c5)"
                      ).to_arrow_table()
    assert got.num_rows == n
    assert got.to_pylist() == want.to_pylist()


@pytest.mark.parametrize("cell", [
    "CAST(12 AS BIGINT)", "CAST(-12 AS INT)", "CAST(12 AS DOUBLE)", "CAST(1.25 AS DECIMAL(10, 2))",
    "CAST(1e3 AS DOUBLE)", "CAST('a' AS VARCHAR)", "CAST(NULL AS DATE)", "CAST(TRUE AS BOOLEAN)",
    "CAST(DATE '2024-01-01' AS DATE)", "CAST(TIMESTAMP '2024-01-01 00:00:00.5' AS TIMESTAMP(3))",
    "CAST(3 AS TINYINT)", "CAST(NULL AS VARCHAR)",
])
def test_the_short_path_types_a_cell_as_the_annotation_does(cell):
    tree = exp.maybe_parse(cell, dialect=Dsms)
    fast = plain_cast_type(tree)
    assert fast is not None, f"{cell} should take the short path"
    assert fast == infer_type(tree, Schema(()))


@pytest.mark.parametrize("cell", [
    "CAST(1.5 AS INT)", "CAST(TRUE AS VARCHAR)", "CAST(TIMESTAMP '2024-01-01 00:00:00' AS VARCHAR)",
    "CAST(1 AS VARCHAR)", "CAST(x AS INT)", "CAST(1 + 1 AS INT)", "TRY_CAST(1 AS INT)",
    "CAST('2024-01-01 00:00:00' AS TIMESTAMP_LTZ(3))", "CAST(ARRAY[1] AS ARRAY<INT>)",
])
def test_cells_whose_rendering_depends_on_types_take_the_annotation(cell):
    assert plain_cast_type(exp.maybe_parse(cell, dialect=Dsms)) is None


def test_arrow_types_of_the_short_path_are_the_columns():
    assert plain_cast_type(exp.maybe_parse("CAST(1 AS DECIMAL(38, 18))", dialect=Dsms)) == pa.decimal128(38, 18)
