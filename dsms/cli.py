"""The ``dsms`` command: run or explain a script of statements."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from . import __version__
from .crash import report_bug
from .engine import Engine
from .errors import DsmsError
from .grammar import (
    CreateMaterializedView,
    CreateSink,
    CreateTableAs,
    Explain,
    Insert,
    QueryStatement,
    StatementSet,
    parse_script,
)
from .render import format_header, format_rows, format_watermark


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dsms", description="A declarative SQL continuous-query engine. "
                                     "With no command, opens the interactive shell (docs/repl.md).")
    parser.add_argument("--version", action="version", version=f"dsms {__version__}")
    parser.add_argument("--state-dir", metavar="DIR", default=None,
                        help="the shell (or statements piped in): keep durable state, and the shell's history, in DIR")
    parser.add_argument("-c", dest="sql", metavar="SQL", default=None,
                        help="run these statements (as a script) instead of opening the shell")
    parser.add_argument("-f", dest="file", metavar="FILE", default=None,
                        help="run the statements of FILE (as dsms run FILE) instead of opening the shell")
    parser.add_argument("--engine", dest="shell_engine", choices=Engine.engine_names(), default=None,
                        help="the shell (or -c / -f): where queries run, as SET 'engine'")
    parser.add_argument("--connect", metavar="URL", default=None,
                        help="the shell over the wire to a dsms server (postgresql://host:port; default: $DSMS_URL)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    shell_cmd = sub.add_parser("shell", help="the interactive shell (what dsms with no command opens)",
                               description="The interactive shell: on an embedded engine, or with --connect (or "
                                           "DSMS_URL) on a dsms server over the PostgreSQL protocol (docs/server.md).")
    shell_cmd.add_argument("--connect", metavar="URL", default=None,
                           help="connect to a dsms server, e.g. postgresql://127.0.0.1:6875 (default: $DSMS_URL)")
    shell_cmd.add_argument("--state-dir", metavar="DIR", default=None, help="as dsms --state-dir (embedded engine)")

    run = sub.add_parser("run", help="run a script to completion (bounded sources) or until interrupted",
                         description="Run the statements of a script. Bounded sources are processed to the end: "
                                     "every window fires, sinks are flushed, and the command exits 0.")
    run.add_argument("script", nargs="?", help="a file of ;-separated statements (optional with --state-dir: "
                                               "run what the directory holds)")
    run.add_argument("--quiet", "-q", action="store_true", help="no progress line and no summary")
    run.add_argument("--batch-size", type=int, default=None, metavar="ROWS",
                     help="rows per micro-batch read from files (default 65536)")
    run.add_argument("--state-dir", metavar="DIR", default=None,
                     help="keep the catalog, memory streams and checkpoints of sinks and materialized views in DIR; "
                          "run again with the same DIR (and script) to continue after a crash or an interrupt")
    run.add_argument("--engine", choices=Engine.engine_names(), default=None,
                     help="where queries run: the incremental runtime, one DuckDB statement, Spark, or auto "
                          "(the default: DuckDB or Spark for bounded files by size, else the runtime; "
                          "SET 'engine' in the script overrides it)")

    explain = sub.add_parser("explain", help="print the operator DAG of each query in a script",
                             description="Print, for each CREATE SINK, CREATE MATERIALIZED VIEW and SELECT of a "
                                         "script, its operators, their inputs, changelog mode and watermark.")
    explain.add_argument("script")

    server = sub.add_parser("server", help="serve the engine over the PostgreSQL wire protocol (docs/server.md)",
                            description="Run the engine as a service: psql and PostgreSQL drivers connect; the "
                                        "catalog and standing queries live in the state dir and outlive clients.")
    server.add_argument("--state-dir", metavar="DIR", required=True, help="the catalog, memory streams and "
                        "checkpoints (restored at start; a final checkpoint on SIGTERM/SIGINT)")
    server.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    server.add_argument("--port", type=int, default=6875, help="PostgreSQL protocol port (default 6875; 0: any free)")
    server.add_argument("--metrics-port", type=int, default=None, metavar="M",
                        help="serve /metrics, /health and /ready over HTTP on this port")
    server.add_argument("--log-file", metavar="F", default=None, help="log here instead of stderr")
    server.add_argument("--users", metavar="FILE", default=None,
                        help="require SCRAM-SHA-256 passwords of the users in FILE (lines name:password)")
    server.add_argument("--tls-cert", metavar="PEM", default=None, help="TLS certificate (with --tls-key)")
    server.add_argument("--tls-key", metavar="PEM", default=None, help="TLS private key")
    server.add_argument("--data-root", metavar="DIR", action="append", default=None,
                        help="a folder clients' file paths may use (repeatable; default: the current folder; "
                             "relative paths resolve against the first)")
    server.add_argument("--subscriber-buffer", type=int, default=100_000, metavar="ROWS",
                        help="changes a subscriber may fall behind before it is dropped (default 100000)")
    server.add_argument("--allow-python-functions", action="store_true",
                        help="let clients CREATE FUNCTION (it imports and runs Python code in the server's process)")
    server.add_argument("--verbose", "-v", action="store_true", help="log every client error too")

    args = parser.parse_args(argv)
    try:
        return _main(parser, args)
    except Exception as e:  # not a DsmsError: a bug, told in one line, its traceback in a log file
        command = "dsms " + " ".join(sys.argv[1:] if argv is None else argv)
        print(report_bug(e, f"{command}\n(dsms {__version__})")[0], file=sys.stderr)
        return 70  # EX_SOFTWARE


def _main(parser: argparse.ArgumentParser, args) -> int:
    """One job per command: the server, the shell (or the statements given to it), run or explain."""
    if args.command == "server":
        return serve(args)
    if args.command in (None, "shell"):
        return _shell_command(args)
    return _script_command(parser, args)


def _shell_command(args) -> int:
    """No command or ``shell``: a server's shell when a URL is given, ``-c SQL`` / ``-f FILE`` run as a
    script, else the shell on an embedded engine."""
    if args.sql is None and args.file is None:
        url = args.connect or os.environ.get("DSMS_URL")
        if url:
            return connect(url)
    if args.command == "shell" or (args.sql is None and args.file is None):
        return shell(args.state_dir, args.shell_engine)
    base = os.path.dirname(os.path.abspath(args.file)) if args.file else os.getcwd()
    try:
        text = args.sql if args.sql is not None else _read(args.file)
        return run_script(text, base, state_dir=args.state_dir, engine=args.shell_engine)
    except DsmsError as e:
        print(str(e), file=sys.stderr)
        return 1


def _script_command(parser: argparse.ArgumentParser, args) -> int:
    """``dsms run`` or ``dsms explain``: a script file (run may continue a state directory without one);
    a failure is one message and exit code 1, Ctrl-C exits 130."""
    try:
        if args.command == "run" and args.script is None and args.state_dir is None:
            parser.error("dsms run needs a script (or --state-dir DIR to continue what DIR holds)")
        text = _read(args.script) if args.script else ""
        base = os.path.dirname(os.path.abspath(args.script)) if args.script else os.getcwd()
        if args.command == "run":
            return run_script(text, base, quiet=args.quiet, batch_size=args.batch_size, state_dir=args.state_dir,
                              engine=args.engine)
        return explain_script(text, base)
    except DsmsError as e:
        print(str(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def shell(state_dir: str | None, engine: str | None = None) -> int:
    """No command: the interactive shell on a terminal; statements piped in run as a script."""
    if not sys.stdin.isatty():
        try:
            return run_script(sys.stdin.read(), os.getcwd(), state_dir=state_dir, engine=engine)
        except DsmsError as e:
            print(str(e), file=sys.stderr)
            return 1
    from .repl import main as repl  # prompt-toolkit is loaded only when the shell starts

    return repl(state_dir=state_dir, engine=engine)


def connect(url: str) -> int:
    """``dsms shell --connect URL`` (or ``DSMS_URL``): the shell over the wire to a dsms server."""
    if not sys.stdin.isatty():
        print("dsms shell --connect needs a terminal; run scripts against a server with psql -f", file=sys.stderr)
        return 2
    from .repl.remote import main as remote  # prompt-toolkit and psycopg are loaded only here

    try:
        return remote(url)
    except DsmsError as e:
        print(str(e), file=sys.stderr)
        return 1


def serve(args) -> int:
    """``dsms server``: the PostgreSQL-protocol front end (dsms.server), loaded only for this command."""
    from .server import ServerConfig, run_server

    config = ServerConfig(state_dir=args.state_dir, host=args.host, port=args.port, metrics_port=args.metrics_port,
                          users_file=args.users, tls_cert=args.tls_cert, tls_key=args.tls_key,
                          data_roots=args.data_root or [], subscriber_buffer=args.subscriber_buffer,
                          log_file=args.log_file, python_functions=args.allow_python_functions)
    return run_server(config, log_file=args.log_file, verbose=args.verbose)


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise DsmsError(f"cannot read script {path}: {e.strerror}") from None


def run_script(text: str, base_dir: str, quiet: bool = False, batch_size: int | None = None, out=None,
               state_dir: str | None = None, engine: str | None = None) -> int:
    """Run a script's statements, then its queries to the end of their input (``engine``: the route)."""
    out = out or sys.stdout
    stop = _Stop()
    # SIGTERM from the start: one that comes while the engine opens or the statements run stops the run
    # between two statements (a final checkpoint; the statements left run when the script runs again).
    # Both signals stay caught until the engine has closed, so that its final checkpoints are whole.
    stop.catch(signal.SIGTERM)
    try:
        runner = Engine(base_dir=base_dir, state_dir=state_dir, batch_rows=batch_size)  # restored queries too
        try:
            return _run(runner, text, base_dir, quiet, batch_size, out, engine, stop)
        finally:
            runner.close()
    finally:
        stop.release()


