"""What the interactive shell costs: throughput of a standing query it drives, how long the prompt
waits for the engine, and the CPU the shell burns while idle.

The 10-second TUMBLE COUNT/SUM per ad of throughput.py (2,000,000 events from Parquet by default)
runs as a sink three ways: as one DuckDB statement, through the engine directly, and started
with CREATE SINK in the shell (its event loop steps the engine between keystrokes). Meanwhile a
task in the shell's loop measures how late its 10 ms timer fires: the longest the prompt waited.

    python benchmarks/repl.py [--events N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

import dsms
from dsms.repl import Repl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import QUERY, impressions, impressions_ddl  # noqa: E402

SINK = "CREATE SINK per_ad WITH (connector = 'memory') AS " + QUERY.strip()


def direct(path: str) -> float:
    engine = dsms.Engine()
    engine.execute(impressions_ddl(path))
    engine.execute(SINK)
    started = time.perf_counter()
    engine.run_until_idle()
    assert engine.sink("per_ad").done
    return time.perf_counter() - started


async def in_the_shell(path: str) -> tuple[float, float, float]:
    """Seconds to finish the sink, the longest wait of a 10 ms timer meanwhile, and idle CPU per second."""
    engine = dsms.Engine()
    engine.execute(impressions_ddl(path))
    with create_pipe_input() as keys:
        repl = Repl(engine, input=keys, output=DummyOutput())
        shell = asyncio.create_task(repl.run())
        await asyncio.sleep(0.2)
        keys.send_text(SINK + ";\r")
        while "per_ad" not in engine.queries.running:  # typed and planned
            await asyncio.sleep(0.001)
        started, worst = time.perf_counter(), 0.0
        while not engine.sink("per_ad").done:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            worst = max(worst, time.perf_counter() - before - 0.01)
        elapsed = time.perf_counter() - started
        # Idle: a live SELECT over a memory stream nobody writes to, for three seconds.
        engine.execute("CREATE STREAM quiet (x BIGINT) WITH (connector = 'memory')")
        keys.send_text("SELECT x FROM quiet;\r")
        await asyncio.sleep(0.5)
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.sleep(3)
        idle = (time.process_time() - cpu) / (time.perf_counter() - wall)
        keys.send_text("\x03\\q\r")
        await shell
    return elapsed, worst, idle


def duckdb_batch(path: str) -> float:
    import duckdb

    started = time.perf_counter()
    duckdb.sql(f"""SELECT time_bucket(INTERVAL '10 seconds', ts) AS ws, ad_id, COUNT(*), SUM(cost)
                   FROM read_parquet('{path}') GROUP BY ALL""").fetchall()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=2_000_000)
    args = parser.parse_args()
    path = impressions(args.events)
    n = args.events
    duck = duckdb_batch(path)
    alone = direct(path)
    shell, worst, idle = asyncio.run(in_the_shell(path))
    print(f"{n:,} events, 10 s TUMBLE COUNT/SUM per ad into a sink")
    print(f"  DuckDB batch          {n / duck:12,.0f} events/s")
    print(f"  engine alone          {n / alone:12,.0f} events/s   {duck / alone:5.2f} x DuckDB")
    print(f"  started in the shell  {n / shell:12,.0f} events/s   {duck / shell:5.2f} x DuckDB, "
          f"{alone / shell:4.2f} x the engine alone")
    print(f"  longest the prompt waited for a step while it ran: {worst * 1000:.0f} ms")
    print(f"  CPU while idle with a live SELECT: {idle * 100:.1f} % of one core")


if __name__ == "__main__":
    main()
