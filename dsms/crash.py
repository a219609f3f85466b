"""What ``dsms`` does with an error that is not a DsmsError: it is a bug.

The user sees one line saying so and where the details went; the
traceback is written to a log file, never to the terminal.

Example:
    >>> import os
    >>> from dsms.crash import report_bug
    >>> try:
    ...     {}["missing"]
    ... except KeyError as e:
    ...     line, path = report_bug(e, "dsms run demo.sql")
    >>> line.startswith("dsms: internal error (a bug): KeyError") and os.path.exists(path)
    True
    >>> "Traceback" in open(path).read()
    True
"""

from __future__ import annotations

import os
import tempfile
import time
import traceback


def crash_dir() -> str:
    """Where crash logs go: ``$DSMS_LOG_DIR``, else ``dsms`` in the system's temporary folder."""
    return os.environ.get("DSMS_LOG_DIR") or os.path.join(tempfile.gettempdir(), "dsms")


def report_bug(error: BaseException, context: str = "") -> tuple[str, str | None]:
    """Write ``error``'s traceback to a new log file; returns the line to show the user and the file.

    ``context`` heads the log (the command line and the version, say).
    """
    summary = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}".rstrip(": ")
    if len(summary) > 200:
        summary = summary[:200] + "..."
    path = None
    try:
        os.makedirs(crash_dir(), exist_ok=True)
        fd, path = tempfile.mkstemp(prefix=time.strftime("crash-%Y%m%d-%H%M%S-"), suffix=".log", dir=crash_dir())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{context}\n\n")
            f.write("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    except OSError:
        path = None
    where = f"details are in {path}" if path else "no log could be written"
    return f"dsms: internal error (a bug): {summary}; {where}", path
