"""The JSON-lines file source: values, types, NULLs, bad lines, dead letters, batches."""

from __future__ import annotations

import base64
from datetime import date
from decimal import Decimal

import pyarrow as pa
import pytest

from dsms.runtime.connectors import SourceError, open_file_source

from connector_helpers import TS, dead_letters, dt, place, read_rows, request, write_lines

BID = pa.schema([("auction", pa.int64()), ("price", pa.int64()), ("ts", TS)])


def test_reads_rows_in_file_order_with_declared_types(tmp_path):
    path = tmp_path / "bid.jsonl"
    write_lines(path, [
        '{"auction": 1, "price": 10, "ts": "2024-01-01 10:00:00"}',
        '{"auction": 2, "price": 20, "ts": "2024-01-01 10:00:01", "bidder": "x", "extra": {"a": [1]}}',
    ])
    assert read_rows(path, BID) == [
        {"auction": 1, "price": 10, "ts": dt("2024-01-01 10:00:00")},
        {"auction": 2, "price": 20, "ts": dt("2024-01-01 10:00:01")},
    ]


def test_only_requested_columns_in_requested_order(tmp_path):
    path = tmp_path / "bid.jsonl"
    write_lines(path, ['{"auction": 1, "price": 10, "ts": "2024-01-01 10:00:00"}'])
    schema = pa.schema([("price", pa.int32()), ("auction", pa.float64())])
    assert read_rows(path, schema) == [{"price": 10, "auction": 1.0}]


def test_timestamp_forms_mixed_in_one_file(tmp_path):
    path = tmp_path / "t.jsonl"
    write_lines(path, [
        '{"ts": "2024-01-01 10:00:00"}',
        '{"ts": 1704103200000}',               # epoch ms = 2024-01-01 10:00:00 UTC
        '{"ts": "2024-01-01 10:00:00.5"}',
        '{"ts": "2024-01-01 10:00:00.12"}',
        '{"ts": "2024-01-01 10:00:00.123"}',
        '{"ts": "2024-01-01 10:00:00.123456"}',
        '{"ts": "2024-01-01T10:00:00.250Z"}',
        '{"ts":1704103200999}',
        '{"ts": -1}',
        '{"ts": "1704103200001"}',             # an epoch in a string counts too
    ])
    got = [r["ts"] for r in read_rows(path, pa.schema([("ts", TS)]))]
    assert got == [
        dt("2024-01-01 10:00:00"), dt("2024-01-01 10:00:00"), dt("2024-01-01 10:00:00.500000"),
        dt("2024-01-01 10:00:00.120000"), dt("2024-01-01 10:00:00.123000"), dt("2024-01-01 10:00:00.123456"),
        dt("2024-01-01 10:00:00.250000"), dt("2024-01-01 10:00:00.999000"), dt("1969-12-31 23:59:59.999000"),
        dt("2024-01-01 10:00:00.001000"),
    ]


@pytest.mark.parametrize("batch_rows", [1, 3, 1000])
def test_mixed_timestamps_do_not_depend_on_batching(tmp_path, batch_rows):
    path = tmp_path / "t.jsonl"
    lines, expected = [], []
    for i in range(20):
        ms = 1704067200000 + i * 1500
        lines.append(f'{{"id": {i}, "ts": {ms}}}' if i % 3 else f'{{"id": {i}, "ts": "{_fmt_ms(ms)}"}}')
        expected.append({"id": i, "ts": dt(_fmt_ms(ms))})
    write_lines(path, lines)
    schema = pa.schema([("id", pa.int64()), ("ts", TS)])
    assert read_rows(path, schema, batch_rows=batch_rows) == expected


