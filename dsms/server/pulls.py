"""Pull queries over materialized views, answered off the engine thread.

A pull query is planned once (on the engine thread) into a ``PullPlan``:
DuckDB SQL over the views' rows (``dsms/pull.py``), cached by its text and
the client's settings, and kept while the views it reads are the same
catalog objects. A prepared statement's parameters become DuckDB
parameters, so one plan serves every value. Each answer then runs over
the rows the engine thread published for each view after its last step
(``host.py``): a query that only filters one view and picks columns as a
``pyarrow.compute`` filter on the event loop, any other on a reader
thread with a DuckDB connection of its own. A read never waits for the
engine's step, and sees every view as it was between two steps.

A client reads its own writes: if it wrote since the engine last had
nothing left to process, its pull first waits for the engine to take in
what it wrote. Another client's writes appear once the engine has
processed them (a step later; ``FLUSH`` waits for that).
"""

from __future__ import annotations

import asyncio
import decimal
import math
import re
import threading
import warnings
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

import duckdb
import pyarrow as pa

from ..errors import DsmsError
from ..grammar import QueryStatement, parse_statement
from ..planner import Catalog
from ..pull import PullPlan, compile_pull, pulled_views
from .pgtypes import NAME, NUMERIC_OIDS, TEXT, UNKNOWN, VARCHAR
from .sqltext import bind_parameters
from .statements import Outcome

# A pull's answer is one small table: the copy DuckDB warns about is what the reader wants.
warnings.filterwarnings("ignore", message="Arrow output on a DB-API result", category=UserWarning)
PULL_START = re.compile(r"^\s*(SELECT|WITH)\b", re.I)
READER_THREADS = 2
CACHED_PLANS = 1000
# Parameter sentinels: values no client sends, so each is found again in the lowered SQL.
_SENTINEL = 8_346_291_537_000


@dataclass(frozen=True)
class Bound:
    """A prepared statement's text and the values bound to its parameters (extended protocol)."""

    text: str
    values: tuple
    oids: tuple[int, ...]


@dataclass
class CachedPull:
    plan: PullPlan
    depends: tuple[tuple[str, object], ...]  # the catalog objects it was planned against, by lower-case name
    queries: tuple[tuple[str, object], ...]  # each view's running query


def parameterize(bound: Bound) -> tuple[list[str], list, tuple[str, ...]] | None:
    """Sentinel literals for a statement's parameters, the values DuckDB binds instead, and their kinds.

    None when a value is of a kind better planned as a literal (NULL,
    booleans, times): the statement is then planned with its values.
    """
    sentinels, args, kinds = [], [], []
    for n, (value, oid) in enumerate(zip(bound.values, bound.oids), 1):
        if isinstance(value, str) and oid in NUMERIC_OIDS:
            try:
                value = decimal.Decimal(value.strip())
            except decimal.InvalidOperation:
                return None
            value = int(value) if value == value.to_integral_value() and "." not in str(value) else value
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int):
            sentinels.append(str(_SENTINEL + n))
        elif isinstance(value, (float, decimal.Decimal)) and math.isfinite(value):
            sentinels.append(f"{_SENTINEL + n}.5")
        elif isinstance(value, str) and oid in (TEXT, VARCHAR, UNKNOWN, NAME, 0) and "\0" not in value:
            sentinels.append(f"'dsms parameter {n} {_SENTINEL}'")
        else:
            return None
        args.append(value)
        kinds.append(type(value).__name__)
    return sentinels, args, tuple(kinds)