def _run(engine: Engine, text: str, base_dir: str, quiet: bool, batch_size: int | None, out,
         route: str | None, stop: "_Stop") -> int:
    """Apply the script's statements, then run its queries to the end of their input: the exit code."""
    if batch_size:
        engine.set("batch.size", str(batch_size), save=False)
    if route:
        engine.set("engine", route, save=False)
    started = time.perf_counter()
    statements = parse_script(text)
    printers = _apply_statements(engine, statements, base_dir, quiet, out, stop)
    # In a script, memory streams hold exactly what the script inserted. (Without one, a state
    # directory's memory streams stay open: its queries run until interrupted.)
    if statements and not stop.pressed:
        engine.end_input()
    progress = _Progress(engine, started, enabled=not quiet)
    interrupted = _run_queries(engine, printers, progress, stop)
    if interrupted is not None:
        progress.clear()
        _summary(engine, started, interrupted=True, quiet=quiet)
        return interrupted
    for p in printers:
        p.print_new()
        p.finish()
    progress.clear()
    _summary(engine, started, quiet=quiet)
    return _report_failed_jobs(engine)


def _apply_statements(engine: Engine, statements: list, base_dir: str, quiet: bool, out,
                      stop: "_Stop") -> list[_Printer]:
    """Execute the statements in order, skipping those a state directory's earlier run of the script
    applied already (so a rerun continues it); a printer for each query they start."""
    printers = []
    progress = engine.script_progress(statements)
    for index, stmt in enumerate(statements):
        if stop.pressed:
            break
        if progress.done(index):
            continue
        progress.begin(index)
        try:
            result = engine.execute_statement(stmt, base_dir, script_tag=index)
        except BaseException:
            progress.begin(index - 1)
            raise
        progress.applied(index)
        printer = _show_result(stmt, result, quiet, out)
        if printer is not None:
            printers.append(printer)
    return printers


