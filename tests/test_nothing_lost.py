"""Nothing lost: sinks never destroy data they did not write, bad input rows are never written out or
silently dropped, restarts notice replaced input, and state-directory failures are DsmsErrors."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dsms
from dsms.cli import main
from dsms.runtime import checkpoint

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")

MEMORY = "CREATE STREAM m (id BIGINT, name VARCHAR) WITH (connector = 'memory');"


def _sink(path, fmt="json", mode=None) -> str:
    extra = f", 'sink.mode' = '{mode}'" if mode else ""
    return f"CREATE SINK o WITH (connector = 'file', path = '{path}', format = '{fmt}'{extra}) AS SELECT * FROM m"


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


# -- sinks --------------------------------------------------------------------------------------


def test_a_sink_onto_a_file_a_source_reads_is_refused(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1}\n{"id": 2}\n')
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in.jsonl', format = 'json')")
    with pytest.raises(dsms.SqlError, match="which stream 's' reads") as info:
        engine.execute("CREATE SINK o WITH (connector = 'file', path = './in.jsonl', format = 'json', "
                       "'sink.mode' = 'overwrite') AS SELECT id FROM s")
    assert info.value.line == 1
    assert src.read_text() == '{"id": 1}\n{"id": 2}\n'
    assert engine.catalog.get("o") is None


def test_an_existing_file_is_kept_unless_the_sink_mode_says_otherwise(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": 0, "name": "precious"}\n')
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(MEMORY)
    with pytest.raises(dsms.DsmsError, match="already exists and is not empty.*'sink.mode'"):
        engine.execute(_sink(out))
    assert out.read_text() == '{"id": 0, "name": "precious"}\n' and engine.catalog.get("o") is None
    with pytest.raises(dsms.SqlError, match="invalid value 'replace' for option 'sink.mode'"):
        engine.execute(_sink(out, mode="replace"))
    engine.execute(_sink(out, mode="append"))
    engine.insert("m", [(1, "a"), (2, "b")])
    engine.run_until_idle()
    engine.execute("DROP SINK o")
    assert _lines(out) == [{"id": 0, "name": "precious"}, {"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    engine.execute(_sink(out, mode="overwrite"))
    engine.insert("m", [(3, "c")])
    engine.run_until_idle()
    engine.close()
    assert [r["id"] for r in _lines(out)] == [1, 2, 3]  # the stream's rows, from the start


def test_csv_append_keeps_one_header_and_ends_an_unterminated_last_line(tmp_path):
    out = tmp_path / "out.csv"
    out.write_text("id,name\n0,x")  # no newline at the end
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(MEMORY)
    engine.execute(_sink(out, fmt="csv", mode="append"))
    engine.insert("m", [(1, "a")])
    engine.run_until_idle()
    engine.close()
    assert out.read_text() == 'id,name\n0,x\n1,"a"\n'


def test_append_is_refused_for_parquet(tmp_path):
    out = tmp_path / "out.parquet"
    pq.write_table(pa.table({"id": [0], "name": ["x"]}), out)
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute(MEMORY)
    with pytest.raises(dsms.DsmsError, match="Parquet, which cannot grow"):
        engine.execute(_sink(out, fmt="parquet", mode="append"))
    assert pq.read_table(out).to_pylist() == [{"id": 0, "name": "x"}]


def test_restarts_of_an_appending_sink_cut_back_exactly_what_it_wrote(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text('{"id": 0, "name": "precious"}\n')
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute("SET 'checkpoint.interval' = '1 h'")
    engine.execute(MEMORY)
    engine.execute(_sink(out, mode="append"))
    engine.insert("m", [(1, "a")])
    engine.run_until_idle()
    engine.checkpoint()
    engine.insert("m", [(2, "b")])
    engine.run_until_idle()
    engine.scheduler.jobs["o"].output.writer.flush()
    assert [r["id"] for r in _lines(out)] == [0, 1, 2]
    del engine  # a crash: row 2 was written after the checkpoint
    gc.collect()
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    assert [r["id"] for r in _lines(out)] == [0, 1]  # cut back to the checkpoint, not before the sink's start
    engine.run_until_idle()
    engine.close()
    assert _lines(out) == [{"id": 0, "name": "precious"}, {"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


# -- bad input rows ------------------------------------------------------------------------------

BAD_JSON = (b'{"id":1,"name":"a","v":1.5}\n'
            b'{"id":2,"name":"\xff\xfe","v":2.0}\n'
            b'{"id":3,"name":"c","v":1e400}\n'
            b'{"id":4,"name":"d","v":NaN}\n'
            b'{"id":5,"name":"e","v":-Infinity}\n'
            b'{"id":6,"name":"NaN: not a number, Infinity","v":6.0}\n')


def _json_source(tmp_path, skip: bool) -> dsms.Engine:
    (tmp_path / "in.jsonl").write_bytes(BAD_JSON)
    engine = dsms.Engine(base_dir=str(tmp_path))
    extra = ", on_error = 'skip', dead_letter = 'dead.jsonl'" if skip else ""
    engine.execute("CREATE STREAM s (id BIGINT, name VARCHAR, v DOUBLE) WITH (connector = 'file', "
                   f"path = 'in.jsonl', format = 'json'{extra})")
    return engine


def test_invalid_utf8_nan_and_huge_numbers_in_json_are_bad_rows_blamed_on_their_column(tmp_path):
    engine = _json_source(tmp_path, skip=True)
    engine.execute("CREATE SINK o WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS SELECT * FROM s")
    engine.run_until_idle()
    engine.close()
    out = (tmp_path / "out.jsonl").read_bytes()
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the output")) for line in out.splitlines()]
    assert rows == [{"id": 1, "name": "a", "v": 1.5}, {"id": 6, "name": "NaN: not a number, Infinity", "v": 6.0}]
    dead = {(r["line"], r["column"]): r["error"] for r in _lines(tmp_path / "dead.jsonl")}
    assert dead == {(2, "name"): "the string is not valid UTF-8",
                    (3, "v"): "number 1e400 is out of range for DOUBLE",
                    (4, "v"): "NaN is not a JSON number (write null, or a number)",
                    (5, "v"): "-Infinity is not a JSON number (write null, or a number)"}


def test_a_bad_json_row_fails_the_query_by_default_naming_line_and_column(tmp_path):
    engine = _json_source(tmp_path, skip=False)
    engine.query("SELECT * FROM s")
    with pytest.raises(dsms.DsmsError, match=r"line 2, column 'name'") as info:
        engine.run_until_idle()
    assert "not valid UTF-8" in str(info.value)


def test_a_huge_number_is_blamed_on_its_own_column(tmp_path):
    (tmp_path / "b.jsonl").write_text('{"id":1,"v":1.5}\n{"id":2,"v":1e400}\n')
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("CREATE STREAM b (id BIGINT, v DOUBLE) WITH (connector = 'file', path = 'b.jsonl', format = 'json')")
    engine.query("SELECT * FROM b")
    with pytest.raises(dsms.DsmsError, match=r"number 1e400 is out of range for DOUBLE .*line 2, column 'v'"):
        engine.run_until_idle()


def test_year_zero_is_a_bad_row_but_nan_fits_a_csv_double(tmp_path):
    (tmp_path / "y.csv").write_text("id,d,ts,v\n1,2024-01-01,2024-01-01 00:00:00,NaN\n2,0000-01-01,2024-01-01 00:00:00,1\n"
                                    "3,2024-01-01,0000-12-31 00:00:00,2\n4,9999-12-31,9999-12-31 23:59:59.999,inf\n")
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("CREATE STREAM y (id BIGINT, d DATE, ts TIMESTAMP(3), v DOUBLE) WITH (connector = 'file', "
                   "path = 'y.csv', format = 'csv', on_error = 'skip', dead_letter = 'dead.jsonl')")
    q = engine.query("SELECT id, d, ts, v FROM y")
    engine.run_until_idle()
    got = q.snapshot().to_pylist()
    assert [r["id"] for r in got] == [1, 4] and got[0]["v"] != got[0]["v"] and got[1]["v"] == float("inf")
    assert {(r["line"], r["column"]) for r in _lines(tmp_path / "dead.jsonl")} == {(3, "d"), (4, "ts")}


# -- malformed input, every format and both routes --------------------------------------------------

N = 40
BAD = {5, 6, 17, 29, 40}  # the ids of the rows made bad


def _malformed_inputs(tmp_path) -> dict[str, str]:
    """One input per format; row ``id`` is on line ``id`` (JSON), ``id + 1`` (CSV) or row ``id`` (Parquet)."""
    json_lines, csv_lines = [], ["id,v"]
    for i in range(1, N + 1):
        if i not in BAD:
            json_lines.append(json.dumps({"id": i, "v": i * 1.5}))
            csv_lines.append(f"{i},{i * 1.5}")
        else:
            json_lines.append([f'{{"id": {i}, "v": NaN}}', f'{{"id": {i}, "v": "x"}}', f'{{"id": {i}, v}}',
                               f'{{"id": {i}, "v": 1e999}}', f'{{"id": {i}, "v": [1]}}'][len(json_lines) % 5])
            csv_lines.append([f"{i},abc", f"{i},1,2", f"{i},--"][i % 3])
    (tmp_path / "in.jsonl").write_text("\n".join(json_lines) + "\n")
    (tmp_path / "in.csv").write_text("\n".join(csv_lines) + "\n")
    pq.write_table(pa.table({"id": list(range(1, N + 1)),
                             "v": ["x" if i in BAD else str(i * 1.5) for i in range(1, N + 1)]}), tmp_path / "in.parquet")
    return {"json": "in.jsonl", "csv": "in.csv", "parquet": "in.parquet"}


@pytest.mark.parametrize("fmt", ["json", "csv", "parquet"])
@pytest.mark.parametrize("route", ["runtime", "duckdb"])
@pytest.mark.parametrize("on_error", ["skip", "fail"])
def test_every_input_row_is_in_the_output_or_the_dead_letter_exactly_once(tmp_path, fmt, route, on_error):
    path = _malformed_inputs(tmp_path)[fmt]
    dead = tmp_path / "dead.jsonl"
    script = tmp_path / "job.sql"
    script.write_text(f"""SET 'engine' = '{route}';
