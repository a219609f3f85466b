"""The `dsms` command on real files: run to completion, explain, and bad input."""

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

from dsms.cli import main

from oracle import duck, events, rows

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ad_ctr")
DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")


def test_the_example_runs_and_matches_duckdb(tmp_path):
    out = subprocess.run([DSMS, "run", os.path.join(EXAMPLE, "ad_ctr.sql")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "done:" in out.stderr and "late events dropped: 0" in out.stderr
    sink = os.path.join(EXAMPLE, "out", "ctr.jsonl")
    got = [json.loads(line) for line in open(sink)]
    data = os.path.join(EXAMPLE, "data")
    want = duck(f"""
      WITH imp AS (SELECT ad_id, CAST(ts AS TIMESTAMP) AS ts FROM read_json('{data}/impressions.jsonl',
                   columns = {{ad_id: 'BIGINT', ts: 'VARCHAR'}})),
           clk AS (SELECT ad_id, make_timestamp(ts * 1000) AS ts FROM read_json('{data}/clicks.jsonl',
                   columns = {{ad_id: 'BIGINT', ts: 'BIGINT'}})),
           ev AS (SELECT ad_id, ts, 1 AS i, 0 AS c FROM imp UNION ALL SELECT ad_id, ts, 0, 1 FROM clk)
      SELECT strftime(time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01'), '%Y-%m-%d %H:%M:%S.000') AS ws,
             strftime(time_bucket(INTERVAL '1 minute', ts, TIMESTAMP '1970-01-01') + INTERVAL '1 minute',
                      '%Y-%m-%d %H:%M:%S.000') AS we,
             ad_id, SUM(i)::BIGINT AS impressions, SUM(c)::BIGINT AS clicks, SUM(c) / NULLIF(SUM(i), 0) AS ctr
      FROM ev GROUP BY ALL""")
    assert sorted((r["window_start"], r["window_end"], r["ad_id"], r["impressions"], r["clicks"],
                   None if r["ctr"] is None else round(r["ctr"], 6)) for r in got) == sorted(rows(want))
    # The SELECT at the end of the script printed the rows for ads 1 to 3 as the windows closed.
    printed = [ln for ln in out.stdout.splitlines() if ln.startswith("2024-05-01")]
    assert len(printed) == sum(1 for r in got if r["ad_id"] <= 3)


def write_jsonl(path, records):
    with open(path, "w") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")


SCRIPT = """
CREATE STREAM ev (k VARCHAR, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'file', path = 'ev.{fmt}', format = '{fmt}'{extra});
CREATE SINK per_10s WITH (connector = 'file', path = 'out/per_10s.jsonl', format = '{sink_format}') AS
  {query};
"""

WINDOW_QUERY = """SELECT window_start, k, COUNT(*) AS n, SUM(v) AS sv
  FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end, k"""


def run_script(tmp_path, fmt, data, query=WINDOW_QUERY, sink_format="json", extra="", capsys=None):
    data_path = tmp_path / f"ev.{fmt}"
    if fmt == "parquet":
        pq.write_table(data, data_path, row_group_size=100)
    elif fmt == "csv":
        duck(f"COPY (SELECT * FROM ev) TO '{data_path}' (HEADER)", ev=data)
    else:
        write_jsonl(data_path, [{**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]} for r in data.to_pylist()])
    script = tmp_path / "job.sql"
    script.write_text(SCRIPT.format(fmt=fmt, extra=extra, sink_format=sink_format, query=query))
    code = main(["run", str(script), "--batch-size", "97"])
    out = tmp_path / "out" / "per_10s.jsonl"
    return code, [json.loads(line) for line in open(out)] if out.exists() else None


def test_json_csv_and_parquet_sources_give_the_same_windows(tmp_path):
    # No NULL keys: in CSV an empty VARCHAR field is '' (as in Flink), not NULL.
    data = duck("SELECT COALESCE(k, 'none') AS k, v, ts FROM ev", ev=events(700, seed=4))
    want = duck("""SELECT strftime(time_bucket(INTERVAL '10 seconds', ts, TIMESTAMP '1970-01-01'),
                   '%Y-%m-%d %H:%M:%S.000') AS ws, k, COUNT(*) AS n, SUM(v)::BIGINT AS sv FROM ev GROUP BY ALL""", ev=data)
    for fmt in ("json", "csv", "parquet"):
        sub = tmp_path / fmt
        sub.mkdir()
        code, got = run_script(sub, fmt, data)
        assert code == 0
        assert rows(pa.Table.from_pylist(got)) == rows(want), fmt


def test_an_updating_result_goes_to_a_changelog_json_sink(tmp_path):
    data = events(200, seed=8).select(["k", "v", "ts"])
    code, got = run_script(tmp_path, "parquet", data, query="SELECT k, COUNT(*) AS n FROM ev GROUP BY k",
                           sink_format="changelog-json")
    assert code == 0
    assert {r["op"] for r in got} == {"+I", "-U", "+U"}
    final: dict = {}
    for r in got:
        if r["op"] in ("+I", "+U"):
            final[r["k"]] = r["n"]
        else:
            assert final.pop(r["k"]) == r["n"]  # a retraction removes exactly what was emitted
    want = duck("SELECT k, COUNT(*) FROM ev GROUP BY k", ev=data)
    assert sorted(final.items(), key=str) == sorted(((k, n) for k, n in rows(want)), key=str)


def test_a_malformed_line_stops_the_run_naming_file_line_and_column(tmp_path, capsys):
    write_jsonl(tmp_path / "ev.json", [
        {"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"},
        {"k": "a", "v": 2, "ts": "2024-01-01 00:00:02"},
        '{"k": "a", "v": 3, "ts": "2024-01-01 00:00:03"',  # line 3: malformed
    ])
    (tmp_path / "job.sql").write_text(SCRIPT.format(fmt="json", extra="", sink_format="json", query=WINDOW_QUERY))
    assert main(["run", str(tmp_path / "job.sql")]) == 1
    err = capsys.readouterr().err
    assert "ev.json" in err and "line 3" in err and "source 'ev'" in err

    write_jsonl(tmp_path / "ev.json", [{"k": "a", "v": "three", "ts": "2024-01-01 00:00:01"}])
    assert main(["run", str(tmp_path / "job.sql")]) == 1
    err = capsys.readouterr().err
    assert "line 1" in err and "column 'v'" in err


def test_on_error_skip_counts_and_dead_letters_bad_rows(tmp_path, capsys):
    write_jsonl(tmp_path / "ev.json", [
        {"k": "a", "v": 1, "ts": "2024-01-01 00:00:01"},
        "not json at all",
        {"k": "a", "v": "x", "ts": "2024-01-01 00:00:02"},
        {"k": "a", "v": 4, "ts": "2024-01-01 00:00:03"},
    ])
    (tmp_path / "job.sql").write_text(SCRIPT.format(fmt="json", extra=", on_error = 'skip'", sink_format="json",
                                                    query=WINDOW_QUERY))
    assert main(["run", str(tmp_path / "job.sql")]) == 0
    err = capsys.readouterr().err
    assert "malformed rows skipped: ev: 2" in err
    out = [json.loads(line) for line in open(tmp_path / "out" / "per_10s.jsonl")]
    assert [(r["k"], r["n"], r["sv"]) for r in out] == [("a", 2, 5)]
    dead = [json.loads(line) for line in open(tmp_path / "ev.json.dead-letter.jsonl")]
    assert [(d["line"], d["raw"]) for d in dead] == [(2, "not json at all"),
                                                     (3, '{"k": "a", "v": "x", "ts": "2024-01-01 00:00:02"}')]
    assert dead[1]["column"] == "v"


def test_explain_prints_the_statement_of_a_batch_route(capsys):
    assert main(["explain", os.path.join(EXAMPLE, "ad_ctr.sql")]) == 0
    out = capsys.readouterr().out
    assert "-- sink ctr  (append-only)\nroute: duckdb (bounded files" in out
    assert "-- __scan0: impressions (json files at" in out and "-- __scan1: clicks (json files at" in out
    assert 'FROM "__scan0"' in out and "WindowAggregate" not in out  # no runtime operators: DuckDB runs it


def test_explain_prints_every_operator_with_mode_and_watermark(tmp_path, capsys):
    script = open(os.path.join(EXAMPLE, "ad_ctr.sql")).read().replace("'data/", f"'{EXAMPLE}/data/")
    (tmp_path / "ad_ctr.sql").write_text("SET 'engine' = 'runtime';\n" + script)
    assert main(["explain", str(tmp_path / "ad_ctr.sql")]) == 0
    out = capsys.readouterr().out
    assert "-- sink ctr  (append-only)\nroute: runtime (SET 'engine' = 'runtime')" in out
    assert "WindowAggregate(TUMBLE(ts, 1min), keys=[ad_id]" in out
    assert "watermark: min(impressions.ts - 5s, clicks.ts - 5s)" in out
    assert "Source(impressions, file, json)" in out and "Source(clicks, file, json)" in out
    ops = [ln for ln in out.splitlines() if "#" in ln]
    assert all("[append-only, watermark:" in ln for ln in ops)


def test_a_long_run_shows_a_progress_line(tmp_path, capsys, monkeypatch):
    from dsms import cli

    monkeypatch.setattr(cli._Progress, "LOG_INTERVAL", 0.0)
    monkeypatch.setattr(cli._Progress, "QUIET_FOR", 0.0)
    n = 20_000
    pq.write_table(pa.table({"k": ["a"] * n, "v": list(range(n)),
                             "ts": pa.array([i * 1000 for i in range(n)], pa.timestamp("us"))}), tmp_path / "ev.parquet")
    (tmp_path / "job.sql").write_text(SCRIPT.format(fmt="parquet", extra="", sink_format="json", query=WINDOW_QUERY))
    # Progress is reported per micro-batch, i.e. on the runtime (a batch route runs in one statement).
    assert main(["run", str(tmp_path / "job.sql"), "--batch-size", "1000", "--engine", "runtime"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("events ")]
    assert len(lines) >= 10, err
    # events grow and the watermark (max event time - 5 s) is shown as a timestamp
    counts = [int(ln.split()[1].replace(",", "")) for ln in lines]
    assert counts == sorted(counts) and counts[-1] <= n
    assert any("watermark 1970-01-01 00:00:" in ln for ln in lines)
    assert all("events/s" in ln and "late 0" in ln for ln in lines)
    assert f"done: {n:,} events" in err


def test_help_and_bad_arguments():
    out = subprocess.run([DSMS, "run", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--batch-size" in out.stdout
    out = subprocess.run([DSMS, "run", "/nonexistent/script.sql"], capture_output=True, text=True)
    assert out.returncode == 1 and "cannot read script" in out.stderr


def test_the_joins_example_runs_and_matches_duckdb():
    example = os.path.join(ROOT, "examples", "ad_joins")
    out = subprocess.run([DSMS, "run", os.path.join(example, "ad_joins.sql")], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "late events dropped: 0" in out.stderr and "warning" not in out.stderr
    data = os.path.join(ROOT, "examples", "ad_ctr", "data")
    imp = f"""(SELECT impression_id, ad_id, CAST(ts AS TIMESTAMP) AS ts FROM read_json('{data}/impressions.jsonl',
               columns = {{impression_id: 'VARCHAR', ad_id: 'BIGINT', ts: 'VARCHAR'}}))"""
    clk = f"""(SELECT impression_id, make_timestamp(ts * 1000) AS ts FROM read_json('{data}/clicks.jsonl',
               columns = {{impression_id: 'VARCHAR', ts: 'BIGINT'}}))"""
    want = duck(f"""SELECT i.impression_id, strftime(c.ts, '%Y-%m-%d %H:%M:%S.%g') FROM {imp} i LEFT JOIN {clk} c
                    ON c.impression_id = i.impression_id AND c.ts BETWEEN i.ts AND i.ts + INTERVAL 30 SECOND""")
    got = [json.loads(line) for line in open(os.path.join(example, "out", "attributed.jsonl"))]
    assert sorted((r["impression_id"], r["clicked_at"]) for r in got) == rows(want)
    versions = pa.Table.from_pylist([
        {**e["after"], "ts": e["after"]["ts"]} for e in map(json.loads, open(os.path.join(example, "data", "ads.jsonl")))])
    want = duck(f"""WITH v AS (SELECT ad_id, campaign, bid, CAST(ts AS TIMESTAMP) AS ts FROM versions),
                         j AS (SELECT i.ts, v.campaign, v.bid FROM {imp} i JOIN v ON v.ad_id = i.ad_id
                               AND v.ts = (SELECT MAX(ts) FROM v AS w WHERE w.ad_id = i.ad_id AND w.ts <= i.ts))
                    SELECT strftime(time_bucket(INTERVAL 1 MINUTE, ts), '%Y-%m-%d %H:%M:%S.000'), campaign, COUNT(*),
                           ROUND(SUM(bid), 2) FROM j GROUP BY ALL""", versions=versions)
    got = [json.loads(line) for line in open(os.path.join(example, "out", "spend.jsonl"))]
    assert sorted((r["window_start"], r["campaign"], r["impressions"], r["spend"]) for r in got) == rows(want)


def test_warnings_go_to_stderr_and_explain(tmp_path, capsys):
    script = tmp_path / "j.sql"
    script.write_text("""
      CREATE STREAM a (k BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
      CREATE STREAM b (k BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory');
      INSERT INTO a VALUES (1, '2024-01-01 00:00:00');
      INSERT INTO b VALUES (1, '2024-01-01 00:00:01');
      SELECT a.k, b.ts FROM a JOIN b ON a.k = b.k;
    """)
    assert main(["run", str(script)]) == 0
    captured = capsys.readouterr()
    assert "warning: this regular join of two streams" in captured.err
    assert "2024-01-01 00:00:01" in captured.out
    assert main(["explain", str(script)]) == 0
    assert "warning: this regular join" in capsys.readouterr().out
