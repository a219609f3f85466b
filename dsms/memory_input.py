"""Rows given by the program to memory streams and tables: ``Engine.insert``, ``delete`` and ``end_input``."""

from __future__ import annotations

from .flow import admit
from .inserts import as_deleted, as_inserted, memory_source
from .planner.catalog import SourceDef
from .runtime.convert import to_table
from .runtime.memory import data_schema


class MemoryInput:
    """The Engine's methods that feed memory sources (mixed into ``dsms.Engine``; needs its catalog,
    scheduler and lock)."""

    def insert(self, name: str, rows, columns: list[str] | None = None) -> int:
        """Append rows to a memory stream, or upsert them into a memory table by its primary key.

        Running queries see them on their next step. A row whose key a
        table already holds replaces that row (an update).
        """
        source = memory_source(self.catalog, name)
        log = self.scheduler.memory_log(source)
        table = to_table(rows, data_schema(log), columns)
        admit(self, log, source.name)  # backpressure: the queries reading it catch up first
        with self._lock:
            log.append(as_inserted(source, table))
        return table.num_rows

    def delete(self, name: str, rows, columns: list[str] | None = None) -> int:
        """Delete rows of a memory table by its primary key.

        ``rows`` are given like ``insert``'s, or as tuples of key values;
        only the key columns matter (and, for a table with a WATERMARK, the
        time column: the time the row stops being valid). Deleting a key
        the table does not hold does nothing.

        Example:
            >>> import dsms
            >>> engine = dsms.Engine()
            >>> _ = engine.execute("CREATE TABLE t (id INT, v VARCHAR, PRIMARY KEY (id) NOT ENFORCED) "
            ...                    "WITH (connector = 'memory')")
            >>> q = engine.query("SELECT * FROM t")
            >>> _ = engine.insert("t", [(1, "a"), (2, "b")]); _ = engine.insert("t", [(1, "c")])
            >>> _ = engine.delete("t", [{"id": 2}])
            >>> engine.run_until_idle()
            >>> q.snapshot().to_pylist()
            [{'id': 1, 'v': 'c'}]
        """
        source = memory_source(self.catalog, name)
        log = self.scheduler.memory_log(source)
        changes = as_deleted(source, log, rows, columns)
        with self._lock:
            log.append(changes)
        return changes.num_rows

    def end_input(self, name: str | None = None) -> None:
        """End a memory stream (or all of them): its queries flush every window and finish."""
        if name is not None:
            self.scheduler.memory_log(memory_source(self.catalog, name)).close()
            return
        for obj in self.catalog.of_kind("stream", "table"):
            if isinstance(obj, SourceDef) and obj.descriptor.insertable:
                self.scheduler.memory_log(obj).close()
