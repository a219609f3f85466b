"""``dsms server``: standing queries as a service over the PostgreSQL wire protocol (docs/server.md).

A front end over the public ``Engine`` API, like the CLI and the shell:
nothing below this package knows about sockets.
"""

from .app import Server, ServerConfig, run_server, serve

__all__ = ["Server", "ServerConfig", "run_server", "serve"]
