"""The ``dsms`` command: run or explain a script of statements."""

from __future__ import annotations

import argparse
import os
import sys
import time

from . import __version__
from .engine import Engine
from .errors import DsmsError
from .grammar import CreateMaterializedView, CreateSink, Explain, QueryStatement, parse_script
from .planner import plan_query
from .planner.ddl import bind_create_mv
from .planner.routing import ENGINES
from .render import format_header, format_rows, format_value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dsms", description="A declarative SQL continuous-query engine.")
    parser.add_argument("--version", action="version", version=f"dsms {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a script to completion (bounded sources) or until interrupted",
                         description="Run the statements of a script. Bounded sources are processed to the end: "
                                     "every window fires, sinks are flushed, and the command exits 0.")
    run.add_argument("script", help="a file of ;-separated statements")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress line and no summary")
    run.add_argument("--batch-size", type=int, default=None, metavar="ROWS",
                     help="rows per micro-batch read from files (default 65536)")
    run.add_argument("--engine", choices=ENGINES, default=None,
                     help="where queries run: the incremental runtime, one DuckDB statement, Spark, or auto "
                          "(the default: DuckDB or Spark for bounded files by size, else the runtime; "
                          "SET 'engine' in the script overrides it)")

    explain = sub.add_parser("explain", help="print the operator DAG of each query in a script",
                             description="Print, for each CREATE SINK, CREATE MATERIALIZED VIEW and SELECT of a "
                                         "script, its operators, their inputs, changelog mode and watermark.")
    explain.add_argument("script")

    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        text = _read(args.script)
        if args.command == "run":
            return run_script(text, os.path.dirname(os.path.abspath(args.script)), quiet=args.quiet,
                              batch_size=args.batch_size, engine=args.engine)
        return explain_script(text, os.path.dirname(os.path.abspath(args.script)))
    except DsmsError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise DsmsError(f"cannot read script {path}: {e.strerror}") from None


def run_script(text: str, base_dir: str, quiet: bool = False, batch_size: int | None = None, out=None,
               engine: str | None = None) -> int:
    out = out or sys.stdout
    route = engine
    engine = Engine(base_dir=base_dir)
    if batch_size:
        engine.scheduler.batch_rows = batch_size
    if route:
        engine.catalog.settings["engine"] = route
    started = time.perf_counter()
    printers = []
    for stmt in parse_script(text):
        result = engine.execute_statement(stmt, base_dir)
        for warning in result.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        if result.query is not None:
            printers.append(_Printer(result.query, out, title=stmt.text.strip().split("\n")[0]))
        elif result.table is not None:
            from .render import format_table

            print(format_table(result.table) if not isinstance(stmt, Explain) else result.message, file=out)
        elif result.message and not quiet:
            print(result.message, file=sys.stderr)
    # In a script, memory streams hold exactly what the script inserted.
    engine.end_input()
    progress = _Progress(engine, started, enabled=not quiet)
    try:
        while not all(job.done for job in engine.scheduler.jobs.values()):
            moved = engine.step()
            for p in printers:
                p.print_new()
            progress.tick()
            if not moved:
                time.sleep(0.05)  # unbounded sources: wait for more input
    except KeyboardInterrupt:
        progress.clear()
        _summary(engine, started, interrupted=True, quiet=quiet)
        return 130
    for p in printers:
        p.print_new()
        p.finish()
    progress.clear()
    _summary(engine, started, quiet=quiet)
    engine.close()
    return 0


def explain_script(text: str, base_dir: str, out=None) -> int:
    out = out or sys.stdout
    engine = Engine(base_dir=base_dir)
    first = True
    for stmt in parse_script(text):
        inner = stmt.statement if isinstance(stmt, Explain) else stmt
        if isinstance(inner, (CreateSink, CreateMaterializedView, QueryStatement)):
            planned = plan_query(inner.query, engine.catalog, inner.source)
            title = {CreateSink: "sink", CreateMaterializedView: "materialized view"}.get(type(inner))
            header = f"{title} {inner.name.value}" if title else inner.query.text.split("\n")[0]
            if not first:
                print(file=out)
            first = False
            print(f"-- {header}  ({planned.changelog})", file=out)
            print(engine.explain_planned(planned), file=out)
            if isinstance(inner, CreateMaterializedView):
                engine.catalog.add(bind_create_mv(inner, planned.schema), name=inner.name, source=inner.source)
        elif not isinstance(stmt, Explain):
            engine.execute_statement(stmt, base_dir)
    return 0


