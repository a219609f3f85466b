"""Generate the ad_ctr example's input: impressions and clicks as JSON lines.

Ten ads over ten minutes. Each ad has its own click-through rate; a click
follows its impression by 1 to 20 seconds. Both files are written in
arrival order, which is up to 3 seconds out of event-time order.
Impressions carry timestamps as strings, clicks as epoch milliseconds:
dsms reads both.

    python examples/ad_ctr/generate.py
"""

import datetime as dt
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
START = dt.datetime(2024, 5, 1, 9, 0, 0)


def main(seed: int = 42) -> None:
    rng = random.Random(seed)
    ctr = {ad: rng.uniform(0.01, 0.12) for ad in range(1, 11)}
    impressions, clicks = [], []
    t = 0.0
    n = 0
    while t < 600:
        t += rng.expovariate(8.0)  # about 8 impressions a second
        n += 1
        ad = rng.choice(list(ctr))
        ts = START + dt.timedelta(seconds=round(t, 3))
        imp = {"impression_id": f"i{n}", "ad_id": ad, "user_id": rng.randrange(1, 2000), "ts": ts}
        impressions.append(imp)
        if rng.random() < ctr[ad]:
            clicks.append({**imp, "ts": ts + dt.timedelta(seconds=round(rng.uniform(1, 20), 3))})

    def arrival(rows):
        jitter = [r["ts"] + dt.timedelta(seconds=rng.uniform(0, 3)) for r in rows]
        return [rows[i] for i in sorted(range(len(rows)), key=lambda i: jitter[i])]

    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    with open(os.path.join(HERE, "data", "impressions.jsonl"), "w") as f:
        for r in arrival(impressions):
            f.write(json.dumps({**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]}) + "\n")
    with open(os.path.join(HERE, "data", "clicks.jsonl"), "w") as f:
        for r in arrival(clicks):
            millis = int((r["ts"] - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
            f.write(json.dumps({**r, "ts": millis}) + "\n")
    print(f"{len(impressions)} impressions, {len(clicks)} clicks")


if __name__ == "__main__":
    main()
