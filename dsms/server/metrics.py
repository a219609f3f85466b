"""Prometheus metrics of the server and of every query, and the /metrics, /health, /ready endpoints.

Query numbers are read on the engine thread when a scrape arrives (one
command), then rendered by prometheus-client from that snapshot, so a
scrape never reads the engine while it runs.
"""

from __future__ import annotations

import asyncio
import logging
import time

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..runtime.operators.base import MAX_WATERMARK, MIN_WATERMARK

log = logging.getLogger("dsms.server")


def query_stats(engine) -> dict:
    """What a scrape reports about the queries (engine thread)."""
    now_us = engine.scheduler.clock.now_us()
    queries = []
    for query in engine.queries.running.values():
        job = query.job
        stats = query.stats()
        wm = stats["watermark"]
        late = dict(getattr(job, "late", {}) or {})
        by_operator = dict(getattr(job, "late_by_operator", {}) or {})
        backlog = getattr(job, "backlog", None)
        queries.append({"id": query.id, "kind": query.kind, "status": stats["status"],
                        "rows_in": stats["rows_in"], "rows_out": stats["rows_out"],
                        "late": {k: v for k, v in late.items() if k not in by_operator}, "late_by_operator": by_operator,
                        "backlog": backlog() if backlog is not None else {}, "state_rows": stats["state_rows"],
                        "state_bytes": stats["state_bytes"],
                        "watermark_us": wm if wm is not None and MIN_WATERMARK < wm < MAX_WATERMARK else None,
                        "checkpoint_age_s": (now_us - query.checkpoint_at) / 1e6
                        if query.uid is not None and query.checkpoint_at is not None else None,
                        "checkpoint_s": query.checkpoint_seconds, "checkpoints": query.checkpoint_seq})
    return {"queries": queries, "wall_us": time.time() * 1e6}


class _QueryCollector:
    def __init__(self):
        self.snapshot: dict = {"queries": [], "wall_us": 0}

    def collect(self):
        q = self.snapshot["queries"]
        wall = self.snapshot["wall_us"]
        families = {
            "in": CounterMetricFamily("dsms_query_events_in", "Events the query has read", labels=["query"]),
            "out": CounterMetricFamily("dsms_query_rows_out", "Rows (changes) the query has emitted", labels=["query"]),
            "late": CounterMetricFamily("dsms_query_late_events_dropped", "Late events dropped by a source "
                                        "(under operators that do not judge lateness per window)",
                                        labels=["query", "source"]),
            "oplate": CounterMetricFamily("dsms_operator_late_events_dropped", "Late events dropped by an operator "
                                          "(#id Kind, as EXPLAIN and SHOW PROGRESS name it)",
                                          labels=["query", "operator"]),
            "backlog": GaugeMetricFamily("dsms_source_lag", "How far a source's reader is behind the head of its "
                                         "input: Kafka consumer lag (messages), bytes left of the file being read",
                                         labels=["query", "source", "unit"]),
            "wm": GaugeMetricFamily("dsms_query_watermark_seconds", "The query's output watermark (Unix seconds)",
                                    labels=["query"]),
            "lag": GaugeMetricFamily("dsms_query_watermark_lag_seconds", "Wall-clock time minus the watermark",
                                     labels=["query"]),
            "rows": GaugeMetricFamily("dsms_query_state_rows", "Rows held in the query's state", labels=["query"]),
            "bytes": GaugeMetricFamily("dsms_query_state_bytes", "Bytes held in the query's state", labels=["query"]),
            "age": GaugeMetricFamily("dsms_query_checkpoint_age_seconds", "Time since the query's last checkpoint",
                                     labels=["query"]),
            "ckpt_s": GaugeMetricFamily("dsms_query_checkpoint_duration_seconds", "How long the query's last "
                                        "checkpoint took", labels=["query"]),
            "ckpts": CounterMetricFamily("dsms_query_checkpoints", "Checkpoints taken of the query", labels=["query"]),
            "status": GaugeMetricFamily("dsms_query_status", "1 for the query's current status",
                                        labels=["query", "kind", "status"]),
        }
        for s in q:
            qid = s["id"]
            families["in"].add_metric([qid], s["rows_in"])
            families["out"].add_metric([qid], s["rows_out"])
            for source, n in s["late"].items():
                families["late"].add_metric([qid, source], n)
            for operator, n in s["late_by_operator"].items():
                families["oplate"].add_metric([qid, operator], n)
            for source, (amount, unit) in s["backlog"].items():
                families["backlog"].add_metric([qid, source, unit], amount)
            if s["watermark_us"] is not None:
                families["wm"].add_metric([qid], s["watermark_us"] / 1e6)
                families["lag"].add_metric([qid], (wall - s["watermark_us"]) / 1e6)
            families["rows"].add_metric([qid], s["state_rows"])
            families["bytes"].add_metric([qid], s["state_bytes"])
            if s["checkpoint_age_s"] is not None:
                families["age"].add_metric([qid], s["checkpoint_age_s"])
            if s["checkpoint_s"] is not None:
                families["ckpt_s"].add_metric([qid], s["checkpoint_s"])
            families["ckpts"].add_metric([qid], s["checkpoints"])
            families["status"].add_metric([qid, s["kind"], s["status"]], 1)
        yield from families.values()


