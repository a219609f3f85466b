"""The Parquet file source: projection, type conversion, bad values, row positions."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsms.runtime.connectors import SourceError, open_file_source

from connector_helpers import TS, dead_letters, dt, place, read_all, read_rows, request

BID = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("ts", TS)])


def _write(path, table, row_group_size=None):
    pq.write_table(table, path, row_group_size=row_group_size)


def test_projection_order_and_casts(tmp_path):
    path = tmp_path / "b.parquet"
    _write(path, pa.table({
        "ts": pa.array([0, 1500], pa.timestamp("ms")),
        "bidder": ["a", "b"],
        "price": pa.array([10, 20], pa.int32()),
        "auction": pa.array([1, 2], pa.int16()),
    }))
    assert read_rows(path, BID, fmt="parquet") == [
        {"auction": 1, "price": 10, "ts": dt("1970-01-01 00:00:00")},
        {"auction": 2, "price": 20, "ts": dt("1970-01-01 00:00:01.500000")},
    ]


@pytest.mark.parametrize("column, expected", [
    (pa.array([1_700_000_000_123_456_789], pa.timestamp("ns")), "2023-11-14 22:13:20.123456"),
    (pa.array([1_700_000_000], pa.timestamp("s", "UTC")), "2023-11-14 22:13:20"),
    (pa.array([1_700_000_000_000], pa.timestamp("ms", "Asia/Tokyo")), "2023-11-14 22:13:20"),
    (pa.array([1_700_000_000_250], pa.int64()), "2023-11-14 22:13:20.250"),
    (pa.array(["2023-11-14 22:13:20.5"]), "2023-11-14 22:13:20.500"),
])
def test_timestamps_of_any_unit_and_zone_become_utc_wall_clock_microseconds(tmp_path, column, expected):
    path = tmp_path / "t.parquet"
    _write(path, pa.table({"ts": column}))
    [row] = read_rows(path, pa.schema([("ts", TS)]), fmt="parquet")
    assert row["ts"] == datetime.fromisoformat(expected)


def test_missing_column(tmp_path):
    path = tmp_path / "m.parquet"
    _write(path, pa.table({"auction": [1], "ts": pa.array([0], TS)}))
    with pytest.raises(SourceError) as info:
        read_rows(path, BID, fmt="parquet")
    assert (info.value.file, info.value.column) == (str(path), "price")
    assert "column 'price' is not in the Parquet file" in str(info.value)


def test_bad_value_names_row_and_column(tmp_path):
    path = tmp_path / "v.parquet"
    _write(path, pa.table({"auction": ["1", "2", "x", "4"], "price": [1, 2, 3, 4], "ts": pa.array([0] * 4, TS)}))
    reader = open_file_source(request(path, BID, fmt="parquet"))
    assert [r["auction"] for r in reader.read().to_pylist()] == [1, 2]
    with pytest.raises(SourceError) as info:
        reader.read()
    assert (info.value.line, info.value.column) == (3, "auction")
    assert "cannot convert 'x' to BIGINT" in str(info.value) and str(path) in str(info.value)


def test_not_null_and_skip(tmp_path):
    path = tmp_path / "n.parquet"
    _write(path, pa.table({"auction": [1, None, 3, 300], "price": [1, 2, None, 4], "ts": pa.array([0] * 4, TS)}))
    schema = pa.schema([("auction", pa.int8()), ("price", pa.int64())])
    with pytest.raises(SourceError, match=r"null value for a NOT NULL column .*line 2, column 'auction'"):
        read_rows(path, schema, fmt="parquet", not_null=("auction",))
    reader = open_file_source(request(path, schema, fmt="parquet", not_null=("auction",), on_error="skip"))
    assert read_all(reader) == [{"auction": 1, "price": 1}, {"auction": 3, "price": None}]
    assert reader.skipped == 2
    letters = dead_letters(tmp_path / "n.parquet.dead-letter.jsonl")
    assert [(d["line"], d["column"], d["error"], d["raw"]) for d in letters] == [
        (2, "auction", "null value for a NOT NULL column", '{"auction": null, "price": 2}'),
        (4, "auction", "cannot convert 300 to TINYINT", '{"auction": 300, "price": 4}'),
    ]


def test_batches_and_row_positions_across_row_groups(tmp_path):
    path = tmp_path / "g.parquet"
    _write(path, pa.table({"auction": list(range(100)), "price": list(range(100)),
                           "ts": pa.array(range(100), pa.timestamp("ms"))}), row_group_size=30)
    reader = open_file_source(request(path, BID, fmt="parquet", batch_rows=16))
    first = []
    while len(first) < 40:
        batch = reader.read()
        assert 0 < batch.num_rows <= 16
        first += batch.to_pylist()
    position = reader.position
    assert place(position) == {"file": "g.parquet", "row": len(first)}
    for cut in (position, {"file": "g.parquet", "row": 45}, {"file": "g.parquet", "row": 100}):
        again = open_file_source(request(path, BID, fmt="parquet", batch_rows=16))
        again.seek(cut)
        rest = read_all(again)
        assert [r["auction"] for r in rest] == list(range(cut["row"], 100))
    with pytest.raises(SourceError, match="fewer than the saved position"):
        again = open_file_source(request(path, BID, fmt="parquet"))
        again.seek({"file": "g.parquet", "row": 101})
        again.read()
