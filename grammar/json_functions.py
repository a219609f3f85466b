"""Flink's JSON functions, parsed into vectorized DuckDB SQL with Flink's meaning.

``JSON_VALUE``, ``JSON_QUERY``, ``JSON_EXISTS``, ``JSON_OBJECT``,
``JSON_ARRAY``, ``JSON_STRING`` and ``s IS [NOT] JSON [VALUE|OBJECT|ARRAY|SCALAR]``
become ``CASE`` expressions over DuckDB's json functions (``json_valid``,
``json_extract``, ``json_type``, ``to_json``), so they run inside the
per-batch SQL of the runtime and the DuckDB route, never row by row in
Python. The calls to DuckDB-only functions are :class:`DuckDBJsonFunc`
nodes; the planner refuses them on Spark (``planner/lower/plan.py``).

Flink's rules (``SqlJsonUtils``) as built here, for an input ``s`` and a path
in ``strict`` mode (the default) or ``lax`` mode:

=============================  ===============  ==============
what the path finds            strict           lax
=============================  ===============  ==============
``s`` is NULL                  NULL             NULL
``s`` is not JSON              error            empty
nothing (missing key/index)    error            empty
JSON ``null``                  empty            empty
JSON_VALUE: object or array    error            empty
JSON_QUERY: a scalar           error            empty
=============================  ===============  ==============

"empty" and "error" then follow the call's ``ON EMPTY`` / ``ON ERROR``
clauses (``NULL`` by default; ``ERROR`` fails the query). A value that does
not convert to the ``RETURNING`` type is an error too.

Example:
    >>> from dsms.grammar.dialect import parse_expression
    >>> print(parse_expression("s IS JSON OBJECT").sql("duckdb"))
    COALESCE(CASE WHEN JSON_VALID(s) THEN JSON_TYPE(s) = 'OBJECT' END, FALSE)
    >>> print(parse_expression("JSON_STRING(x)").sql("duckdb"))
    CAST(TO_JSON(x) AS TEXT)
"""

from __future__ import annotations

import json

from sqlglot import exp
from sqlglot.tokens import TokenType

from .json_path import JsonPath, JsonPathError, parse_json_path
from .sqlbuild import DT, InvalidCall, _case, _eq, _is_null, _refuse, _str, _str_literal

# -- DuckDB functions (rendered as plain calls; refused on Spark) -------------------


class DuckDBJsonFunc(exp.Expression, exp.Func):
    """A call to one of DuckDB's json functions, which Spark SQL does not have."""

    arg_types = {"expressions": True}
    is_var_len_args = True


class JsonValid(DuckDBJsonFunc):
    _sql_names = ["JSON_VALID"]


class JsonExtract(DuckDBJsonFunc):
    _sql_names = ["JSON_EXTRACT"]


class JsonExtractString(DuckDBJsonFunc):
    _sql_names = ["JSON_EXTRACT_STRING"]


class JsonType(DuckDBJsonFunc):
    _sql_names = ["JSON_TYPE"]


class ToJson(DuckDBJsonFunc):
    _sql_names = ["TO_JSON"]


class Json(DuckDBJsonFunc):
    _sql_names = ["JSON"]


class ListExtract(DuckDBJsonFunc):
    _sql_names = ["LIST_EXTRACT"]


class RaiseError(DuckDBJsonFunc):
    """DuckDB's ``error(message)``: fails the statement (only on the rows a CASE sends to it)."""

    _sql_names = ["ERROR"]


def _json_text(e: exp.Expression) -> exp.Expression:
    """Mark the text a JSON constructor built: an enclosing constructor inserts it as JSON, not as a string."""
    marked = exp.Paren(this=e)
    marked.meta[_JSON_TEXT] = True
    return marked


_JSON_TEXT = "dsms_json_text"


class JsonRaw(InvalidCall):
    """``JSON(value)``: pre-formatted JSON, valid only as a JSON_OBJECT or JSON_ARRAY value."""


def _f(cls, *args: exp.Expression) -> exp.Expression:
    return cls(expressions=[a.copy() for a in args])


def _varchar(e: exp.Expression) -> exp.Expression:
    return exp.Cast(this=e, to=DT.build("VARCHAR"))


# -- JSON_VALUE, JSON_QUERY, JSON_EXISTS --------------------------------------------

_RETURNABLE = {DT.Type.VARCHAR, DT.Type.TEXT, DT.Type.CHAR, DT.Type.BOOLEAN, DT.Type.TINYINT, DT.Type.SMALLINT,
               DT.Type.INT, DT.Type.BIGINT, DT.Type.FLOAT, DT.Type.DOUBLE, DT.Type.DECIMAL}
_INTEGERS = {DT.Type.TINYINT, DT.Type.SMALLINT, DT.Type.INT, DT.Type.BIGINT}
_TEXT = {DT.Type.VARCHAR, DT.Type.TEXT, DT.Type.CHAR}


