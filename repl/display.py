"""How the shell shows a statement's result: aligned or expanded, on the screen or through a pager.

* ``\\x [on|off|auto]`` (psql's): ``auto``, the default, shows a table
  wider than the terminal as one block per row (``column | value``), its
  values wrapped to the terminal's width, so ``SHOW QUERIES`` and ``SHOW
  PROGRESS`` read well at 80 columns; ``on`` always, ``off`` never. ``\\x``
  alone switches between on and off.
* ``\\pset pager [on|off]``: a result longer (or wider) than the terminal
  goes through ``$PAGER`` (``less -FRSX`` when PAGER is not set; an empty
  PAGER never pages), as in psql. Only on a terminal: output that is not
  a terminal is never paged.

Example:
    >>> import pyarrow as pa
    >>> d = Display()
    >>> wide = pa.table({"id": ["per_ad"], "error": ["the file is shorter than the saved position"]})
    >>> print(d.render(wide, width=40))
    -[ RECORD 1 ]-
    id    | per_ad
    error | the file is shorter than the
          | saved position
    (1 row)
    >>> print(d.render(wide, width=80))
    id     | error
    -------+--------------------------------------------
    per_ad | the file is shorter than the saved position
    (1 row)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap

import pyarrow as pa

from dsms.render import format_expanded, format_table

EXPANDED = ("off", "on", "auto")
DEFAULT_PAGER = "less -FRSX"


class Display:
    def __init__(self, expanded: str = "auto", pager: bool = True):
        self.expanded = expanded
        self.pager = pager

    # -- \x and \pset -------------------------------------------------------------------------

    def set_expanded(self, arg: str) -> str:
        """``\\x [on|off|auto]``: what to print."""
        arg = arg.strip().lower()
        if not arg:
            arg = "off" if self.expanded == "on" else "on"
        if arg not in EXPANDED:
            return "\\x takes on, off or auto"
        self.expanded = arg
        return "Expanded display is used automatically." if arg == "auto" else f"Expanded display is {arg}."

    def set_option(self, arg: str) -> str:
        """``\\pset pager [on|off]``."""
        name, _, value = arg.strip().partition(" ")
        if name != "pager":
            return "\\pset knows one option: \\pset pager on|off"
        value = value.strip().lower() or ("off" if self.pager else "on")
        if value not in ("on", "off"):
            return "\\pset pager takes on or off"
        self.pager = value == "on"
        return f"Pager usage is {value}."

    # -- rendering ------------------------------------------------------------------------------

    def render(self, table: pa.Table, width: int) -> str:
        """``table`` as the shell prints it on a terminal ``width`` columns wide."""
        if self.expanded == "off":
            return format_table(table)
        text = format_table(table)
        if self.expanded == "auto" and max(len(line) for line in text.split("\n")) <= width:
            return text
        return wrap_expanded(format_expanded(table), width)

    # -- paging ---------------------------------------------------------------------------------

    def pager_command(self) -> str | None:
        """The pager to use, or None (``PAGER`` empty, or no ``less`` when it is not set)."""
        if not self.pager:
            return None
        if "PAGER" in os.environ:
            return os.environ["PAGER"].strip() or None
        return DEFAULT_PAGER if shutil.which("less") else None

    def page(self, text: str, rows: int, columns: int) -> bool:
        """Show ``text`` through the pager if it does not fit the screen; False if it was not paged."""
        lines = text.split("\n")
        command = self.pager_command()
        if command is None or (len(lines) < rows - 1 and max(map(len, lines)) <= columns):
            return False
        try:
            subprocess.run(command, shell=True, input=(text + "\n").encode(), check=False)
        except OSError:
            return False
        return True


def wrap_expanded(text: str, width: int) -> str:
    """Expanded display's ``name | value`` lines with long values wrapped under themselves."""
    out = []
    for line in text.split("\n"):
        name, sep, value = line.partition(" | ")
        room = width - len(name) - len(sep)
        if not sep or len(line) <= width or room < 10:
            out.append(line)
            continue
        pieces = textwrap.wrap(value, room, break_long_words=True, break_on_hyphens=False) or [""]
        out.append(f"{name}{sep}{pieces[0]}")
        out += [f"{' ' * len(name)}{sep}{piece}".rstrip() for piece in pieces[1:]]
    return "\n".join(out)
