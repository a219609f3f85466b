"""Generate the ad_joins example's versioned ads table as Debezium JSON.

The ten ads of the ad_ctr example (whose impressions and clicks this example
reuses) are created at 09:00, then change their bid every two to four minutes
of event time; ad 10 moves to another campaign halfway. Each change is an
envelope with the row before and after it; ``ts`` is when the change takes
effect.

    python examples/ad_joins/generate.py
"""

import datetime as dt
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
START = dt.datetime(2024, 5, 1, 9, 0, 0)


def main(seed: int = 7) -> None:
    rng = random.Random(seed)
    rows = {ad: {"ad_id": ad, "campaign": "spring" if ad <= 5 else "summer", "bid": round(rng.uniform(0.1, 1.0), 2),
                 "ts": START} for ad in range(1, 11)}
    changes = [{"op": "c", "before": None, "after": dict(r)} for r in rows.values()]
    for ad in rows:
        t = START
        while True:
            t += dt.timedelta(seconds=rng.randrange(120, 240))
            if t >= START + dt.timedelta(minutes=10):
                break
            before = dict(rows[ad])
            rows[ad]["bid"], rows[ad]["ts"] = round(rng.uniform(0.1, 1.0), 2), t
            if ad == 10 and t > START + dt.timedelta(minutes=5):
                rows[ad]["campaign"] = "spring"
            changes.append({"op": "u", "before": before, "after": dict(rows[ad])})
    changes.sort(key=lambda c: c["after"]["ts"])
    with open(os.path.join(HERE, "data", "ads.jsonl"), "w") as f:
        for c in changes:
            out = {k: (None if v is None else {**v, "ts": v["ts"].strftime("%Y-%m-%d %H:%M:%S")})
                   for k, v in c.items() if k != "op"}
            f.write(json.dumps({"op": c["op"], **out, "source": {"table": "ads"}}) + "\n")
    print(f"{len(changes)} changes of {len(rows)} ads")


if __name__ == "__main__":
    main()
