"""The shell: a prompt that runs statements while the engine keeps running standing queries.

One asyncio loop on one thread does everything. A driver task calls
``engine.step()`` while the engine has work, yielding to the prompt between
steps, and ticks every ``tick`` seconds when idle so processing time and
idle timeouts advance. Standing queries (sinks, materialized views) thus
run while the user types, and no locks are needed.

A continuous SELECT becomes the *live result*: its table (or its
changelog) is drawn above the prompt and updated in place, so the user can
keep typing, e.g. INSERT events and watch a window fire. Ctrl-C stops it
(and only it); a SELECT over bounded sources ends by itself. Its last
result then stays on screen. Everything else is printed above the prompt.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from contextlib import suppress

import pyarrow as pa
from prompt_toolkit import PromptSession, print_formatted_text
from prompt_toolkit.filters import Condition, completion_is_selected
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.patch_stdout import patch_stdout

import dsms
from dsms import DsmsError
from dsms.crash import report_bug
from dsms.grammar import Diagnostic, ResetOption, SetOption, SqlError, parse_script

from .completion import SqlCompleter, quote_name
from .display import Display
from .highlight import STYLE, SqlLexer, highlight
from .live import RESULT_MODES, LiveResult
from .meta import EndSession, read_script, run_meta
from .tokens import statement_complete

PROMPT = "dsms> "
CONTINUATION = "   -> "
# The shell's own options, set with SET like the engine's.
SESSION_OPTIONS = {"result_mode": ("table", RESULT_MODES)}


class Repl:
    """The interactive shell around one engine.

    Args:
        engine: the ``dsms.Engine`` statements run on.
        input, output: prompt-toolkit input and output (the terminal by default; tests pass a pipe).
        history: a prompt-toolkit History (in memory by default).
        tick: seconds between engine steps while it is idle.
    """

    def __init__(self, engine, *, input=None, output=None, history=None, tick: float = 0.1):
        self.engine = engine
        self.options = {key: default for key, (default, _) in SESSION_OPTIONS.items()}
        self.display = Display()  # \x and \pset: expanded display, the pager
        self.paging = input is None and output is None and sys.stdout.isatty()  # only on the user's terminal
        self.live: LiveResult | None = None
        self.tick = tick
        self._executing = False
        self._drawn = 0.0
        self._dirty = False
        self._last_failure = None
        self._failures_seen = len(engine.scheduler.failures)
        self.session = PromptSession(
            message=self.message, prompt_continuation=CONTINUATION, lexer=SqlLexer(), style=STYLE,
            multiline=Condition(lambda: not statement_complete(self.session.default_buffer.text)),
            completer=SqlCompleter(engine, tuple(SESSION_OPTIONS)), complete_while_typing=True,
            history=history or InMemoryHistory(), key_bindings=self._key_bindings(), erase_when_done=True,
            include_default_pygments_style=False, input=input, output=output)

    # -- the loop ------------------------------------------------------------------------

    async def run(self) -> None:
        """Read and run statements until ``\\q`` or Ctrl-D."""
        self._loop = asyncio.get_running_loop()
        previous = _set_sigint(self._on_sigint)
        driver = asyncio.create_task(self._drive())
        try:
            while True:
                try:
                    text = await self.session.prompt_async()
                except KeyboardInterrupt:
                    continue  # Ctrl-C clears the line
                except EOFError:
                    break
                self._echo(text)
                if not self.handle(text):
                    break
        finally:
            driver.cancel()
            with suppress(asyncio.CancelledError):
                await driver
            if self.live is not None:
                self._end_live()
            _set_sigint(previous)

    async def _drive(self) -> None:
        while True:
            busy = self._step()
            try:
                self._refresh_live()
            except Exception as e:  # the driver must outlive any one view
                self.live = None
                self.bug(e, "showing a live result")
            await asyncio.sleep(0 if busy else self.tick)

    def _step(self) -> bool:
        try:
            busy = self.engine.step()
        except Exception as e:  # an internal error: say it once, keep the shell going
            message = f"{type(e).__name__}: {e}"
            if message != self._last_failure:
                self.bug(e, "running the queries")
            self._last_failure = message
            return False
        self._report_failures()
        return busy

    def _report_failures(self) -> None:
        """A query that failed (bad input) is reported once; a live SELECT that failed is stopped."""
        failures = self.engine.scheduler.failures
        for name, job in failures[self._failures_seen:]:
            message = str(job.error) if isinstance(job.error, DsmsError) \
                else f"internal error: {type(job.error).__name__}: {job.error}"
            if self.live is not None and self.live.name == name:
                self._end_live(drop=False)
                self.engine.execute(f"DROP QUERY IF EXISTS {quote_name(name)}")
                self.error(f"query {name} failed and was stopped:\n{message}")
            else:
                self.error(f"query {name} failed (SHOW QUERIES lists it; DROP it to remove it):\n{message}")
        self._failures_seen = len(failures)

    # -- statements ----------------------------------------------------------------------

    def handle(self, text: str) -> bool:
        """Run what the user entered; False when the session should end."""
        stripped = text.strip()
        word = stripped.rstrip(";").strip().lower()
        if word in ("quit", "exit"):
            return False
        if word == "help":
            stripped = "\\help"
        if not stripped:
            return True
        self._executing = True
        try:
            if stripped.startswith("\\"):
                command, _, rest = stripped.partition(" ")
                if command == "\\x":  # expanded display of result tables: on, off or auto
                    self.print(self.display.set_expanded(rest))
                elif command == "\\pset":
                    self.print(self.display.set_option(rest))
                elif command in ("\\i", "\\include"):  # run the statements of a file
                    for stmt in parse_script(read_script(rest.strip())):
                        self.execute(stmt)
                else:
                    self.show(run_meta(stripped, self.engine))
                return True
            for stmt in parse_script(text):
                self.execute(stmt)
        except EndSession:
            return False
        except DsmsError as e:
            self.error(str(e))
        except KeyboardInterrupt:
            self.error("interrupted")
        except Exception as e:  # a bug must not end the session
            self.bug(e, f"running: {text}")
        finally:
            self._executing = False
        return True

    def execute(self, stmt) -> None:
        if isinstance(stmt, (SetOption, ResetOption)) and self._session_option(stmt):
            return
        result = self.engine.execute_statement(stmt)
        for warning in result.warnings:
            self.print(f"warning: {warning}", "class:warning")
        if result.query is not None:
            if self.live is not None:
                self._end_live()
            self.live = LiveResult(result.query, self.options["result_mode"])
            self._dirty = True
        elif result.message is not None:
            self.show(result.message)
        elif result.table is not None:
            table = result.table
            if isinstance(stmt, SetOption):  # SET lists the shell's options with the engine's
                table = _append_options(table, self.options)
            self.show(self.display.render(table, self.session.app.output.get_size().columns))

    def _session_option(self, stmt) -> bool:
        """SET / RESET of the shell's own options; False if the statement is for the engine."""
        if stmt.key is None:
            if isinstance(stmt, ResetOption):
                self.options = {key: default for key, (default, _) in SESSION_OPTIONS.items()}
            return False
        if stmt.key not in SESSION_OPTIONS:
            return False
        default, allowed = SESSION_OPTIONS[stmt.key]
        if isinstance(stmt, ResetOption):
            self.options[stmt.key] = default
            self.print("Reset")
            return True
        value = stmt.value.lower()
        if value not in allowed:
            raise SqlError(Diagnostic(f"invalid value '{stmt.value}' for '{stmt.key}'", stmt.span, stmt.source,
                                      help="expected one of: " + ", ".join(allowed)))
        self.options[stmt.key] = value
        self.print(f"Set {stmt.key} = {value}" + (" (for the next SELECT)" if self.live is not None else ""))
        return True

    # -- the live result -----------------------------------------------------------------

    def _refresh_live(self) -> None:
        live = self.live
        if live is None:
            return
        if live.name not in self.engine.scheduler.jobs:  # dropped with DROP QUERY
            self._end_live(drop=False)
            return
        self._dirty = live.refresh() or self._dirty
        if live.mode == "changelog":
            lines = live.take_changes()
            if lines:
                self.print("\n".join(lines))
        if live.done:
            self._end_live()
            return
        now = time.monotonic()
        if (self._dirty and now - self._drawn >= 0.05) or now - self._drawn >= 0.5:
            self._drawn, self._dirty = now, False
            self.session.app.invalidate()

    def stop_live(self) -> None:
        """Ctrl-C: stop the live query, keep its last result on screen."""
        if self.live is not None:
            self.live.refresh()
            self._end_live()

    def _end_live(self, drop: bool = True) -> None:
        live, self.live = self.live, None
        self.print(live.final())
        if drop:
            self.engine.execute(f"DROP QUERY IF EXISTS {quote_name(live.name)}")
        self.session.app.invalidate()

    def _on_sigint(self, signum, frame) -> None:
        """SIGINT outside the prompt (a statement is running): interrupt it; never end the shell."""
        if self._executing:
            raise KeyboardInterrupt
        self._loop.call_soon_threadsafe(self.stop_live)

    # -- the screen ----------------------------------------------------------------------

    def message(self):
        """The prompt, with the live result above it."""
        fragments = []
        if self.live is not None:
            size = self.session.app.output.get_size()
            *table, status = self.live.view(size.columns, max(3, size.rows - 10))
            fragments += [("", line + "\n") for line in table] + [("class:status", status), ("", "\n")]
        return fragments + [("class:prompt", PROMPT)]

    def _echo(self, text: str) -> None:
        """Put the statement in the scrollback as typed (the prompt itself is erased when done)."""
        if not text.strip():
            return
        fragments = [("class:prompt", PROMPT)]
        for style, part in highlight(text):
            pieces = part.split("\n")
            for i, piece in enumerate(pieces):
                if i:
                    fragments += [("", "\n"), ("class:continuation", CONTINUATION)]
                fragments.append((style, piece))
        print_formatted_text(FormattedText(fragments), style=STYLE, output=self.session.app.output,
                             include_default_pygments_style=False)

    def show(self, text: str) -> None:
        """A statement's result: through the pager when it does not fit the terminal (``\\pset pager``)."""
        size = self.session.app.output.get_size()
        if not (self.paging and self.display.page(text, size.rows, size.columns)):
            self.print(text)

    def print(self, text: str, style: str = "") -> None:
        print_formatted_text(FormattedText([(style, text)]), style=STYLE, output=self.session.app.output,
                             include_default_pygments_style=False)

    def error(self, text: str) -> None:
        self.print(text if text.startswith("error") else f"error: {text}", "class:error")

    def bug(self, e: Exception, doing: str) -> None:
        """An error that is not a DsmsError: one line saying it is a bug and where its traceback went."""
        self.print(report_bug(e, f"dsms shell, {doing}\n(dsms {dsms.__version__})")[0], "class:error")

    def _key_bindings(self) -> KeyBindings:
        kb = KeyBindings()
        live = Condition(lambda: self.live is not None)

        @kb.add("c-c", filter=live)
        @kb.add("<sigint>", filter=live)
        def _(event):
            self.stop_live()

        @kb.add("enter", filter=completion_is_selected)
        def _(event):
            event.current_buffer.complete_state = None  # take the completion, do not run yet

        return kb