class PullReader:
    """Plans pull queries once and answers them off the engine thread (see the module docstring)."""

    def __init__(self, host, metrics, threads: int = READER_THREADS):
        self.host = host
        self.by_reader, self.by_engine = metrics.pulls.labels("reader"), metrics.pulls.labels("engine")
        self.cache: OrderedDict[tuple, CachedPull] = OrderedDict()  # least recently used first
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="dsms-pull")
        self.local = threading.local()

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def answer(self, session, text: str, bound: Bound | None, otherwise: Callable) -> Outcome:
        """The answer to ``text`` if it is a pull query; otherwise ``otherwise(engine)``'s, run on the engine thread."""
        settings = tuple(sorted(session.settings.items()))
        template = parameterize(bound) if bound is not None and bound.values else None
        if template is not None:
            sentinels, args, kinds = template
            key = (bound.text, kinds, settings)
        else:
            sentinels, args, key = [], [], (text, settings)
        entry = self.cache.get(key)
        if entry is not None:
            self.cache.move_to_end(key)
        if entry is None or not self._valid(entry):
            planned_text = bind_parameters(bound.text, sentinels) if sentinels else text
            entry = await self.host.call(lambda e: self._compile(e, planned_text, dict(session.settings), sentinels)
                                         or otherwise(e), reads_only=True)
            if isinstance(entry, Outcome):
                if entry.table is not None and entry.tag.startswith("SELECT"):
                    self.by_engine.inc()
                return entry
            self.cache[key] = entry
            if len(self.cache) > CACHED_PLANS:  # e.g. a dashboard's time range in every query's text
                self.cache.popitem(last=False)
        if session.written > self.host.settled:  # read your writes
            await self.host.call(self.host.settle, reads_only=True)
        rows = {}
        for view, query in entry.queries:
            rows[view] = self.host.rows_of(query)
            if rows[view] is None:
                return await self._on_engine(otherwise)
        table = None
        point = entry.plan.point
        if point is not None:  # a filter over one view: cheaper here than a hop to a reader thread
            try:
                table = point.run(rows.__getitem__, args, entry.plan.schema)
            except (pa.ArrowException, ValueError, TypeError):
                table = None  # a comparison Arrow does not make (DuckDB casts): the plan's SQL answers
        if table is None:
            try:
                table = await asyncio.get_running_loop().run_in_executor(self.pool, self._run, entry.plan, rows, args)
            except (duckdb.Error, pa.ArrowException):  # e.g. ORDER BY a name the answer lacks: the engine says it
                return await self._on_engine(otherwise)
        self.by_reader.inc()
        return Outcome(f"SELECT {table.num_rows}", table)

    async def _on_engine(self, otherwise: Callable) -> Outcome:
        outcome = await self.host.call(otherwise, reads_only=True)
        self.by_engine.inc()
        return outcome

    def _valid(self, entry: CachedPull) -> bool:
        engine = self.host.engine
        return (all(engine.catalog.objects.get(name) is obj for name, obj in entry.depends)
                and all(engine.queries.running.get(view.lower()) is query and query.job.error is None
                        for view, query in entry.queries))

    def _compile(self, engine, text: str, settings: dict, sentinels: list[str]) -> CachedPull | None:
        """Plan ``text`` as a pull query, or None if it is not one the batch route answers (engine thread)."""
        try:
            stmt = parse_statement(text)
            if not isinstance(stmt, QueryStatement):
                return None
            depends: dict = {}
            views = pulled_views(stmt.query.tree, engine.catalog, depends)
            if views is None:
                return None
            plan = compile_pull(stmt, Catalog(objects=dict(engine.catalog.objects), settings=settings), views,
                                sentinels)
        except DsmsError:
            return None
        if plan is None:
            return None
        queries = []
        for view in plan.views:
            query = engine.queries.running.get(view.lower())
            if query is None or query.handle is None or query.job.error is not None:
                return None
            self.host.watch(query)
            queries.append((view, query))
        return CachedPull(plan, tuple(depends.items()), tuple(queries))

    def _run(self, plan: PullPlan, rows: dict, args: list) -> pa.Table:
        local = self.local
        if not hasattr(local, "con"):  # each reader thread: its own connection, and what it has registered
            # the plans read only the views' published tables: no file is ever theirs to open
            local.con = duckdb.connect(config={"threads": 1, "enable_external_access": False,
                                               "lock_configuration": True})
            local.registered = {}
        return plan.run(local.con, rows.__getitem__, args, local.registered)
