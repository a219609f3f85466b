"""Helpers for the crash tests: how far a ``dsms run --state-dir`` process got (holds no tests)."""

from __future__ import annotations

import glob
import os
import signal
import time


def newest_checkpoint(state) -> int:
    """The highest checkpoint number any standing query of the state directory has on disk (0: none)."""
    found = [int(os.path.basename(p)[len("ckpt-"):]) for p in glob.glob(os.path.join(str(state), "queries", "*", "ckpt-*"))
             if not p.endswith(".tmp")]
    return max(found, default=0)


def wait_past_checkpoint(state, seq: int, proc, timeout: float = 120.0) -> None:
    """Wait until the process has written a checkpoint newer than ``seq``: it restored the last one and runs the
    job (a kill after this lands in the job, not in the interpreter's start). A process that ends first or does
    not get there in ``timeout`` seconds is killed and the test fails with its stderr."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if newest_checkpoint(state) > seq:
            return
        time.sleep(0.02)
    ended = proc.poll()
    if ended is None:
        proc.send_signal(signal.SIGKILL)
    err = proc.communicate()[1]
    raise AssertionError(f"dsms run wrote no checkpoint past {seq} "
                         f"({'it ended with ' + str(ended) if ended is not None else f'within {timeout:.0f} s'}): {err}")
