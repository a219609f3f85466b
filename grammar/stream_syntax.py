"""Streaming clauses of the dsms dialect: emission, lateness, CQL windows, relation-to-stream.

These are query-level additions to Flink SQL, parsed by hooks of the dsms
sqlglot parser (:mod:`dialect`):

- ``EMIT CHANGES [EVERY INTERVAL ...]``, ``EMIT FINAL`` (also RisingWave's
  ``EMIT ON WINDOW CLOSE``) and ``ALLOWED LATENESS INTERVAL ...`` after the
  other clauses of a SELECT, in either order (:class:`EmitClause`);
- the STREAM/CQL window after a relation in FROM: ``s [RANGE 1 MINUTE SLIDE
  10 SECONDS]``, ``[RANGE UNBOUNDED]``, ``[ROWS 100]``, ``[PARTITION BY k
  ROWS 3]``, ``[NOW]`` (:class:`CqlWindow`);
- ``ISTREAM(query)``, ``DSTREAM(query)``, ``RSTREAM(query)``
  (:class:`RelationToStream`).

Example:
    >>> from dsms.grammar.dialect import parse_query
    >>> q = parse_query("SELECT k, COUNT(*) FROM s [RANGE 1 MINUTE SLIDE 10 SECONDS] GROUP BY k")
    >>> w = q.find(CqlWindow); w.args["kind"], w.args["size"].sql(), w.args["slide"].sql()
    ('RANGE', "INTERVAL '1' MINUTE", "INTERVAL '10' SECONDS")
    >>> parse_query("SELECT COUNT(*) FROM s GROUP BY k EMIT CHANGES").args["emit"].args["mode"]
    'changes'
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.tokens import TokenType

R2S_KINDS = ("ISTREAM", "DSTREAM", "RSTREAM")
_CQL_START = ("RANGE", "ROWS", "NOW", "PARTITION")


class EmitClause(exp.Expression):
    """When a query's window results are emitted.

    ``mode`` is ``'final'`` (once, when the window closes) or ``'changes'``
    (early, as an updating result); ``every`` an interval of processing
    time between early firings; ``lateness`` how long windows stay open
    after they fire.
    """

    arg_types = {"mode": False, "every": False, "lateness": False}


class CqlWindow(exp.Expression):
    """A CQL window on a relation in FROM: ``s [RANGE size SLIDE slide]``, ``[ROWS n]`` ...

    ``kind`` is RANGE, UNBOUNDED, ROWS or NOW; ``size`` and ``slide`` are
    intervals (RANGE), ``rows`` an integer literal (ROWS), ``partition_by``
    the columns of ``[PARTITION BY k ROWS n]``.
    """

    arg_types = {"this": True, "kind": True, "size": False, "slide": False, "rows": False,
                 "partition_by": False, "alias": False}


class RelationToStream(exp.Expression):
    """``ISTREAM(query)`` / ``DSTREAM(query)`` / ``RSTREAM(query)``."""

    arg_types = {"kind": True, "this": True}


def _interval(parser) -> exp.Expression:
    """``INTERVAL '1' MINUTE``, ``'1' MINUTE`` or ``1 MINUTE``."""
    if parser._curr and parser._curr.token_type == TokenType.INTERVAL:
        return parser._parse_interval()
    start = parser._curr
    if start is None or start.token_type not in (TokenType.NUMBER, TokenType.STRING):
        parser.raise_error("Expected a duration such as 1 MINUTE")
    parser._advance()
    unit = parser._curr
    if unit is None or unit.token_type in (TokenType.R_BRACKET, TokenType.COMMA):
        parser.raise_error("Expected a time unit (SECOND, MINUTE, HOUR ...)")
    parser._advance()
    node = exp.Interval(this=exp.Literal.string(start.text), unit=exp.Var(this=unit.text.upper()))
    parser._add_comments(node)
    return node


def parse_cql_window(parser, table: exp.Expression) -> exp.Expression:
    """Called with the parser at ``[`` after a relation; consumes through ``]``."""
    parser._advance()  # [
    word = (parser._curr.text.upper().split()[0] if parser._curr else "")
    args: dict = {"this": table}
    if word == "NOW":
        parser._advance()
        args["kind"] = "NOW"
    elif word == "RANGE":
        parser._advance()
        if parser._curr and parser._curr.text.upper() == "UNBOUNDED":
            parser._advance()
            args["kind"] = "UNBOUNDED"
        else:
            args["kind"] = "RANGE"
            args["size"] = _interval(parser)
            if parser._curr and parser._curr.text.upper() == "SLIDE":
                parser._advance()
                args["slide"] = _interval(parser)
    elif word in ("ROWS", "PARTITION"):
        if word == "PARTITION":
            if not (parser._match(TokenType.PARTITION_BY) or parser._match_text_seq("PARTITION", "BY")):
                parser.raise_error("Expected PARTITION BY")
            keys = [parser._parse_column()]
            while parser._match(TokenType.COMMA):
                keys.append(parser._parse_column())
            args["partition_by"] = keys
            if not (parser._curr and parser._curr.text.upper() == "ROWS"):
                parser.raise_error("Expected ROWS n after PARTITION BY in a CQL window")
        parser._advance()  # ROWS
        count = parser._curr
        if count is None or count.token_type != TokenType.NUMBER:
            parser.raise_error("Expected a number of rows")
        parser._advance()
        args["kind"] = "ROWS"
        args["rows"] = exp.Literal.number(count.text)
    else:
        parser.raise_error("Expected a CQL window: [RANGE ...], [ROWS n], [PARTITION BY k ROWS n] or [NOW]")
    if not parser._match(TokenType.R_BRACKET):
        parser.raise_error("Expected ] to close the CQL window")
    return parser.expression(CqlWindow(**args))


def at_cql_window(parser) -> bool:
    """Whether the parser is at ``[RANGE``, ``[ROWS``, ``[PARTITION BY`` or ``[NOW``."""
    return bool(parser._curr and parser._curr.token_type == TokenType.L_BRACKET and parser._next
                and parser._next.text.upper().split()[0] in _CQL_START)


def at_stream_clause(parser) -> bool:
    """Whether the next words start EMIT ... or ALLOWED LATENESS (so they are not an alias)."""
    cur, nxt = parser._curr, parser._next
    if cur is None:
        return False
    word = cur.text.upper()
    following = nxt.text.upper() if nxt else ""
    return (word == "EMIT" and following in ("CHANGES", "FINAL", "ON", "EVERY")) or \
        (word == "ALLOWED" and following == "LATENESS")


def parse_stream_clauses(parser, query: exp.Expression) -> None:
    """Parse EMIT ... / ALLOWED LATENESS ... after a query's other clauses."""
    clause = None
    while at_stream_clause(parser):
        start = parser._curr
        clause = clause or EmitClause()
        if parser._curr.text.upper() == "ALLOWED":
            parser._advance(2)
            if clause.args.get("lateness") is not None:
                parser.raise_error("ALLOWED LATENESS is given twice", token=start)
            clause.set("lateness", _interval(parser))
            continue
        parser._advance()  # EMIT
        if clause.args.get("mode") is not None:
            parser.raise_error("EMIT is given twice", token=start)
        word = parser._curr.text.upper()
        if word == "FINAL":
            parser._advance()
            clause.set("mode", "final")
        elif word == "ON":
            if not parser._match_text_seq("ON", "WINDOW", "CLOSE"):
                parser.raise_error("Expected EMIT ON WINDOW CLOSE")
            clause.set("mode", "final")
        else:
            if word == "CHANGES":
                parser._advance()
            clause.set("mode", "changes")
            if parser._curr and parser._curr.text.upper() == "EVERY":
                parser._advance()
                clause.set("every", _interval(parser))
    if clause is not None:
        query.set("emit", clause)


def parse_relation_to_stream(parser, kind: str) -> exp.Expression:
    """``ISTREAM(`` has been consumed: parse the query and the closing parenthesis."""
    query = parser._parse_select(nested=True)
    if query is None:
        parser.raise_error(f"{kind}( takes a query: {kind}(SELECT ...)")
    query = parser._parse_set_operations(query)
    if not parser._match(TokenType.R_PAREN):
        parser.raise_error(f"Expected ) to close {kind}(...)")
    return parser.expression(RelationToStream(kind=kind, this=query))


def sql_emit(gen, e: EmitClause) -> str:
    parts = []
    if e.args.get("mode"):
        parts.append("EMIT " + ("FINAL" if e.args["mode"] == "final" else "CHANGES"))
        if e.args.get("every") is not None:
            parts.append(f"EVERY {gen.sql(e, 'every')}")
    if e.args.get("lateness") is not None:
        parts.append(f"ALLOWED LATENESS {gen.sql(e, 'lateness')}")
    return " ".join(parts)


def sql_cql_window(gen, e: CqlWindow) -> str:
    kind = e.args["kind"]
    if kind == "NOW":
        inner = "NOW"
    elif kind == "UNBOUNDED":
        inner = "RANGE UNBOUNDED"
    elif kind == "RANGE":
        inner = f"RANGE {gen.sql(e, 'size')}" + (f" SLIDE {gen.sql(e, 'slide')}" if e.args.get("slide") else "")
    else:
        keys = e.args.get("partition_by")
        inner = (f"PARTITION BY {gen.expressions(e, key='partition_by', flat=True)} " if keys else "") + \
            f"ROWS {gen.sql(e, 'rows')}"
    alias = f" AS {gen.sql(e, 'alias')}" if e.args.get("alias") else ""
    return f"{gen.sql(e, 'this')} [{inner}]{alias}"
