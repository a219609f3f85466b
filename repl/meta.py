"""Backslash commands: ``\\help``, ``\\d [name]``, ``\\q`` (and ``\\i file``, ``\\x``, ``\\pset``, run by the shell).

They end at the end of the line (no ``;``) and are the shell's own; SQL
statements go to the engine.
"""

from __future__ import annotations

import os

import pyarrow as pa

from dsms.grammar import Describe, DsmsError, Name, Span
from dsms.render import format_table

HELP = """\
Statements end with ';' and may span lines. Backslash commands end at the end of the line.

  CREATE STREAM s (...) WITH (connector = 'memory');   declare a stream (SHOW CONNECTORS; docs/connectors.md)
  INSERT INTO s VALUES (...), (...);                     push events into a memory stream
  SELECT ...;                                            a live result above the prompt; Ctrl-C stops it
  CREATE SINK k WITH (...) AS SELECT ...;                a standing query, runs in the background
  CREATE MATERIALIZED VIEW v AS SELECT ...;              a standing query that keeps its result
  SHOW STREAMS | TABLES | VIEWS | MATERIALIZED VIEWS | SINKS | QUERIES | FUNCTIONS | CONNECTORS;
  DESCRIBE name;   EXPLAIN SELECT ...;   DROP QUERY | SINK | STREAM ... name;
  SET 'key' = 'value';   SET;   RESET 'key';
      'result_mode' = 'table' (a table updated in place) | 'changelog' (every change, with +I -U +U -D)

  \\i file             run the statements of a file
  \\x [on|off|auto]    expanded display (a block per row); auto, the default: when wider than the screen
  \\pset pager on|off  results longer than the screen go through $PAGER (default less -FRSX)
  \\d                  list streams, tables, views, materialized views and sinks
  \\d name             describe one: its columns and its definition
  \\help               this text
  \\q                  quit (also Ctrl-D on an empty line)

Keys: Tab completes names, columns and keywords; Up/Down recall history; Ctrl-C stops the live query
(or clears the line); Alt-Enter runs the buffer without a ';'."""

KINDS = ("STREAMS", "TABLES", "VIEWS", "MATERIALIZED VIEWS", "SINKS")


class EndSession(Exception):
    """``\\q``: leave the shell."""


def run_meta(text: str, engine) -> str:
    """Run one backslash command; returns what to print. Raises EndSession for ``\\q``."""
    command, _, rest = text.strip().partition(" ")
    command = command.lower()
    if command in ("\\q", "\\quit"):
        raise EndSession
    if command in ("\\help", "\\h", "\\?"):
        return HELP
    if command in ("\\d", "\\d+"):
        return describe(engine, text) if rest.strip() else list_objects(engine)
    return f"unknown command {command}: \\d [name], \\i file, \\x, \\pset, \\help and \\q are known"


def read_script(path: str) -> str:
    """``\\i file``: the file's text (a DsmsError if it cannot be read)."""
    if not path:
        raise DsmsError("\\i needs a file: \\i script.sql")
    try:
        with open(os.path.expanduser(path), encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise DsmsError(f"cannot read {path}: {e.strerror or e}") from None


def list_objects(engine) -> str:
    tables = [engine.execute(f"SHOW {kind}").table for kind in KINDS]
    found = [t for t in tables if t.num_rows]
    if not found:
        return "No streams, tables, views or sinks yet: CREATE STREAM s (...) WITH (connector = 'memory');"
    return format_table(pa.concat_tables(found))


def describe(engine, text: str) -> str:
    """``\\d name``: DESCRIBE's columns, then the statement that declared it."""
    arg = text.strip().partition(" ")[2].strip().rstrip(";").strip()
    start = text.index(arg)
    value = arg[1:-1] if len(arg) > 1 and arg[0] in "\"`" and arg[-1] == arg[0] else arg
    name = Name(value, Span(start, start + len(arg)))
    result = engine.execute_statement(Describe(Span(0, len(text)), text, name=name))
    obj = engine.catalog.get(value)
    ddl = getattr(obj, "ddl", "")
    return format_table(result.table) + (f"\n\n{ddl.strip()};" if ddl else "")