def _show_result(stmt, result, quiet: bool, out) -> _Printer | None:
    """Print a statement's warnings and its table or message; a query's rows come later, through the
    printer returned for it."""
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if result.query is not None:
        return _Printer(result.query, out, title=stmt.text.strip().split("\n")[0])
    if result.table is not None:
        from .render import format_table

        print(format_table(result.table) if not isinstance(stmt, Explain) else result.message, file=out)
    elif result.message and not quiet:
        print(result.message, file=sys.stderr)
    return None


def _run_queries(engine: Engine, printers: list[_Printer], progress: _Progress, stop: "_Stop") -> int | None:
    """Step the running queries, printing their new rows, until none runs; the exit code when Ctrl-C or
    SIGTERM ends the run first (None when the queries ended by themselves)."""
    try:
        stop.catch(signal.SIGINT)  # from here on, Ctrl-C too ends the run between two turns
        # Paused queries (a state directory can hold some) do not keep the run going.
        while not stop.pressed and any(q.stats.status == "running" for q in engine.statuses()):
            moved = engine.step()
            for p in printers:
                p.print_new()
            progress.tick()
            if not moved:
                time.sleep(0.05)  # unbounded sources: wait for more input
    except KeyboardInterrupt:
        return 130
    return stop.exit_code if stop.pressed else None


def _report_failed_jobs(engine: Engine) -> int:
    """Tell each failed query or job on stderr: exit code 1 if any failed, else 0."""
    failed = [q for q in engine.statuses() if q.stats.status == "failed"]
    for q in failed:
        print(f"{q.kind} {q.id} failed: {q.stats.error}" if q.kind != "query" else str(q.stats.error), file=sys.stderr)
    return 1 if failed else 0