def _containers() -> list[exp.Expression]:
    return [_str("OBJECT"), _str("ARRAY")]


def _path(name: str, arg: exp.Expression) -> JsonPath | InvalidCall:
    text = _str_literal(arg)
    if text is None:
        return _refuse(f"{name} needs the JSON path as a string literal (it is translated when the query is planned)",
                       [arg])
    try:
        return parse_json_path(text)
    except JsonPathError as e:
        return _refuse(str(e), [arg])


def _behaviour(name: str, when: str, choice, dtype: exp.DataType, text: dict[str, str] | None = None) -> exp.Expression:
    """The value for an ``ON EMPTY`` / ``ON ERROR`` choice (a keyword string or a DEFAULT expression)."""
    if isinstance(choice, exp.Expression):
        return exp.Cast(this=choice, to=dtype.copy())
    keyword = (choice or "NULL").split(" ON ")[0]
    if keyword == "ERROR":
        reason = "the path found nothing (ERROR ON EMPTY)" if when == "EMPTY" else "the input is not JSON, or the " \
            "path found no value of the right kind (ERROR ON ERROR)"
        return exp.Cast(this=_f(RaiseError, _str(f"{name}: {reason}")), to=dtype.copy())
    if text and keyword in text:
        return exp.Cast(this=_str(text[keyword]), to=dtype.copy())
    return exp.Cast(this=exp.Null(), to=dtype.copy())


_J = "__json"  # the lambda variable that holds what the path found, as JSON text


def _j() -> exp.Expression:
    return exp.to_identifier(_J)


def _first_char(e: exp.Expression) -> exp.Expression:
    return exp.Left(this=e, expression=exp.Literal.number(1))


def _is_container(e: exp.Expression) -> exp.Expression:
    """JSON text of an object or an array (what json_extract gives is minified: no leading space)."""
    return exp.In(this=_first_char(e), expressions=[_str("{"), _str("[")])


def _found(s: exp.Expression, path: JsonPath) -> exp.Expression:
    """What the path finds in ``s`` (which must be JSON), as JSON text; NULL when it finds nothing."""
    hit = _f(JsonExtract, s, _str(path.duckdb))
    return _varchar(_f(ToJson, hit) if not path.definite else hit)  # a wildcard: one JSON array of the matches


def _lookup(s: exp.Expression, path: JsonPath, invalid: exp.Expression, on_found: exp.Expression,
            dtype: exp.DataType) -> exp.Expression:
    """``CASE`` on the input, then ``on_found`` (over the lambda variable ``__json``) applied to what the path finds.

    The input is parsed twice per row (``json_valid``, ``json_extract``) and what is found is
    bound once through a one-element ``list_transform``, so the checks on it do not parse the
    input again (a CASE evaluates each branch's calls anew).
    """
    bound = exp.Transform(this=exp.Array(expressions=[_found(s, path)]),
                          expression=exp.Lambda(this=on_found, expressions=[_j()]))
    return _case(
        (_is_null(s), exp.Cast(this=exp.Null(), to=dtype.copy())),
        (exp.Not(this=_f(JsonValid, s)), invalid),
        default=exp.Cast(this=_f(ListExtract, bound, exp.Literal.number(1)), to=dtype.copy()))


def _json_argument(self, name: str) -> exp.Expression:
    """The JSON text a JSON_VALUE / JSON_QUERY / JSON_EXISTS call reads (its first argument)."""
    s = self._parse_bitwise()
    if s is None:
        self.raise_error(f"{name} needs the JSON text first: {name}(text, 'path' ...)")
    return s


def _parse_json_value(self):
    s = _json_argument(self, "JSON_VALUE")
    self._match(TokenType.COMMA)
    path_arg = self._parse_bitwise()
    dtype = (self._match(TokenType.RETURNING) and self._parse_types()) or DT.build("VARCHAR")
    on_empty = self._parse_on_handling("EMPTY", "NULL", "ERROR")
    on_error = self._parse_on_handling("ERROR", "NULL", "ERROR")
    path = _path("JSON_VALUE", path_arg)
    if isinstance(path, InvalidCall):
        return path
    if dtype.this not in _RETURNABLE:
        return _refuse(f"JSON_VALUE cannot return {dtype.sql()}: use STRING, BOOLEAN, an integer type, DOUBLE, "
                       "FLOAT or DECIMAL", [s])
    if not path.definite:
        return _refuse("JSON_VALUE returns one scalar; a path with a wildcard can match many (use JSON_QUERY)", [s])
    empty = _behaviour("JSON_VALUE", "EMPTY", on_empty, dtype)
    error = _behaviour("JSON_VALUE", "ERROR", on_error, dtype)
    strict = path.mode == "strict"
    # a JSON string is unquoted; a number or a boolean is its text
    text = _case((_eq(_first_char(_j()), _str('"')), _f(JsonExtractString, _j(), _str("$"))), default=_j())
    if dtype.this in _TEXT:
        found = exp.Cast(this=text, to=dtype.copy())
    else:  # a value that does not convert is an error, as a conversion error in Flink
        if dtype.this in _INTEGERS:  # a number with a fraction is truncated toward zero (DuckDB would round)
            text = exp.Trunc(this=exp.TryCast(this=text, to=DT.build("DECIMAL(38, 9)")))
        converted = exp.TryCast(this=text, to=dtype.copy())
        found = _case((_is_null(converted), error.copy()), default=converted.copy())
    on_found = _case(
        (_is_null(_j()), (error if strict else empty).copy()),
        (_eq(_j(), _str("null")), empty.copy()),
        (_is_container(_j()), (error if strict else empty).copy()),
        default=found)
    return _lookup(s, path, error if strict else empty, on_found, dtype)


