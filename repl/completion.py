"""What to offer at the cursor: keywords, functions, object names and the columns of the relation in use.

:func:`suggest` is a pure function of the buffer text, the cursor and the
catalog, so it is tested without a terminal; :class:`SqlCompleter` wraps it
for prompt-toolkit. It reads the statement around the cursor with the
shell's tokenizer (never the engine's parser: the text is half typed), finds
the relations its FROM and JOIN clauses name (:mod:`.query_relations`: with
their aliases, and the window columns a window TVF adds), and decides from
the words before the cursor what may come next.

Example:
    >>> import dsms
    >>> engine = dsms.Engine()
    >>> _ = engine.execute("CREATE STREAM clicks (ad BIGINT, ts TIMESTAMP(3)) WITH (connector = 'memory')")
    >>> [s.text for s in suggest("SELECT c. FROM clicks c", 9, engine.catalog)]
    ['ad', 'ts']
    >>> [s.text for s in suggest("SELECT * FROM cl", 16, engine.catalog)]
    ['clicks']
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from prompt_toolkit.completion import Completer, Completion

from dsms.planner.connectors import connector_names, find
from dsms.planner.functions import AGGREGATES, SCALAR_FUNCTIONS

from .query_relations import WINDOW_TVFS, Relation, relations
from .tokens import TYPES, Token, significant, tokenize

FUNCTIONS = sorted(set(SCALAR_FUNCTIONS) | AGGREGATES | set(WINDOW_TVFS) | {"DESCRIPTOR", "ROW_NUMBER", "PROCTIME",
                                                                            "LATE"})
STATEMENTS = ("SELECT", "CREATE", "INSERT INTO", "SHOW", "DESCRIBE", "EXPLAIN", "DROP", "SET", "RESET",
              "PAUSE QUERY", "RESUME QUERY", "FLUSH", "WITH", "VALUES")
QUERY_KEYWORDS = ("SELECT", "FROM", "WHERE", "GROUP BY", "HAVING", "ORDER BY", "LIMIT", "JOIN", "LEFT JOIN",
                  "RIGHT JOIN", "FULL OUTER JOIN", "CROSS JOIN", "ON", "AS", "AND", "OR", "NOT", "IN", "BETWEEN",
                  "IS NULL", "IS NOT NULL", "LIKE", "CASE", "WHEN", "THEN", "ELSE", "END", "DISTINCT", "UNION ALL",
                  "INTERVAL", "TABLE", "EMIT CHANGES", "EMIT FINAL", "ALLOWED LATENESS", "OVER", "PARTITION BY",
                  "ROWS BETWEEN", "RANGE BETWEEN", "PRECEDING", "CURRENT ROW", "FOR SYSTEM_TIME AS OF", "TRUE",
                  "FALSE", "NULL")
SHOW_TARGETS = ("STREAMS", "TABLES", "VIEWS", "MATERIALIZED VIEWS", "SINKS", "QUERIES", "FUNCTIONS", "PROGRESS",
                "CONNECTORS")
CREATE_TARGETS = ("STREAM", "TABLE", "VIEW", "MATERIALIZED VIEW", "SINK", "FUNCTION", "TEMPORARY FUNCTION",
                  "OR REPLACE")
DROP_KINDS = {"STREAM": ("stream",), "TABLE": ("table",), "VIEW": ("view",), "SINK": ("sink",),
              "MATERIALIZED": ("materialized view",)}
EXPLAIN_OPTIONS = ("ANALYZE", "LOGICAL", "PHYSICAL", "LOWERED", "SELECT", "CREATE SINK", "CREATE MATERIALIZED VIEW")
TIME_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY")
META_COMMANDS = ("\\d", "\\i", "\\x", "\\pset", "\\help", "\\q")
RELATION_KINDS = ("stream", "table", "view", "materialized view")


@dataclass(frozen=True)
class Suggestion:
    text: str
    kind: str  # column, stream, table, view, materialized view, sink, function, keyword, type, option, query, command


def suggest(text: str, cursor: int, catalog, queries: tuple[str, ...] = (),
            options: tuple[str, ...] = ()) -> list[Suggestion]:
    """Completions for the word at ``cursor`` in ``text``.

    Args:
        catalog: the engine's catalog (object names, kinds and schemas).
        queries: ids of running queries (for DROP / PAUSE / RESUME QUERY).
        options: session option keys (for SET and RESET).
    """
    tokens = tokenize(text)
    prefix = word_before(text, cursor, tokens)
    if prefix is None:
        return []  # inside a comment, a string or a quoted name
    start = cursor - len(prefix)
    stmt = _statement_at(tokens, start)
    before = [t for t in stmt if t.end <= start]
    context = _Context(catalog, stmt, before, queries, options)
    return _filter(context.candidates(), prefix)


def word_before(text: str, cursor: int, tokens: list[Token] | None = None) -> str | None:
    """The part of the word at the cursor that completions replace; None where nothing is offered."""
    tokens = tokenize(text) if tokens is None else tokens
    at = next((t for t in tokens if t.start < cursor <= t.end), None)
    if at is None:
        return ""
    if at.kind in ("word", "keyword", "type", "meta") or _set_key(tokens, at) or _with_string(tokens, at):
        return text[at.start:cursor]
    if at.kind == "comment" or at.kind in ("string", "quoted") and (cursor < at.end or not at.closed):
        return None
    return ""


def _set_key(tokens: list[Token], at: Token) -> bool:
    """Whether ``at`` is the option key of a SET or RESET being typed."""
    sig = [t for t in significant(tokens) if t.end <= at.start]
    return at.kind == "string" and not at.closed and bool(sig) and sig[-1].upper in ("SET", "RESET")


def _with_string(tokens: list[Token], at: Token) -> bool:
    """Whether ``at`` is an option key or value being typed as a string in WITH (...)."""
    if at.kind != "string" or at.closed:
        return False
    sig = [t for t in significant(tokens) if t.end <= at.start]
    depth, opener = _open_paren(sig)
    return depth >= 1 and opener > 0 and sig[opener - 1].upper == "WITH" and sig[-1].text in ("(", ",", "=")


def _statement_at(tokens: list[Token], offset: int) -> list[Token]:
    """The significant tokens of the statement that holds ``offset`` (statements end at ';')."""
    sig = significant(tokens)
    begin = 0
    for i, t in enumerate(sig):
        if t.text == ";":
            if t.end <= offset:
                begin = i + 1
            else:
                return sig[begin:i]
    return sig[begin:]


def _filter(candidates: list[Suggestion], prefix: str) -> list[Suggestion]:
    low = prefix.lower()
    lower_case = prefix != "" and prefix == low
    out, seen = [], set()
    for s in candidates:
        if prefix.startswith("'") and s.kind == "option" and not s.text.startswith("'"):
            s = Suggestion(f"'{s.text}'", s.kind)  # an option key typed as a string: complete it as one
        key = s.text.lower()
        if key in seen or not key.startswith(low):
            continue
        seen.add(key)
        if lower_case and s.kind in ("keyword", "function", "type"):
            s = Suggestion(s.text.lower(), s.kind)
        out.append(s)
    return out


def quote_name(name: str) -> str:
    """A name as it is written in SQL: quoted unless it is a plain identifier.

    >>> quote_name("clicks"), quote_name("query-3")
    ('clicks', '"query-3"')
    """
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name) else '"' + name.replace('"', '""') + '"'


def _columns(names) -> list[Suggestion]:
    return [Suggestion(quote_name(n), "column") for n in names]


def _words(words, kind: str) -> list[Suggestion]:
    return [Suggestion(w, kind) for w in words]


class _Context:
    def __init__(self, catalog, stmt: list[Token], before: list[Token], queries, options):
        self.catalog, self.stmt, self.before = catalog, stmt, before
        self.queries, self.options = queries, options

    def objects(self, kinds) -> list[Suggestion]:
        return [Suggestion(quote_name(o.name), o.object_kind) for o in self.catalog.objects.values() if o.object_kind in kinds]

    def columns_of(self, name: str) -> list[str]:
        obj = self.catalog.get(name)
        return [f.name for f in obj.schema] if obj is not None else []

    def candidates(self) -> list[Suggestion]:
        before = self.before
        if not before:
            return _words(STATEMENTS, "keyword") + _words(META_COMMANDS, "command")
        first = before[0].upper
        if before[0].kind == "meta":
            return self.objects(RELATION_KINDS + ("sink",)) if before[0].text.lower() in ("\\d", "\\d+") else []
        if first == "EXPLAIN":
            rest = [t for t in before[1:] if t.upper not in ("ANALYZE", "LOGICAL", "PHYSICAL", "LOWERED")]
            if not rest:
                return _words(EXPLAIN_OPTIONS, "keyword")
            return _Context(self.catalog, self.stmt, rest, self.queries, self.options).candidates()
        handler = getattr(self, f"_after_{first.lower()}", None)
        if handler is not None:
            found = handler(before)
            if found is not None:
                return found
        return self.query(before)

    # -- statements other than queries -------------------------------------------------

    def _after_show(self, before):
        if len(before) == 2 and before[1].upper == "PROGRESS":
            return _words(map(quote_name, self.queries), "query")
        return _words(SHOW_TARGETS, "keyword") if len(before) == 1 else []

    def _after_describe(self, before):
        return self.objects(RELATION_KINDS + ("sink",)) if len(before) == 1 else []

    _after_desc = _after_describe

    def _after_drop(self, before):
        words = [t.upper for t in before[1:] if t.upper not in ("IF", "EXISTS")]
        if not words:
            return _words(("STREAM", "TABLE", "VIEW", "MATERIALIZED VIEW", "SINK", "QUERY", "FUNCTION",
                           "TEMPORARY FUNCTION"), "keyword")
        if words == ["MATERIALIZED"]:
            return _words(("VIEW",), "keyword")
        if words[0] == "TEMPORARY":
            words = words[1:] or [""]
        if len(words) > (2 if words[0] == "MATERIALIZED" else 1):
            return []
        if_exists = [] if any(t.upper == "IF" for t in before) else _words(("IF EXISTS",), "keyword")
        if words[0] == "QUERY":
            return _words(map(quote_name, self.queries), "query") + if_exists
        if words[0] == "FUNCTION":
            names = sorted(f.name for f in getattr(self.catalog, "functions", {}).values())
            return _words(map(quote_name, names), "function") + if_exists
        return self.objects(DROP_KINDS.get(words[0], ())) + if_exists

    def _after_pause(self, before):
        return _words(("QUERY",), "keyword") if len(before) == 1 else _words(map(quote_name, self.queries), "query") \
            if len(before) == 2 else []

    _after_resume = _after_pause

    def _after_set(self, before):
        if len(before) == 1:
            keys = list(self.options) + sorted(self.catalog.settings)
            return [Suggestion(f"'{k}'", "option") for k in keys]
        if len(before) == 3 and before[1].name.strip("'") == "result_mode":
            return [Suggestion("'table'", "option"), Suggestion("'changelog'", "option")]
        return []

    _after_reset = _after_set

    def _after_insert(self, before):
        if len(before) == 1:
            return _words(("INTO",), "keyword")
        if len(before) == 2:
            return [s for s in self.objects(("stream", "table"))
                    if getattr(getattr(self.catalog.get(s.text), "descriptor", None), "insertable", False)]
        if before[3:4] and before[3].text == "(" and not any(t.text == ")" for t in before[3:]):
            return _columns(self.columns_of(before[2].name))
        if not any(t.upper in ("SELECT", "VALUES") for t in before):
            return _words(("VALUES", "SELECT"), "keyword")
        return None

    def _after_create(self, before):
        if any(t.upper in ("SELECT", "VALUES") for t in before):
            return None  # the query of a view or sink
        words = [t.upper for t in before]
        if len(before) == 1 or words[1:] == ["OR", "REPLACE"]:
            return _words(CREATE_TARGETS if len(before) == 1 else ("STREAM", "TABLE", "VIEW"), "keyword")
        depth, opener = _open_paren(before)
        if depth == 1 and opener > 0 and before[opener - 1].upper == "WITH":
            return self._create_options(before, opener, words)
        if depth == 1 and ("STREAM" in words[:4] or "TABLE" in words[:4]):
            return self._column_definition(before)
        if depth == 0 and before[-1].upper == "AS":
            return _words(("SELECT",), "keyword")
        return []

    def _create_options(self, before, opener: int, words: list[str]) -> list[Suggestion]:
        """Inside CREATE ... WITH (...): the options of a source's or a sink's connector (a materialized
        view's options are not a connector's, so none are offered)."""
        if "MATERIALIZED" in words[:3]:
            return []
        role = "sink" if "SINK" in words[:3] else "source"
        return _with_options(before[opener + 1:], role, self._defined_columns(before[:opener]))

    def _column_definition(self, before) -> list[Suggestion]:
        """Inside CREATE STREAM/TABLE (...): a column's type after its name, WATERMARK FOR / PRIMARY KEY
        where a new entry starts, the declared columns after WATERMARK FOR."""
        if before[-1].text in ("(", ","):
            return _words(("WATERMARK FOR", "PRIMARY KEY"), "keyword")
        if before[-2].text in ("(", ",") and before[-1].kind in ("word", "quoted"):
            return _words(sorted(TYPES), "type")
        if before[-1].upper == "FOR":
            return _columns(self._defined_columns(before))
        return []

    def _defined_columns(self, before) -> list[str]:
        """The columns a CREATE STREAM declares so far (for WATERMARK FOR ...)."""
        return [b.name for a, b in zip(before, before[1:]) if a.text in ("(", ",") and b.kind in ("word", "quoted")]

    # -- queries ---------------------------------------------------------------------------

    def query(self, before) -> list[Suggestion]:
        """What may come next in a query: the columns after ``q.``, a relation where one is read, a
        keyword after a name, else any column, function or keyword."""
        prev = before[-1]
        prev2 = before[-2].upper if len(before) > 1 else ""
        scope = relations(self.stmt, self.catalog)
        if prev.text == "." and len(before) > 1:
            return self._qualified_columns(before[-2].name.lower(), scope)
        found = self._relation_to_read(prev, prev2)
        if found is not None:
            return found
        if _function_at(before) == "DESCRIPTOR":
            return _columns(c for rel in scope for c in rel.columns)
        if prev.text == "," and _clause(before) == "FROM":
            return self.objects(RELATION_KINDS)
        if prev.upper == "AS":
            return _words(sorted(TYPES), "type") if _function_at(before) in ("CAST", "TRY_CAST") else []
        if prev.kind == "string" and prev2 == "INTERVAL":
            return _words(TIME_UNITS, "keyword")
        if prev.kind in ("word", "quoted") and (prev2 in ("AS", ",") or _clause(before) in ("FROM", "JOIN")):
            return _words(QUERY_KEYWORDS, "keyword")  # after a relation, an alias or an expression: a keyword
        return self._expression_start(scope)

    def _qualified_columns(self, qualifier: str, scope: list[Relation]) -> list[Suggestion]:
        """The columns after ``q.``: of the relation the statement aliases ``q``, else of the object named ``q``."""
        for rel in scope:
            if rel.alias.lower() == qualifier:
                return _columns(rel.columns)
        return _columns(self.columns_of(qualifier))

    def _relation_to_read(self, prev: Token, prev2: str) -> list[Suggestion] | None:
        """After FROM, JOIN or TABLE, and inside ``TABLE(`` or a window TVF's ``(``: what names the relation
        read there; None elsewhere."""
        if prev.upper in ("FROM", "JOIN"):
            return self.objects(RELATION_KINDS) + _words(("TABLE",), "keyword")
        if prev.upper == "TABLE":
            return [] if prev2 in ("FROM", "JOIN") else self.objects(RELATION_KINDS)  # FROM TABLE(TUMBLE(TABLE s, ...))
        if prev.text == "(" and prev2 == "TABLE":
            return _words(WINDOW_TVFS, "function")
        if prev.text == "(" and prev2 in WINDOW_TVFS:
            return _words(("TABLE",), "keyword")
        return None

    def _expression_start(self, scope: list[Relation]) -> list[Suggestion]:
        """Where an expression may start: the columns in scope first, then Python and built-in functions,
        then keywords."""
        columns = [c for rel in scope for c in rel.columns]
        python = sorted(f.name for f in getattr(self.catalog, "functions", {}).values())
        return _columns(columns) + _words(python + FUNCTIONS, "function") + _words(QUERY_KEYWORDS, "keyword")


def _option_entries(inside: list[Token]) -> list[tuple[str, list[Token]]]:
    """The ``key = value`` entries typed so far in WITH (...): (key, value tokens)."""
    entries, key, value, in_value = [], [], [], False
    for t in inside + [None]:
        if t is None or t.text == ",":
            if key:
                entries.append(("".join(_unquote(k) for k in key).lower(), value))
            key, value, in_value = [], [], False
        elif t.text == "=" and not in_value:
            in_value = True
        else:
            (value if in_value else key).append(t)
    return entries


def _unquote(t: Token) -> str:
    return t.text[1:-1].replace("''", "'") if t.kind == "string" and t.closed else t.text


def _option_key(name: str) -> str:
    """An option key as written: bare if it is a dotted name, else quoted."""
    return name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", name) else f"'{name}'"


def _with_options(inside: list[Token], role: str, columns: list[str]) -> list[Suggestion]:
    """Option keys after ``(`` or ``,``; values after ``=`` (connector names, formats, choices)."""
    entries = _option_entries(inside)
    given = {k: v for k, v in entries}
    connector = find(_unquote(given["connector"][0])) if given.get("connector") else None
    last = inside[-1].text if inside else "("
    if last == "=":
        return _option_values(entries[-1][0] if entries else "", connector, role)
    if last not in ("(", ","):
        return []
    if connector is None:
        return _words(("connector",), "option")
    return _words((_option_key(k) for k in _option_keys(connector, role, columns) if k not in given), "option")


def _option_values(key: str, connector, role: str) -> list[Suggestion]:
    """The values ``key =`` may take: the connectors of the role for ``connector``, else the option's
    choices (true/false for a flag); none for a free-form option or before the connector is known."""
    if key == "connector":
        return _words((f"'{n}'" for n in connector_names(role)), "option")
    option = next((o for o in connector.options_for(role) if o.matches(key)), None) if connector else None
    if option is None:
        return []
    values = option.values or (("true", "false") if option.type == "bool" else ())
    return _words((f"'{v}'" for v in values), "option")


def _option_keys(connector, role: str, columns: list[str]) -> list[str]:
    """The option keys a connector takes in the role; a per-column pattern (``fields.*.kind``) is spelled
    out for each declared column, another pattern offers its fixed prefix."""
    keys = []
    for o in connector.options_for(role):
        if o.is_pattern and o.name.startswith("fields.*"):
            keys += [o.name.replace("*", c, 1) for c in columns]
        elif o.is_pattern:
            keys.append(o.name.split("*", 1)[0])
        else:
            keys.append(o.name)
    return keys


def _open_paren(before: list[Token]) -> tuple[int, int]:
    """How many parentheses are open at the end, and the index of the innermost one (-1 if none)."""
    stack = []
    for i, t in enumerate(before):
        if t.text == "(":
            stack.append(i)
        elif t.text == ")" and stack:
            stack.pop()
    return len(stack), stack[-1] if stack else -1


def _function_at(before: list[Token]) -> str:
    """The name of the call whose parentheses hold the cursor ('' if none)."""
    _, opener = _open_paren(before)
    return before[opener - 1].upper if opener > 0 else ""


def _clause(before: list[Token]) -> str:
    """The clause keyword the cursor is in, at the current parenthesis depth."""
    depth = 0
    for t in reversed(before):
        if t.text == ")":
            depth += 1
        elif t.text == "(":
            if depth == 0:
                return "("
            depth -= 1
        elif depth == 0 and t.upper in ("SELECT", "FROM", "JOIN", "WHERE", "GROUP", "HAVING", "ORDER", "ON",
                                        "LIMIT", "WINDOW"):
            return t.upper
    return ""


class SqlCompleter(Completer):
    """prompt-toolkit's view of :func:`suggest`: names and keywords with what they are."""

    def __init__(self, engine, options: tuple[str, ...] = ()):
        self.engine, self.options = engine, options

    def get_completions(self, document, complete_event):
        text, cursor = document.text, document.cursor_position
        prefix = word_before(text, cursor) or ""
        queries = tuple(self.engine.scheduler.jobs)
        for s in suggest(text, cursor, self.engine.catalog, queries, self.options):
            yield Completion(s.text, start_position=-len(prefix), display_meta=s.kind)
