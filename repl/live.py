"""The live result of a continuous SELECT, as the shell shows it while the query runs.

Two modes (``SET 'result_mode' = 'table' | 'changelog'``):

* ``table`` (the default): the query's current result, a table redrawn in
  place above the prompt: a window's row appears when the window fires,
  a retracted row disappears, an updated row changes. An append-only
  result is shown in arrival order (its last rows when it is long); an
  updating one sorted by its columns, so a key's row keeps its place.
* ``changelog``: every change as a row with its kind (``+I``, ``-U``,
  ``+U``, ``-D``), printed above the prompt as it arrives.

Under either, a status line: rows, changes, the query's input watermark,
events per second and late events. When the query ends (its sources are
bounded) or is stopped, :meth:`LiveResult.final` is what stays on screen.
"""

from __future__ import annotations

import time
from collections import deque

import pyarrow as pa

from dsms.render import format_header, format_rows, format_table, format_watermark

RESULT_MODES = ("table", "changelog")
FINAL_ROWS = 1000  # rows printed when a query ends; a sink keeps them all


class LiveResult:
    def __init__(self, handle, mode: str = "table", clock=time.monotonic):
        self.handle = handle
        self.mode = mode
        self.clock = clock
        self.table: pa.Table = handle.snapshot()
        if mode == "changelog":
            handle.keep_changes_only()  # printed changes are not kept: memory stays flat however long it runs
        self.changes = 0
        self.pending: list[pa.Table] = []  # changes not printed yet (changelog mode)
        self.widths: list[int] | None = None
        self._samples: deque[tuple[float, int]] = deque()
        self.rate = 0.0

    @property
    def name(self) -> str:
        return self.handle.name

    @property
    def done(self) -> bool:
        return self.handle.done

    def refresh(self) -> bool:
        """Take the query's new changes; True if any arrived."""
        changes = self.handle.poll()
        self._sample()
        if not changes.num_rows:
            return False
        self.changes += changes.num_rows
        if self.mode == "changelog":
            self.pending.append(changes)
        else:
            self.table = _in_place(self.handle.snapshot()) if self.handle.changelog == "updating" \
                else self.handle.snapshot()
        return True

    def _sample(self) -> None:
        """Events per second over about the last two seconds."""
        now, rows_in = self.clock(), self.handle.job.rows_in
        self._samples.append((now, rows_in))
        while len(self._samples) > 2 and now - self._samples[1][0] > 2.0:
            self._samples.popleft()
        first_t, first_rows = self._samples[0]
        if now - first_t >= 0.2:
            self.rate = (rows_in - first_rows) / (now - first_t)

    # -- what is shown -----------------------------------------------------------------

    def status(self) -> str:
        stats = self.handle.job.stats()  # (every route's job reports the same stats)
        marks = stats.open_watermarks
        wm = format_watermark(min(marks)) if marks else "end of input"
        late = sum(stats.late.values())
        rows = f"{self.table.num_rows:,} rows  " if self.mode == "table" else ""
        return (f"{self.name}: {rows}{self.changes:,} changes  watermark {wm}  {self.rate:,.0f} events/s  "
                f"late {late:,}")

    def view(self, width: int, height: int) -> list[str]:
        """The lines drawn above the prompt: the table's last rows (table mode), then the status line."""
        status = _fit(self.status() + "  (Ctrl-C stops)", width)
        if self.mode == "changelog":
            return [status]
        body = self.table.slice(max(0, self.table.num_rows - max(1, height - 4)))
        lines, widths = format_rows(body, self._grow(body))
        out = format_header(body.column_names, widths)
        if body.num_rows < self.table.num_rows:
            out.append(f"... {self.table.num_rows - body.num_rows:,} earlier rows")
        out += lines or ["(no rows yet)"]
        return [_fit(line, width) for line in out] + [status]

    def take_changes(self) -> list[str]:
        """Changelog mode: the lines of the changes since the last call (with a header the first time)."""
        if not self.pending:
            return []
        changes = pa.concat_tables(self.pending)
        self.pending = []
        first = self.widths is None
        lines, widths = format_rows(changes, self._grow(changes))
        return (format_header(changes.column_names, widths) if first else []) + lines

    def final(self) -> str:
        """What stays on screen when the query ends: its last result, and how it ended."""
        late = sum(self.handle.job.late.values())
        notes = [] if self.done else [f"{self.name} stopped after {_count(self.changes, 'change')}"]
        if late:
            notes.append(f"{_count(late, 'late event')} dropped")
        if self.mode == "changelog":
            return "\n".join(self.take_changes() + notes)
        table = self.table
        if table.num_rows > FINAL_ROWS:
            notes.append(f"the last {FINAL_ROWS:,} of {table.num_rows:,} rows are shown")
            table = table.slice(table.num_rows - FINAL_ROWS)
        return "\n".join([format_table(table)] + notes)

    def _grow(self, table: pa.Table) -> list[int]:
        """Column widths that only grow, so the table does not jitter as rows change."""
        _, widths = format_rows(table)
        if self.widths is not None:
            widths = [max(a, b) for a, b in zip(widths, self.widths)]
        self.widths = widths
        return widths


def _in_place(table: pa.Table) -> pa.Table:
    """An updating result sorted by its columns, left to right, so a changed row keeps its place."""
    try:
        return table.sort_by([(name, "ascending") for name in table.column_names])
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return table  # a column type without an order


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _fit(line: str, width: int) -> str:
    return line if len(line) < width else line[:max(1, width - 2)] + "…"
