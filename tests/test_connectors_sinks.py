"""File sinks: the exact text of each format, changelogs, refusals, positions and truncation."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsms.runtime.changelog import OP
from dsms.runtime.connectors import SinkError, open_file_sink

from connector_helpers import TS, read_rows

ALL = pa.schema([("id", pa.int64()), ("name", pa.string()), ("price", pa.decimal128(10, 2)),
                 ("ratio", pa.float64()), ("f32", pa.float32()), ("ok", pa.bool_()), ("day", pa.date32()),
                 ("ts", TS), ("bin", pa.binary())])
ROWS = pa.table({
    "id": [1, 2, 3],
    "name": ['a "q" \\ é\n😀\t\x01', None, ""],
    "price": [Decimal("12.50"), None, Decimal("-0.05")],
    "ratio": [0.1, None, float("nan")],
    "f32": pa.array([0.1, None, float("inf")], pa.float32()),
    "ok": [True, None, False],
    "day": [date(2024, 2, 29), None, date(1969, 12, 31)],
    "ts": [datetime(2024, 1, 1, 10, 0, 0, 123456), None, datetime(1969, 12, 31, 23, 59, 59, 999900)],
    "bin": [b"\x00\xff", None, b""],
}, schema=ALL)
ROW1 = ('"id":1,"name":"a \\"q\\" \\\\ é\\n😀\\t\\u0001","price":12.50,"ratio":0.1,"f32":0.1,"ok":true,'
        '"day":"2024-02-29","ts":"2024-01-01 10:00:00.123","bin":"AP8="')
ROW2 = '"id":2,"name":null,"price":null,"ratio":null,"f32":null,"ok":null,"day":null,"ts":null,"bin":null'
ROW3 = ('"id":3,"name":"","price":-0.05,"ratio":null,"f32":null,"ok":false,"day":"1969-12-31",'
        '"ts":"1969-12-31 23:59:59.999","bin":""')

KV = pa.schema([("k", pa.string()), ("v", pa.int64())])


def _write(tmp_path, fmt, table, schema, updating=False, name="out"):
    path = tmp_path / "sub" / f"{name}.{fmt}"
    sink = open_file_sink({"format": fmt, "sink.mode": "overwrite"}, str(path), schema, updating)
    sink.write(table)
    sink.close()
    return path


def _changes(ops: list[int]) -> pa.Table:
    return pa.table({"k": [f"k{i}" for i in range(len(ops))], "v": list(range(len(ops))),
                     OP: pa.array(ops, pa.int8())})


def test_json_text_for_every_type(tmp_path):
    path = _write(tmp_path, "json", ROWS, ALL)
    assert path.read_text(encoding="utf-8") == f"{{{ROW1}}}\n{{{ROW2}}}\n{{{ROW3}}}\n"


def test_changelog_json_text(tmp_path):
    path = _write(tmp_path, "changelog-json", ROWS, ALL)
    assert path.read_text(encoding="utf-8") == (
        f'{{"op":"+I",{ROW1}}}\n{{"op":"+I",{ROW2}}}\n{{"op":"+I",{ROW3}}}\n')
    path = _write(tmp_path, "changelog-json", _changes([0, 1, 2, 3]), KV, updating=True)
    assert path.read_text() == (
        '{"op":"+I","k":"k0","v":0}\n{"op":"-U","k":"k1","v":1}\n'
        '{"op":"+U","k":"k2","v":2}\n{"op":"-D","k":"k3","v":3}\n')


def test_debezium_json_text(tmp_path):
    path = _write(tmp_path, "debezium-json", _changes([0, 1, 2, 3]), KV, updating=True)
    assert path.read_text() == (
        '{"before":null,"after":{"k":"k0","v":0},"op":"c"}\n'
        '{"before":{"k":"k1","v":1},"after":null,"op":"d"}\n'
        '{"before":null,"after":{"k":"k2","v":2},"op":"c"}\n'
        '{"before":{"k":"k3","v":3},"after":null,"op":"d"}\n')
    path = _write(tmp_path, "debezium-json", ROWS.slice(1, 1), ALL, name="append")
    assert path.read_text() == f'{{"before":null,"after":{{{ROW2}}},"op":"c"}}\n'


def test_csv_text(tmp_path):
    path = _write(tmp_path, "csv", ROWS, ALL)
    assert path.read_text(encoding="utf-8") == (
        "id,name,price,ratio,f32,ok,day,ts,bin\n"
        '1,"a ""q"" \\ é\n😀\t\x01",12.50,0.1,0.1,true,"2024-02-29","2024-01-01 10:00:00.123","AP8="\n'
        "2,,,,,,,,\n"
        '3,"",-0.05,nan,inf,false,"1969-12-31","1969-12-31 23:59:59.999",""\n')


def test_csv_round_trip_through_the_source(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", TS), ("day", pa.date32())])
    table = pa.table({"id": [1, 2], "name": ["x, y", ""], "ts": [datetime(2024, 5, 1, 1, 2, 3, 4000), None],
                      "day": [date(2024, 5, 1), None]}, schema=schema)
    path = _write(tmp_path, "csv", table, schema)
    assert read_rows(path, schema, fmt="csv") == table.to_pylist()


def test_keys_keep_schema_order_and_odd_names_are_escaped(tmp_path):
    schema = pa.schema([("z", pa.int64()), ('we"ird\'s', pa.int64()), ("a", pa.int64())])
    path = _write(tmp_path, "json", pa.table({"a": [3], 'we"ird\'s': [2], "z": [1]}), schema)
    assert path.read_text() == '{"z":1,"we\\"ird\'s":2,"a":3}\n'


def test_updating_result_refused_by_append_only_formats(tmp_path):
    for fmt in ("json", "csv", "parquet"):
        with pytest.raises(SinkError, match=f"format '{fmt}' needs an append-only result.*"
                                            "'changelog-json' or 'debezium-json'"):
            open_file_sink({"format": fmt}, str(tmp_path / "x"), KV, True)
    sink = open_file_sink({"format": "json"}, str(tmp_path / "y.jsonl"), KV, False)
    with pytest.raises(SinkError, match="can only write inserts"):
        sink.write(_changes([0, 3]))
    sink.write(_changes([0, 0]))  # an op column of inserts only is fine
    sink.close()
    assert (tmp_path / "y.jsonl").read_text() == '{"k":"k0","v":0}\n{"k":"k1","v":1}\n'


def test_unknown_format(tmp_path):
    with pytest.raises(SinkError, match="cannot write format 'xml'"):
        open_file_sink({"format": "xml"}, str(tmp_path / "x"), KV, False)


@pytest.mark.parametrize("fmt", ["json", "changelog-json", "debezium-json", "csv"])
def test_position_flush_and_truncate(tmp_path, fmt):
    path = tmp_path / f"t.{fmt}"
    path.write_text("old contents\n")
    with pytest.raises(SinkError, match="already exists and is not empty.*'sink.mode'"):
        open_file_sink({"format": fmt}, str(path), KV, False)  # never destroys what it did not write
    assert path.read_text() == "old contents\n"
    sink = open_file_sink({"format": fmt, "sink.mode": "overwrite"}, str(path), KV, False)  # starts afresh
    start = sink.position["bytes"]
    sink.write(pa.table({"k": ["a"], "v": [1]}))
    sink.flush()
    checkpoint = sink.position
    after_first = path.read_bytes()
    assert checkpoint == {"bytes": len(after_first)} and "old" not in after_first.decode()
    sink.write(pa.table({"k": ["b", "c"], "v": [2, 3]}))
    sink.flush()
    assert len(path.read_bytes()) > len(after_first)
    sink.truncate(checkpoint)
    sink.write(pa.table({"k": ["d"], "v": [4]}))
    sink.close()
    expected = open_file_sink({"format": fmt}, str(tmp_path / "e"), KV, False)
    expected.write(pa.table({"k": ["a", "d"], "v": [1, 4]}))
    expected.close()
    assert path.read_bytes() == (tmp_path / "e").read_bytes()
    # Reopening at a checkpoint keeps the file up to there (restore after a crash).
    again = open_file_sink({"format": fmt}, str(path), KV, False, position=checkpoint)
    again.close()
    assert path.read_bytes() == after_first
    again = open_file_sink({"format": fmt}, str(path), KV, False, position={"bytes": start})
    again.close()
    assert len(path.read_bytes()) == start


def test_csv_truncate_into_the_header_rewrites_it(tmp_path):
    path = tmp_path / "h.csv"
    sink = open_file_sink({"format": "csv"}, str(path), KV, False)
    sink.write(pa.table({"k": ["a"], "v": [1]}))
    sink.truncate({"bytes": 0})
    sink.close()
    assert path.read_text() == "k,v\n"


def test_parquet_row_groups_positions_and_truncate(tmp_path):
    path = tmp_path / "p" / "out.parquet"
    sink = open_file_sink({"format": "parquet"}, str(path), ALL, False)
    sink.write(ROWS.slice(0, 2))
    checkpoint = sink.position
    sink.write(ROWS.slice(2))
    assert sink.position == {"rows": 3}
    sink.truncate(checkpoint)
    sink.write(ROWS.slice(2))
    sink.write(ROWS.slice(0, 0))
    sink.close()
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == ALL
    got, want = table.to_pylist(), ROWS.to_pylist()
    assert got[2].pop("ratio") != want[2].pop("ratio")  # NaN, written as NaN: Parquet can hold it
    assert got == want
    again = open_file_sink({"format": "parquet"}, str(path), ALL, False, position={"rows": 2})
    again.write(ROWS.slice(0, 1))
    again.close()
    assert pq.read_table(path).column("id").to_pylist() == [1, 2, 1]


def test_parquet_integers_and_times_are_delta_encoded_and_read_back_by_duckdb(tmp_path):
    import duckdb

    schema = pa.schema([("i8", pa.int8()), ("u64", pa.uint64()), ("i64", pa.int64()), ("day", pa.date32()),
                        ("ts", TS), ("name", pa.string()), ("ratio", pa.float64())])
    table = pa.table({"i8": [1, None, -128], "u64": [2**64 - 1, 0, None], "i64": [-(2**63), 2**63 - 1, None],
                      "day": [date(1900, 1, 1), None, date(2024, 2, 29)],
                      "ts": [datetime(1969, 12, 31, 23, 59, 59, 999900), datetime(2024, 1, 1), None],
                      "name": ["a", None, "a"], "ratio": [0.5, None, 0.5]}, schema=schema)
    path = _write(tmp_path, "parquet", pa.concat_tables([table] * 3), schema)
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert all("DELTA_BINARY_PACKED" in encodings[c] for c in ("i8", "u64", "i64", "day", "ts"))
    assert all("RLE_DICTIONARY" in encodings[c] for c in ("name", "ratio"))
    got = duckdb.connect().sql(f"SELECT * FROM read_parquet('{path}')").fetchall()
    assert got == [tuple(r.values()) for r in table.to_pylist()] * 3


def test_parquet_resume_from_an_unfinished_file_is_refused(tmp_path):
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 half written")
    with pytest.raises(SinkError, match="not readable"):
        open_file_sink({"format": "parquet"}, str(path), KV, False, position={"rows": 5})


def test_many_rows_render_in_order(tmp_path):
    n = 200_000
    table = pa.table({"k": pa.array([f"k{i}" for i in range(n)]), "v": pa.array(range(n), pa.int64())})
    path = _write(tmp_path, "json", table, KV)
    lines = path.read_text().splitlines()
    assert len(lines) == n and lines[0] == '{"k":"k0","v":0}' and lines[-1] == f'{{"k":"k{n - 1}","v":{n - 1}}}'
    assert lines[12345] == '{"k":"k12345","v":12345}'


def test_a_standing_sink_writes_its_rows_to_the_file_as_they_come(tmp_path):
    # A sink that runs for months must not hold its rows back until it is dropped.
    import dsms

    out = tmp_path / "out.jsonl"
    engine = dsms.Engine()
    engine.execute(f"""CREATE STREAM s (k BIGINT) WITH (connector = 'memory');
        CREATE SINK big WITH (connector = 'file', path = '{out}', format = 'json') AS SELECT k FROM s WHERE k > 1""")
    engine.insert("s", [(1,), (2,), (3,)])
    engine.run_until_idle()
    assert out.read_text() == '{"k":2}\n{"k":3}\n'
    engine.close()
