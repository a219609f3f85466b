"""The extended query protocol of one session: Parse, Bind, Describe, Execute, Close.

A portal is executed when it is first described or executed, and its
rows are kept until sent, so Describe always tells the truth about what
Execute returns. Parameters are bound as literals (``sqltext.py``); the
values themselves go along too, so a pull query's plan can take them as
parameters (``pulls.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from . import wire
from .errors import INVALID_CURSOR, WireError
from .param_types import infer_parameter_types
from .pgarrays import field_description
from .pgtypes import decode_parameter, sql_literal
from .pulls import Bound
from .sqltext import bind_parameters, parameter_count, split_statements, strip_comments
from .statements import CLIENT_SHOW, DSMS_SHOW_WORDS, FETCH, Outcome, result_columns, unquote


@dataclass
class Prepared:
    text: str
    param_types: list[int]
    described: bool = False  # the client asked for its columns (Describe S): ARRAY columns go out as JSON then


@dataclass
class Portal:
    text: str
    formats: list[int]
    bound: Bound | None = None
    outcome: Outcome | None = None
    sent: int = 0
    described: bool = False
    arrays: bool = True  # ARRAY columns as PostgreSQL arrays (False: JSON, as a described statement said)


class ExtendedQuery:
    """The prepared statements and portals of one session."""

    def __init__(self, session):
        self.session = session
        self.prepared: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}

    def parse(self, r: wire.Reader) -> None:
        name, text = r.cstring(), r.cstring()
        types = [r.int32() for _ in range(r.int16())]
        self.prepared[name] = Prepared(text, types)
        self.session.send(wire.parse_complete())

    def bind(self, r: wire.Reader) -> None:
        portal, name = r.cstring(), r.cstring()
        prepared = self.prepared.get(name)
        if prepared is None:
            raise WireError("26000", f"prepared statement \"{name}\" does not exist")
        formats = [r.int16() for _ in range(r.int16())]
        values = []
        for _ in range(r.int16()):
            size = r.int32()
            values.append(None if size < 0 else r.bytes(size))
        result_formats = [r.int16() for _ in range(r.int16())]
        decoded, literals, oids = [], [], []
        for i, value in enumerate(values):
            oid = prepared.param_types[i] if i < len(prepared.param_types) else 0
            fmt = formats[i] if len(formats) > 1 else (formats[0] if formats else 0)
            decoded.append(decode_parameter(value, oid, fmt == 1))
            oids.append(oid)
            literals.append(sql_literal(decoded[-1], oid))
        text = bind_parameters(prepared.text, literals) if literals else prepared.text
        bound = Bound(prepared.text, tuple(decoded), tuple(oids)) if literals else None
        self.portals[portal] = Portal(text, result_formats, bound, arrays=not prepared.described)
        self.session.send(wire.bind_complete())

    def close(self, r: wire.Reader) -> None:
        what, name = r.bytes(1), r.cstring()
        (self.prepared if what == b"S" else self.portals).pop(name, None)
        self.session.send(wire.close_complete())

    async def describe(self, r: wire.Reader) -> None:
        what, name = r.bytes(1), r.cstring()
        await (self.describe_statement(name) if what == b"S" else self.describe_portal(name))

    async def describe_statement(self, name: str) -> None:
        prepared = self.prepared.get(name)
        if prepared is None:
            raise WireError("26000", f"prepared statement \"{name}\" does not exist")
        count = parameter_count(prepared.text)
        types = await self.session.host.call(
            lambda e: infer_parameter_types(e.catalog, prepared.text, prepared.param_types), reads_only=True)
        prepared.param_types = types  # Bind decodes binary values by the types the client was told
        prepared.described = True  # and its results come in the types it is told here
        self.session.send(wire.parameter_description(types))
        schema = await self.result_schema(bind_parameters(prepared.text, ["NULL"] * count) if count
                                          else prepared.text)
        self.session.send(wire.no_data() if schema is None else
                          wire.row_description([field_description(f.name, f.type, False, arrays=False)
                                                for f in schema]))

    async def describe_portal(self, name: str) -> None:
        portal = self._portal(name)
        await self._start(portal)
        schema = result_columns(portal.outcome)
        portal.described = True
        self.session.send(wire.no_data() if schema is None else
                          self.session.results.row_description(schema, portal.formats, portal.arrays))

    async def execute(self, r: wire.Reader) -> None:
        portal = self._portal(r.cstring())
        max_rows = r.int32()
        await self._start(portal)
        await self.session.results.send_outcome(portal.outcome, portal.formats, describe=False, max_rows=max_rows,
                                                portal=portal)

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise WireError(INVALID_CURSOR, f"portal \"{name}\" does not exist")
        return portal

    async def _start(self, portal: Portal) -> None:
        if portal.outcome is None:
            statements = split_statements(portal.text)
            if len(statements) > 1:
                raise WireError("42601", "cannot insert multiple commands into a prepared statement")
            offset, text = statements[0] if statements else (0, "")
            portal.outcome = (await self.session.execute(text, offset, portal.text, bound=portal.bound) if text
                              else Outcome("EMPTY"))

    async def result_schema(self, text: str) -> pa.Schema | None:
        """The columns a statement would return, without running anything that changes state."""
        body = strip_comments(text).strip()
        first = body.split(None, 1)[0].upper() if body else ""
        if first not in ("SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "SUBSCRIBE", "VALUES", "FETCH", "TABLE"):
            return None
        if first == "FETCH":
            match = FETCH.match(body)
            cursor = self.session.cursors.get(unquote(match.group(2))) if match else None
            return cursor.schema if cursor else None
        show = CLIENT_SHOW.match(body)
        if show and show.group(1).lower() not in DSMS_SHOW_WORDS:
            return pa.schema([(show.group(1).lower(), pa.string())])
        outcome = await self.session.execute(body, 0, body, dry=True)
        return result_columns(outcome)
