"""Directory sinks: a sink whose path ends in '/' holds its rows in part files; Spark writes them from its
executors. The rows are the file sink's (the same encoders), read back through a file source and checked
against the oracle; parts are committed whole and cut back to a checkpoint's position."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

import dsms
from dsms.runtime.connectors.dir_sink import DirectorySink, PartSpec, write_part

from oracle import duck, events, rows, tumble_on_time
from route_shapes import tumble

DDL = """CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{path}', format = 'json');"""
COUNTS = "SELECT window_start, k, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) " \
         "GROUP BY window_start, window_end, k"
BACK = {"json": "CREATE STREAM back (window_start TIMESTAMP(3), k VARCHAR, n BIGINT) WITH (connector = 'file', "
                "path = '{path}', format = '{fmt}')",
        "csv": "CREATE STREAM back (window_start TIMESTAMP(3), k VARCHAR, n BIGINT) WITH (connector = 'file', "
               "path = '{path}', format = '{fmt}')"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("dir-sink")
    table = events(2000, seed=41, keys=4, span_s=400, disorder_s=3)
    os.makedirs(root / "in")
    for i in range(4):
        with open(root / "in" / f"p{i}.jsonl", "w") as f:
            for r in table.slice(i * 500, 500).to_pylist():
                f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    counted = tumble_on_time(table, 2, 10)  # late events judged per window
    return root, rows(duck(f"SELECT {tumble(10)}, k, COUNT(*) FROM s GROUP BY ALL", s=counted))


def read_back(path, fmt: str) -> pa.Table:
    engine = dsms.Engine()
    engine.execute(BACK[fmt].format(path=path, fmt=fmt))
    handle = engine.query("SELECT window_start, k, n FROM back")
    engine.run_until_idle()
    return handle.snapshot()


@pytest.mark.parametrize("route", ["runtime", "duckdb", "spark"])
def test_every_route_writes_a_directory_sink_that_reads_back_as_the_oracle(data, route, tmp_path, spark_session):
    root, want = data
    settings = {"spark.sql.adaptive.coalescePartitions.enabled": "false"}  # several tasks, so several parts
    engine = dsms.Engine()
    engine.execute(DDL.format(path=root / "in") + f"SET 'engine' = '{route}';")
    for key, value in settings.items():
        engine.execute(f"SET '{key}' = '{value}'")
    stale = tmp_path / "json" / "part-000007-00001.jsonl"  # a part of an earlier run: a sink starts afresh
    os.makedirs(stale.parent)
    stale.write_text('{"window_start": "2000-01-01 00:00:00.000", "k": "old", "n": 1}\n')
    for fmt in ("json", "csv"):
        engine.execute(f"CREATE SINK out_{fmt} WITH (connector = 'file', path = '{tmp_path / fmt}/', "
                       f"format = '{fmt}') AS {COUNTS}")
    try:
        engine.run_until_idle()
    finally:
        engine.close()
        if route == "spark":
            spark_session.conf.unset("spark.sql.adaptive.coalescePartitions.enabled")
    for fmt in ("json", "csv"):
        names = sorted(os.listdir(tmp_path / fmt))
        assert not [n for n in names if n.startswith(".")]  # every part committed
        if route == "spark":
            assert len(names) > 1 and all(n.startswith("part-000000-") for n in names), names
        else:
            assert names == [f"part-00000.{'jsonl' if fmt == 'json' else 'csv'}"]
        got = [(w, k or None, n) for w, k, n in rows(read_back(tmp_path / fmt, fmt))]  # (CSV: NULL reads as '')
        assert sorted(got, key=str) == sorted(want, key=str)


def test_parts_are_committed_whole_and_cut_back_to_a_position(tmp_path):
    schema = pa.schema([("n", pa.int64())])
    sink = DirectorySink(str(tmp_path / "out"), schema, "json", ",", False)
    spec: PartSpec = sink.spec
    batch = [pa.record_batch({"n": [1, 2]})]
    for task in (0, 1):
        write_part(spec, 0, task, 0, batch)
    write_part(spec, 0, 1, 1, batch)  # a second attempt of task 1: only one of them is committed
    sink.commit(0, [(".part-000000-00000-0.jsonl", spec.part(0, 0)), (".part-000000-00001-1.jsonl", spec.part(0, 1))])
    assert sorted(os.listdir(tmp_path / "out")) == ["part-000000-00000.jsonl", "part-000000-00001.jsonl"]
    position = sink.position
    write_part(spec, 1, 0, 0, batch)
    sink.commit(1, [(".part-000001-00000-0.jsonl", spec.part(1, 0))])
    sink.write(pa.table({"n": [9]}))  # the driver's own part
    restored = DirectorySink(str(tmp_path / "out"), schema, "json", ",", False, position=position)
    assert sorted(os.listdir(tmp_path / "out")) == ["part-000000-00000.jsonl", "part-000000-00001.jsonl"]
    assert restored.batch == 0
