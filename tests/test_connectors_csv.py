"""The CSV file source: header, delimiter, values, bad records, dead letters."""

from __future__ import annotations

import base64
from datetime import date
from decimal import Decimal

import pyarrow as pa
import pytest

from dsms.runtime.connectors import SourceError, open_file_source

from connector_helpers import TS, dead_letters, dt, place, read_rows, request, write_lines

BID = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("ts", TS)])


def test_columns_found_by_header_name(tmp_path):
    path = tmp_path / "bid.csv"
    write_lines(path, [
        "ts, auction ,bidder,price",
        "2024-01-01 10:00:00,1,alice,10",
        "1704103201000,2,bob,20",
        "2024-01-01T10:00:02.5Z,3,carol,30",
    ])
    assert read_rows(path, BID, fmt="csv") == [
        {"auction": 1, "price": 10, "ts": dt("2024-01-01 10:00:00")},
        {"auction": 2, "price": 20, "ts": dt("2024-01-01 10:00:01")},
        {"auction": 3, "price": 30, "ts": dt("2024-01-01 10:00:02.500000")},
    ]


def test_values_quoting_and_empty_fields(tmp_path):
    schema = pa.schema([("s", pa.string()), ("i", pa.int32()), ("f", pa.float64()), ("b", pa.bool_()),
                        ("d", pa.decimal128(6, 3)), ("day", pa.date32()), ("ts", TS), ("bin", pa.binary())])
    path = tmp_path / "v.csv"
    blob = base64.b64encode(b"\x01\x02").decode()
    write_lines(path, [
        "s,i,f,b,d,day,ts,bin",
        f'"a, ""quoted"" one",-7,1.25,true,1.5,2024-02-29,2024-01-01 00:00:00.001,{blob}',
        ",,,,,,,",
        '"",0,nan,0,-0.001,1970-01-01,0,',
    ])
    rows = read_rows(path, schema, fmt="csv")
    assert rows[:2] == [
        {"s": 'a, "quoted" one', "i": -7, "f": 1.25, "b": True, "d": Decimal("1.500"), "day": date(2024, 2, 29),
         "ts": dt("2024-01-01 00:00:00.001000"), "bin": b"\x01\x02"},
        {"s": "", "i": None, "f": None, "b": None, "d": None, "day": None, "ts": None, "bin": None},
    ]
    last = rows[2]
    assert last["f"] != last["f"]  # NaN
    assert {k: v for k, v in last.items() if k != "f"} == {
        "s": "", "i": 0, "b": False, "d": Decimal("-0.001"), "day": date(1970, 1, 1), "ts": dt("1970-01-01"),
        "bin": None}


def test_delimiter_option(tmp_path):
    path = tmp_path / "t.tsv"
    write_lines(path, ["auction\tprice", "1\t2", "3\t4"])
    schema = pa.schema([("price", pa.int64()), ("auction", pa.int64())])
    assert read_rows(path, schema, fmt="csv", **{"csv.delimiter": "\\t"}) == [
        {"price": 2, "auction": 1}, {"price": 4, "auction": 3}]
    write_lines(path, ["auction;price", "1;2"])
    assert read_rows(path, schema, fmt="csv", **{"csv.delimiter": ";"}) == [{"price": 2, "auction": 1}]


def test_missing_header_column(tmp_path):
    path = tmp_path / "h.csv"
    write_lines(path, ["auction,ts", "1,0"])
    with pytest.raises(SourceError) as info:
        read_rows(path, BID, fmt="csv")
    assert (info.value.file, info.value.line, info.value.column) == (str(path), 1, "price")
    assert "column 'price' is not in the CSV header (which has: auction, ts)" in str(info.value)


def test_empty_file_has_no_rows(tmp_path):
    path = tmp_path / "e.csv"
    path.write_text("")
    assert read_rows(path, BID, fmt="csv") == []
    write_lines(path, ["auction,price,ts"])
    assert read_rows(path, BID, fmt="csv") == []


@pytest.mark.parametrize("line, column, message", [
    ("2,3", None, "expected 3 fields (as in the header), found 2"),
    ("2,3,0,9", None, "expected 3 fields (as in the header), found 4"),
    ("abc,3,0", "auction", "cannot convert 'abc' to BIGINT"),
    ("2,3.5,0", "price", "cannot convert '3.5' to BIGINT"),
    ("2,3,2024-13-01 00:00:00", "ts", "cannot convert '2024-13-01 00:00:00' to TIMESTAMP(3)"),
    ('2,"3', None, "malformed CSV"),
])
def test_bad_record_fails_with_file_line_and_column(tmp_path, line, column, message):
    path = tmp_path / "bad.csv"
    write_lines(path, ["auction,price,ts", "1,1,0", line, "4,4,0"])
    with pytest.raises(SourceError) as info:
        read_rows(path, BID, fmt="csv")
    err = info.value
    assert (err.file, err.line, err.column) == (str(path), 3, column)
    assert message in err.reason
    assert "line 3" in str(err) and str(path) in str(err)


