"""The dsms dialect of sqlglot: Flink SQL query bodies and expressions.

It extends sqlglot's default dialect with what streaming SQL adds:

- window table-valued functions ``TUMBLE``, ``HOP``, ``SESSION`` and
  ``CUMULATE`` whose arguments are ``TABLE name [PARTITION BY cols]``,
  ``DESCRIPTOR(col)`` and intervals, positional or named
  (``DATA => TABLE t, TIMECOL => DESCRIPTOR(ts), SIZE => INTERVAL ...``);
  the same names with plain arguments are the group-window functions of
  ``GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)``;
- ``INTERVAL 'n' UNIT`` with plural units (``SECONDS``, ``MINUTES`` ...);
- ``FOR SYSTEM_TIME AS OF`` (already parsed by sqlglot as ``exp.Version``);
- ``EMIT ...`` / ``ALLOWED LATENESS ...``, CQL windows ``s [RANGE ...]`` and
  ``ISTREAM/DSTREAM/RSTREAM(query)`` (see :mod:`stream_syntax`);
- backquoted identifiers, as in Flink.

Example:
    >>> from dsms.grammar.dialect import parse_query
    >>> q = parse_query("SELECT window_start, COUNT(*) FROM TABLE(TUMBLE("
    ...     "TABLE bid, DESCRIPTOR(ts), INTERVAL '10' SECONDS)) GROUP BY window_start")
    >>> q.find(WindowTVF).kind
    'TUMBLE'
"""

from __future__ import annotations

import re

from sqlglot import exp, parser, tokens
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import TokenType

from .diagnostics import Diagnostic, Span
from .errors import SqlSyntaxError
from .functions import FLINK_FUNCTION_PARSERS, FLINK_FUNCTIONS, FLINK_TYPES
from .json_functions import JSON_FUNCTION_PARSERS, JSON_FUNCTIONS, is_json
from .match_recognize import parse_match_recognize
from .nested import NESTED_FUNCTIONS, NESTED_TYPES, Subscript, build_map, parse_flink_type, sql_subscript
from .stream_syntax import (
    R2S_KINDS,
    CqlWindow,
    EmitClause,
    RelationToStream,
    at_cql_window,
    at_stream_clause,
    parse_cql_window,
    parse_relation_to_stream,
    parse_stream_clauses,
    sql_cql_window,
    sql_emit,
)

# Window kinds by grammar name, with the named-argument spellings Flink accepts for each parameter
# position. The planner's window kinds (planner/windows) add theirs through add_window_kind.
_NAMED_PARAMS = {
    "TUMBLE": ("SIZE", "OFFSET"),
    "HOP": ("SLIDE", "SIZE", "OFFSET"),
    "SESSION": ("GAP",),
    "CUMULATE": ("STEP", "SIZE", "OFFSET"),
}
WINDOW_KINDS = tuple(_NAMED_PARAMS)


def _window_parser(kind: str):
    return lambda self: self._parse_window_function(kind)


class Descriptor(exp.Expression):
    """``DESCRIPTOR(col)``: names the time column of a window TVF."""

    arg_types = {"this": True}


class TableArg(exp.Expression):
    """``TABLE name [PARTITION BY a, b]``: the input of a window TVF."""

    arg_types = {"this": True, "partition_by": False}


class WindowTVF(exp.Expression):
    """A window table-valued function in FROM.

    ``this`` is the input (a Table or Subquery), ``descriptor`` the time
    column, ``params`` the intervals in Flink's positional order, and
    ``partition_by`` the session keys.
    """

    arg_types = {"kind": True, "this": True, "descriptor": True, "params": True, "partition_by": False}

    @property
    def kind(self) -> str:
        return self.args["kind"]


class GroupWindow(exp.Expression):
    """``TUMBLE(ts, size)`` / ``HOP(ts, slide, size)`` / ``SESSION(ts, gap)`` in GROUP BY."""

    arg_types = {"kind": True, "expressions": True}


