"""An application that embeds dsms: orders come in from Python, standing queries keep
revenue per region and minute and per customer up to date, a callback raises alerts as
windows close, and the program reads results as Arrow and pandas.

    python examples/embedding/orders_app.py [--state-dir DIR]

With --state-dir, run it twice: the second run finds the views and their contents
again and only adds the orders it has not inserted yet.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random

import dsms

SETUP = """
CREATE STREAM IF NOT EXISTS orders (order_id BIGINT, customer VARCHAR, region VARCHAR, amount DOUBLE,
  ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (connector = 'memory');

CREATE MATERIALIZED VIEW IF NOT EXISTS revenue_per_minute AS
  SELECT window_start, region, COUNT(*) AS orders, SUM(amount) AS revenue
  FROM TABLE(TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
  GROUP BY window_start, window_end, region;

CREATE MATERIALIZED VIEW IF NOT EXISTS per_customer AS
  SELECT customer, COUNT(*) AS orders, SUM(amount) AS spent FROM orders GROUP BY customer;
"""

START = dt.datetime(2024, 5, 1, 9, 0, 0)
ALERT_REVENUE = 900.0


def make_orders(n: int = 600, seed: int = 7) -> list[dict]:
    """Orders over ten minutes, a few seconds out of order, as an application would receive them."""
    rng = random.Random(seed)
    orders = []
    for i in range(n):
        ts = START + dt.timedelta(seconds=i * 600 / n + rng.uniform(-3, 3))
        orders.append({"order_id": i, "customer": f"c{rng.randrange(12)}", "region": rng.choice(["eu", "us", "apac"]),
                       "amount": round(rng.uniform(5, 80), 2), "ts": max(ts, START)})
    return orders


def main(state_dir: str | None = None, orders: list[dict] | None = None, out=print) -> dict:
    orders = make_orders() if orders is None else orders
    alerts = []

    def on_window(changes):  # called with each batch of changes, as pyarrow, with an `op` column
        for row in changes.to_pylist():
            if row["op"] == "+I" and row["revenue"] > ALERT_REVENUE:
                alerts.append(row)
                out(f"alert: {row['region']} made {row['revenue']:.2f} in the minute from {row['window_start']}")

    with dsms.Engine(state_dir=state_dir) as engine:
        engine.execute(SETUP)
        engine.subscribe("revenue_per_minute", on_window, snapshot=False)
        # Orders an earlier run (same state directory) already inserted are in the stream.
        seen = sum(engine.execute("SELECT orders FROM per_customer").table.column("orders").to_pylist())
        for i in range(seen, len(orders), 50):
            engine.insert("orders", orders[i:i + 50])
            engine.run_until_idle()  # the standing queries catch up; alerts fire as windows close

        top = engine.execute("SELECT customer, spent FROM per_customer WHERE orders >= 50").to_pandas()
        out(top.sort_values("spent", ascending=False).to_string(index=False))
        revenue = engine.execute("SELECT * FROM revenue_per_minute").table  # a pull query: the view now
        out(f"{revenue.num_rows} closed windows, {len(alerts)} alerts")
        return {"revenue": revenue, "per_customer": engine.execute("SELECT * FROM per_customer").table,
                "alerts": alerts}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state-dir", default=None)
    main(parser.parse_args().state_dir)