def _parse_wrapper(self) -> str:
    if self._match_text_seq("WITHOUT"):
        self._match_text_seq("ARRAY")
        self._match_text_seq("WRAPPER")
        return "WITHOUT"
    if self._match_text_seq("WITH"):
        kind = "CONDITIONAL" if self._match_text_seq("CONDITIONAL") else "UNCONDITIONAL"
        self._match_text_seq("UNCONDITIONAL")
        self._match_text_seq("ARRAY")
        if not self._match_text_seq("WRAPPER"):
            self.raise_error("Expected WRAPPER")
        return kind
    return "WITHOUT"


def _parse_query_behaviour(self, on: str) -> str | None:
    for words in (("NULL",), ("ERROR",), ("EMPTY", "ARRAY"), ("EMPTY", "OBJECT")):
        if self._match_text_seq(*words, "ON", on):
            return " ".join(words)
    return None


def _parse_json_query(self):
    s = _json_argument(self, "JSON_QUERY")
    self._match(TokenType.COMMA)
    path_arg = self._parse_bitwise()
    dtype = (self._match(TokenType.RETURNING) and self._parse_types()) or DT.build("VARCHAR")
    wrapper = _parse_wrapper(self)
    on_empty = _parse_query_behaviour(self, "EMPTY")
    on_error = _parse_query_behaviour(self, "ERROR")
    path = _path("JSON_QUERY", path_arg)
    if isinstance(path, InvalidCall):
        return path
    if dtype.this not in _TEXT:
        return _refuse(f"JSON_QUERY RETURNING {dtype.sql()} is not supported: it returns STRING", [s])
    texts = {"EMPTY ARRAY": "[]", "EMPTY OBJECT": "{}"}
    vc = DT.build("VARCHAR")
    empty = _behaviour("JSON_QUERY", "EMPTY", on_empty and on_empty + " ON EMPTY", vc, texts)
    error = _behaviour("JSON_QUERY", "ERROR", on_error and on_error + " ON ERROR", vc, texts)
    strict = path.mode == "strict"
    bracketed = exp.DPipe(this=exp.DPipe(this=_str("["), expression=_j(), safe=True), expression=_str("]"), safe=True)
    value: exp.Expression = _j()
    if wrapper == "UNCONDITIONAL":
        value = bracketed
    elif wrapper == "CONDITIONAL":
        value = _case((_eq(_first_char(_j()), _str("[")), _j()), default=bracketed)
    on_found = _case(
        (_is_null(_j()), (error if strict else empty).copy()),
        (_eq(_j(), _str("null")), empty.copy()),
        (exp.Not(this=_is_container(value)), (error if strict else empty).copy()),
        default=value.copy())
    return _lookup(s, path, error if strict else empty, on_found, vc)


def _parse_json_exists(self):
    s = _json_argument(self, "JSON_EXISTS")
    self._match(TokenType.COMMA)
    path_arg = self._parse_bitwise()
    on_error = self._parse_on_handling("ERROR", "TRUE", "FALSE", "UNKNOWN", "ERROR") or "FALSE ON ERROR"
    path = _path("JSON_EXISTS", path_arg)
    if isinstance(path, InvalidCall):
        return path
    if not path.definite or isinstance(on_error, exp.Expression):
        return _refuse("JSON_EXISTS takes a path without wildcards and {TRUE | FALSE | UNKNOWN | ERROR} ON ERROR", [s])
    boolean = DT.build("BOOLEAN")
    keyword = on_error.split(" ON ")[0]
    error = {"TRUE": exp.true(), "FALSE": exp.false(), "UNKNOWN": exp.Cast(this=exp.Null(), to=boolean)}.get(keyword)
    if error is None:
        error = exp.Cast(this=_f(RaiseError, _str("JSON_EXISTS: the input is not JSON, or the path found nothing "
                                                   "(ERROR ON ERROR)")), to=boolean)
    strict = path.mode == "strict"
    on_found = _case((_is_null(_j()), error.copy() if strict else exp.false()),
                     default=exp.NEQ(this=_j(), expression=_str("null")))
    return _lookup(s, path, error if strict else exp.false(), on_found, boolean)