def test_not_null_empty_field(tmp_path):
    path = tmp_path / "nn.csv"
    write_lines(path, ["auction,price,ts", "1,1,0", "2,,0"])
    with pytest.raises(SourceError) as info:
        read_rows(path, BID, fmt="csv", not_null=("price",))
    assert (info.value.line, info.value.column, info.value.reason) == (3, "price", "empty value for a NOT NULL column")


def test_skip_bad_records(tmp_path):
    path = tmp_path / "s.csv"
    write_lines(path, ["auction,price,ts", "1,10,0", "2,x,0", "3", "4,40,", "5,50,soon"])
    reader = open_file_source(request(path, BID, fmt="csv", on_error="skip", not_null=("ts",)))
    rows = reader.read().to_pylist()
    assert rows == [{"auction": 1, "price": 10, "ts": dt("1970-01-01")}]
    assert reader.read() is None and reader.skipped == 4
    reader.close()
    letters = dead_letters(tmp_path / "s.csv.dead-letter.jsonl")
    assert [(d["line"], d["column"], d["error"], d["raw"]) for d in letters] == [
        (3, "price", "cannot convert 'x' to BIGINT", "2,x,0"),
        (4, None, "expected 3 fields (as in the header), found 1", "3"),
        (5, "ts", "empty value for a NOT NULL column", "4,40,"),
        (6, "ts", "cannot convert 'soon' to TIMESTAMP(3)", "5,50,soon"),
    ]
    assert {d["source"] for d in letters} == {"src"} and {d["file"] for d in letters} == {str(path)}


def test_crlf_and_blank_lines(tmp_path):
    path = tmp_path / "w.csv"
    path.write_bytes(b"auction,price,ts\r\n1,1,0\r\n\r\n2,2,0\r\n\n3,3,0")
    reader = open_file_source(request(path, BID, fmt="csv", batch_rows=2))
    rows = []
    while (batch := reader.read()) is not None:
        assert batch.num_rows <= 2
        rows += batch.to_pylist()
    assert [r["auction"] for r in rows] == [1, 2, 3]
    assert place(reader.position) == {"file": "w.csv", "offset": path.stat().st_size, "line": 6}


@pytest.mark.parametrize("batch_rows", [1, 5, 64, 100_000])
def test_skip_result_does_not_depend_on_batching(tmp_path, batch_rows):
    path = tmp_path / "noisy.csv"
    lines, good, bad = ["auction,price,ts"], [], []
    for i in range(300):
        kind = i % 13
        if kind == 2:
            lines.append(f"{i},{i}")                      # a field short
        elif kind == 4:
            lines.append(f"{i},many,0")                   # the same bad value on many lines
        elif kind == 6:
            lines.append(f"{i},{i},{i}:00")               # a different bad timestamp each time
        elif kind == 8:
            lines.append(f",{i},0")                       # NOT NULL auction
        elif kind == 10:
            lines.append("")
            continue
        else:
            lines.append(f"{i},{i},{1000 * i}")
            good.append(i)
            continue
        bad.append(len(lines))
    write_lines(path, lines)
    reader = open_file_source(request(path, BID, fmt="csv", not_null=("auction",), batch_rows=batch_rows,
                                      on_error="skip"))
    rows = []
    while (batch := reader.read()) is not None:
        assert batch.num_rows <= batch_rows
        rows += batch.to_pylist()
    reader.close()
    assert rows == [{"auction": i, "price": i, "ts": dt("1970-01-01") + (dt("1970-01-01 00:00:01") - dt("1970-01-01")) * i}
                    for i in good]
    letters = dead_letters(tmp_path / "noisy.csv.dead-letter.jsonl")
    assert [d["line"] for d in letters] == bad and reader.skipped == len(bad)
    assert {d["error"] for d in letters} >= {"expected 3 fields (as in the header), found 2",
                                             "cannot convert 'many' to BIGINT", "cannot convert '6:00' to TIMESTAMP(3)",
                                             "empty value for a NOT NULL column"}