CREATE STREAM s (id BIGINT, v DOUBLE) WITH (connector = 'file', path = '{path}', format = '{fmt}',
  on_error = '{on_error}', dead_letter = 'dead.jsonl');
CREATE SINK o WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS SELECT id, v FROM s;""")
    done = subprocess.run([DSMS, "run", str(script), "-q"], capture_output=True, text=True, timeout=300)
    assert "Traceback" not in done.stderr
    out_text = (tmp_path / "out.jsonl").read_text() if (tmp_path / "out.jsonl").exists() else ""
    out = [json.loads(line, parse_constant=lambda c: pytest.fail(f"{c} in the output")) for line in out_text.splitlines()]
    ids = [r["id"] for r in out]
    assert len(ids) == len(set(ids)) and all(r["v"] == r["id"] * 1.5 for r in out)
    first_line = 1 if fmt == "csv" else 0  # the CSV header
    if on_error == "skip":
        assert done.returncode == 0, done.stderr
        dead_ids = [r["line"] - first_line for r in _lines(dead)]
        assert sorted(dead_ids) == sorted(BAD) and all(r["column"] in (None, "v", "id") for r in _lines(dead))
        assert sorted(ids + dead_ids) == list(range(1, N + 1))
    else:
        assert done.returncode == 1
        first = min(BAD) + first_line
        assert f"line {first}" in done.stderr or f"row {first}" in done.stderr, done.stderr
        assert set(ids) <= set(range(1, min(BAD))) and not dead.exists()


# -- restarts ---------------------------------------------------------------------------------------

WATCHED = ("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in.jsonl', format = 'json', "
           "watch = 'true', batch.size = '2');"
           "CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM s;")


def test_a_restart_notices_an_input_file_replaced_under_the_same_name(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(WATCHED)
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 10}]
    engine.close()
    # Rotated: a new file of the same name, as long and longer, other content.
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i + 50}}}\n' for i in range(12)))
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["n"][0] == "failed" and "replaced or rotated" in status["n"][1] and "in.jsonl" in status["n"][1]
    engine.close()


def test_a_restart_on_the_same_file_grown_continues(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(WATCHED)
    engine.run_until_idle()
    engine.close()
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write('{"id": 10}\n')
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 11}]
    engine.close()


BOUNDED = ("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in.jsonl', format = 'json');\n"
           "CREATE SINK o WITH (connector = 'file', path = 'out.jsonl', format = 'json') AS "
           "SELECT id FROM s WHERE id % 2 = 0;\n")


def _rerun(tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([DSMS, "run", "--state-dir", str(tmp_path / "state"), "-q"], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("route", ["runtime", "duckdb"])
def test_a_restart_of_a_finished_query_notices_its_input_file_changed(tmp_path, route):
    original = "".join(f'{{"id": {i}}}\n' for i in range(10))
    (tmp_path / "in.jsonl").write_text(original)
    (tmp_path / "job.sql").write_text(f"SET 'engine' = '{route}';\n" + BOUNDED)
    done = subprocess.run([DSMS, "run", "--state-dir", str(tmp_path / "state"), "-q", str(tmp_path / "job.sql")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = [{"id": i} for i in range(0, 10, 2)]  # hand-computed: the even ids
    assert _lines(tmp_path / "out.jsonl") == written
    unchanged = _rerun(tmp_path)
    assert unchanged.returncode == 0, unchanged.stderr
    # Appended: the finished query would not read the new lines; the restart says so.
    with open(tmp_path / "in.jsonl", "a") as f:
        f.write('{"id": 10}\n')
    grown = _rerun(tmp_path)
    assert grown.returncode == 1 and "Traceback" not in grown.stderr
    assert "grown by 11 bytes" in grown.stderr and "in.jsonl" in grown.stderr and "--state-dir" in grown.stderr
    # Replaced under the same name, longer, other content: refused as well, in other words.
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i + 50}}}\n' for i in range(12)))
    replaced = _rerun(tmp_path)
    assert replaced.returncode == 1 and "replaced or rotated" in replaced.stderr and "in.jsonl" in replaced.stderr
    assert _lines(tmp_path / "out.jsonl") == written  # the result stays as it was
    # The original file back: the finished query is whole again.
    (tmp_path / "in.jsonl").write_text(original)
    again = _rerun(tmp_path)
    assert again.returncode == 0, again.stderr
    assert _lines(tmp_path / "out.jsonl") == written


def test_a_restart_of_a_finished_query_notices_a_new_file_in_its_folder(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in', format = 'json');"
                   "CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM s;")
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 2}]
    engine.close()
    (tmp_path / "in" / "b.jsonl").write_text('{"id": 3}\n')
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["n"][0] == "failed" and "appeared" in status["n"][1] and "b.jsonl" in status["n"][1]
    engine.close()


def test_a_restart_of_a_finished_query_notices_a_rewritten_parquet_file(tmp_path):
    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "in.parquet")
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute("CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in.parquet', format = 'parquet');"
                   "CREATE MATERIALIZED VIEW n AS SELECT COUNT(*) AS n FROM s;")
    engine.run_until_idle()
    engine.close()
    pq.write_table(pa.table({"id": [1, 2, 3, 4, 5, 6]}), tmp_path / "in.parquet")  # more rows: a new file
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["n"][0] == "failed" and "replaced or rotated" in status["n"][1]
    engine.close()


def test_the_batch_size_applies_to_restored_queries(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    state = str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path))
    engine.execute(WATCHED.replace(", batch.size = '2'", ""))
    engine.close()
    engine = dsms.Engine(state_dir=state, base_dir=str(tmp_path), batch_rows=3)
    (_, source), = engine.scheduler.jobs["n"].sources
    assert source.reader.req.batch_rows == 3
    engine.run_until_idle()
    assert engine.execute("SELECT * FROM n").table.to_pylist() == [{"n": 10}]
    engine.close()


def test_sigterm_while_a_script_starts_stops_it_between_two_statements(tmp_path):
    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": {i}}}\n' for i in range(10)))
    marker = tmp_path / "terminated"
    # Importing this module (a statement of the script) sends the process SIGTERM, the first time only.
    (tmp_path / "stopper.py").write_text(f"""import os
