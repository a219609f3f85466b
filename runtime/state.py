"""Operator state, kept apart from operator logic so it can be checkpointed.

Each operator asks the store for named state under its own id:

- :class:`PaneState` holds Arrow tables grouped by an integer key, such as
  the start of a window pane. Writers append small tables; readers take
  whole groups; :meth:`PaneState.compact` lets the owner merge a group
  when it has collected many pieces, so state stays a few tables per key.
- :class:`ValueState` holds one small JSON-serialisable value (a
  watermark, a counter).

:meth:`StateStore.snapshot` turns everything into Arrow tables and plain
values, and :meth:`StateStore.restore` rebuilds it, which is what a
checkpoint stores and a restart reads.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from .duck import registered

_KEY = "__state_key"


class PaneState:
    """Arrow tables grouped by an integer key (e.g. the start of a window pane)."""

    def __init__(self) -> None:
        self._groups: dict[int, list[pa.Table]] = {}

    def add(self, key: int, table: pa.Table) -> None:
        if table.num_rows:
            self._groups.setdefault(key, []).append(table)

    def add_split(self, keys: pa.Array | pa.ChunkedArray, table: pa.Table) -> None:
        """Append the rows of ``table`` to the group named by each row's key."""
        if table.num_rows == 0:
            return
        if isinstance(keys, pa.ChunkedArray):
            keys = keys.combine_chunks()
        unique = pc.unique(keys)
        if len(unique) == 1:
            self.add(unique[0].as_py(), table)
            return
        # Sort once, then slice: one pass instead of one filter per key.
        order = pc.sort_indices(keys)
        sorted_keys = pc.take(keys, order)
        table = table.take(order)
        bounds = pc.value_counts(sorted_keys)
        offset = 0
        for item in bounds:
            key, count = item["values"].as_py(), item["counts"].as_py()
            self.add(key, table.slice(offset, count))
            offset += count

    def keys(self) -> list[int]:
        return sorted(self._groups)

    def get(self, key: int) -> list[pa.Table]:
        return self._groups.get(key, [])

    def pop(self, key: int) -> list[pa.Table]:
        return self._groups.pop(key, [])

    def replace(self, key: int, table: pa.Table) -> None:
        self._groups[key] = [table] if table.num_rows else []

    def pieces(self, key: int) -> int:
        return len(self._groups.get(key, ()))

    def compact(self, key: int, merge: Callable[[list[pa.Table]], pa.Table]) -> None:
        group = self._groups.get(key)
        if group and len(group) > 1:
            self._groups[key] = [merge(group)]

    def __len__(self) -> int:
        return len(self._groups)

    @property
    def rows(self) -> int:
        return sum(t.num_rows for g in self._groups.values() for t in g)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for g in self._groups.values() for t in g)

    def snapshot(self) -> pa.Table | None:
        tables = []
        for key, group in self._groups.items():
            for t in group:
                tables.append(t.append_column(_KEY, pa.repeat(pa.scalar(key, pa.int64()), t.num_rows)))
        if not tables:
            return None
        return pa.concat_tables(tables, promote_options="none")

    def restore(self, table: pa.Table | None) -> None:
        self._groups.clear()
        if table is None or table.num_rows == 0:
            return
        keys = table.column(_KEY)
        self.add_split(keys, table.drop_columns([_KEY]))


class ValueState:
    """One small JSON-serialisable value."""

    def __init__(self, default: Any = None) -> None:
        self.value = default

    def snapshot(self) -> Any:
        return self.value

    def restore(self, value: Any) -> None:
        self.value = value


class DuckTables:
    """State an operator keeps in DuckDB tables of the job's connection."""

    def __init__(self, duck, names: tuple[str, ...]) -> None:
        self.duck, self.names = duck, names

    @property
    def rows(self) -> int:
        return sum(self.duck.con.execute(f"SELECT COUNT(*) FROM {n}").fetchall()[0][0] for n in self.names)

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.snapshot().values())

    def snapshot(self) -> dict[str, pa.Table]:
        return {n: self.duck.query(f"SELECT * FROM {n}") for n in self.names}

    def restore(self, tables: dict[str, pa.Table]) -> None:
        for name, table in tables.items():
            with registered(self.duck.con, __restore=table):
                self.duck.con.execute(f"DELETE FROM {name}")
                self.duck.con.execute(f"INSERT INTO {name} SELECT * FROM __restore")


class StateStore:
    """All operator state of one job, by ``'<operator id>/<name>'``."""

    def __init__(self) -> None:
        self._states: dict[str, PaneState | ValueState | DuckTables] = {}

    def duck_tables(self, op_id: int, names: tuple[str, ...], duck) -> DuckTables:
        state = self._states[f"{op_id}/tables"] = DuckTables(duck, names)
        return state

    def panes(self, op_id: int, name: str) -> PaneState:
        return self._get(f"{op_id}/{name}", PaneState)

    def value(self, op_id: int, name: str, default: Any = None) -> ValueState:
        key = f"{op_id}/{name}"
        if key not in self._states:
            self._states[key] = ValueState(default)
        return self._states[key]  # type: ignore[return-value]

    def _get(self, key: str, cls):
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = cls()
        return state

    def rows(self, op_id: int | None = None) -> int:
        return sum(s.rows for k, s in self._states.items()
                   if not isinstance(s, ValueState) and (op_id is None or k.startswith(f"{op_id}/")))

    def nbytes(self, op_id: int | None = None) -> int:
        return sum(s.nbytes for k, s in self._states.items()
                   if not isinstance(s, ValueState) and (op_id is None or k.startswith(f"{op_id}/")))

    def snapshot(self) -> dict[str, Any]:
        """Tables and values of every state, for a checkpoint."""
        kinds = {PaneState: "panes", ValueState: "value", DuckTables: "tables"}
        return {k: (kinds[type(s)], s.snapshot()) for k, s in self._states.items()}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Put back a snapshot into the states the operators of this job have created."""
        for key, (kind, data) in snapshot.items():
            state = self._states.get(key)
            if state is None:
                state = self._states[key] = PaneState() if kind == "panes" else ValueState()
            state.restore(data)
