"""Routing: which engine runs a query, and why (``SET 'engine'``, ``dsms run --engine``).

* ``runtime``: the in-process incremental runtime (every query it can plan);
* ``duckdb``: the query lowered to one DuckDB statement over its files;
* ``spark``: the query lowered to Spark SQL, run through PySpark; over
  watched files (``watch = 'true'``), a Spark Structured Streaming query
  (the *continuous* Spark route, ``lower/stream.py``);
* ``auto`` (the default) picks, in this order:

  1. the runtime when a batch route cannot run the query (memory or
     watched sources, processing time, lookup joins, ...), when a source
     has an ``idle_timeout`` (idleness is a matter of processing time), or
     when the result is updating: the runtime emits its changes, a batch
     route only the final rows, so routing would change what a sink
     receives (force a batch route with ``SET 'engine'`` for that), or
     when a source is read through its connector rather than as files (a
     bounded Kafka read), which cannot be sized before it is read;
  2. Spark when ``spark.master`` is set;
  3. DuckDB when the files' estimated size is at most ``'batch.max_bytes'``
     (file sizes; Parquet's uncompressed row-group sizes), else Spark.

A query the runtime runs over watched files takes its history from a
batch route first when ``SET 'backfill' = 'duckdb' | 'spark'`` (``analysis/backfill.py``).

Example:
    >>> parse_size("512MB"), parse_size("2g"), parse_size("1000")
    (536870912, 2147483648, 1000)
    >>> format_size(3 * 1024**3)
    '3.0 GiB'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable

from ..catalog import SourceDef
from ..logical import nodes as L
from ..logical.late import LateScan
from ..lower.plan import refusal
from ..lower.stream import unbounded_sources

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


@dataclass(frozen=True)
class RouteChoice:
    """Which engine runs a query and why; the runtime's route registry finds the route that serves it."""

    engine: str  # runtime | duckdb | spark
    reason: str
    continuous: bool = False  # spark over watched files: a Structured Streaming query (lower/stream.py)
    backfill: str | None = None  # the runtime after the history of its watched files ran on this route

    def describe(self) -> str:
        text = f"route: {self.engine}{' continuous' if self.continuous else ''} ({self.reason})"
        if self.backfill:
            text += f"; backfill: {self.backfill} (the files present when the query starts, then the runtime)"
        return text


def parse_size(text: str) -> int:
    """A size in bytes: ``1000``, ``512MB``, ``2g`` (units are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"invalid size '{text}': expected e.g. '2147483648', '512MB' or '2GB'")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: int) -> str:
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= factor:
            return f"{n / factor:.1f} {unit}"
    return f"{n} B"


def sources_of(root: L.Node) -> list[SourceDef]:
    found: dict[str, SourceDef] = {}
    for n in L.walk(root):
        if isinstance(n, (L.Scan, LateScan)):
            found.setdefault(n.source.name.lower(), n.source)
    return list(found.values())


def choose_route(root: L.Node, settings: dict, estimate: Callable[[SourceDef], int]) -> RouteChoice:
    """The route of the query ``root`` under ``settings``, with its backfill (``SET 'backfill'``).

    Raises:
        LoweringRefused: ``engine`` names a route that cannot run the query, or the query cannot backfill.
    """
    route = _choose(root, settings, estimate)
    backfill = settings.get("backfill", "off").lower()
    if route.engine != "runtime" or backfill == "off" or not unbounded_sources(root):
        return route
    refused = refusal(root, backfill, history=True)
    if refused is not None:
        raise refused
    return replace(route, backfill=backfill)


def _choose(root: L.Node, settings: dict, estimate: Callable[[SourceDef], int]) -> RouteChoice:
    """The engine (``estimate(source)``: its size in bytes; if it raises, the query stays on the runtime,
    which reports the problem where it reads)."""
    engine = settings.get("engine", "auto").lower()
    if engine == "runtime":
        return RouteChoice("runtime", "SET 'engine' = 'runtime'")
    if engine == "spark" and unbounded_sources(root):
        refused = refusal(root, engine, streaming=True)
        if refused is not None:
            raise refused
        names = ", ".join(f"'{s.name}'" for s in unbounded_sources(root))
        return RouteChoice(engine, f"SET 'engine' = 'spark'; {names} watched: Spark Structured Streaming", continuous=True)
    if engine != "auto":  # a batch route asked for by name (SET 'engine' checks the name against the routes)
        refused = refusal(root, engine)
        if refused is not None:
            raise refused
        return RouteChoice(engine, f"SET 'engine' = '{engine}'")
    refused = refusal(root, "duckdb")
    if refused is not None:
        return RouteChoice("runtime", f"the batch routes cannot {refused.what}: {refused.why}")
    sources = sources_of(root)
    idle = [s.name for s in sources if "idle_timeout" in s.options]
    if idle:
        return RouteChoice("runtime", f"'{idle[0]}' has an idle_timeout, which depends on processing time")
    if root.changelog == L.UPDATING:
        return RouteChoice("runtime", "the result is updating: the runtime emits its changes, a batch route only its "
                                "final rows (SET 'engine' = 'duckdb' or 'spark' for those)")
    unsized = next((s for s in sources if s.descriptor.batch_reader != "files"), None)
    if unsized is not None:  # a bounded read of a connector (Kafka): the batch routes run it when asked to
        return RouteChoice("runtime", f"'{unsized.name}' is read through its connector ('{unsized.connector}'), "
                                      "not sized as files (SET 'engine' = 'duckdb' or 'spark' runs the bounded read "
                                      "as one statement)")
    if settings.get("spark.master"):
        return RouteChoice("spark", f"spark.master is '{settings['spark.master']}'")
    try:
        size = sum(estimate(s) for s in sources)
    except Exception as e:  # noqa: BLE001 - the runtime reports a missing file where it reads it
        return RouteChoice("runtime", f"the input could not be sized ({e})")
    limit = parse_size(settings.get("batch.max_bytes", str(2 * 1024**3)))
    if size <= limit:
        return RouteChoice("duckdb", f"bounded files, about {format_size(size)}, within batch.max_bytes "
                               f"({format_size(limit)})")
    return RouteChoice("spark", f"bounded files, about {format_size(size)}, more than batch.max_bytes ({format_size(limit)})")