def _fmt_ms(ms: int) -> str:
    from datetime import datetime, timedelta
    return (datetime(1970, 1, 1) + timedelta(milliseconds=ms)).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def test_all_types(tmp_path):
    schema = pa.schema([("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()),
                        ("f32", pa.float32()), ("f64", pa.float64()), ("d", pa.decimal128(10, 2)),
                        ("s", pa.string()), ("day", pa.date32()), ("ts", TS), ("bin", pa.binary())])
    path = tmp_path / "all.jsonl"
    blob = base64.b64encode(b"\x00\xffhi").decode()
    write_lines(path, [
        f'{{"b": true, "i8": -128, "i16": 300, "i32": 70000, "f32": 1.5, "f64": 2, "d": 12.5, '
        f'"s": "h\\u00e9 \\"q\\" \\ud83d\\ude00", "day": "2024-02-29", "ts": "2024-01-01 00:00:00", "bin": "{blob}"}}',
        '{"b": false, "d": "0.01", "s": ""}',
    ])
    assert read_rows(path, schema) == [
        {"b": True, "i8": -128, "i16": 300, "i32": 70000, "f32": 1.5, "f64": 2.0, "d": Decimal("12.50"),
         "s": 'hé "q" 😀', "day": date(2024, 2, 29), "ts": dt("2024-01-01 00:00:00"), "bin": b"\x00\xffhi"},
        {"b": False, "i8": None, "i16": None, "i32": None, "f32": None, "f64": None, "d": Decimal("0.01"),
         "s": "", "day": None, "ts": None, "bin": None},
    ]


def test_missing_keys_and_nulls_are_null(tmp_path):
    path = tmp_path / "n.jsonl"
    write_lines(path, ['{"auction": 1}', '{"auction": null, "price": null, "ts": null}', "{}"])
    assert read_rows(path, BID) == [
        {"auction": 1, "price": None, "ts": None},
        {"auction": None, "price": None, "ts": None},
        {"auction": None, "price": None, "ts": None},
    ]


def test_blank_lines_and_unterminated_last_line(tmp_path):
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'{"auction": 1}\n\n   \n{"auction": 2}\r\n{"auction": 3}')
    reader = open_file_source(request(path, BID))
    rows = []
    while (batch := reader.read()) is not None:
        rows += batch.to_pylist()
    assert [r["auction"] for r in rows] == [1, 2, 3]
    assert place(reader.position) == {"file": "b.jsonl", "offset": path.stat().st_size, "line": 5}


def test_byte_order_mark_is_ignored(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"auction": 1}\n{"auction": 2}\n')
    assert [r["auction"] for r in read_rows(path, BID)] == [1, 2]


@pytest.mark.parametrize("line, column, message", [
    ('{"auction": 2, "price": "abc"}', "price", 'cannot convert "abc" to BIGINT'),
    ('{"auction": 2, "price": 1.5}', "price", "cannot convert 1.5 to BIGINT"),
    ('{"auction": 2, "ts": "yesterday"}', "ts", 'cannot convert "yesterday" to TIMESTAMP(3)'),
    ('{"auction": 2, "ts": "2024-01-01 10:00:00.1234567"}', "ts", "TIMESTAMP(3)"),
    ('{"auction": 2, "ts": true}', "ts", "cannot convert true to TIMESTAMP(3)"),
    ('{"auction": 2, "price": 10', None, "malformed JSON"),
    ('{"auction": 2} {"auction": 3}', None, "malformed JSON: Extra data"),
    ('[1, 2]', None, "expected a JSON object, found an array"),
    ('{"auction": 2, "auction": 3}', "auction", "key 'auction' appears more than once"),
])
def test_bad_line_fails_with_file_line_and_column(tmp_path, line, column, message):
    path = tmp_path / "bad.jsonl"
    write_lines(path, ['{"auction": 1, "price": 1}', "", line, '{"auction": 4}'])
    with pytest.raises(SourceError) as info:
        read_rows(path, BID)
    err = info.value
    assert (err.source, err.file, err.line, err.column) == ("src", str(path), 3, column)
    assert message in err.reason
    text = str(err)
    assert str(path) in text and "line 3" in text and "source 'src'" in text
    if column:
        assert f"column '{column}'" in text


def test_tinyint_overflow_is_an_error(tmp_path):
    path = tmp_path / "o.jsonl"
    write_lines(path, ['{"v": 127}', '{"v": 128}'])
    with pytest.raises(SourceError, match=r"cannot convert 128 to TINYINT.*line 2, column 'v'"):
        read_rows(path, pa.schema([("v", pa.int8())]))


def test_not_null_violations(tmp_path):
    path = tmp_path / "nn.jsonl"
    write_lines(path, ['{"auction": 1, "ts": 0}', '{"auction": 2}'])
    with pytest.raises(SourceError) as info:
        read_rows(path, BID, not_null=("ts",))
    assert (info.value.line, info.value.column, info.value.reason) == (2, "ts", "missing value for a NOT NULL column")
    write_lines(path, ['{"auction": 1, "ts": 0}', '{"auction": 2, "ts": null}'])
    with pytest.raises(SourceError, match="null value for a NOT NULL column"):
        read_rows(path, BID, not_null=("ts",))


