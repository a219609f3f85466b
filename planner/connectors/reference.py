"""The connector reference of docs/connectors.md, written from the descriptors.

The part of the page between the two marker lines is generated; after
changing a descriptor, regenerate it with::

    .venv/bin/python -m dsms.planner.connectors.reference docs/connectors.md

(tests/test_docs_connectors.py fails while the page is out of date).

Example:
    >>> from dsms.planner.connectors import find
    >>> print(connector_markdown(find("blackhole")).splitlines()[0])
    ### `blackhole`
"""

from __future__ import annotations

import sys

from .descriptor import SOURCE_TIME_OPTIONS_HELP, ConnectorDescriptor
from .registry import connectors

BEGIN = "<!-- BEGIN CONNECTOR REFERENCE: generated from the descriptors, do not edit (see planner/connectors/reference.py) -->"
END = "<!-- END CONNECTOR REFERENCE -->"
COMMAND = ".venv/bin/python -m dsms.planner.connectors.reference docs/connectors.md"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def connector_markdown(d: ConnectorDescriptor) -> str:
    """One connector's section: what it is, then its options as a table."""
    title = f"### `{d.name}`" + "".join(f" (also `{a}`)" for a in d.aliases)
    lines = [title, "", d.help[0].upper() + d.help[1:] + ".", "", "; ".join(_facts(d)) + ".", ""]
    rows = _format_rows(d) + [_option_row(d, o) for o in d.options]
    if rows:
        lines += ["| option | for | values | default | required | description |", "|---|---|---|---|---|---|"]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
        lines.append("")
    return "\n".join(lines)


def _facts(d: ConnectorDescriptor) -> list[str]:
    facts = [f"**{' and '.join(d.kinds)}**"]
    if d.source:
        facts.append(f"bounded: {d.bounded_note}")
        facts.append(("read on every route " + d.batch_note).strip() + (
            " (by the batch routes through its own reader)" if d.batch_reader == "source" else "")
            if d.batch_readable else "read by the runtime route only")
    for on, fact in ((d.tables, "streams and tables with a PRIMARY KEY" if d.streams else "tables with a PRIMARY KEY only"), (d.insertable, "takes INSERT INTO"),
                     (d.collects, "a sink's results are kept in the engine")):
        if on:
            facts.append(fact)
    return facts


def _format_rows(d: ConnectorDescriptor) -> list[tuple]:
    rows = []
    for role in (r for r in ("source", "sink") if r in d.kinds and d.format_names(r)):
        changes = [f.name for f in d.formats if f.changelog and (f.source if role == "source" else f.sink)]
        note = f" (changelogs: {', '.join(f'`{c}`' for c in changes)})" if changes else ""
        rows.append(("`format`", role, ", ".join(f"`{n}`" for n in d.format_names(role)) + note, "",
                     "yes" if d.format_required else "", "the value format"))
    return rows


def _option_row(d: ConnectorDescriptor, o) -> tuple:
    scope = "" if o.scope == "both" or len(d.kinds) == 1 else o.scope
    return (f"`{o.name}`", scope, o.describe_values(), f"`{o.default}`" if o.default is not None else "",
            "yes" if o.required else "", o.help)


def reference_markdown() -> str:
    """Every connector's section, between the markers."""
    common = ", ".join(f"`{k}`" for k in SOURCE_TIME_OPTIONS_HELP)
    parts = [BEGIN, "", f"Every source also takes {common} ([time.md](time.md)); `connector` names the connector.", ""]
    parts += [connector_markdown(d) for d in connectors()]
    parts.append(END)
    return "\n".join(parts)


def with_reference(page: str) -> str:
    """``page`` with its generated part replaced by the current reference."""
    start, end = page.index(BEGIN), page.index(END) + len(END)
    return page[:start] + reference_markdown() + page[end:]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {COMMAND}", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        page = f.read()
    with open(argv[0], "w", encoding="utf-8") as f:
        f.write(with_reference(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
