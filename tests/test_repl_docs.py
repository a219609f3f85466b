"""The shell sessions shown in docs/repl.md, replayed: what the page shows is what the screen shows."""

import asyncio
import os
import re

import pytest

from repl_helpers import Shell

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "repl.md")
RATE = re.compile(r"[\d,]+ events/s")


def sessions() -> list[tuple[str, list[str]]]:
    """Each ``repl-session`` block, with the ``repl-live`` blocks that follow it (one per ^C)."""
    text = open(DOC).read()
    found = []
    for kind, body in re.findall(r"<!-- repl-(session|live) -->\n```text\n(.*?)```", text, re.S):
        if kind == "session":
            found.append((body.rstrip("\n"), []))
        else:
            found[-1][1].append(body.rstrip("\n"))
    return found


@pytest.mark.parametrize("session, live", sessions())
def test_a_session_in_the_docs_gives_the_screen_it_shows(session, live, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines = session.split("\n")

    async def scenario():
        async with Shell(cols=110) as sh:
            pending_live = list(live)
            i = 0
            while i < len(lines):
                line = lines[i]
                if line == "^C":
                    if pending_live:
                        want = pending_live.pop(0)
                        assert RATE.sub("N events/s", "\n".join(sh.live_area())) == RATE.sub("N events/s", want)
                    sh.send("\x03")
                    await until_stopped(sh)
                elif line.startswith("dsms> "):
                    typed = [line[len("dsms> "):]]
                    while i + 1 < len(lines) and lines[i + 1].startswith("   -> "):
                        i += 1
                        typed.append(lines[i][len("   -> "):])
                    await sh.run("\n".join(typed))
                i += 1
            await sh.settle()
            shown = sh.screen.text().split("\n")
            assert shown[-1].startswith("dsms>")  # the prompt waiting for more
            assert "\n".join(shown[:-1]) == "\n".join(ln for ln in lines if ln != "^C")
            if "per_ad" in sh.engine.queries.running:
                assert sorted(sh.engine.sink("per_ad").snapshot().to_pylist(), key=lambda r: r["ad"]) == [
                    {"ad": 7, "clicks": 2}, {"ad": 8, "clicks": 1}]

    asyncio.run(scenario())


async def until_stopped(sh: Shell) -> None:
    for _ in range(500):
        if sh.repl.live is None:
            break
        await asyncio.sleep(0.01)
    await sh.settle()


def test_the_page_has_sessions_to_replay():
    assert len(sessions()) >= 2 and sessions()[0][1]