def test_rows_before_a_bad_line_are_returned_then_the_error_is_raised(tmp_path):
    path = tmp_path / "p.jsonl"
    write_lines(path, ['{"auction": 1}', '{"auction": 2}', '{"auction": "x"}', '{"auction": 4}'])
    reader = open_file_source(request(path, BID, batch_rows=10))
    assert [r["auction"] for r in reader.read().to_pylist()] == [1, 2]
    assert place(reader.position) == {"file": "p.jsonl", "offset": 30, "line": 2}
    with pytest.raises(SourceError, match="line 3"):
        reader.read()
    with pytest.raises(SourceError, match="line 3"):  # it stays failed
        reader.read()


def test_skip_dead_letters_bad_lines_and_keeps_the_rest(tmp_path):
    path = tmp_path / "s.jsonl"
    write_lines(path, [
        '{"auction": 1, "price": 10}',
        '{"auction": 2, "price": "ten"}',
        'not json',
        '{"auction": 4, "ts": "2024-01-01 00:00:00"}',
        '{"auction": 5, "ts": "never"}',
        '{"price": 6}',
        '{"auction": 7, "price": "ümlaut"}',
    ])
    reader = open_file_source(request(path, BID, not_null=("auction",), batch_rows=3, on_error="skip"))
    rows = []
    while (batch := reader.read()) is not None:
        rows += batch.to_pylist()
    assert rows == [{"auction": 1, "price": 10, "ts": None},
                    {"auction": 4, "price": None, "ts": dt("2024-01-01 00:00:00")}]
    assert reader.skipped == 5
    reader.close()
    letters = dead_letters(tmp_path / "s.jsonl.dead-letter.jsonl")
    assert letters == [
        {"source": "src", "file": str(path), "line": 2, "column": "price",
         "error": 'cannot convert "ten" to BIGINT', "raw": '{"auction": 2, "price": "ten"}'},
        {"source": "src", "file": str(path), "line": 3, "column": None,
         "error": "malformed JSON: Expecting value at character 1", "raw": "not json"},
        {"source": "src", "file": str(path), "line": 5, "column": "ts",
         "error": 'cannot convert "never" to TIMESTAMP(3)', "raw": '{"auction": 5, "ts": "never"}'},
        {"source": "src", "file": str(path), "line": 6, "column": "auction",
         "error": "missing value for a NOT NULL column", "raw": '{"price": 6}'},
        {"source": "src", "file": str(path), "line": 7, "column": "price",
         "error": 'cannot convert "ümlaut" to BIGINT', "raw": '{"auction": 7, "price": "ümlaut"}'},
    ]


def test_skip_writes_to_the_given_dead_letter_path_and_counts_invalid_utf8(tmp_path):
    path = tmp_path / "u.jsonl"
    path.write_bytes(b'{"auction": 1}\n{"auction": "\xff"}\n{"auction": 3}\n')
    target = tmp_path / "errors" / "bad.jsonl"
    reader = open_file_source(request(path, BID, on_error="skip", dead_letter=str(target)))
    assert [r["auction"] for r in reader.read().to_pylist()] == [1, 3]
    assert reader.skipped == 1
    [letter] = dead_letters(target)
    assert letter["line"] == 2 and "UTF-8" in letter["error"] and letter["raw"] == '{"auction": "\ufffd"}'
    assert not (tmp_path / "u.jsonl.dead-letter.jsonl").exists()


def test_no_dead_letter_file_without_bad_rows(tmp_path):
    path = tmp_path / "ok.jsonl"
    write_lines(path, ['{"auction": 1}'])
    assert len(read_rows(path, BID, on_error="skip")) == 1
    assert not (tmp_path / "ok.jsonl.dead-letter.jsonl").exists()


def test_batches_hold_at_most_batch_rows(tmp_path):
    path = tmp_path / "many.jsonl"
    write_lines(path, [f'{{"auction": {i}}}' for i in range(1000)])
    reader = open_file_source(request(path, BID, batch_rows=64))
    sizes = []
    while (batch := reader.read()) is not None:
        sizes.append(batch.num_rows)
    assert sizes == [64] * 15 + [40]


def test_zero_columns_still_count_rows(tmp_path):
    path = tmp_path / "z.jsonl"
    write_lines(path, ['{"a": 1}', '{"a": 2}', '{"a": 3}'])
    reader = open_file_source(request(path, pa.schema([])))
    assert reader.read().num_rows == 3


def test_long_lines_beyond_the_parser_block(tmp_path):
    path = tmp_path / "long.jsonl"
    text = "x" * (3 << 20)
    write_lines(path, [f'{{"s": "{text}", "n": 1}}', '{"s": "y", "n": 2}'])
    rows = read_rows(path, pa.schema([("n", pa.int64()), ("s", pa.string())]))
    assert [r["n"] for r in rows] == [1, 2] and rows[0]["s"] == text


