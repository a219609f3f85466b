"""Backfill then live: a query over watched files takes its history from DuckDB or Spark, then runs on.

The events of each source are split across files: the history (present
when the query starts) and live files added afterwards, with windows that
straddle the seam and events out of order around it (some late, judged
against the history's largest times). The final rows must equal the
oracle, plain DuckDB SQL over the events that count (late ones removed
per event, in file order; per window under window operators): nothing lost or counted twice at the seam. The
same query without a backfill (the runtime alone) gives them too, and the
backfill must have done the work: rows emitted by the statement, and the
replay started late in the history.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pyarrow as pa
import pytest

import dsms

from oracle import arrival_watermarks, duck, events, late_mask, rows
from route_shapes import OPEN, hop_starts, tumble

FAR = dt.datetime(2030, 1, 1)
DDL = """
CREATE STREAM s (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'file', path = '{root}/s', format = 'json', watch = 'true');
CREATE STREAM s2 (k VARCHAR, v BIGINT, price DOUBLE, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'file', path = '{root}/s2', format = '{fmt}', watch = 'true');
"""
PARTS = 10  # each source in ten files of about 10 s of events each
HISTORY, LIVE = (0, 1, 2, 3, 4, 5), (6, 7, 8, 9)  # files part-0..5 are there when the query starts

SHAPES = {
    "hop_aggregate": (
        "SELECT window_start, window_end, k, COUNT(*) AS n, SUM(v) AS sv, MAX(price) AS hi FROM TABLE(HOP(TABLE s, "
        "DESCRIPTOR(ts), INTERVAL '5' SECOND, INTERVAL '20' SECOND)) GROUP BY window_start, window_end, k",
        f"SELECT ws, ws + INTERVAL '20 seconds', k, COUNT(*), SUM(v), MAX(price) FROM (SELECT *, {hop_starts(5, 20)} "
        f"AS ws FROM s_arr) WHERE {OPEN.format(end='ws + INTERVAL 20 SECOND')} GROUP BY ALL"),
    "cumulate_with_offset": (
        "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), "
        "INTERVAL '4' SECOND, INTERVAL '12' SECOND, INTERVAL '1' SECOND)) GROUP BY window_start, window_end",
        "SELECT b AS ws, we, COUNT(*) FROM (SELECT *, time_bucket(INTERVAL '12 seconds', ts, "
        "TIMESTAMP '1970-01-01 00:00:01') AS b, unnest(range(time_bucket(INTERVAL '4 seconds', ts, "
        "TIMESTAMP '1970-01-01 00:00:01') + INTERVAL '4 seconds', b + INTERVAL '13 seconds', INTERVAL '4 seconds')) "
        f"AS we FROM s_arr) WHERE {OPEN.format(end='we')} GROUP BY ALL"),
    "tumble_rows": (  # a window table function alone drops no late event
        "SELECT k, v, window_start FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' SECOND)) WHERE v > 20",
        f"SELECT k, v, {tumble(10)} FROM s_all WHERE v > 20"),
    "interval_join_then_windows": (
        "SELECT window_start, COUNT(*) AS n, SUM(bv) AS sbv FROM TABLE(TUMBLE(TABLE (SELECT a.k, a.ts, b.v AS bv "
        "FROM s a JOIN s2 b ON a.k = b.k AND b.ts BETWEEN a.ts - INTERVAL '3' SECOND AND a.ts + INTERVAL '1' SECOND), "
        "DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end",
        f"SELECT {tumble(10, col='a.ts')}, COUNT(*), SUM(b.v) FROM s a JOIN s2 b ON a.k = b.k AND b.ts BETWEEN "
        "a.ts - INTERVAL 3 SECOND AND a.ts + INTERVAL 1 SECOND GROUP BY ALL"),
}


def write_part(path: str, table: pa.Table, fmt: str) -> None:
    hidden = os.path.join(os.path.dirname(path), "." + os.path.basename(path))
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, hidden, row_group_size=40)
    else:
        with open(hidden, "w") as f:
            for r in table.to_pylist():
                f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    os.rename(hidden, path)  # whole when it appears


class Data:
    """Two sources of out-of-order events, each cut into ten files; oracle tables of their on-time events."""

    def __init__(self, root: str, fmt: str = "json"):
        self.root, self.fmt = root, fmt
        self.streams = {"s": (events(500, seed=31, keys=3, span_s=100, disorder_s=4), 2, "json"),
                        "s2": (events(300, seed=32, keys=3, span_s=100, disorder_s=2), 1, fmt)}
        self.tables = {}
        for name, (table, bound, _) in self.streams.items():
            late = late_mask(table.column("ts").to_pylist(), bound)
            self.tables[name] = table.filter(pa.array([not x for x in late]))
            # every event with the watermark when it arrived: window operators judge lateness per window
            wms = arrival_watermarks(table.column("ts").to_pylist(), bound)
            self.tables[f"{name}_arr"] = table.append_column("wm", pa.array(wms, pa.timestamp("us")))
            self.tables[f"{name}_all"] = table
            os.makedirs(f"{root}/{name}")
        assert any(late_mask(self.streams["s"][0].column("ts").to_pylist(), 2)[self.cut("s", LIVE[0]):]), \
            "some live events must be late against the history"

    def cut(self, name: str, part: int) -> int:
        return self.streams[name][0].num_rows * part // PARTS

    def ddl(self) -> str:
        return DDL.format(root=self.root, fmt=self.fmt)

    def add(self, parts) -> None:
        for name, (table, _, fmt) in self.streams.items():
            for p in parts:
                ext = "parquet" if fmt == "parquet" else "jsonl"
                write_part(f"{self.root}/{name}/part-{p}.{ext}", table.slice(self.cut(name, p), self.cut(name, p + 1)
                                                                              - self.cut(name, p)), fmt)

    def end(self) -> None:
        """A last file per source with an event far ahead: every window of the data closes."""
        for name, (table, _, fmt) in self.streams.items():
            far = pa.Table.from_pylist([{"k": "zz", "v": 0, "price": 0.0, "ts": FAR}], schema=table.schema)
            write_part(f"{self.root}/{name}/part-z.{'parquet' if fmt == 'parquet' else 'jsonl'}", far, fmt)


def run(data: Data, query: str, backfill: str) -> tuple[list[tuple], object]:
    """History, start the query, live files, the end: its final rows, and the job."""
    engine = dsms.Engine()
    engine.execute(data.ddl())
    engine.execute(f"SET 'backfill' = '{backfill}'")
    handle = engine.query(query)
    engine.run_until_idle()
    emitted = handle.job.metrics.rows_out
    data.add(LIVE[:2])
    engine.run_until_idle()
    data.add(LIVE[2:])
    data.end()
    engine.run_until_idle()
    result = rows(handle.snapshot())
    engine.close()
    return result, (handle.job, emitted)


@pytest.mark.parametrize("name", list(SHAPES))
def test_backfill_on_duckdb_then_live_loses_and_repeats_nothing_at_the_seam(tmp_path, name):
    query, oracle = SHAPES[name]
    data = Data(str(tmp_path), fmt="parquet" if "join" in name else "json")
    want = rows(duck(oracle, **data.tables))
    data.add(HISTORY)
    got, (job, emitted) = run(data, query, "duckdb")
    assert got == want, f"{len(got)} rows vs the oracle's {len(want)}"
    assert job.backfilled is not None and emitted > 0  # the statement emitted the history's closed windows
    assert job.backfilled.replayed_from["s"] not in (None, "part-0.jsonl")  # the runtime read again only a tail


def test_backfill_on_spark_then_live(tmp_path, spark_session):
    query, oracle = SHAPES["hop_aggregate"]
    data = Data(str(tmp_path))
    data.add(HISTORY)
    got, (job, emitted) = run(data, query, "spark")
    assert got == rows(duck(oracle, **data.tables))
    assert emitted > 0 and job.backfilled.route == "spark"


def test_a_backfilled_sink_restarts_from_its_state_directory(tmp_path):
    """A sink with --state-dir: closed before its first turn (the backfill runs after the restart), then
    after the seam (it continues on the runtime from its checkpoint; the history is not backfilled again)."""
    query, oracle = SHAPES["hop_aggregate"]
    data = Data(str(tmp_path / "in"))
    data.add(HISTORY)
    out, state = tmp_path / "out.jsonl", str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state)
    engine.execute(data.ddl() + "SET 'backfill' = 'duckdb';")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {query}")
    engine.close()
    engine = dsms.Engine(state_dir=state)
    engine.run_until_idle()
    assert engine.scheduler.jobs["out"].backfilled is not None
    data.add(LIVE[:2])
    engine.run_until_idle()
    engine.close()
    data.add(LIVE[2:])
    data.end()
    engine = dsms.Engine(state_dir=state)
    assert engine.scheduler.jobs["out"].backfill is None  # restored after the seam: the runtime goes on
    engine.run_until_idle()
    engine.close()
    with open(out) as f:
        lines = [json.loads(line) for line in f]
    got = rows(pa.Table.from_pylist(lines).select(["window_start", "window_end", "k", "n", "sv", "hi"]))
    stamp = "%Y-%m-%d %H:%M:%S.000"
    want = [(a.strftime(stamp), b.strftime(stamp), k, n, sv, hi)
            for a, b, k, n, sv, hi in rows(duck(oracle, **data.tables))]
    assert got == want


REFUSED = [
    ("SELECT k, COUNT(*) AS n FROM s GROUP BY k", "the result is updating"),
    ("SELECT window_start, COUNT(*) AS n FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), "
     "INTERVAL '1' SECOND)) GROUP BY window_start, window_end, k", "a session can chain without end"),
    ("SELECT a.v, b.v AS bv FROM s a LEFT JOIN s2 b ON a.k = b.k AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '1' SECOND",
     "only inner interval joins"),
    ("SELECT k, v FROM LATE(s)", "the late events of the history"),
    ("SELECT k, v, ts FROM (SELECT k, v, ts, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts) AS rn FROM s) "
     "WHERE rn = 1", "its state reaches back"),
    ("SELECT k, ts FROM s UNION ALL SELECT k, ts FROM b", "'b' is not a watched file source"),
]


@pytest.mark.parametrize("query, message", REFUSED, ids=[m[:30] for _, m in REFUSED])
def test_what_cannot_be_handed_over_at_a_seam_is_refused_when_planned(tmp_path, query, message):
    data = Data(str(tmp_path))
    write_part(f"{tmp_path}/b.jsonl", data.tables["s"].select(["k", "ts"]), "json")
    engine = dsms.Engine()
    engine.execute(data.ddl() + f"""CREATE STREAM b (k VARCHAR, ts TIMESTAMP(3)) WITH (connector = 'file',
        path = '{tmp_path}/b.jsonl', format = 'json'); SET 'backfill' = 'duckdb';""")
    with pytest.raises(dsms.UnsupportedPlan) as info:
        engine.query(query)
    text = str(info.value)
    assert text.startswith("cannot backfill on duckdb and continue live") and message in text, text
    assert "SET 'backfill' = 'off'" in text
    engine.execute("SET 'backfill' = 'off'")
    engine.query(query)  # the runtime alone runs it


def test_explain_names_the_backfill(tmp_path):
    data = Data(str(tmp_path))
    engine = dsms.Engine()
    engine.execute(data.ddl() + "SET 'backfill' = 'spark';")
    first = engine.execute("EXPLAIN " + SHAPES["hop_aggregate"][0]).message.splitlines()[0]
    assert first.startswith("route: runtime (") and first.endswith(
        "; backfill: spark (the files present when the query starts, then the runtime)"), first