def _as_subscripts(node: exp.Expression) -> exp.Expression:
    """A chain of brackets ``x[i][k]`` as Subscripts, innermost first (each its own, or the inner one would
    keep sqlglot's index offset)."""
    if not isinstance(node, exp.Bracket):
        return node
    return Subscript(this=_as_subscripts(node.this), expression=node.expressions[0])


def _closed_calls(parsers: dict) -> dict:
    """Each call parser, made to refuse a call whose ``)`` is missing.

    sqlglot takes the ``)`` after a special call (``CAST(x AS INT``,
    ``TRIM(k``, ``JSON_ARRAY(x``) as optional, so ``SELECT TRIM(k FROM s``
    would read as ``TRIM(s, k)``. A parser that read its own ``)`` is left as it is.
    """

    def closed(parse):
        def parse_closed(self):
            start = self._index  # just after the call's '('
            result = parse(self)
            if self._curr is not None and self._curr.token_type == TokenType.R_PAREN:
                return result
            depth = 0
            for tok in self._tokens[start:self._index]:
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(tok.token_type, 0)
                if depth < 0:
                    return result  # the parser read the call's ')' itself
            self.raise_error("Expecting )")
            return result

        return parse_closed

    return {name: closed(parse) for name, parse in parsers.items()}


class Dsms(Dialect):
    NORMALIZE_FUNCTIONS = "upper"
    # Flink semantics: INT / INT is an integer division.
    TYPED_DIVISION = True
    # Flink's result types (YEAR is BIGINT, ROUND keeps its argument's type, INT / INT is INT).
    EXPRESSION_METADATA = {**Dialect.EXPRESSION_METADATA, **FLINK_TYPES, **NESTED_TYPES}

    class Tokenizer(tokens.Tokenizer):
        IDENTIFIERS = ['"', "`"]
        KEYWORDS = {**tokens.Tokenizer.KEYWORDS, "MATCH_RECOGNIZE": TokenType.MATCH_RECOGNIZE,
                    "LOCALTIMESTAMP": TokenType.LOCALTIMESTAMP}

    class Parser(parser.Parser):
        # SESSION is a keyword in the default tokenizer; let it name a function.
        FUNC_TOKENS = parser.Parser.FUNC_TOKENS | {TokenType.SESSION}
        ID_VAR_TOKENS = parser.Parser.ID_VAR_TOKENS | {TokenType.SESSION}

        FUNCTIONS = {**parser.Parser.FUNCTIONS, **FLINK_FUNCTIONS, **JSON_FUNCTIONS, **NESTED_FUNCTIONS}
        NO_PAREN_FUNCTIONS = {**parser.Parser.NO_PAREN_FUNCTIONS, TokenType.LOCALTIMESTAMP: exp.Localtimestamp}

        def _parse_is(self, this):
            # s IS [NOT] JSON [VALUE|OBJECT|ARRAY|SCALAR], as DuckDB json calls (grammar/json_functions.py)
            return is_json(super()._parse_is(this))

        def _parse_csv(self, parse_method, sep=TokenType.COMMA):
            # sqlglot skips an empty item (``SELECT a, FROM s``, ``f(a,,b)``); Flink refuses it.
            item = parse_method()
            items = [item] if item is not None else []
            while self._match(sep):
                if isinstance(item, exp.Expression):
                    self._add_comments(item)
                item = parse_method()
                if item is None:
                    if sep == TokenType.COMMA:
                        self.raise_error("Expected an item after ','", self._curr or self._prev)
                else:
                    items.append(item)
            return items

        def _parse_projections(self):
            # sqlglot takes ``SELECT FROM s`` as a select of no columns; Flink refuses it.
            projections, exclude = super()._parse_projections()
            if not projections:
                self.raise_error("Expected a column or an expression after SELECT", self._curr or self._prev)
            return projections, exclude

        FUNCTION_PARSERS = _closed_calls({
            **parser.Parser.FUNCTION_PARSERS,
            **FLINK_FUNCTION_PARSERS,  # EXTRACT, FLOOR/CEIL ... TO, SUBSTRING ... FROM, INITCAP
            **JSON_FUNCTION_PARSERS,  # JSON_VALUE ... RETURNING ... ON EMPTY, JSON_OBJECT(KEY k VALUE v), ...
            **{kind: _window_parser(kind) for kind in WINDOW_KINDS},
            "DESCRIPTOR": lambda self: self._parse_descriptor_body(),
            **{kind: (lambda self, k=kind: parse_relation_to_stream(self, k)) for kind in R2S_KINDS},
        })

        def _parse_query_modifiers(self, this):
            this = super()._parse_query_modifiers(this)
            if isinstance(this, exp.Query) and at_stream_clause(self):
                parse_stream_clauses(self, this)
            return this

        _parse_match_recognize = parse_match_recognize  # adds Flink's WITHIN

        def _parse_table_alias(self, alias_tokens=None):
            # "FROM s EMIT CHANGES": EMIT starts a clause, it is not an alias of s.
            return None if at_stream_clause(self) else super()._parse_table_alias(alias_tokens)

        def _parse_types(self, *args, **kwargs):
            # ROW<a INT, ...>, ROW(a INT, ...) and MULTISET<T>; ARRAY<T> and MAP<K, V> are sqlglot's own.
            # No collations (``ARRAY<INT FOO>`` would read FOO as one).
            return parse_flink_type(self) or super()._parse_types(*args, **{**kwargs, "with_collation": False})

        def _parse_bracket(self, this=None):
            if isinstance(this, exp.Table) and at_cql_window(self):
                return parse_cql_window(self, this)
            if (isinstance(this, exp.Column) and not this.table and not this.this.quoted
                    and this.name.upper() == "MAP" and self._match(TokenType.L_BRACKET)):
                args = self._parse_csv(self._parse_disjunction)
                if not self._match(TokenType.R_BRACKET):
                    self.raise_error("Expected ]")
                return self._parse_bracket(self.expression(build_map(args)))
            result = super()._parse_bracket(this)
            if this is None or not isinstance(result, exp.Bracket):
                return result
            # x[k]: an array element, a map value or a row field, decided by the type of x.
            for b in list(result.find_all(exp.Bracket)):
                if len(b.expressions) != 1:
                    self.raise_error("a subscript takes one index: x[i]")
            return _as_subscripts(result)

        def _parse_descriptor_body(self) -> Descriptor:
            col = self._parse_column()
            if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
                self.raise_error("DESCRIPTOR takes one time column: DESCRIPTOR(ts)")
            return self.expression(Descriptor(this=col))

        def _parse_window_function(self, kind: str) -> exp.Expression:
            # Called after "KIND(" has been consumed; consumes the closing ")".
            args: list[exp.Expression] = []
            named: dict[str, exp.Expression] = {}
            while True:
                name = None
                if self._curr and self._next and self._next.token_type == TokenType.FARROW:
                    name = self._curr.text.upper()
                    self._advance(2)
                arg = self._parse_window_arg()
                if arg is None:
                    self.raise_error(f"Expected an argument of {kind}")
                if name:
                    named[name] = arg
                else:
                    args.append(arg)
                if not self._match(TokenType.COMMA):
                    break

            is_tvf = any(isinstance(a, TableArg) for a in args) or "DATA" in named
            if not is_tvf:
                if named:
                    self.raise_error(f"Named arguments need the table form: {kind}(TABLE t, DESCRIPTOR(col), ...)")
                return self.expression(GroupWindow(kind=kind, expressions=args))

            table = named.pop("DATA", None) or (args.pop(0) if args else None)
            descriptor = named.pop("TIMECOL", None) or (args.pop(0) if args and isinstance(args[0], Descriptor) else None)
            if not isinstance(table, TableArg):
                self.raise_error(f"The first argument of {kind} must be TABLE name")
            if not isinstance(descriptor, Descriptor):
                self.raise_error(f"The second argument of {kind} must be DESCRIPTOR(time column)")
            for pname in _NAMED_PARAMS[kind]:
                if pname in named:
                    args.append(named.pop(pname))
            if named:
                self.raise_error(f"Unknown argument {next(iter(named))} of {kind}; expected {', '.join(_NAMED_PARAMS[kind])}")
            return self.expression(
                WindowTVF(
                    kind=kind,
                    this=table.this,
                    descriptor=descriptor.this,
                    params=args,
                    partition_by=table.args.get("partition_by") or [],
                )
            )

        def _parse_window_arg(self) -> exp.Expression | None:
            if self._match(TokenType.TABLE):
                if self._match(TokenType.L_PAREN, advance=False):
                    source: exp.Expression | None = self._parse_table()
                else:
                    source = self._parse_table_parts()
                partition = None
                if self._match(TokenType.PARTITION_BY):
                    partition = self._parse_partition_keys()
                return self.expression(TableArg(this=source, partition_by=partition))
            return self._parse_expression()

        def _parse_partition_keys(self) -> list[exp.Expression]:
            # "PARTITION BY (a, b)" or "PARTITION BY a, b": the bare list ends
            # where the next argument (DESCRIPTOR(...), INTERVAL ..., NAME =>) starts.
            if self._match(TokenType.L_PAREN):
                keys = self._parse_csv(self._parse_column)
                self._match_r_paren()
            else:
                keys = [self._parse_column()]
                while (
                    self._curr
                    and self._curr.token_type == TokenType.COMMA
                    and self._next
                    and self._next.token_type == TokenType.VAR
                    and self._next.text.upper() != "DESCRIPTOR"
                    and self._index + 2 < len(self._tokens)
                    and self._tokens[self._index + 2].token_type not in (TokenType.L_PAREN, TokenType.FARROW)
                ):
                    self._advance()
                    keys.append(self._parse_column())
            if not keys or any(not isinstance(k, exp.Column) for k in keys):
                self.raise_error("a PARTITION BY needs one or more column names")
            return keys

    class Generator(Dialect().generator_class):  # type: ignore[misc]
        TRANSFORMS = {
            **Dialect().generator_class.TRANSFORMS,
            Descriptor: lambda self, e: f"DESCRIPTOR({self.sql(e, 'this')})",
            WindowTVF: lambda self, e: "{}({})".format(
                e.kind,
                ", ".join(
                    [f"TABLE {self.sql(e, 'this')}"
                     + (f" PARTITION BY {self.expressions(e, key='partition_by', flat=True)}" if e.args.get("partition_by") else ""),
                     f"DESCRIPTOR({self.sql(e, 'descriptor')})"]
                    + [self.sql(p) for p in e.args["params"]]
                ),
            ),
            GroupWindow: lambda self, e: f"{e.args['kind']}({self.expressions(e, flat=True)})",
            Subscript: sql_subscript,
            EmitClause: sql_emit,
            CqlWindow: sql_cql_window,
            RelationToStream: lambda self, e: f"{e.args['kind']}({self.sql(e, 'this')})",
        }