def test_unknown_format_and_option_values(tmp_path):
    path = tmp_path / "x.jsonl"
    write_lines(path, ["{}"])
    with pytest.raises(SourceError, match="cannot read format 'avro'"):
        open_file_source(request(path, BID, fmt="avro"))
    with pytest.raises(SourceError, match="option 'on_error'"):
        open_file_source(request(path, BID, on_error="ignore"))
    with pytest.raises(SourceError, match="option 'watch'"):
        open_file_source(request(path, BID, watch="yes"))


def _noisy_file(path, n=300):
    """Lines of every kind, good and bad, with both timestamp forms; returns the good ids and bad lines."""
    lines, good, bad = [], [], []
    for i in range(n):
        ms = 1704067200000 + i
        kind = i % 11
        if kind == 3:
            lines.append(f'{{"auction": {i}, "price": "p{i}"}}')
        elif kind == 7:
            lines.append(f'{{"auction": {i}, "ts": "later"')  # malformed
        elif kind == 8:
            lines.append(f'{{"auction": {i}, "ts": "2024-{i % 50 + 13}-01 00:00:00"}}')  # no such month
        elif kind == 10:
            lines.append(f'{{"auction": {i}, "price": 1e3}}')  # not an integer
        elif kind == 9 and i % 2:
            lines.append(f'{{"price": {i}}}')  # auction is NOT NULL
        elif kind == 5:
            lines.append("")
            continue
        else:
            lines.append(f'{{"auction": {i}, "ts": {ms}}}' if i % 2 else f'{{"auction": {i}, "ts": "{_fmt_ms(ms)}"}}')
            good.append(i)
            continue
        bad.append(len(lines))
    write_lines(path, lines)
    return good, bad


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 100_000])
def test_skip_result_does_not_depend_on_batching(tmp_path, batch_rows):
    path = tmp_path / "noisy.jsonl"
    good, bad = _noisy_file(path)
    reader = open_file_source(request(path, BID, not_null=("auction",), batch_rows=batch_rows, on_error="skip"))
    rows = []
    while (batch := reader.read()) is not None:
        assert batch.num_rows <= batch_rows
        rows += batch.to_pylist()
    reader.close()
    assert [r["auction"] for r in rows] == good
    assert all(r["ts"] == dt(_fmt_ms(1704067200000 + r["auction"])) for r in rows)
    letters = dead_letters(tmp_path / "noisy.jsonl.dead-letter.jsonl")
    assert [d["line"] for d in letters] == bad and reader.skipped == len(bad)


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 100_000])
def test_fail_result_does_not_depend_on_batching(tmp_path, batch_rows):
    path = tmp_path / "noisy.jsonl"
    good, bad = _noisy_file(path)
    reader = open_file_source(request(path, BID, batch_rows=batch_rows))
    rows = []
    with pytest.raises(SourceError) as info:
        while (batch := reader.read()) is not None:
            rows += batch.to_pylist()
    assert [r["auction"] for r in rows] == [i for i in good if i < 3]
    assert (info.value.line, info.value.column) == (bad[0], "price")


def test_python_prefilter_only_flags_what_pyarrow_rejects():
    """The error path trusts JsonCodec.check's 'sure' verdicts without asking pyarrow: pin that here."""
    from dsms.runtime.connectors.json_source import JsonCodec
    from dsms.runtime.connectors.salvage import BadInput

    schema = pa.schema([("b", pa.bool_()), ("i8", pa.int8()), ("u16", pa.uint16()), ("i64", pa.int64()),
                        ("f", pa.float64()), ("d", pa.decimal128(10, 2)), ("s", pa.string()), ("day", pa.date32()),
                        ("ts", TS), ("bin", pa.binary())])
    values = ['1', '0', 'true', '"x"', '"1"', '1.5', '1.0', '1e3', '-1', '128', '-129', '65536',
              '9223372036854775808', '[1]', '{"a": 1}', 'null', '"2024-01-01"', 'NaN']
    sure = 0
    for field in schema:
        for value in values:
            for not_null in ((), (field.name,)):
                codec = JsonCodec(schema, not_null)
                line = f'{{"{field.name}": {value}}}'.encode()
                verdict = codec.check(line)
                if verdict is not None and verdict[2]:
                    sure += 1
                    with pytest.raises(BadInput):
                        JsonCodec(schema, not_null).decode(line + b"\n")
    assert sure > 80  # the check is not vacuous
