"""Flink's utility connectors: datagen (rows made up), print (changes to stdout), blackhole (rows dropped).

Expected rows are hand-computed from the sequences' definitions; random
values are checked against their declared ranges.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import re
import subprocess
import sys
import textwrap

import pyarrow as pa

import dsms
from dsms.planner.catalog import SourceDef
from dsms.runtime.clock import VirtualClock
from dsms.runtime.connectors.base import SourceContext
from dsms.runtime.connectors.datagen import DatagenReader
from dsms.runtime.connectors.factory import read_request

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
T0 = dt.datetime(2024, 1, 1, 10, 0, 0)


def rows_of(ddl: str, query: str, batch_size: int | None = None) -> list[dict]:
    engine = dsms.Engine()
    if batch_size:
        engine.scheduler.batch_rows = batch_size
    engine.execute(ddl)
    q = engine.query(query)
    engine.run_until_idle()
    return q.snapshot().to_pylist()


def reader(ddl: str, clock=None, batch_rows: int = 1000) -> DatagenReader:
    engine = dsms.Engine()
    engine.execute(ddl)
    src = next(o for o in engine.catalog.objects.values() if isinstance(o, SourceDef))
    req = read_request(src, src.physical, None, batch_rows)
    return DatagenReader(req, SourceContext(src, clock or VirtualClock(0)))


def drain(r: DatagenReader) -> pa.Table:
    batches = []
    while (b := r.read()) is not None:
        batches.append(b)
    return pa.concat_tables(batches)


def test_number_of_rows_bounds_the_source():
    ddl = "CREATE STREAM g (id BIGINT, s VARCHAR) WITH (connector = 'datagen', 'number-of-rows' = '1234')"
    assert len(rows_of(ddl, "SELECT id, s FROM g", batch_size=100)) == 1234
    assert dsms.Engine().execute(ddl) and len(rows_of(ddl.replace("1234", "0"), "SELECT id FROM g")) == 0


def test_sequences_count_from_start_to_end_and_the_shortest_ends_the_source():
    rows = rows_of("""CREATE STREAM g (id INT, label VARCHAR, ts TIMESTAMP(3)) WITH (connector = 'datagen',
                        'fields.id.kind' = 'sequence', 'fields.id.start' = '-2', 'fields.id.end' = '1000',
                        'fields.label.kind' = 'sequence', 'fields.label.start' = '7', 'fields.label.end' = '11',
                        'fields.ts.kind' = 'sequence', 'fields.ts.start' = '2024-01-01 10:00:00',
                        'fields.ts.step' = '1.5 s')""", "SELECT id, label, ts FROM g", batch_size=2)
    assert rows == [{"id": -2 + i, "label": str(7 + i), "ts": T0 + dt.timedelta(seconds=1.5 * i)} for i in range(5)]


def test_random_values_stay_in_their_ranges():
    rows = rows_of("""CREATE STREAM g (i SMALLINT, d DOUBLE, s VARCHAR, b BOOLEAN, p DECIMAL(5, 2), t TINYINT)
                      WITH (connector = 'datagen', 'number-of-rows' = '5000', seed = '1',
                            'fields.i.min' = '-5', 'fields.i.max' = '5', 'fields.d.min' = '0.5',
                            'fields.d.max' = '2.5', 'fields.s.length' = '7', 'fields.p.min' = '-1',
                            'fields.p.max' = '1')""", "SELECT * FROM g", batch_size=777)
    assert len(rows) == 5000
    assert {r["i"] for r in rows} == set(range(-5, 6))  # each of 11 values, 5000 draws: all appear
    assert all(0.5 <= r["d"] < 2.5 for r in rows)
    assert all(re.fullmatch(r"[0-9a-f]{7}", r["s"]) for r in rows)
    assert {r["b"] for r in rows} == {True, False}
    assert all(-1 <= r["p"] <= 1 for r in rows)
    assert min(r["t"] for r in rows) < -100 and max(r["t"] for r in rows) > 100  # TINYINT's whole range


def test_a_seed_gives_the_same_rows_whatever_the_batch_size():
    ddl = ("CREATE STREAM g (a BIGINT, s VARCHAR, d DOUBLE) WITH (connector = 'datagen', 'number-of-rows' = '300', "
           "seed = '{seed}', 'fields.s.length' = '40')")
    one = rows_of(ddl.format(seed=9), "SELECT * FROM g", batch_size=7)
    assert one == rows_of(ddl.format(seed=9), "SELECT * FROM g", batch_size=1000)
    assert one != rows_of(ddl.format(seed=10), "SELECT * FROM g", batch_size=7)
    assert len({r["a"] for r in one}) == 300  # BIGINT draws do not repeat


def test_seek_continues_after_the_position_even_without_a_seed():
    ddl = "CREATE STREAM g (a INT, s VARCHAR) WITH (connector = 'datagen', 'number-of-rows' = '50')"
    first = reader(ddl, batch_rows=8)
    assert pa.concat_tables([first.read(), first.read(), first.read()]).num_rows == 24
    resumed = reader(ddl, batch_rows=5)  # another seed until it seeks: the seed is in the position
    resumed.seek(first.position)
    rest = drain(resumed)
    assert rest.num_rows == 50 - 24
    assert rest.equals(drain(first))  # as if it had never stopped


def test_rows_per_second_paces_with_the_clock():
    clock = VirtualClock(0)
    r = reader("CREATE STREAM g (a INT) WITH (connector = 'datagen', 'rows-per-second' = '100')", clock)
    assert r.read().num_rows == 100  # the first second's rows at once
    assert r.read().num_rows == 0
    clock.advance(500_000)
    assert r.read().num_rows == 50
    clock.advance(10_000_000)
    assert r.read().num_rows == 1000  # no more than a batch at a time


def test_random_timestamps_are_up_to_max_past_before_now():
    now = int((T0 - dt.datetime(1970, 1, 1)).total_seconds() * 1e6)
    r = reader("CREATE STREAM g (ts TIMESTAMP(3)) WITH (connector = 'datagen', 'number-of-rows' = '500', "
               "'fields.ts.max-past' = '10 s')", VirtualClock(now))
    times = drain(r).column("ts").to_pylist()
    assert all(T0 - dt.timedelta(seconds=10) <= t <= T0 for t in times)
    assert max(times) - min(times) > dt.timedelta(seconds=9)


def run_script(tmp_path, sql: str, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.sql"
    script.write_text(textwrap.dedent(sql))
    out = subprocess.run([DSMS, "run", *args, str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def test_datagen_to_tumble_to_print(tmp_path):
    # ids 1..10 at 10:00:00, :02, :04, ... :18; 5-second windows:
    #   [00, 05): ids 1 2 3     [05, 10): ids 4 5    [10, 15): ids 6 7 8    [15, 20): ids 9 10
    out = run_script(tmp_path, """
        CREATE STREAM g (id BIGINT, v INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
          WITH (connector = 'datagen', 'rows-per-second' = '4',
                'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '10',
                'fields.v.min' = '3', 'fields.v.max' = '3',
                'fields.ts.kind' = 'sequence', 'fields.ts.start' = '2024-01-01 10:00:00', 'fields.ts.step' = '2 s');
        CREATE SINK out WITH (connector = 'print', 'print-identifier' = 'w') AS
          SELECT window_start, COUNT(*) AS n, SUM(id) AS ids, MAX(v) AS v, CAST(NULL AS INT) AS nothing
          FROM TABLE(TUMBLE(TABLE g, DESCRIPTOR(ts), INTERVAL '5' SECOND)) GROUP BY window_start, window_end;
    """, "--batch-size", "3")
    assert [line for line in out.stdout.splitlines() if line.startswith("w> ")] == [
        "w> +I[2024-01-01 10:00:00.000, 3, 6, 3, null]",
        "w> +I[2024-01-01 10:00:05.000, 2, 9, 3, null]",
        "w> +I[2024-01-01 10:00:10.000, 3, 21, 3, null]",
        "w> +I[2024-01-01 10:00:15.000, 2, 19, 3, null]",
    ]


def test_print_shows_each_change_of_an_updating_result(tmp_path):
    # One row per batch: ids 1 2 3 4 -> k = 1 0 1 0.
    out = run_script(tmp_path, """
        CREATE STREAM g (id INT) WITH (connector = 'datagen',
          'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '4');
        CREATE SINK out WITH (connector = 'print') AS SELECT id % 2 AS k, COUNT(*) AS n FROM g GROUP BY id % 2;
    """, "--batch-size", "1")
    assert [line for line in out.stdout.splitlines() if re.match(r"[+-][IUD]\[", line)] == [
        "+I[1, 1]", "+I[0, 1]", "-U[1, 1]", "+U[1, 2]", "-U[0, 1]", "+U[0, 2]"]


def test_blackhole_takes_every_row():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM g (id BIGINT) WITH (connector = 'datagen', "
                   "'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '5000')")
    engine.execute("CREATE SINK bh WITH (connector = 'blackhole') AS SELECT id FROM g WHERE id % 2 = 0")
    engine.run_until_idle()
    row = engine.execute("SHOW QUERIES").table.to_pylist()[0]
    assert (row["id"], row["status"], row["rows_in"], row["rows_out"]) == ("bh", "finished", 5000, 2500)


def test_the_datagen_example_of_connectors_md_prints_what_the_page_shows(tmp_path):
    page = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs",
                             "connectors.md")).read()
    sql = next(b for b in re.findall(r"```sql\n(.*?)```", page, re.S) if "'datagen'" in b)
    shown = re.search(r"`dsms run` of these prints.*?```text\n(.*?)```", page, re.S).group(1).splitlines()
    out = run_script(tmp_path, sql)
    assert [line for line in out.stdout.splitlines() if line.startswith("orders> ")] == shown


PACED = """
CREATE STREAM g (id BIGINT, r INT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH (connector = 'datagen', 'rows-per-second' = '100', 'number-of-rows' = '1000', seed = '5',
        'fields.id.kind' = 'sequence', 'fields.id.start' = '1', 'fields.id.end' = '100000',
        'fields.r.min' = '0', 'fields.r.max' = '9',
        'fields.ts.kind' = 'sequence', 'fields.ts.start' = '2024-01-01 00:00:00', 'fields.ts.step' = '100 ms');
CREATE SINK per_10s WITH (connector = 'file', path = 'out/per_10s.jsonl', format = 'json') AS
  SELECT window_start, COUNT(*) AS n, SUM(id) AS ids, SUM(r) AS rs
  FROM TABLE(TUMBLE(TABLE g, DESCRIPTOR(ts), INTERVAL '10' SECOND)) GROUP BY window_start, window_end;
"""


def paced_run(tmp_path, crash: bool) -> list[dict]:
    clock, state = VirtualClock(0), str(tmp_path / "state")
    engine = dsms.Engine(state_dir=state, clock=clock, base_dir=str(tmp_path))
    engine.execute(PACED)
    engine.execute("SET 'checkpoint.interval' = '1 h'")  # only the explicit checkpoint below
    engine.run_until_idle()  # the first second's 100 rows
    clock.advance(2_000_000)
    engine.run_until_idle()
    engine.checkpoint()  # after 300 rows
    clock.advance(3_000_000)
    engine.run_until_idle()
    if crash:
        del engine  # gone without close(): rows 301..600 are made again from the checkpoint's position
        gc.collect()
        engine = dsms.Engine(state_dir=state, clock=clock, base_dir=str(tmp_path))
    clock.advance(20_000_000)
    engine.run_until_idle()
    engine.close()
    return [json.loads(line) for line in (tmp_path / "out" / "per_10s.jsonl").read_text().splitlines()]


def test_a_datagen_source_continues_from_its_checkpoint(tmp_path):
    # 10 rows a second of event time: window w holds ids 100w+1 .. 100w+100.
    crashed = paced_run(tmp_path / "a", crash=True)
    assert [(r["window_start"], r["n"], r["ids"]) for r in crashed] == [
        (f"2024-01-01 00:00:{10 * w:02d}.000" if w < 6 else f"2024-01-01 00:01:{10 * (w - 6):02d}.000",
         100, sum(range(100 * w + 1, 100 * w + 101))) for w in range(10)]
    assert all(0 <= r["rs"] <= 900 for r in crashed)
    assert crashed == paced_run(tmp_path / "b", crash=False)  # the random column too: same seed, same rows
