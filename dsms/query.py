"""Query handles and statement results, as a program sees them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from .planner.bind.time_zone import session_zone
from .runtime.changelog import OP, op_names
from .runtime.operators.base import MAX_WATERMARK, MIN_WATERMARK

if TYPE_CHECKING:
    from .engine import Engine
    from .runtime.output import CollectOutput
    from .runtime.routes import Job, JobStats


def public_changes(table: pa.Table) -> pa.Table:
    """A change batch with the row kind as a leading string column ``op`` (+I, -U, +U, -D)."""
    ops = op_names(table)
    body = table.drop_columns([OP]) if OP in table.column_names else table
    return body.add_column(0, "op", ops)


def in_zone(table: pa.Table, zone: str) -> pa.Table:
    """``table`` with its TIMESTAMP_LTZ columns labelled with the session zone: the same instants,
    shown (printed, read as Python or pandas values) in local time, as Flink shows them.

    Example:
        >>> t = pa.table({"ts": pa.array([0], pa.timestamp("us", tz="UTC"))})
        >>> in_zone(t, "Asia/Shanghai").column("ts")[0].as_py().isoformat()
        '1970-01-01T08:00:00+08:00'
    """
    fields = [pa.field(f.name, pa.timestamp(f.type.unit, tz=zone), f.nullable)
              if pa.types.is_timestamp(f.type) and f.type.tz else f for f in table.schema]
    if all(f.type == g.type for f, g in zip(fields, table.schema)):
        return table
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))


def job_stats(job: "Job", qid: str, kind: str) -> dict:
    """A query's line of SHOW QUERIES, unformatted (the watermark in epoch microseconds)."""
    s = job.stats()
    return {"id": qid, "kind": kind, "status": s.status, "watermark": s.watermark, "rows_in": s.rows_in,
            "rows_out": s.rows_out, "events_per_s": s.events_per_s, "late": sum(s.late.values()),
            "state_rows": s.state_rows, "state_bytes": s.state_bytes, "error": str(s.error) if s.error else None}


class QueryHandle:
    """A running query: iterate its changes, or read its current result.

    Example:
        >>> import dsms
        >>> engine = dsms.Engine()
        >>> _ = engine.execute("CREATE STREAM s (x INT) WITH (connector = 'memory')")
        >>> q = engine.query("SELECT x * 2 AS y FROM s")
        >>> _ = engine.insert("s", [{"x": 1}, {"x": 2}])
        >>> engine.run_until_idle()
        >>> q.snapshot().column("y").to_pylist()
        [2, 4]
    """

    def __init__(self, engine: "Engine", name: str, job: "Job", output: "CollectOutput", changelog: str,
                 warnings: tuple[str, ...] = ()):
        self.engine = engine
        self.name = name
        self.job = job
        self.output = output
        self.changelog = changelog
        self.warnings = warnings  # what the planner warned about (e.g. unbounded join state)
        self.zone = session_zone(engine.catalog.settings)  # TIMESTAMP_LTZ values are shown in it

    @property
    def schema(self) -> pa.Schema:
        return self.output.schema

    @property
    def done(self) -> bool:
        """True once every input has ended and all results are out."""
        return self.job.done

    @property
    def status(self) -> str:
        """running, paused, finished, failed, or cancelled (by cancel() or DROP QUERY)."""
        return self.job.status

    @property
    def error(self) -> BaseException | None:
        """Why the query failed (bad input, a sink that cannot be written), or None."""
        return self.job.error

    def stats(self) -> dict:
        """Its line of SHOW QUERIES, unformatted: status, watermark (epoch microseconds or None), rows in and
        out, events per second, late events, state rows and bytes."""
        query = self.engine.queries.running.get(self.name.lower())
        stats = job_stats(self.job, self.name, query.kind if query is not None else "query")
        if not MIN_WATERMARK < stats["watermark"] < MAX_WATERMARK:
            stats["watermark"] = None
        return stats

    def poll(self) -> pa.Table:
        """The changes since the last poll (or iteration), with an ``op`` column."""
        batches = [public_changes(t) for t in self.output.drain()]
        if batches:
            return in_zone(pa.concat_tables(batches), self.zone)
        return in_zone(public_changes(self.output.schema.empty_table()), self.zone)

    def changes(self) -> Iterator[pa.Table]:
        """Run the engine until it is idle and yield each batch of changes as it is produced.

        Stops when the query is done or no input is left to process; call
        again after inserting more events.
        """
        while True:
            for batch in self.output.drain():
                yield in_zone(public_changes(batch), self.zone)
            if self.job.error is not None:
                raise self.job.error
            if self.job.done or not self.engine.step():
                for batch in self.output.drain():
                    yield in_zone(public_changes(batch), self.zone)
                return

    __iter__ = changes

    def snapshot(self) -> pa.Table:
        """The current result: every row so far, or the changelog applied if it is updating."""
        return in_zone(self.output.snapshot(), self.zone)

    def keep_changes_only(self) -> None:
        """Keep no current result, only the changes not yet polled: for a reader of the changelog
        of an endless query, memory then stays the size of what it has not read."""
        self.output.discard_result()

    def to_pandas(self):
        """The current result as a pandas DataFrame."""
        return self.snapshot().to_pandas()

    def poll_pandas(self):
        """The changes since the last poll as a pandas DataFrame (with an ``op`` column)."""
        return self.poll().to_pandas()

    def cancel(self) -> None:
        """Stop the query (a SELECT); for a sink or materialized view, use DROP."""
        with self.engine._lock:
            self.engine.queries.drop(self.name)

    def __repr__(self) -> str:
        return f"<QueryHandle {self.name} {self.changelog} rows={self.output.rows} done={self.done}>"


@dataclass(frozen=True)
class QueryStatus:
    """A running query as ``Engine.statuses()`` lists it: its id, its kind (query, sink, materialized
    view) and what its job reports (``JobStats``: route, status, rows, late events, ...)."""

    id: str
    kind: str
    stats: "JobStats"


@dataclass
class Result:
    """What a statement returned: a message, a table (SHOW, DESCRIBE, EXPLAIN), or a query."""

    kind: str
    message: str | None = None
    table: pa.Table | None = None
    query: QueryHandle | None = None
    warnings: tuple[str, ...] = ()  # e.g. a join whose state grows without bound

    def to_arrow(self) -> pa.Table | None:
        """The rows of a SHOW, DESCRIBE, EXPLAIN or pull query (a query's current result for a SELECT)."""
        return self.table if self.query is None else self.query.snapshot()

    def to_pandas(self):
        table = self.to_arrow()
        return None if table is None else table.to_pandas()

    def __str__(self) -> str:
        if self.message is not None:
            return self.message
        if self.table is not None:
            from .render import format_table

            return format_table(self.table)
        return repr(self.query)