class Metrics:
    """The server's own counters and the query collector, in one registry."""

    def __init__(self):
        self.registry = CollectorRegistry()
        self.queries = _QueryCollector()
        self.registry.register(self.queries)
        r = self.registry
        self.clients = Gauge("dsms_clients", "Connected clients", registry=r)
        self.subscriber_count = Gauge("dsms_subscribers", "Open feeds (SUBSCRIBE, EMIT CHANGES, cursors)", registry=r)
        self.statements = Counter("dsms_statements", "Statements run for clients", registry=r)
        self.errors = Counter("dsms_statement_errors", "Statements that ended in an error", registry=r)
        self.rows_streamed = Counter("dsms_rows_streamed", "Changes sent to subscribers", registry=r)
        self.rows_copied = Counter("dsms_copy_rows", "Rows received by COPY FROM STDIN", registry=r)
        self.pulls = Counter("dsms_pull_queries", "Pull queries over materialized views, by where they were answered "
                             "(reader: a plan run on a reader thread; engine: planned and run on the engine thread)",
                             ["served_by"], registry=r)
        self.dropped = Counter("dsms_subscribers_dropped", "Subscribers dropped for falling behind", registry=r)
        self.checkpoint_seconds = Gauge("dsms_checkpoint_duration_seconds",
                                        "Duration of the last checkpoint of every query the server took", registry=r)
        self.started = Gauge("dsms_start_time_seconds", "When the server started (Unix seconds)", registry=r)
        self.started.set(time.time())

    def subscribers(self, delta: int) -> None:
        self.subscriber_count.inc(delta)

    def streamed(self, rows: int) -> None:
        self.rows_streamed.inc(rows)

    def copied(self, rows: int) -> None:
        self.rows_copied.inc(rows)

    def render(self, stats: dict) -> bytes:
        self.queries.snapshot = stats
        return generate_latest(self.registry)


async def serve_http(server, host: str, port: int) -> asyncio.AbstractServer:
    """GET /metrics, /health (the process answers) and /ready (restored and accepting clients)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            parts = request.split(b"\r\n", 1)[0].decode(errors="replace").split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else "/"
            if path == "/metrics":
                stats = await server.host.call(query_stats)
                status, kind, body = "200 OK", CONTENT_TYPE_LATEST, server.metrics.render(stats)
            elif path == "/health":
                status, kind, body = "200 OK", "text/plain", b"ok\n"
            elif path == "/ready":
                ready = server.ready
                status, kind, body = ("200 OK" if ready else "503 Service Unavailable"), "text/plain", \
                    (b"ready\n" if ready else b"starting\n")
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not found: try /metrics, /health, /ready\n"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except RuntimeError as e:  # the engine is stopping
            log.debug("metrics request during shutdown: %s", e)
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)