def add_window_kind(name: str, named_params: tuple[str, ...]) -> None:
    """Parse ``name(...)`` as a window (table function or group window) with these named parameters."""
    global WINDOW_KINDS
    _NAMED_PARAMS[name] = tuple(named_params)
    WINDOW_KINDS = tuple(_NAMED_PARAMS)
    Dsms.Parser.FUNCTION_PARSERS = {**Dsms.Parser.FUNCTION_PARSERS, **_closed_calls({name: _window_parser(name)})}


def parse_query(text: str, offset: int = 0, script: str | None = None) -> exp.Expression:
    """Parse one query body (SELECT ..., VALUES ...) with the dsms dialect.

    ``offset`` is where ``text`` starts inside ``script``; syntax errors are
    reported against the script so their line and column are the user's.
    """
    _check_nesting(text, offset, script)
    try:
        trees = Dsms().parse(text)
    except (ParseError, TokenError) as e:
        raise _syntax_error(e, text, offset, script) from None
    except RecursionError:  # a long chain of operators rather than parentheses
        raise too_deep(Span(offset, offset + len(text)), script or text) from None
    trees = [t for t in trees if t is not None]
    for tree in trees:
        _check_depth(tree, offset, script or text)
    if offset:
        # Token offsets are relative to ``text``; make them point into the script.
        for tree in trees:
            for node in tree.walk():
                meta = getattr(node, "_meta", None)
                if meta and "start" in meta:
                    meta["start"] += offset
                    meta["end"] += offset
    if len(trees) != 1:
        raise SqlSyntaxError(Diagnostic("expected exactly one query", Span(offset, offset + len(text)), script or text))
    return trees[0]


