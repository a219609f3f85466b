"""JSON_VALUE over raw JSON messages: dsms (runtime and DuckDB route) against DuckDB's own json_extract.

The input is a file of generated JSON messages, one per line, whose shape
varies (a nested user object that is sometimes missing or not an object, an
amount that is a number, a string or absent, a few lines that are not JSON).
dsms reads it with the ``raw`` format and extracts three fields with
``JSON_VALUE`` (Flink's semantics: strict paths, NULL on empty and on
error); DuckDB reads the same file as one text column and extracts the same
fields with ``json_extract_string`` (guarded by ``json_valid``, since a line
that is not JSON is an error in DuckDB), casting as dsms's RETURNING does.
Both write their rows to a JSON-lines file. The ratio is DuckDB's time over
dsms's (1.0: as fast as DuckDB).

    python benchmarks/json_functions.py [--events 5000000] [--batch 65536]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import DATA, time_duckdb  # noqa: E402

QUERY = """SELECT JSON_VALUE(line, '$.user.id' RETURNING BIGINT) AS user_id,
                  JSON_VALUE(line, '$.event') AS event,
                  JSON_VALUE(line, '$.amount' RETURNING DOUBLE) AS amount
           FROM events"""


def duckdb_query(path: str) -> str:
    lines = (f"read_csv('{path}', columns = {{'line': 'VARCHAR'}}, delim = '\\x01', quote = '', escape = '', "
             "header = false, auto_detect = false)")
    return f"""SELECT TRY_CAST(CASE WHEN json_valid(line) THEN json_extract_string(line, '$.user.id') END AS BIGINT)
                        AS user_id,
                      CASE WHEN json_valid(line) THEN json_extract_string(line, '$.event') END AS event,
                      TRY_CAST(CASE WHEN json_valid(line) THEN json_extract_string(line, '$.amount') END AS DOUBLE)
                        AS amount
               FROM {lines}"""


def generate(path: str, events: int) -> None:
    rnd = random.Random(14)
    kinds = ["click", "view", "buy", "share"]
    with open(path, "w") as f:
        for i in range(events):
            r = rnd.random()
            if r < 0.01:
                f.write(f"not json {i}\n")
                continue
            user = {"id": i % 100_000, "name": f"u{i % 977}"} if r < 0.9 else (None if r < 0.95 else [i])
            doc = {"event": kinds[i % 4], "user": user, "ts": 1_700_000_000_000 + i}
            if r < 0.7:
                doc["amount"] = round(r * 100, 2)
            elif r < 0.8:
                doc["amount"] = str(i % 50)
            f.write(json.dumps(doc) + "\n")


def messages(events: int) -> str:
    os.makedirs(DATA, exist_ok=True)
    path = os.path.join(DATA, f"json_messages_{events}.txt")
    if not os.path.exists(path):
        print(f"generating {events:,} messages -> {path}", file=sys.stderr)
        generate(path + ".part", events)
        os.replace(path + ".part", path)
    return path


def time_dsms(path: str, out: str, route: str, batch: int) -> dict:
    import dsms

    engine = dsms.Engine()
    engine.execute(f"SET 'engine' = '{route}'")
    engine.scheduler.batch_rows = batch
    engine.execute(f"CREATE STREAM events (line STRING) WITH (connector = 'file', path = '{path}', format = 'raw')")
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json') AS {QUERY}")
    began = time.perf_counter()
    engine.run_until_idle()
    return {"seconds": time.perf_counter() - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5_000_000)
    parser.add_argument("--batch", type=int, default=65_536, help="rows per batch on the runtime")
    args = parser.parse_args()
    path = messages(args.events)
    with tempfile.TemporaryDirectory() as tmp:
        duck = time_duckdb(duckdb_query(path), os.path.join(tmp, "duck.jsonl"), [])
        results = {"duckdb json_extract": duck["seconds"]}
        for route in ("runtime", "duckdb"):
            out = os.path.join(tmp, f"{route}.jsonl")
            results[f"dsms {route} route"] = time_dsms(path, out, route, args.batch)["seconds"]
            with open(out) as f:
                rows = sum(1 for _ in f)
            assert rows == args.events, (route, rows)
    print(f"JSON_VALUE x3 over {args.events:,} raw JSON messages ({os.path.getsize(path) / 1e6:.0f} MB)")
    base = results["duckdb json_extract"]
    for name, seconds in results.items():
        print(f"  {name:22s} {seconds:7.2f} s  {args.events / seconds / 1e6:6.2f} M events/s  "
              f"ratio to DuckDB {base / seconds:5.2f}")


if __name__ == "__main__":
    main()