def _append_options(table: pa.Table, options: dict) -> pa.Table:
    extra = pa.table({"key": list(options), "value": list(options.values())})
    return pa.concat_tables([table, extra.cast(table.schema)]).sort_by("key")


def _set_sigint(handler):
    """Install a SIGINT handler (only the main thread may); returns the previous one."""
    if handler is not None:
        with suppress(ValueError):
            return signal.signal(signal.SIGINT, handler)
    return None


def main(state_dir: str | None = None, engine: str | None = None) -> int:
    """``dsms``: the shell on the terminal, with history kept under the home folder or the state dir.

    ``engine`` (``dsms --engine``): where the session's queries run, as ``SET 'engine'``.
    """
    route = engine
    engine = dsms.Engine(state_dir=state_dir)
    if route is not None:
        engine.set("engine", route, save=False)
    history, where = _history(state_dir)
    repl = Repl(engine, history=history)
    repl.print(f"dsms {dsms.__version__}: statements end with ';'. \\help for help, \\q to quit.")
    if where is None:
        repl.print("warning: history is not kept (the history file cannot be written)", "class:warning")
    with patch_stdout():
        asyncio.run(repl.run())
    engine.close()
    return 0


def _history(state_dir: str | None):
    """A FileHistory in the state dir (or ``~/.dsms_history``); in memory if it cannot be written."""
    path = os.path.join(state_dir, "history") if state_dir else os.path.join(os.path.expanduser("~"), ".dsms_history")
    try:
        if state_dir:
            os.makedirs(state_dir, exist_ok=True)
        with open(path, "a", encoding="utf-8"):
            pass
    except OSError:
        return InMemoryHistory(), None
    return FileHistory(path), path
