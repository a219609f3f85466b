"""The Kafka -> dsms -> PostgreSQL demo (examples/kafka_to_postgres, ``make demo-kafka``) end to end.

The driver runs as ``make demo-kafka`` runs it, against the test broker and
the test PostgreSQL; the table it fills is checked against the
click-through rate DuckDB computes from the messages read back from the
topics. Skipped, with the reason, where the broker or PostgreSQL cannot run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from kafka_helpers import consume_all, values
from postgres_helpers import fetch, unique

DRIVER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "examples", "kafka_to_postgres", "run_demo.py")


def test_the_demo_writes_the_per_minute_ctr_of_the_kafka_events_to_postgresql(kafka_broker, postgres, tmp_path):
    suffix = unique("_demo")
    run = subprocess.run([sys.executable, DRIVER, "--bootstrap", kafka_broker, "--database-url", postgres.url,
                          "--suffix", suffix], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"PostgreSQL table ad_ctr_per_minute{suffix}:" in run.stdout

    for kind in ("impressions", "clicks"):
        events = values(consume_all(kafka_broker, f"ad_{kind}{suffix}"))
        assert events, f"the driver produced no {kind}"
        (tmp_path / f"{kind}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    columns = "columns = {impression_id: 'VARCHAR', ad_id: 'BIGINT', ts: 'TIMESTAMP'}"
    oracle = duckdb.sql(f"""
        SELECT date_trunc('minute', ts) AS window_start, date_trunc('minute', ts) + INTERVAL 1 MINUTE,
               ad_id, SUM(imp), SUM(click), SUM(click)::DOUBLE / NULLIF(SUM(imp), 0)
        FROM (SELECT ad_id, ts, 1 AS imp, 0 AS click FROM read_json('{tmp_path}/impressions.jsonl', {columns})
              UNION ALL
              SELECT ad_id, ts, 0, 1 FROM read_json('{tmp_path}/clicks.jsonl', {columns}))
        GROUP BY ALL ORDER BY window_start, ad_id""").fetchall()

    table = fetch(postgres, "SELECT window_start, window_end, ad_id, impressions, clicks, ctr "
                            f"FROM ad_ctr_per_minute{suffix} ORDER BY window_start, ad_id")
    assert [row[:5] for row in table] == [row[:5] for row in oracle]
    # A window with clicks but no impressions has a NULL rate: NaN here, so approx can hold it.
    def rates(rows):
        return [float("nan") if row[5] is None else row[5] for row in rows]

    assert rates(table) == pytest.approx(rates(oracle), rel=1e-12, nan_ok=True)