# -- constructors --------------------------------------------------------------------


def _element(value: exp.Expression, absent: bool) -> exp.Expression:
    """A value as JSON text: constructors' results as they are, anything else through ``to_json``."""
    if isinstance(value, exp.Paren) and value.meta.get(_JSON_TEXT):
        text = value.this.copy()
    elif isinstance(value, JsonRaw):  # JSON('') is NULL, as in Flink
        raw = value.expressions[0]
        text = _varchar(_f(Json, exp.Nullif(this=exp.Trim(this=raw.copy()), expression=_str(""))))
    else:
        text = _varchar(_f(ToJson, value))
    return text if absent else exp.Coalesce(this=text, expressions=[_str("null")])


def _joined(open_: str, items: list[exp.Expression], close: str) -> exp.Expression:
    if not items:
        return _json_text(_str(open_ + close))
    body = exp.ConcatWs(expressions=[_str(","), *items], safe=True, coalesce=True)  # skips NULL items
    return _json_text(exp.DPipe(this=exp.DPipe(this=_str(open_), expression=body, safe=True),
                                   expression=_str(close), safe=True))


def _parse_json_object(self):
    node = self._parse_json_object()
    absent = node.args.get("null_handling") == "ABSENT ON NULL"
    pairs = []
    for kv in node.expressions:
        key = _str_literal(kv.this) if isinstance(kv, exp.JSONKeyValue) else None
        if key is None:
            return _refuse("JSON_OBJECT keys must be string literals: JSON_OBJECT(KEY 'k' VALUE v, ...)",
                           [kv] if kv is not None else [])
        pairs.append((key, kv.expression))
    # Flink writes the keys of a JSON object in sorted order.
    items = [exp.DPipe(this=_str(json.dumps(k) + ":"), expression=_element(v, absent), safe=True)
             for k, v in sorted(pairs, key=lambda kv: kv[0])]
    return _joined("{", items, "}")


def _parse_json_array(self):
    values = self._parse_csv(self._parse_bitwise)
    null_handling = self._parse_on_handling("NULL", "NULL", "ABSENT")
    absent = null_handling != "NULL ON NULL"  # Flink's default for arrays is ABSENT ON NULL
    return _joined("[", [_element(v, absent) for v in values], "]")


def _json_string(args):
    if len(args) != 1:
        return _refuse("JSON_STRING takes (value)", args)
    return _varchar(_f(ToJson, args[0]))


def _json_raw(args):
    if len(args) != 1:
        return _refuse("JSON takes (string)", args)
    return JsonRaw(this=exp.Literal.string("JSON(value) can only be used as a value inside JSON_OBJECT or "
                                           "JSON_ARRAY"), expressions=list(args))


# -- IS [NOT] JSON ---------------------------------------------------------------------

def is_json(node: exp.Expression | None) -> exp.Expression | None:
    """Rewrite sqlglot's ``s IS [NOT] JSON [kind]`` into DuckDB json calls (NULL is not JSON)."""
    inner = node.this if isinstance(node, exp.Not) else node
    if not (isinstance(inner, exp.Is) and isinstance(inner.expression, exp.JSON)):
        return node
    s, kind = inner.this, (inner.expression.this or "VALUE").upper()
    if kind == "VALUE":
        test: exp.Expression = exp.Cast(this=_f(JsonValid, s), to=DT.build("BOOLEAN"))
    else:
        jtype = _f(JsonType, s)
        if kind == "SCALAR":
            check: exp.Expression = exp.Not(this=exp.In(this=jtype, expressions=_containers()))
        else:
            check = _eq(jtype, _str(kind))
        test = _case((_f(JsonValid, s), check))
    result = exp.Coalesce(this=test, expressions=[exp.false()])
    return exp.Not(this=result) if isinstance(node, exp.Not) else result


JSON_FUNCTIONS: dict = {"JSON_STRING": _json_string, "JSON": _json_raw}

JSON_FUNCTION_PARSERS: dict = {
    "JSON_VALUE": _parse_json_value,
    "JSON_QUERY": _parse_json_query,
    "JSON_EXISTS": _parse_json_exists,
    "JSON_OBJECT": _parse_json_object,
    "JSON_ARRAY": _parse_json_array,
}

JSON_FUNCTION_NAMES = ["JSON_VALUE", "JSON_QUERY", "JSON_EXISTS", "JSON_OBJECT", "JSON_ARRAY", "JSON_STRING", "JSON"]
