"""Routing: which engine runs a query, and why (``SET 'engine'``, ``dsms run --engine``).

* ``runtime``: the in-process incremental runtime (every query it can plan);
* ``duckdb``: the query lowered to one DuckDB statement over its files;
* ``spark``: the query lowered to Spark SQL, run through PySpark; over
  watched files (``watch = 'true'``), a Spark Structured Streaming query
  (the *continuous* Spark route, ``lower/stream.py``);
* ``auto`` (the default) picks by what each route declares about its
  engine (an :class:`EngineTraits`, given by the caller from the route
  registry, so that no engine is named here), in this order:

  1. the incremental engine (the runtime) when a batch route cannot run the query (memory or
     watched sources, processing time, lookup joins, ...), when a source
     has an ``idle_timeout`` (idleness is a matter of processing time), or
     when the result is updating: the runtime emits its changes, a batch
     route only the final rows, so routing would change what a sink
     receives (force a batch route with ``SET 'engine'`` for that), or
     when a source is read through its connector rather than as files (a
     bounded Kafka read), which cannot be sized before it is read;
  2. a cluster engine (Spark) when its setting (``spark.master``) is set;
  3. the in-process batch engine (DuckDB) when the files' estimated size is
     at most its setting (``'batch.max_bytes'``; file sizes, Parquet's
     uncompressed row-group sizes), else the engine for large inputs (Spark).

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

DEFAULT_MAX_BYTES = 2 * 1024**3  # SET 'batch.max_bytes' when unset

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4, "tb": 1024**4, "tib": 1024**4}


@dataclass(frozen=True)
class EngineTraits:
    """What routing knows about an engine: each route declares its own (``Route.traits``), in planner terms."""

    engine: str  # the value of SET 'engine'
    incremental: bool = False  # runs every query it can plan, over any source, emitting changes (the runtime)
    continuous: str | None = None  # asked for by name over watched files, it runs them as this continuous query
    max_bytes_setting: str | None = None  # auto: a batch engine for inputs up to the size this setting names
    cluster_setting: str | None = None  # auto: the batch engine whenever this setting is set (a cluster's address)
    large_inputs: bool = False  # auto: the batch engine for inputs over the other one's size


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


def choose_route(root: L.Node, settings: dict, estimate: Callable[[SourceDef], int],
                 engines: tuple[EngineTraits, ...]) -> RouteChoice:
    """The route of the query ``root`` under ``settings``, with its backfill (``SET 'backfill'``);
    ``engines``: what the registered routes declare, in the registry's order.

    Raises:
        LoweringRefused: ``engine`` names a route that cannot run the query, or the query cannot backfill.
    """
    route = _choose(root, settings, estimate, engines)
    backfill = settings.get("backfill", "off").lower()
    if not _traits(engines, route.engine).incremental or backfill == "off" or not unbounded_sources(root):
        return route
    refused = refusal(root, backfill, history=True)
    if refused is not None:
        raise refused
    return replace(route, backfill=backfill)


def _traits(engines: tuple[EngineTraits, ...], engine: str) -> EngineTraits:
    """What the routes of ``engine`` declare, together."""
    found = [t for t in engines if t.engine == engine]
    return EngineTraits(engine, incremental=any(t.incremental for t in found),
                        continuous=next((t.continuous for t in found if t.continuous), None))


def _choose(root: L.Node, settings: dict, estimate: Callable[[SourceDef], int],
            engines: tuple[EngineTraits, ...]) -> RouteChoice:
    engine = settings.get("engine", "auto").lower()
    if engine == "auto":
        return _auto(root, settings, estimate, engines)
    asked = f"SET 'engine' = '{engine}'"
    traits = _traits(engines, engine)
    if traits.incremental:
        return RouteChoice(engine, asked)
    if traits.continuous and unbounded_sources(root):
        refused = refusal(root, engine, streaming=True)
        if refused is not None:
            raise refused
        names = ", ".join(f"'{s.name}'" for s in unbounded_sources(root))
        return RouteChoice(engine, f"{asked}; {names} watched: {traits.continuous}", continuous=True)
    refused = refusal(root, engine)  # a batch route asked for by name (SET 'engine' checks the name)
    if refused is not None:
        raise refused
    return RouteChoice(engine, asked)


def _auto(root: L.Node, settings: dict, estimate: Callable[[SourceDef], int],
          engines: tuple[EngineTraits, ...]) -> RouteChoice:
    """The engine ``auto`` picks (``estimate(source)``: its size in bytes; if it raises, the query stays on
    the incremental engine, which reports the problem where it reads)."""
    incremental = next(t.engine for t in engines if t.incremental)
    batch = [t for t in engines if not t.incremental and (t.max_bytes_setting or t.cluster_setting or t.large_inputs)]
    if not batch:
        return RouteChoice(incremental, "no batch route is registered")
    refused = refusal(root, batch[0].engine)
    if refused is not None:
        return RouteChoice(incremental, f"the batch routes cannot {refused.what}: {refused.why}")
    stay = _stays_incremental(root, " or ".join(f"'{t.engine}'" for t in batch))
    if stay is not None:
        return RouteChoice(incremental, stay)
    # an engine that cannot run the query (JSON or Python functions on Spark) is passed over for the first
    able = [batch[0]] + [t for t in batch[1:] if refusal(root, t.engine) is None]
    cluster = next((t for t in able if t.cluster_setting and settings.get(t.cluster_setting)), None)
    if cluster is not None:
        return RouteChoice(cluster.engine, f"{cluster.cluster_setting} is '{settings[cluster.cluster_setting]}'")
    try:
        size = sum(estimate(s) for s in sources_of(root))
    except Exception as e:  # noqa: BLE001 - the runtime reports a missing file where it reads it
        return RouteChoice(incremental, f"the input could not be sized ({e})")
    return _by_size_passing_over(root, size, batch, able, settings)


def _by_size_passing_over(root: L.Node, size: int, batch: list[EngineTraits], able: list[EngineTraits],
                          settings: dict) -> RouteChoice:
    """The batch engine by size among those ``able`` to run the query, saying which one it passed over."""
    choice = _by_size(size, able, settings)
    passed_over = next((t for t in batch if t not in able and t.large_inputs), None)
    if passed_over is not None and choice.engine != _by_size(size, batch, settings).engine:
        why = refusal(root, passed_over.engine)
        return replace(choice, reason=f"{choice.reason}, but the {passed_over.engine} route cannot {why.what}")
    return choice


def _by_size(size: int, batch: list[EngineTraits], settings: dict) -> RouteChoice:
    """The batch engine for bounded files of ``size`` bytes: the small-input one up to its setting, else the
    large-input one."""
    small = next((t for t in batch if t.max_bytes_setting), None)
    large = next((t for t in batch if t.large_inputs), batch[0])
    if small is None:
        return RouteChoice(large.engine, f"bounded files, about {format_size(size)}")
    setting = small.max_bytes_setting
    limit = parse_size(settings.get(setting, str(DEFAULT_MAX_BYTES)))
    if size <= limit or not large.large_inputs:
        return RouteChoice(small.engine, f"bounded files, about {format_size(size)}, within {setting} "
                                         f"({format_size(limit)})")
    return RouteChoice(large.engine, f"bounded files, about {format_size(size)}, more than {setting} ({format_size(limit)})")


def _stays_incremental(root: L.Node, batch_names: str) -> str | None:
    """Why a query every batch route could run still takes the incremental engine (None: it need not)."""
    sources = sources_of(root)
    idle = [s.name for s in sources if "idle_timeout" in s.options]
    if idle:
        return f"'{idle[0]}' has an idle_timeout, which depends on processing time"
    if root.changelog == L.UPDATING:
        return ("the result is updating: the runtime emits its changes, a batch route only its "
                f"final rows (SET 'engine' = {batch_names} for those)")
    unsized = next((s for s in sources if s.descriptor.batch_reader != "files"), None)
    if unsized is not None:  # a bounded read of a connector (Kafka): the batch routes run it when asked to
        return (f"'{unsized.name}' is read through its connector ('{unsized.connector}'), not sized as files "
                f"(SET 'engine' = {batch_names} runs the bounded read as one statement)")
    return None
