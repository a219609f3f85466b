"""Driving the real shell in tests: keys through prompt-toolkit's pipe input, the screen through a
terminal emulator (pyte), so a test reads what a user would see, including the live area redrawn
in place above the prompt."""

from __future__ import annotations

import asyncio
import os
import sys
import time

import pexpect
import pyte
from prompt_toolkit.data_structures import Size
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

import dsms
from dsms.repl import Repl

TICK = 0.02


class Screen:
    """A terminal emulator that prompt-toolkit writes to; keeps what scrolls off the top."""

    encoding = "utf-8"

    def __init__(self, rows: int = 60, cols: int = 110):
        self.rows, self.cols = rows, cols
        self.screen = pyte.HistoryScreen(cols, rows, history=10_000)
        self.stream = pyte.Stream(self.screen)

    def write(self, data: str) -> int:
        self.stream.feed(data)
        return len(data)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False  # no cursor position requests: nobody would answer them

    def display(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display]

    def text(self) -> str:
        """Everything printed: the lines scrolled off the top, then the screen."""
        top = ["".join(line[x].data for x in range(self.cols)).rstrip() for line in self.screen.history.top]
        lines = top + self.display()
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines)


async def until(condition, timeout: float = 10.0, what: str = "", screen: Screen | None = None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return
        await asyncio.sleep(TICK)
    raise AssertionError(f"timed out waiting for {what or condition}" + (f"; screen:\n{screen.text()}" if screen else ""))


class Shell:
    """The shell around an engine, run in this event loop, with its input and screen at hand.

    ``async with Shell() as sh: await sh.run("SELECT 1;")``
    """

    def __init__(self, engine: dsms.Engine | None = None, rows: int = 60, cols: int = 110, history=None):
        self.engine = engine or dsms.Engine()
        self.screen = Screen(rows, cols)
        self.history = history or InMemoryHistory()
        self.handled = 0

    async def __aenter__(self) -> "Shell":
        self._pipe = create_pipe_input()
        self.input = self._pipe.__enter__()
        output = Vt100_Output(self.screen, lambda: Size(rows=self.screen.rows, columns=self.screen.cols), term="xterm")
        self.repl = Repl(self.engine, input=self.input, output=output, history=self.history, tick=TICK)
        handle = self.repl.handle

        def counted(text):  # lets a test wait until what it typed has run
            try:
                return handle(text)
            finally:
                self.handled += 1

        self.repl.handle = counted
        step = self.engine.step
        self.steps: list[bool] = []

        def watched():  # lets a test wait until the engine has nothing left to do
            moved = False
            try:
                moved = step()
                return moved
            finally:
                self.steps.append(moved)

        self.engine.step = watched
        self.task = asyncio.create_task(self.repl.run())
        await self.wait_for("dsms>")
        return self

    async def __aexit__(self, *exc) -> None:
        if not self.task.done():
            self.send("\x03")  # stop the live query, or clear the line
            await asyncio.sleep(4 * TICK)
            self.send("\\q\r")
            await asyncio.wait_for(self.task, 10)
        self._pipe.__exit__(None, None, None)

    def send(self, keys: str) -> None:
        self.input.send_text(keys)

    async def run(self, text: str) -> None:
        """Type ``text`` line by line, wait until it has run and the engine is idle."""
        before = self.handled
        margin = 0
        for line in text.split("\n"):
            # After Enter the editor repeats the last line's indentation: type only what differs.
            indent = len(line) - len(line.lstrip(" "))
            self.send("\x7f" * max(0, margin - indent) + line[min(indent, margin):] + "\r")
            margin = indent
        await until(lambda: self.handled > before, what=f"{text!r} to run", screen=self.screen)
        await self.settle()

    async def settle(self) -> None:
        """Let the engine process everything it has, and the live area catch up."""
        start = len(self.steps)
        await until(lambda: len(self.steps) > start + 2 and not any(self.steps[-3:]), what="the engine to be idle",
                    screen=self.screen)
        await asyncio.sleep(4 * TICK)  # and the live area to be redrawn

    async def wait_for(self, text: str, timeout: float = 10.0) -> None:
        await until(lambda: text in self.screen.text(), timeout, what=repr(text), screen=self.screen)

    def live_area(self) -> list[str]:
        """The live result: the lines the prompt draws above its last line, at the bottom of the screen."""
        lines = self.screen.display()
        prompt = max(i for i, line in enumerate(lines) if line.startswith("dsms>"))
        height = sum(text.count("\n") for _, text in self.repl.message())
        return lines[prompt - height:prompt]


def table_rows(lines: list[str], after: int = 0) -> list[tuple[str, ...]]:
    """The data rows of the first table drawn in ``lines`` from ``after``: the lines below its rule."""
    rule = next(i for i in range(after, len(lines)) if lines[i] and set(lines[i]) <= set("-+"))
    out = []
    for line in lines[rule + 1:]:
        if not line or line.startswith(("(", "query_", "dsms>", "... ")):
            break
        out.append(tuple(c.strip() for c in line.split("|")))
    return out


# -- the real command in a pseudo-terminal -----------------------------------------------------------

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")


class Terminal:
    """``dsms`` in a pseudo-terminal, its screen kept by pyte."""

    def __init__(self, args: list[str], home: str, rows: int = 40, cols: int = 120, cwd: str | None = None,
                 env: dict | None = None):
        self.screen = pyte.HistoryScreen(cols, rows, history=10_000)
        self.stream = pyte.ByteStream(self.screen)
        self.cols = cols
        # No pager unless a test asks for one (an empty PAGER never pages): a long result would wait in less.
        env = {**os.environ, "HOME": str(home), "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1", "PAGER": "",
               **(env or {})}
        self.child = pexpect.spawn(DSMS, args, dimensions=(rows, cols), env=env, cwd=cwd, timeout=10)

    def pump(self, seconds: float = 0.1) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                self.stream.feed(self.child.read_nonblocking(65536, timeout=0.05))
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF:
                return

    def text(self) -> str:
        top = ["".join(line[x].data for x in range(self.cols)).rstrip() for line in self.screen.history.top]
        return "\n".join(top + [line.rstrip() for line in self.screen.display])

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.1)
            if text in self.text():
                return
        raise AssertionError(f"timed out waiting for {text!r}; screen:\n{self.text()}")

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def close(self) -> int:
        self.child.expect(pexpect.EOF, timeout=20)
        self.child.close()
        return self.child.exitstatus
