"""What SET 'state.ttl' costs: a group aggregate and a stream-table join with and without a TTL.

The events (user, amount) go into a memory stream in batches of 10,000 rows, with a virtual clock that
moves 1 s per batch. Per query: no TTL; a TTL of 1 h (stamping only: nothing expires); a TTL of 5 s
(keys expire all the time: about 5 batches' keys are alive). Printed: events/s, the ratio to no TTL,
and the state rows at the end (flat with the short TTL).

    python benchmarks/state_ttl.py [--events N] [--users N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

import dsms
from dsms.runtime.clock import VirtualClock

BATCH = 10_000
QUERIES = {
    "group aggregate": "SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM ev GROUP BY user_id",
    "stream-table join": "SELECT ev.user_id, ev.amount, u.tier FROM ev LEFT JOIN users u ON ev.user_id = u.id",
}


def run(sql: str, ttl: str, events: int, users: int) -> tuple[float, int]:
    clock = VirtualClock(start_us=0)
    engine = dsms.Engine(clock=clock)
    engine.execute(f"""
      CREATE STREAM ev (user_id BIGINT, amount DOUBLE) WITH (connector = 'memory');
      CREATE TABLE users (id BIGINT, tier VARCHAR, PRIMARY KEY (id) NOT ENFORCED) WITH (connector = 'memory');
      SET 'state.ttl' = '{ttl}';
    """)
    engine.insert("users", pa.table({"id": np.arange(users), "tier": np.where(np.arange(users) % 3, "a", "b")}))
    q = engine.query(sql)
    rng = np.random.default_rng(1)
    batches = [pa.table({"user_id": rng.integers(0, users, BATCH), "amount": rng.random(BATCH)})
               for _ in range(events // BATCH)]
    began = time.perf_counter()
    for b in batches:
        clock.advance(1_000_000)
        engine.insert("ev", b)
        engine.run_until_idle()
        q.poll()
    seconds = time.perf_counter() - began
    state = q.job.env.state.rows()
    engine.close()
    return events / seconds, state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--users", type=int, default=100_000)
    args = parser.parse_args()
    print(f"{args.events:,} events in batches of {BATCH:,}, {args.users:,} users, the clock 1 s per batch")
    for name, sql in QUERIES.items():
        base = None
        for ttl in ("0 ms", "1 h", "5 s"):
            rate, state = run(sql, ttl, args.events, args.users)
            base = base or rate
            print(f"  {name:<18} state.ttl = {ttl:<5} {rate:>10,.0f} events/s  x{rate / base:.2f}  "
                  f"state rows at the end: {state:,}")


if __name__ == "__main__":
    main()
