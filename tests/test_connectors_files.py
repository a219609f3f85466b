"""File sources over directories and globs, watch mode, and position/seek hand-offs."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsms.runtime.connectors import SourceError, open_file_source

from connector_helpers import dead_letters, place, read_all, read_rows, request, write_lines

ID = pa.schema([("id", pa.int64())])


def _ids(rows):
    return [r["id"] for r in rows]


def _json(path, ids):
    write_lines(path, [json.dumps({"id": i}) for i in ids])


def _append(path, text: str):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


# -- which files ---------------------------------------------------------------------------

def test_directory_files_in_name_order_hidden_and_dead_letters_ignored(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    _json(d / "b.jsonl", [3, 4])
    _json(d / "a.jsonl", [1, 2])
    _json(d / ".c.jsonl", [99])
    _json(d / "notes.txt", [98])  # other extensions are ignored when some files have the format's
    _json(d / "src.dead-letter.jsonl", [97])
    (d / "sub").mkdir()
    _json(d / "sub" / "x.jsonl", [96])
    assert _ids(read_rows(d, ID)) == [1, 2, 3, 4]


def test_directory_without_matching_extensions_reads_all_files(tmp_path):
    _json(tmp_path / "part-0", [1])
    _json(tmp_path / "part-1", [2])
    assert _ids(read_rows(tmp_path, ID)) == [1, 2]


def test_glob_pattern(tmp_path):
    for day, ids in (("2024-01-02", [3]), ("2024-01-01", [1, 2]), ("other", [9])):
        (tmp_path / day).mkdir()
        _json(tmp_path / day / "bids.jsonl", ids)
    assert _ids(read_rows(tmp_path / "2024-*" / "*.jsonl", ID)) == [1, 2, 3]


def test_missing_paths(tmp_path):
    with pytest.raises(SourceError, match=r"file or directory not found \(source 'src', file .*nope.jsonl\)"):
        open_file_source(request(tmp_path / "nope.jsonl", ID))
    with pytest.raises(SourceError, match="no files match the pattern"):
        open_file_source(request(tmp_path / "*.jsonl", ID))
    with pytest.raises(SourceError, match="directory not found"):
        open_file_source(request(tmp_path / "nodir" / "*.jsonl", ID))
    assert read_rows(tmp_path, ID) == []  # an empty directory is an empty input


def test_default_dead_letter_beside_a_directory(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    _json(d / "a.jsonl", [1])
    write_lines(d / "b.jsonl", ['{"id": "x"}'])
    assert _ids(read_rows(d, ID, on_error="skip", name="bids")) == [1]
    [letter] = dead_letters(tmp_path / "bids.dead-letter.jsonl")
    assert (letter["file"], letter["line"], letter["column"]) == (str(d / "b.jsonl"), 1, "id")


# -- watch mode ----------------------------------------------------------------------------

def test_watch_file_picks_up_appended_lines_and_waits_for_partial_ones(tmp_path):
    path = tmp_path / "live.jsonl"
    _json(path, [1, 2])
    reader = open_file_source(request(path, ID, watch="true"))
    assert _ids(reader.read().to_pylist()) == [1, 2]
    empty = reader.read()
    assert empty.num_rows == 0 and empty.schema == ID
    _append(path, '{"id": 3}\n{"id": ')
    assert _ids(reader.read().to_pylist()) == [3]
    assert reader.read().num_rows == 0  # the partial line waits
    assert place(reader.position) == {"file": "live.jsonl", "offset": 30, "line": 3}
    _append(path, '4}\n')
    assert _ids(reader.read().to_pylist()) == [4]
    reader.close()


def test_watch_directory_picks_up_new_files_in_name_order(tmp_path):
    _json(tmp_path / "001.jsonl", [1])
    reader = open_file_source(request(tmp_path, ID, watch="true"))
    assert _ids(reader.read().to_pylist()) == [1]
    assert reader.read().num_rows == 0
    _append(tmp_path / "001.jsonl", '{"id": 2}\n{"id": 3}')  # unterminated last line
    assert _ids(reader.read().to_pylist()) == [2]
    _json(tmp_path / "002.jsonl", [4, 5])
    # A newer file means the writer moved on: 001's last line is complete after all.
    rows = []
    while (batch := reader.read()).num_rows:
        rows += batch.to_pylist()
    assert _ids(rows) == [3, 4, 5]
    _json(tmp_path / "000.jsonl", [0])  # sorts before the current file: never read
    _json(tmp_path / "003.jsonl", [6])
    _append(tmp_path / "001.jsonl", '\n{"id": 7}\n')  # appends to an older file are not read either
    assert _ids(reader.read().to_pylist()) == [6]
    assert reader.read().num_rows == 0
    assert place(reader.position) == {"file": "003.jsonl", "offset": 10, "line": 1}


def test_watch_an_empty_directory_and_a_csv_header_written_late(tmp_path):
    reader = open_file_source(request(tmp_path, ID, fmt="csv", watch="true"))
    assert reader.read().num_rows == 0
    (tmp_path / "a.csv").write_text("i")
    assert reader.read().num_rows == 0
    _append(tmp_path / "a.csv", "d\n7\n")
    assert _ids(reader.read().to_pylist()) == [7]


def test_watch_parquet_directory(tmp_path):
    pq.write_table(pa.table({"id": [1, 2]}), tmp_path / "a.parquet")
    reader = open_file_source(request(tmp_path, ID, fmt="parquet", watch="true"))
    assert _ids(reader.read().to_pylist()) == [1, 2]
    assert reader.read().num_rows == 0
    (tmp_path / "b.parquet").write_bytes(b"PAR1 not yet complete")  # still being written
    assert reader.read().num_rows == 0
    pq.write_table(pa.table({"id": [3]}), tmp_path / "b.parquet")
    assert _ids(reader.read().to_pylist()) == [3]
    assert place(reader.position) == {"file": "b.parquet", "row": 1}


def test_watch_file_that_shrinks_is_an_error(tmp_path):
    path = tmp_path / "s.jsonl"
    _json(path, [1, 2])
    reader = open_file_source(request(path, ID, watch="true"))
    reader.read()
    _json(path, [1])
    with pytest.raises(SourceError, match="shrank"):
        reader.read()


# -- position and seek ---------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "csv"])
@pytest.mark.parametrize("stop_after", [0, 1, 2, 3, 5])
def test_seek_continues_exactly_across_files(tmp_path, fmt, stop_after):
    d = tmp_path / "in"
    d.mkdir()
    ids = iter(range(100))
    for name, n in (("a", 7), ("b", 0), ("c", 5), ("d", 4)):
        path = d / f"{name}.{fmt}"
        chunk = [next(ids) for _ in range(n)]
        if fmt == "json":
            _json(path, chunk)
        else:
            write_lines(path, ["id"] + [str(i) for i in chunk])
    everything = _ids(read_rows(d, ID, fmt=fmt, batch_rows=3))
    assert everything == list(range(16))
    first = open_file_source(request(d, ID, fmt=fmt, batch_rows=3))
    head = []
    for _ in range(stop_after):
        batch = first.read()
        if batch is None:
            break
        head += _ids(batch.to_pylist())
    position = json.loads(json.dumps(first.position))  # survives a checkpoint
    first.close()
    second = open_file_source(request(d, ID, fmt=fmt, batch_rows=2))
    second.seek(position)
    assert head + _ids(read_all(second)) == everything


def test_seek_to_a_deleted_file_continues_with_the_next(tmp_path):
    _json(tmp_path / "a.jsonl", [1, 2])
    _json(tmp_path / "b.jsonl", [3])
    reader = open_file_source(request(tmp_path, ID, batch_rows=1))
    reader.read()
    position = reader.position
    assert place(position) == {"file": "a.jsonl", "offset": 10, "line": 1}
    os.remove(tmp_path / "a.jsonl")
    again = open_file_source(request(tmp_path, ID))
    again.seek(position)
    assert _ids(read_all(again)) == [3]


def test_backfill_then_live_handoff(tmp_path):
    path = tmp_path / "events.jsonl"
    _json(path, [1, 2, 3])
    backfill = open_file_source(request(path, ID))
    assert _ids(read_all(backfill)) == [1, 2, 3]
    _append(path, '{"id": 4}\n')  # arrives between the two readers
    live = open_file_source(request(path, ID, watch="true"))
    live.seek(backfill.position)
    assert _ids(live.read().to_pylist()) == [4]
    _append(path, '{"id": 5}\n')
    assert _ids(live.read().to_pylist()) == [5]


def test_seek_beyond_the_end_of_a_file_is_an_error(tmp_path):
    path = tmp_path / "x.jsonl"
    _json(path, [1])
    reader = open_file_source(request(path, ID))
    with pytest.raises(SourceError, match="shorter"):
        reader.seek({"file": "x.jsonl", "offset": 1000, "line": 50})


def test_seek_after_a_failure_retries_from_the_position(tmp_path):
    path = tmp_path / "f.jsonl"
    write_lines(path, ['{"id": 1}', '{"id": "bad"}'])
    reader = open_file_source(request(path, ID))
    reader.read()
    with pytest.raises(SourceError):
        reader.read()
    position = reader.position
    write_lines(path, ['{"id": 1}', '{"id": 2}'])  # someone fixed the line, same length
    reader.seek(position)
    assert _ids(read_all(reader)) == [2]


def test_docstring_examples_run():
    import doctest

    import dsms.runtime.connectors as connectors
    result = doctest.testmod(connectors)
    assert result.attempted >= 6 and result.failed == 0