class _Stop:
    """Ctrl-C (SIGINT) or SIGTERM ends the run between two turns (or two statements), so no batch is cut
    in half and the checkpoints taken when the engine closes are consistent.

    ``catch`` takes a signal over: SIGTERM from the start of a run, SIGINT once the queries run (before,
    Ctrl-C interrupts a long statement as a KeyboardInterrupt). ``release`` gives the signals back.
    """

    def __init__(self):
        self.pressed = False
        self.exit_code = 130
        self._previous: dict = {}

    def catch(self, sig: int) -> None:
        if sig in self._previous:
            return
        try:
            self._previous[sig] = signal.signal(sig, self._press)
        except ValueError:  # not the main thread: the signal keeps its own handler
            pass

    def _press(self, signum, frame) -> None:
        self.pressed = True
        self.exit_code = 128 + signum  # 130 for Ctrl-C, 143 for SIGTERM, as a shell reports them

    def release(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous = {}


def explain_script(text: str, base_dir: str, out=None) -> int:
    out = out or sys.stdout
    engine = Engine(base_dir=base_dir)
    first = True
    for stmt in parse_script(text):
        inner = stmt.statement if isinstance(stmt, Explain) else stmt
        if isinstance(inner, (CreateSink, CreateMaterializedView, QueryStatement)):
            planned = engine.plan(inner)
            title = {CreateSink: "sink", CreateMaterializedView: "materialized view"}.get(type(inner))
            header = f"{title} {inner.name.value}" if title else inner.query.text.split("\n")[0]
            if not first:
                print(file=out)
            first = False
            print(f"-- {header}  ({planned.changelog})", file=out)
            print(engine.explain(planned), file=out)
            if isinstance(inner, CreateMaterializedView):
                engine.declare(inner)
        elif isinstance(inner, (Insert, StatementSet, CreateTableAs)):  # explained, never started
            if not first:
                print(file=out)
            first = False
            print(f"-- {' '.join(inner.text.split())[:70]}", file=out)
            if isinstance(inner, CreateTableAs):
                print(engine.explain(engine.plan(inner)), file=out)
                engine.declare(inner)  # for the statements after it
            else:
                explain = Explain(inner.span, inner.source, statement=inner)
                print(engine.execute_statement(explain, base_dir).message, file=out)
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
        jobs = [q.stats for q in self.engine.statuses()]
        events = events_read(jobs)
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        marks = [wm for j in jobs for wm in j.open_watermarks]
        wm = format_watermark(min(marks)) if marks else "end of input"
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


def events_read(jobs: list) -> int:
    """Events read from the sources: each source counted once, however many queries read it."""
    per_source: dict[str, int] = {}
    for job in jobs:
        for name, rows in job.sources.items():
            per_source[name] = max(per_source.get(name, 0), rows)
    return sum(per_source.values())


def _summary(engine: Engine, started: float, interrupted: bool = False, quiet: bool = False) -> None:
    if quiet:
        return
    elapsed = time.perf_counter() - started
    statuses = engine.statuses()
    jobs = [q.stats for q in statuses]
    events = events_read(jobs)
    late: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for q in statuses:
        for name, n in q.stats.late.items():  # a source's count is shared by its queries; an operator's is its own
            key = f"{q.id} {name}" if name.startswith("#") else name
            late[key] = max(late.get(key, 0), n)
        for name, n in q.stats.skipped.items():
            skipped[name] = max(skipped.get(name, 0), n)
    word = "interrupted" if interrupted else "done"
    parts = [f"{word}: {events:,} events in {elapsed:.2f} s ({events / max(elapsed, 1e-9):,.0f} events/s)"]
    total_late = sum(late.values())
    uncounted = sorted({j.route for j in jobs if not j.late_counted})
    parts.append(f"late events dropped: {total_late:,}" +
                 (f" ({', '.join(f'{k}: {v:,}' for k, v in late.items() if v)})" if total_late else "") +
                 (f"; not counted on the {', '.join(uncounted)} route" if uncounted else ""))
    if skipped:
        parts.append("malformed rows skipped: " + ", ".join(f"{k}: {v:,}" for k, v in skipped.items()))
    for q in statuses:
        if q.kind == "sink":
            parts.append(f"sink {q.id}: {q.stats.rows_out:,} rows ({q.stats.route})")
    print("\n".join(parts), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
