"""The parser front end: script text -> statements.

The statement layer is a lark LALR grammar (``statements.lark``); query
bodies and scalar expressions inside it are parsed by sqlglot with the dsms
dialect, at their offset in the script, so every syntax error names the
user's line and column with a caret.

Example:
    >>> from dsms.grammar import parse_script
    >>> [type(s).__name__ for s in parse_script("SHOW STREAMS; SELECT 1")]
    ['Show', 'QueryStatement']
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from importlib import resources

import lark
from lark import Token, Transformer, v_args

from . import statements as st
from .diagnostics import Diagnostic, Span
from .dialect import parse_expression, parse_query
from .errors import SqlSyntaxError

# How terminals are named to a user in "expected ..." messages.
_TERMINAL_WORDS = {
    "QUERY_TEXT": "a query (SELECT ...)",
    "EXPR_TEXT": "an expression",
    "NESTED_TYPE": "a type",
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": "a quoted string",
    "SIGNED_NUMBER": "a number",
    "INT": "an integer",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "EQUAL": "'='",
    "DOT": "'.'",
    "_SEMI": "';'",
    "$END": "end of input",
    "QUERY_KW": "QUERY",
}

# EXPLAIN LOWERED <query> FOR <engine>: the engine's name is checked when the statement is planned.
_EXPLAIN_TARGET = re.compile(r"\s+FOR\s+([a-z_][a-z0-9_-]*)\s*$", re.IGNORECASE)


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    grammar = resources.files(__package__).joinpath("statements.lark").read_text()
    return lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=False)


def parse_script(text: str) -> list[st.Statement]:
    """Parse a script of ``;``-separated statements."""
    if "\x00" in text:  # DuckDB, file paths and names would cut the text short there
        at = text.index("\x00")
        raise SqlSyntaxError(Diagnostic("SQL text cannot contain a NUL character", Span(at, at + 1), text,
                                        help="remove the \\0 byte"))
    try:
        tree = _parser().parse(text)
    except lark.UnexpectedInput as e:
        raise _lark_error(e, text) from None
    _check_keywords_end(tree, text)
    try:
        return _Build(text).transform(tree).children
    except lark.exceptions.VisitError as e:
        # Errors raised while building (query bodies, expressions) are already ours.
        raise e.orig_exc from None


@lru_cache(maxsize=1)
def _keyword_terminals() -> frozenset[str]:
    return frozenset(t.name for t in _parser().terminals
                     if isinstance(t.pattern, lark.lexer.PatternStr) and t.pattern.value.isalpha())


def _check_keywords_end(tree: lark.Tree, text: str) -> None:
    """A keyword ends where a word ends: the lexer would read ``CREATE STREAMX`` as STREAM and the name X."""
    keywords = _keyword_terminals()
    for tok in tree.scan_values(lambda v: isinstance(v, Token) and v.type in keywords):
        end = tok.end_pos
        if end < len(text) and (text[end].isalnum() or text[end] in "_$"):
            start = tok.start_pos
            while end < len(text) and (text[end].isalnum() or text[end] in "_$"):
                end += 1
            raise SqlSyntaxError(Diagnostic(f"unexpected '{text[start:end]}'", Span(start, end), text,
                                            help=f"did you mean '{text[start:tok.end_pos]} {text[tok.end_pos:end]}'?"))


def parse_statement(text: str) -> st.Statement:
    """Parse exactly one statement (a trailing ``;`` is allowed)."""
    stmts = parse_script(text)
    if len(stmts) != 1:
        raise SqlSyntaxError(Diagnostic(f"expected one statement, found {len(stmts)}", Span(0, len(text)), text))
    return stmts[0]


def _lark_error(e: lark.UnexpectedInput, text: str) -> SqlSyntaxError:
    pos = e.pos_in_stream if e.pos_in_stream is not None else len(text)
    if isinstance(e, lark.UnexpectedToken):
        tok = e.token
        if tok.type == "$END":
            found, length = "end of input", 1
            pos = len(text.rstrip())
        else:
            found, length = f"'{tok.value}'", max(1, len(str(tok.value)))
            if len(found) > 40:
                found, length = f"'{str(tok.value)[:30]}...'", len(str(tok.value).split()[0]) if str(tok.value).split() else 1
        expected = sorted({_TERMINAL_WORDS.get(t, t) for t in e.expected if not t.startswith("__")})
        message = f"unexpected {found}"
        help_ = "expected " + _join(expected) if expected else None
    else:
        char = text[pos] if pos < len(text) else ""
        message, length = f"unexpected character '{char}'", 1
        allowed = sorted({_TERMINAL_WORDS.get(t, t) for t in (getattr(e, "allowed", None) or ())})
        help_ = "expected " + _join(allowed) if allowed else None
    return SqlSyntaxError(Diagnostic(message, Span(pos, pos + length), text, help=help_))


def _join(words: list[str]) -> str:
    if len(words) > 8:
        words = words[:8] + ["..."]
    return ", ".join(words)


def _span(meta) -> Span:
    return Span(meta.start_pos, meta.end_pos)


def _tok_span(tok: Token) -> Span:
    return Span(tok.start_pos, tok.end_pos)


def _unquote_name(tok: Token) -> str:
    value = str(tok)
    if tok.type == "QUOTED_NAME":
        return value[1:-1]
    return value


def _unquote_string(tok: Token) -> str:
    return str(tok)[1:-1].replace("''", "'")


class _Build(Transformer):
    """Turn the lark tree into statement dataclasses."""

    def __init__(self, source: str):
        super().__init__()
        self.source = source

    # -- small pieces -------------------------------------------------
    def name(self, children):
        tok = children[0]
        return st.Name(_unquote_name(tok), _tok_span(tok))

    def dotted_name(self, children):
        return ".".join(c.value for c in children)

    def option_key(self, children):
        c = children[0]
        return _unquote_string(c) if isinstance(c, Token) else c

    set_key = option_key

    def string_value(self, children):
        tok = children[0]
        return _unquote_string(tok)

    def number_value(self, children):
        return str(children[0])

    def word_value(self, children):
        c = children[0]
        return str(c)

    def option(self, children):
        return (children[0], children[1])

    def with_options(self, children):
        options = {}
        for key, value in (c for c in children if isinstance(c, tuple)):
            options[key.lower()] = value
        return options

    def _query(self, tok: Token) -> st.Query:
        text = str(tok).rstrip()
        m = _EXPLAIN_TARGET.search(text)
        if m:  # EXPLAIN LOWERED <query> FOR spark: the target rides at the end of the query text
            target, text = m.group(1).lower(), text[: m.start()]
            tree = parse_query(text, tok.start_pos, self.source)
            return st.Query(text, tree, Span(tok.start_pos, tok.start_pos + len(text)), target)
        tree = parse_query(text, tok.start_pos, self.source)
        return st.Query(text, tree, Span(tok.start_pos, tok.start_pos + len(text)))

    def _flags(self, children):
        return {c.data for c in children if isinstance(c, lark.Tree)}

    # -- statements -----------------------------------------------------
    @v_args(meta=True)
    def start(self, meta, children):
        statements = [c for c in children if isinstance(c, st.Statement)]
        for s in statements:
            query = getattr(s, "query", None)
            if query is not None and query.target is not None:
                raise SqlSyntaxError(Diagnostic(f"FOR {query.target} only follows EXPLAIN LOWERED <query>",
                                                Span(query.span.end, query.span.end + 1), self.source,
                                                help="remove it, or write EXPLAIN LOWERED before the query"))
        return lark.Tree("start", statements)

    def type_name(self, children):
        return " ".join(str(c) for c in children)

    def type_params(self, children):
        return "(" + ", ".join(str(c) for c in children) + ")"

    def tz_suffix(self, children):
        return " " + " ".join(str(c).upper() for c in children)

    @v_args(meta=True)
    def type_spec(self, meta, children):
        return ("".join(children), _span(meta))

    @v_args(meta=True)
    def column_def(self, meta, children):
        type_text, type_span = children[1]
        spec = next((c for c in children[2:] if isinstance(c, tuple) and c[0] == "metadata"), None)
        not_null = any(isinstance(c, lark.Tree) and c.data == "not_null" for c in children[2:])
        metadata, virtual = (spec[1] or children[0].value, spec[2]) if spec else (None, False)
        return st.ColumnDef(children[0], type_text, not_null, _span(meta), type_span, metadata, virtual)

    def metadata_spec(self, children):
        key = next((str(c)[1:-1].replace("''", "'") for c in children if getattr(c, "type", "") == "STRING"), None)
        return ("metadata", key, any(getattr(c, "type", "") == "VIRTUAL" for c in children))

    @v_args(meta=True)
    def computed_column(self, meta, children):
        tok = children[2]
        expr = parse_expression(str(tok).strip(), tok.start_pos, self.source)
        return st.ComputedColumn(children[0], expr, _span(meta))

    @v_args(meta=True)
    def watermark_def(self, meta, children):
        names = [c for c in children if isinstance(c, st.Name)]
        tok = children[-1]
        expr = parse_expression(str(tok).strip(), tok.start_pos, self.source)
        return st.WatermarkDef(names[0], expr, _span(meta))

    def primary_key(self, children):
        return ("primary_key", tuple(c for c in children if isinstance(c, st.Name)))

    def kind_stream(self, children):
        return ("kind", "stream")

    def kind_table(self, children):
        return ("kind", "table")

    @v_args(meta=True)
    def create_source(self, meta, children):
        flags = self._flags(children)
        kind = _table_kind(children)
        name = next(c for c in children if isinstance(c, st.Name))
        columns = tuple(c for c in children if isinstance(c, st.ColumnDef))
        computed = tuple(c for c in children if isinstance(c, st.ComputedColumn))
        watermarks = self._watermarks(children)
        pks = [c[1] for c in children if isinstance(c, tuple) and c[0] == "primary_key"]
        options = next((c for c in children if isinstance(c, dict)), {})
        if len(pks) > 1:
            raise SqlSyntaxError(Diagnostic("a source can declare only one PRIMARY KEY", _span(meta), self.source))
        if _has_ctas_query(children):
            return self._ctas_with_key(meta, children, kind, name, options, pks, columns + computed + tuple(watermarks))
        return st.CreateSource(
            _span(meta), self.source, kind=kind, name=name, columns=columns, computed=computed,
            watermark=watermarks[0] if watermarks else None, primary_key=pks[0] if pks else (),
            options=options, or_replace="or_replace" in flags, if_not_exists="if_not_exists" in flags,
        )

    def _watermarks(self, children) -> list[st.WatermarkDef]:
        """The statement's WATERMARK declarations, refused past the first: a source has one event-time clock."""
        watermarks = [c for c in children if isinstance(c, st.WatermarkDef)]
        if len(watermarks) > 1:
            raise SqlSyntaxError(Diagnostic("a source can declare only one WATERMARK", watermarks[1].span, self.source))
        return watermarks

    def or_replace(self, children):
        return lark.Tree("or_replace", [])

    def if_not_exists(self, children):
        return lark.Tree("if_not_exists", [])

    def if_exists(self, children):
        return lark.Tree("if_exists", [])

    @v_args(meta=True)
    def create_view(self, meta, children):
        flags = self._flags(children)
        name = next(c for c in children if isinstance(c, st.Name))
        return st.CreateView(_span(meta), self.source, name=name, query=self._query(children[-1]),
                             or_replace="or_replace" in flags, if_not_exists="if_not_exists" in flags)

    @v_args(meta=True)
    def create_mv(self, meta, children):
        name = next(c for c in children if isinstance(c, st.Name))
        options = next((c for c in children if isinstance(c, dict)), {})
        return st.CreateMaterializedView(_span(meta), self.source, name=name, options=options,
                                         query=self._query(children[-1]),
                                         if_not_exists="if_not_exists" in self._flags(children))

    @v_args(meta=True)
    def create_sink(self, meta, children):
        name = next(c for c in children if isinstance(c, st.Name))
        options = next((c for c in children if isinstance(c, dict)), {})
        return st.CreateSink(_span(meta), self.source, name=name, options=options, query=self._query(children[-1]),
                             if_not_exists="if_not_exists" in self._flags(children))

    def column_list(self, children):
        return tuple(children)

    @v_args(meta=True)
    def insert(self, meta, children):
        target_tok = children[2]
        target = st.Name(_unquote_name(target_tok), _tok_span(target_tok))
        columns = next((c for c in children if isinstance(c, tuple)), ())
        return st.Insert(_span(meta), self.source, target=target, columns=columns, query=self._query(children[-1]))

    @v_args(meta=True)
    def statement_set(self, meta, children):
        inserts = tuple(c for c in children if isinstance(c, st.Insert))
        return st.StatementSet(_span(meta), self.source, inserts=inserts)

    @v_args(meta=True)
    def create_table_as(self, meta, children):
        kind = _table_kind(children)
        name = next(c for c in children if isinstance(c, st.Name))
        options = next((c for c in children if isinstance(c, dict)), {})
        return st.CreateTableAs(_span(meta), self.source, kind=kind, name=name, options=options,
                                query=self._query(children[-1]),
                                if_not_exists="if_not_exists" in self._flags(children))

    def _ctas_with_key(self, meta, children, kind, name, options, pks, others) -> st.CreateTableAs:
        """``CREATE TABLE t (PRIMARY KEY (k) NOT ENFORCED) AS SELECT``: the columns are the query's, the key is
        the statement's."""
        if others or not pks:
            span = others[0].span if others and getattr(others[0], "span", None) else _span(meta)
            raise SqlSyntaxError(Diagnostic(
                "CREATE TABLE ... AS SELECT takes its columns from the query: only a PRIMARY KEY goes in parentheses",
                span, self.source, help="write CREATE TABLE t (PRIMARY KEY (k) NOT ENFORCED) AS SELECT ..."))
        if "or_replace" in self._flags(children):
            raise SqlSyntaxError(Diagnostic("CREATE OR REPLACE TABLE ... AS SELECT is not supported", _span(meta),
                                            self.source, help="DROP the table first"))
        query = next(c for c in children if isinstance(c, lark.Tree) and c.data == "ctas_query").children[-1]
        return st.CreateTableAs(_span(meta), self.source, kind=kind, name=name, options=options,
                                query=self._query(query), primary_key=pks[0],
                                if_not_exists="if_not_exists" in self._flags(children))

    def show_what(self, children):
        return str(children[0]).lower()

    def show_mvs(self, children):
        return "materialized views"

    @v_args(meta=True)
    def show(self, meta, children):
        what = next(c for c in children if isinstance(c, str) and not isinstance(c, Token))
        name = next((c for c in children if isinstance(c, st.Name)), None)
        return st.Show(_span(meta), self.source, what=what, name=name)

    @v_args(meta=True)
    def describe(self, meta, children):
        return st.Describe(_span(meta), self.source, name=children[-1])

    def explain_option(self, children):
        return ("explain_option", str(children[0]).lower())

    @v_args(meta=True)
    def explain(self, meta, children):
        options = frozenset(c[1] for c in children if isinstance(c, tuple))
        inner = children[-1]
        target = None
        query = getattr(inner, "query", None)
        if query is not None and query.target is not None:
            target = query.target
            inner = dataclasses.replace(inner, query=dataclasses.replace(query, target=None))
        return st.Explain(_span(meta), self.source, options=options, statement=inner, target=target)

    def drop_kind(self, children):
        return ("drop_kind", str(children[0]).lower())

    def drop_mv(self, children):
        return ("drop_kind", "materialized view")

    def drop_function(self, children):
        return ("drop_kind", "function")

    def temporary(self, children):
        return lark.Tree("temporary", [])

    @v_args(meta=True)
    def create_function(self, meta, children):
        flags = self._flags(children)
        names = [c for c in children if isinstance(c, st.Name)]
        target = next(_unquote_string(c) for c in children if getattr(c, "type", "") == "STRING")
        language = names[1].value.lower() if len(names) > 1 else "python"
        return st.CreateFunction(_span(meta), self.source, name=names[0], target=target, language=language,
                                 temporary="temporary" in flags, if_not_exists="if_not_exists" in flags)

    @v_args(meta=True)
    def drop(self, meta, children):
        kind = next(c[1] for c in children if isinstance(c, tuple))
        return st.Drop(_span(meta), self.source, kind=kind, name=children[-1], if_exists="if_exists" in self._flags(children))

    @v_args(meta=True)
    def set(self, meta, children):
        values = [c for c in children if not isinstance(c, Token)]
        key = values[0] if values else None
        value = values[1] if len(values) > 1 else None
        return st.SetOption(_span(meta), self.source, key=_setting(key), value=value)

    @v_args(meta=True)
    def reset(self, meta, children):
        values = [c for c in children if not isinstance(c, Token)]
        return st.ResetOption(_span(meta), self.source, key=_setting(values[0]) if values else None)

    @v_args(meta=True)
    def pause(self, meta, children):
        return st.PauseQuery(_span(meta), self.source, name=children[-1])

    @v_args(meta=True)
    def resume(self, meta, children):
        return st.ResumeQuery(_span(meta), self.source, name=children[-1])

    @v_args(meta=True)
    def flush(self, meta, children):
        return st.Flush(_span(meta), self.source)

    @v_args(meta=True)
    def query(self, meta, children):
        q = self._query(children[0])
        return st.QueryStatement(q.span, self.source, query=q)


def _table_kind(children) -> str:
    """``"stream"`` or ``"table"``: which CREATE statement the children come from (see ``kind_stream``)."""
    return next(c[1] for c in children if isinstance(c, tuple) and c[0] == "kind")


def _has_ctas_query(children) -> bool:
    """Whether the CREATE statement ends in ``AS SELECT``, so its columns come from the query."""
    return any(isinstance(c, lark.Tree) and c.data == "ctas_query" for c in children)


def _setting(key: str | None) -> str | None:
    """A SET key: dsms's own are case-insensitive; Spark's (``spark.*``) keep their case, as Spark reads them."""
    if key is None or key.lower().startswith("spark."):
        return key
    return key.lower()
