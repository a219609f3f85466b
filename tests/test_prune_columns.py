"""Column pruning (planner/rules/prune_columns.py): every route reads only the columns a query uses, and
pruning never changes a result."""

import json

import pytest

import dsms
from dsms.planner import declare, plan_query

DDL = """
CREATE STREAM a (id BIGINT, x BIGINT, pad VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/a.jsonl', format = 'json');
CREATE STREAM b (id BIGINT, y BIGINT, note VARCHAR, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/b.jsonl', format = 'json');
"""


def _reads(sql: str, root: str = "/data") -> tuple[dict, dict]:
    """The columns each source is read with: by the runtime's plan, and by the DuckDB statement."""
    planned = plan_query(sql, declare(DDL.format(root=root)))
    runtime = {op.source.name: set(op.columns) for op in planned.physical.sources}
    duckdb = {s.source.name: set(s.columns) for s in planned.lowered("duckdb").scans}
    return runtime, duckdb


@pytest.mark.parametrize("sql, want", [
    # The projection and the filter's columns, and the event time (the watermark needs it).
    ("SELECT id FROM a WHERE x > 1", {"a": {"id", "x", "ts"}}),
    # A join reads its keys, its time bounds and what is selected; a filter's column below it is read too.
    ("""SELECT a.x, b.y FROM a JOIN (SELECT * FROM b WHERE note <> 'n') b ON a.id = b.id
        AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '5' SECOND""",
     {"a": {"id", "x", "ts"}, "b": {"id", "y", "note", "ts"}}),
    # A union reads the columns at the positions used above it.
    ("SELECT id FROM (SELECT id, x AS v, ts FROM a UNION ALL SELECT id, y AS v, ts FROM b)",
     {"a": {"id", "ts"}, "b": {"id", "ts"}}),
])
def test_every_route_reads_only_the_columns_used(sql, want):
    runtime, duckdb = _reads(sql)
    assert runtime == want and duckdb == want


def _write(root, name, rows):
    (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_pruned_unions_and_joins_give_the_rows_on_every_route(tmp_path):
    _write(tmp_path, "a", [{"id": i, "x": 10 * i, "pad": "p", "ts": f"2024-01-01 00:00:0{i}"} for i in range(1, 5)])
    _write(tmp_path, "b", [{"id": i, "y": 100 * i, "note": "n" if i == 2 else "m", "ts": f"2024-01-01 00:00:0{i + 1}"}
                           for i in range(1, 5)])
    union = "SELECT id, v FROM (SELECT id, x AS v, pad, ts FROM a UNION ALL SELECT id, y AS v, note, ts FROM b)"
    join = """SELECT a.x, b.y FROM a JOIN (SELECT * FROM b WHERE note <> 'n') b ON a.id = b.id
        AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '5' SECOND"""
    want = {  # by hand from the rows above
        union: sorted([(i, 10 * i) for i in range(1, 5)] + [(i, 100 * i) for i in range(1, 5)]),
        join: [(10, 100), (30, 300), (40, 400)],
    }
    for route in ("runtime", "duckdb"):
        engine = dsms.Engine()
        engine.execute(DDL.format(root=tmp_path))
        engine.execute(f"SET 'engine' = '{route}'")
        for sql, rows in want.items():
            handle = engine.query(sql)
            engine.run_until_idle()
            got = sorted(tuple(r.values()) for r in handle.snapshot().to_pylist())
            assert got == rows, (route, sql)