class _Printer:
    """Prints a query's rows as they are produced, as an aligned table."""

    def __init__(self, handle, out, title: str):
        self.handle, self.out, self.title = handle, out, title
        self.widths = None
        self.rows = 0

    def print_new(self) -> None:
        table = self.handle.poll()
        if table.num_rows == 0:
            return
        if self.handle.changelog == "append-only":
            table = table.drop_columns(["op"])
        if self.widths is None:
            _, widths = format_rows(table.slice(0, 200))
            self.widths = [max(w, 12) if "TIMESTAMP" not in str(t).upper() else max(w, 23)
                           for w, t in zip(widths, table.schema.types)]
            print("\n".join(format_header(table.column_names, self.widths)), file=self.out)
        lines, _ = format_rows(table, self.widths)
        print("\n".join(lines), file=self.out, flush=True)
        self.rows += table.num_rows

    def finish(self) -> None:
        if self.widths is None:
            print("(no rows)", file=self.out)


class _Progress:
    """A progress line on stderr: events read, watermark, events per second.

    On a terminal the line is redrawn in place four times a second; in a log
    a line is printed every ``LOG_INTERVAL`` seconds. Runs shorter than a
    second show none.
    """

    LOG_INTERVAL = 10.0
    QUIET_FOR = 1.0  # seconds before the first line

    def __init__(self, engine: Engine, started: float, enabled: bool):
        self.engine, self.started = engine, started
        self.tty = sys.stderr.isatty()
        self.enabled = enabled
        self.last = 0.0
        self.shown = False

    def line(self) -> str:
        jobs = list(self.engine.scheduler.jobs.values())
        events = events_read(self.engine)
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        marks = [s.watermark for j in jobs for _, s in j.sources if not s.finished]
        wm = _format_watermark(min(marks)) if marks else "end of input"
        late = sum(sum(j.late.values()) for j in jobs)
        return f"events {events:,}  watermark {wm}  {events / elapsed:,.0f} events/s  late {late:,}"

    def tick(self) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.last < (0.25 if self.tty else self.LOG_INTERVAL):
            return
        if now - self.started < self.QUIET_FOR:
            return  # short runs need no progress line
        self.last = now
        if self.tty:
            sys.stderr.write("\r\033[K" + self.line())
            self.shown = True
        else:
            print(self.line(), file=sys.stderr)

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()


def _format_watermark(wm: int) -> str:
    import datetime as dt

    from .runtime.operators.base import MIN_WATERMARK

    if wm <= MIN_WATERMARK:
        return "-"
    return format_value(dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=wm))


def events_read(engine: Engine) -> int:
    """Events read from the sources: each source counted once, however many queries read it."""
    per_source: dict[str, int] = {}
    for job in engine.scheduler.jobs.values():
        for _, s in job.sources:
            per_source[s.name] = max(per_source.get(s.name, 0), s.rows_read)
    return sum(per_source.values())


def _summary(engine: Engine, started: float, interrupted: bool = False, quiet: bool = False) -> None:
    if quiet:
        return
    elapsed = time.perf_counter() - started
    jobs = engine.scheduler.jobs
    events = events_read(engine)
    late: dict[str, int] = {}
    for j in jobs.values():
        for name, n in j.late.items():
            late[name] = max(late.get(name, 0), n)
    skipped = {}
    for j in jobs.values():
        for _, s in j.sources:
            reader = getattr(s, "reader", None)
            if reader is not None and getattr(reader, "skipped", 0):
                skipped[s.name] = max(skipped.get(s.name, 0), reader.skipped)
    word = "interrupted" if interrupted else "done"
    parts = [f"{word}: {events:,} events in {elapsed:.2f} s ({events / max(elapsed, 1e-9):,.0f} events/s)"]
    total_late = sum(late.values())
    parts.append(f"late events dropped: {total_late:,}" +
                 (f" ({', '.join(f'{k}: {v:,}' for k, v in late.items() if v)})" if total_late else "") +
                 ("; not counted on the spark route" if any(not getattr(j, "late_counted", True)
                                                             for j in jobs.values()) else ""))
    if skipped:
        parts.append("malformed rows skipped: " + ", ".join(f"{k}: {v:,}" for k, v in skipped.items()))
    for name, job in jobs.items():
        if not name.startswith("query-"):
            parts.append(f"sink {name}: {job.metrics.rows_out:,} rows ({getattr(job, 'route', 'runtime')})")
    print("\n".join(parts), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