# Parentheses deeper than this are refused before sqlglot's recursive descent
# (about 20 Python frames per level) could exhaust the interpreter's stack.
MAX_NESTING = 32
_NESTING_TOKENS = re.compile(r"--[^\n]*|/\*[\s\S]*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|[()]")


def too_deep(span: Span, source: str) -> SqlSyntaxError:
    """The error for a statement nested deeper than dsms can plan."""
    return SqlSyntaxError(Diagnostic("the statement is nested too deeply", span, source,
                                     help=f"use at most {MAX_NESTING} levels of parentheses or subqueries; "
                                          "name inner parts with WITH or CREATE VIEW"))


# Expressions deeper than this (a sum of a thousand terms) would pass the
# planner but exceed DuckDB's expression depth when run.
MAX_DEPTH = 250


def _check_depth(tree: exp.Expression, offset: int, source: str) -> None:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            meta = getattr(node, "_meta", None) or {}
            at = meta.get("start", 0) + offset
            raise too_deep(Span(at, at + 1), source)
        stack.extend((child, depth + 1) for child in node.iter_expressions())


def _check_nesting(text: str, offset: int, script: str | None) -> None:
    depth = 0
    for m in _NESTING_TOKENS.finditer(text):
        if m.group() == "(":
            depth += 1
            if depth > MAX_NESTING:
                raise too_deep(Span(offset + m.start(), offset + m.end()), script or text)
        elif m.group() == ")":
            depth = max(0, depth - 1)


