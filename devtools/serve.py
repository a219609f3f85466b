"""Run a test server from the command line until SIGTERM or Ctrl-C (kafka_broker.py, postgres_server.py)."""

from __future__ import annotations

import signal
import sys
import time


def serve(name: str, doc: str, start, address, unavailable: type[Exception]) -> int:
    """Start a server with ``start()``, print ``address(server)``, wait until stopped or its process ends."""
    if "-h" in sys.argv or "--help" in sys.argv:
        print(doc)
        return 0
    try:
        server = start()
    except unavailable as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    print(address(server), flush=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        while not stop and server.process.poll() is None:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
