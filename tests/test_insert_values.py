"""INSERT ... VALUES: each value cast to its column, as SQL does, fast for long VALUES lists.

Literal cells take a short path (``planner/literal_cells.py``) that skips
sqlglot's type annotation, and a VALUES list made only of literals is cast
a column at a time in one statement; the results are checked against
hand-computed rows and DuckDB's casts of the same literals, and the short
path's types against the annotation's.
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
from dsms.planner.literal_cells import literal_columns, plain_cast_type
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


# (column type, literals of one kind): each column is cast as a whole from the literals' texts.
LITERAL_COLUMNS = [
    ("DECIMAL(10, 2)", ["1.005", "-2.675", "3", "0.1", "12345678.994", "NULL"]),
    ("DECIMAL(38, 18)", ["12345678901234567890.123456789012345678", "-0.000000000000000001", "7"]),
    ("DOUBLE", ["0.1", "-1.7976931348623157", "123456.789012345678", "5", "NULL"]),
    ("DOUBLE", ["1e3", "-2.5E-7", "1.7976931348623157e308"]),
    ("FLOAT", ["0.1", "3.4", "-7"]),
    ("BIGINT", ["9223372036854775807", "-9223372036854775808", "0", "NULL"]),
    ("SMALLINT", ["32767", "-32768"]),
    ("INT", ["'42'", "' 7 '", "'-3'"]),
    ("BOOLEAN", ["TRUE", "FALSE", "NULL"]),
    ("BOOLEAN", ["'true'", "'f'", "'1'"]),
    ("VARCHAR", ["'it''s'", "''", "'ünï'", "NULL"]),
    ("DATE", ["DATE '2024-02-29'", "DATE '0001-01-01'", "NULL"]),
    ("DATE", ["'2024-03-01'"]),
    ("TIMESTAMP(3)", ["TIMESTAMP '2024-01-01 10:00:00.1239'", "TIMESTAMP '1999-12-31 23:59:59'"]),
    ("TIMESTAMP(3)", ["DATE '2024-01-02'", "DATE '2024-01-03'"]),
    ("TIMESTAMP(3)", ["'2024-01-01 10:00:00.5'"]),
    ("DOUBLE", ["NULL", "NULL"]),
]


@pytest.mark.parametrize("sql_type, literals", LITERAL_COLUMNS, ids=[f"{t}-{i}" for i, (t, _) in
                                                                    enumerate(LITERAL_COLUMNS)])
def test_a_list_of_literals_lands_as_duckdb_casts_each_literal(sql_type, literals):
    engine = dsms.Engine()
    engine.execute(f"CREATE STREAM c (x {sql_type}) WITH (connector = 'memory')")
    q = engine.query("SELECT x FROM c")
    values = "VALUES " + ", ".join(f"({v})" for v in literals)
    tree = exp.maybe_parse(values, dialect=Dsms)
    assert literal_columns(tree, [exp.DataType.build(sql_type, dialect=Dsms)]) is not None  # the whole-list path
    engine.execute("INSERT INTO c " + values)
    engine.run_until_idle()
    duck_type = sql_type.replace("TIMESTAMP(3)", "TIMESTAMP")  # dsms keeps a timestamp's microseconds
    want = [duckdb.sql(f"SELECT CAST({v} AS {duck_type}) AS x").fetchall()[0][0] for v in literals]
    got = q.snapshot().column("x").to_pylist()
    if sql_type == "FLOAT":
        got, want = [round(v, 5) for v in got], [round(v, 5) for v in want]
    assert got == want


def test_a_literal_that_does_not_fit_its_column_is_a_positioned_error():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM c (x SMALLINT, y VARCHAR) WITH (connector = 'memory')")
    with pytest.raises(dsms.SqlError, match="cannot insert these rows.*(out of range|Conversion)") as e:
        engine.execute("INSERT INTO c VALUES (1, 'a'),\n  (40000, 'b')")
    assert e.value.diagnostic.span is not None
    with pytest.raises(dsms.SqlError, match="cannot insert these rows"):
        engine.execute("INSERT INTO c VALUES ('x1', 'a')")