def parse_expression(text: str, offset: int = 0, script: str | None = None) -> exp.Expression:
    """Parse one scalar expression (a computed column, a watermark bound)."""
    return parse_query(f"SELECT {text}", offset - len("SELECT "), script).expressions[0]


def _syntax_error(e: Exception, text: str, offset: int, script: str | None) -> SqlSyntaxError:
    source = script if script is not None else text
    start = end = None
    message = str(e).split("\n")[0]
    if isinstance(e, ParseError) and e.errors:
        err = e.errors[0]
        message = err.get("description") or message
        line, col = err.get("line"), err.get("col")
        highlight = err.get("highlight") or ""
        if line and col:
            # sqlglot reports the column of the token's last character.
            lines = text.split("\n")
            base = sum(len(ln) + 1 for ln in lines[: line - 1])
            end = base + col
            start = max(base, end - max(1, len(highlight)))
    if start is None:
        start, end = 0, len(text)
    message = _friendly(message)
    return SqlSyntaxError(Diagnostic(message, Span(start + offset, end + offset), source))


def _friendly(message: str) -> str:
    message = message.strip().rstrip(".")
    if message.startswith("Invalid expression / Unexpected token"):
        return "unexpected token"
    if message.startswith("Required keyword:"):
        return "incomplete expression"
    if not message:
        return "syntax error"
    # "Expected ..." -> "expected ..."; a leading keyword (DESCRIPTOR, PARTITION) keeps its case.
    return message[0].lower() + message[1:] if message[1:2].islower() else message