import signal

if not os.path.exists({str(marker)!r}):
    open({str(marker)!r}, "w").close()
    os.kill(os.getpid(), signal.SIGTERM)


def plus(x: int) -> int:
    return x + 100
""")
    (tmp_path / "job.sql").write_text(
        "CREATE STREAM s (id BIGINT) WITH (connector = 'file', path = 'in.jsonl', format = 'json');\n"
        "CREATE SINK evens WITH (connector = 'file', path = 'evens.jsonl', format = 'json') AS "
        "SELECT id FROM s WHERE id % 2 = 0;\n"
        "CREATE FUNCTION plus AS 'stopper.plus' LANGUAGE PYTHON;\n"
        "CREATE SINK odds WITH (connector = 'file', path = 'odds.jsonl', format = 'json') AS "
        "SELECT plus(id) AS id FROM s WHERE id % 2 = 1;\n")
    command = [DSMS, "run", "--state-dir", str(tmp_path / "state"), str(tmp_path / "job.sql")]
    stopped = subprocess.run(command, capture_output=True, text=True, timeout=120)
    # As Ctrl-C: the statement under way ends, the engine closes with its checkpoints, exit 128 + 15.
    assert stopped.returncode == 143, stopped.stderr
    assert marker.exists() and "Traceback" not in stopped.stderr and "interrupted" in stopped.stderr
    assert not (tmp_path / "odds.jsonl").exists()  # the statement after the signal did not run
    # The same command runs the statements left, then every query to its end.
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert _lines(tmp_path / "evens.jsonl") == [{"id": i} for i in range(0, 10, 2)]
    assert _lines(tmp_path / "odds.jsonl") == [{"id": i + 100} for i in range(1, 10, 2)]


# -- the state directory's own failures -------------------------------------------------------------


def test_a_damaged_catalog_is_a_dsms_error_naming_it(tmp_path):
    state = tmp_path / "state"
    dsms.Engine(state_dir=str(state)).close()
    (state / "catalog.json").write_text('{"version": 1, "objects": [')
    with pytest.raises(dsms.DsmsError, match=r"catalog .*catalog\.json cannot be read"):
        dsms.Engine(state_dir=str(state))
    dsms.Engine(state_dir=str(tmp_path / "other")).close()  # the lock was released


def test_a_state_dir_that_cannot_be_made_is_a_dsms_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(dsms.DsmsError, match="cannot use .*file.* as a state directory"):
        dsms.Engine(state_dir=str(tmp_path / "file" / "state"))


def test_a_damaged_checkpoint_fails_its_query_alone_naming_the_file(tmp_path):
    state = tmp_path / "state"
    engine = dsms.Engine(state_dir=str(state))
    engine.execute(MEMORY + "CREATE MATERIALIZED VIEW c AS SELECT COUNT(*) AS n FROM m;"
                            "CREATE MATERIALIZED VIEW d AS SELECT COUNT(*) AS n FROM m;")
    engine.insert("m", [(1, "a")])
    engine.run_until_idle()
    engine.close()
    uid = next(o["uid"] for o in json.loads((state / "catalog.json").read_text())["objects"] if o["name"] == "c")
    (ckpt,) = os.listdir(state / "queries" / uid)
    (state / "queries" / uid / ckpt / "meta.json").write_text("{garbage")
    engine = dsms.Engine(state_dir=str(state))
    status = {r["id"]: (r["status"], r["error"]) for r in engine.execute("SHOW QUERIES").table.to_pylist()}
    assert status["c"][0] == "failed" and "cannot be read" in status["c"][1] and "meta.json" in status["c"][1]
    assert status["d"] == ("running", "")
    engine.close()


def test_a_full_disk_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    state = tmp_path / "state"
    engine = dsms.Engine(state_dir=str(state))
    engine.execute(MEMORY + "CREATE MATERIALIZED VIEW c AS SELECT COUNT(*) AS n FROM m;")
    engine.insert("m", [(1, "a")])
    engine.run_until_idle()
    engine.checkpoint()
    folder = state / "queries" / os.listdir(state / "queries")[0]
    good = os.listdir(folder)

    def full(path, table):
        raise OSError(28, "No space left on device", path)

    monkeypatch.setattr(checkpoint, "_write_table", full)
    engine.insert("m", [(2, "b")])
    engine.run_until_idle()
    with pytest.raises(dsms.DsmsError, match="cannot write the checkpoint .*No space left on device"):
        engine.checkpoint()
    assert os.listdir(folder) == good  # no half-written checkpoint; the good one is there
    monkeypatch.undo()
    engine.close()
    assert dsms.Engine(state_dir=str(state)).execute("SELECT * FROM c").table.to_pylist() == [{"n": 2}]


# -- the command line --------------------------------------------------------------------------------


def test_an_unexpected_error_prints_one_line_and_writes_a_log(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DSMS_LOG_DIR", str(tmp_path / "logs"))

    def broken(*args, **kwargs):
        raise RuntimeError("something internal")

    monkeypatch.setattr(dsms.Engine, "execute_statement", broken)
    (tmp_path / "job.sql").write_text("SHOW STREAMS;")
    assert main(["run", str(tmp_path / "job.sql")]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error (a bug): RuntimeError: something internal" in err
    (log,) = os.listdir(tmp_path / "logs")
    assert str(tmp_path / "logs" / log) in err and "Traceback" not in err
    assert "Traceback" in (tmp_path / "logs" / log).read_text()
