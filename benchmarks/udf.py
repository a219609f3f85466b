"""Python functions inside the 10-second TUMBLE per ad, against the same query with built-in SQL.

The generated ad impressions (``common.impressions``) are aggregated per
ad and 10-second window with ``SUM(gross(cost))``, where ``gross`` is

* ``built-in``: the SQL expression ``cost * 1.2``;
* ``vectorized``: a Python function over pyarrow arrays (``pc.multiply(cost, 1.2)``);
* ``mapped``: a Python function over plain values (``cost * 1.2``), called once per distinct value
  of each vector DuckDB hands it (costs rarely repeat here, so about once per row);

and, for the aggregate itself, ``aggregate``: ``py_sum(cost * 1.2)``, a Python aggregate function
(``create_accumulator`` / ``accumulate`` / ``get_value``: one accumulator per window and ad) in place
of the built-in ``SUM``.

Each variant runs on the incremental runtime and on the DuckDB route; the
ratio is the built-in query's time over the variant's (1.0: as fast as
built-in SQL).

    python benchmarks/udf.py [--events 2000000] [--batch 65536]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import impressions, impressions_ddl  # noqa: E402

QUERY = """SELECT window_start, window_end, ad_id, COUNT(*) AS impressions, {gross} AS gross
           FROM TABLE(TUMBLE(TABLE impressions, DESCRIPTOR(ts), INTERVAL '10' SECOND))
           GROUP BY window_start, window_end, ad_id"""
VARIANTS = {"built-in": "SUM(cost * 1.2)", "vectorized": "SUM(gross_arrow(cost))", "mapped": "SUM(gross_value(cost))",
            "aggregate": "py_sum(cost * 1.2)"}


class PySum:
    """A Python aggregate function: the sum of its values."""

    def create_accumulator(self):
        return [0.0]

    def accumulate(self, acc, value):
        acc[0] += value

    def get_value(self, acc) -> float:
        return acc[0]


def time_variant(path: str, out: str, route: str, variant: str, batch: int) -> tuple[float, int]:
    import pyarrow as pa
    import pyarrow.compute as pc

    import dsms

    def gross_arrow(cost: pa.Array) -> pa.Array:
        return pc.multiply(cost, 1.2)

    def gross_value(cost):
        return None if cost is None else cost * 1.2

    engine = dsms.Engine()
    engine.create_function("gross_arrow", gross_arrow, returns="DOUBLE")
    engine.create_function("gross_value", gross_value, returns="DOUBLE")
    engine.create_function("py_sum", PySum())
    engine.execute(f"SET 'engine' = '{route}'")
    engine.scheduler.batch_rows = batch
    engine.execute(impressions_ddl(path))
    query = QUERY.format(gross=VARIANTS[variant])
    engine.execute(f"CREATE SINK out WITH (connector = 'file', path = '{out}', format = 'json', "
                   f"'sink.mode' = 'overwrite') AS {query}")
    began = time.perf_counter()
    engine.run_until_idle()
    seconds = time.perf_counter() - began
    with open(out) as f:
        rows = sum(1 for _ in f)
    engine.close()
    return seconds, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=65_536, help="rows per batch on the runtime")
    args = parser.parse_args()
    path = impressions(args.events)
    print(f"SUM(gross(cost)) per ad and 10 s TUMBLE over {args.events:,} impressions")
    with tempfile.TemporaryDirectory() as tmp:
        for route in ("runtime", "duckdb"):
            results = {}
            for variant in VARIANTS:
                results[variant] = time_variant(path, os.path.join(tmp, f"{route}-{variant}.jsonl"), route, variant,
                                                args.batch)
            base, base_rows = results["built-in"]
            for variant, (seconds, rows) in results.items():
                assert rows == base_rows, (route, variant, rows, base_rows)
                print(f"  {route:8s} {variant:11s} {seconds:7.2f} s  {args.events / seconds / 1e6:6.2f} M events/s  "
                      f"ratio to built-in {base / seconds:5.2f}")


if __name__ == "__main__":
    main()
