"""Flink's nested types and the functions over them, as sqlglot expressions.

Types: ``ROW<a INT, b STRING>`` (or ``ROW(a INT, b STRING)``) is a sqlglot
``STRUCT``, ``ARRAY<T>`` an ``ARRAY``, ``MAP<K, V>`` a ``MAP`` and
``MULTISET<T>`` the ``MAP<T, INT>`` from element to count that Flink
keeps for it. :func:`parse_flink_type` is the dsms parser's hook for the
two spellings sqlglot does not know (ROW and MULTISET); the rest of the
grammar is sqlglot's.

Access: ``r.a`` is an ``exp.Dot`` (the binder makes it from a column
reference whose qualifier is a ROW column), ``x[k]`` a :class:`Subscript`
whose meaning depends on the type of ``x`` (an array element, 1-based and
NULL out of range as in Flink; a map value, NULL for a missing key; a row
field by name), decided when the expression is type-annotated.

Functions keep Flink 2.x's semantics on every route. Where DuckDB's and
Spark's own functions differ from Flink's (DuckDB's ``list_distinct``
loses the order, its ``list_concat`` skips NULL arrays, Spark's
``try_element_at`` fails on index 0), the expression is one of the classes
below, rendered per dialect by :func:`_register`.

Example:
    >>> from dsms.grammar.dialect import parse_expression
    >>> parse_expression("ARRAY_DISTINCT(a)").sql("duckdb")
    'LIST_FILTER(a, LAMBDA __x, __i : LIST_POSITION(a, __x) = __i)'
    >>> parse_expression("ARRAY_DISTINCT(a)").sql("spark")
    'ARRAY_DISTINCT(a)'
    >>> parse_expression("MAP['a', 1, 'b', 2]").sql("duckdb")
    "MAP(['a', 'b'], [1, 2])"
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from .sqlbuild import DT, _arity, _c, _case, _is_null, _num, _or, _refuse, _str

_STRUCT, _ARRAY, _MAP = DT.Type.STRUCT, DT.Type.ARRAY, DT.Type.MAP


# -- types ------------------------------------------------------------------------------

def parse_flink_type(parser) -> exp.DataType | None:
    """At ``ROW<...>``, ``ROW(...)`` or ``MULTISET<...>``: the type, else None (nothing consumed)."""
    cur, nxt = parser._curr, parser._next
    if cur is None or nxt is None or cur.text.upper() not in ("ROW", "MULTISET"):
        return None
    if nxt.token_type not in (TokenType.LT, TokenType.L_PAREN):
        return None
    index = parser._index
    word = cur.text.upper()
    parser._advance(2)
    close = TokenType.GT if nxt.token_type == TokenType.LT else TokenType.R_PAREN
    if word == "MULTISET":
        element = parser._parse_types()
        if element is None or not parser._match(close):
            parser._retreat(index)
            return None
        return exp.DataType(this=_MAP, expressions=[element, DT.build("INT")], nested=True)
    fields = []
    while True:
        name = parser._parse_id_var(any_token=True)
        dtype = parser._parse_types() if name is not None else None
        if dtype is None:
            parser._retreat(index)  # ROW(1, 'x') is the row constructor, not a type
            return None
        parser._match_text_seq("NOT", "NULL") or parser._match(TokenType.NULL)
        parser._match(TokenType.STRING)  # a field description, as Flink allows
        fields.append(exp.ColumnDef(this=exp.to_identifier(name.name, quoted=True), kind=dtype))
        if not parser._match(TokenType.COMMA):
            break
    if not parser._match(close):
        parser._retreat(index)
        return None
    return exp.DataType(this=_STRUCT, expressions=fields, nested=True)


def struct_fields(dtype: exp.DataType | None) -> dict[str, exp.DataType]:
    """Field name -> type of a STRUCT type (empty for anything else)."""
    if dtype is None or dtype.this != _STRUCT:
        return {}
    return {f.name: f.args["kind"] for f in dtype.expressions if isinstance(f, exp.ColumnDef)}


def _field_type(dtype: exp.DataType | None, name: str) -> exp.DataType | None:
    fields = struct_fields(dtype)
    if name in fields:
        return fields[name]
    lowered = {k.lower(): v for k, v in fields.items()}
    return lowered.get(name.lower())


def element_type(dtype: exp.DataType | None) -> exp.DataType | None:
    if dtype is not None and dtype.this == _ARRAY and dtype.expressions:
        return dtype.expressions[0]
    return None


def map_types(dtype: exp.DataType | None) -> tuple[exp.DataType, exp.DataType] | None:
    if dtype is not None and dtype.this == _MAP and len(dtype.expressions) == 2:
        return dtype.expressions[0], dtype.expressions[1]
    return None


def _array_of(dtype: exp.DataType | None) -> exp.DataType:
    return exp.DataType(this=_ARRAY, expressions=[dtype.copy() if dtype else DT.build("UNKNOWN")], nested=True)


# -- expressions ------------------------------------------------------------------------

class Subscript(exp.Expression, exp.Func):
    """``x[k]``: an array element (1-based), a map value or a row field, by the type of ``x``.

    ``kind`` ('array', 'map' or 'row') is set when the expression is typed.
    """

    arg_types = {"this": True, "expression": True, "kind": False}
    _sql_names = ["SUBSCRIPT"]


class Element(exp.Expression, exp.Func):
    """``ELEMENT(arr)``: the only element; NULL for an empty array; an error for more than one."""

    _sql_names = ["ELEMENT"]


class FlinkArrayDistinct(exp.Expression, exp.Func):
    """``ARRAY_DISTINCT(arr)``: the first occurrence of each element, in order (NULL kept once)."""

    _sql_names = ["ARRAY_DISTINCT"]


class FlinkArrayRemove(exp.Expression, exp.Func):
    """``ARRAY_REMOVE(arr, x)``: ``arr`` without the elements equal to ``x``, in order."""

    arg_types = {"this": True, "expression": True}
    _sql_names = ["ARRAY_REMOVE"]


class FlinkArrayPosition(exp.Expression, exp.Func):
    """``ARRAY_POSITION(arr, x)``: the 1-based position of the first ``x``, 0 if absent."""

    arg_types = {"this": True, "expression": True}
    _sql_names = ["ARRAY_POSITION"]


class FlinkArraySlice(exp.Expression, exp.Func):
    """``ARRAY_SLICE(arr, start [, end])``: 1-based, inclusive, negative from the end, 0 the start."""

    arg_types = {"this": True, "start": True, "end": False}
    _sql_names = ["ARRAY_SLICE"]


class FlinkArrayContains(exp.Expression, exp.Func):
    """``ARRAY_CONTAINS(arr, x)``: whether ``x`` is an element (NULL finds a NULL element; FALSE when absent)."""

    arg_types = {"this": True, "expression": True}
    _sql_names = ["ARRAY_CONTAINS"]


class FlinkArrayReverse(exp.Expression, exp.Func):
    """``ARRAY_REVERSE(arr)``: the elements in reverse order."""

    _sql_names = ["ARRAY_REVERSE"]


class FlinkArrayConcat(exp.Expression, exp.Func):
    """``ARRAY_CONCAT(a, b, ...)``: NULL if any array is NULL."""

    arg_types = {"expressions": True}
    is_var_len_args = True
    _sql_names = ["ARRAY_CONCAT"]


class FlinkArrayJoin(exp.Expression, exp.Func):
    """``ARRAY_JOIN(arr, sep [, null_text])``: NULL elements are skipped unless ``null_text`` is given."""

    arg_types = {"this": True, "expression": True, "null": False}
    _sql_names = ["ARRAY_JOIN"]


class Cardinality(exp.Expression, exp.Func):
    """``CARDINALITY(x)``: the number of elements of an array or entries of a map (DuckDB and Spark alike)."""

    _sql_names = ["CARDINALITY"]


class MapValues(exp.Expression, exp.Func):
    _sql_names = ["MAP_VALUES"]


class MapEntries(exp.Expression, exp.Func):
    _sql_names = ["MAP_ENTRIES"]


# -- per-dialect renderings -----------------------------------------------------------

def _fn(name: str, *args: exp.Expression) -> exp.Anonymous:
    return exp.Anonymous(this=name, expressions=[_c(a) for a in args])


def _lambda(body: exp.Expression, *names: str) -> exp.Lambda:
    return exp.Lambda(this=body, expressions=[exp.to_identifier(n) for n in names])


def _x(name: str) -> exp.Column:
    return exp.column(name)


def _unguarded(i: exp.Expression) -> bool:
    """A key no engine reads from the end: a positive integer or a string."""
    return isinstance(i, exp.Literal) and (i.is_string or (i.is_int and int(i.name) >= 1))


def _subscript(e: Subscript, dialect: str) -> exp.Expression:
    this, key, kind = e.this, e.expression, e.args.get("kind")
    if kind == "row":
        return exp.Dot(this=_c(this), expression=exp.to_identifier(key.name, quoted=True))
    if dialect == "duckdb":
        value = exp.Bracket(this=_c(this), expressions=[_c(key)], offset=1)  # DuckDB: 1-based, NULL out of range
        if kind == "map" or _unguarded(key):
            return value
        return _case((exp.GTE(this=_c(key), expression=_num(1)), value))  # a negative index counts from the end
    value = _fn("TRY_ELEMENT_AT", this, key)
    if kind == "map" or _unguarded(key):
        return value
    return _case((exp.GTE(this=_c(key), expression=_num(1)), value))  # index 0 is an error in Spark


def _element(e: Element, dialect: str) -> exp.Expression:
    a = e.this
    size = _fn("LEN" if dialect == "duckdb" else "SIZE", a)
    error = _fn("ERROR" if dialect == "duckdb" else "RAISE_ERROR", _str("ELEMENT: the array has more than one element"))
    first = _subscript(Subscript(this=a, expression=_num(1), kind="array"), dialect)
    return _case((exp.GT(this=size, expression=_num(1)), error), default=first)


def _distinct(e: FlinkArrayDistinct, dialect: str) -> exp.Expression:
    if dialect != "duckdb":
        return _fn("ARRAY_DISTINCT", e.this)
    first = exp.EQ(this=_fn("LIST_POSITION", e.this, _x("__x")), expression=_x("__i"))
    return _fn("LIST_FILTER", e.this, _lambda(first, "__x", "__i"))


def _remove(e: FlinkArrayRemove, dialect: str) -> exp.Expression:
    a, x = e.this, e.expression
    if dialect != "duckdb":
        return _fn("ARRAY_REMOVE", a, x)
    keep = exp.NullSafeNEQ(this=_x("__x"), expression=_c(x))
    return _case((_is_null(x), exp.Null()), default=_fn("LIST_FILTER", a, _lambda(keep, "__x")))


def _position(e: FlinkArrayPosition, dialect: str) -> exp.Expression:
    a, x = e.this, e.expression
    if dialect != "duckdb":
        return exp.Cast(this=_fn("ARRAY_POSITION", a, x), to=DT.build("INT"))
    found = exp.Coalesce(this=_fn("LIST_POSITION", a, x), expressions=[_num(0)])
    return _case((_or(_is_null(a), _is_null(x)), exp.Null()), default=exp.Cast(this=found, to=DT.build("INT")))


def _slice(e: FlinkArraySlice, dialect: str) -> exp.Expression:
    a, start, end = e.this, e.args["start"], e.args.get("end")
    size = _fn("LEN" if dialect == "duckdb" else "SIZE", a)
    end = end if end is not None else size

    def absolute(i):  # 1-based position, negative counted from the end, 0 the first element
        return _case((exp.LT(this=_c(i), expression=_num(0)), exp.Add(this=exp.Add(this=size.copy(), expression=_c(i)),
                                                                        expression=_num(1))),
                     (exp.EQ(this=_c(i), expression=_num(0)), _num(1)), default=_c(i))

    if dialect == "duckdb":  # list_slice has Flink's meaning of 0, negative and out-of-range offsets
        body = _fn("LIST_SLICE", a, start, end)
    else:
        lo = exp.Greatest(this=absolute(start), expressions=[_num(1)])
        hi = exp.Least(this=absolute(end), expressions=[size.copy()])
        length = exp.Add(this=exp.Sub(this=hi.copy(), expression=lo.copy()), expression=_num(1))
        body = _case((exp.GT(this=lo.copy(), expression=hi.copy()), _fn("SLICE", a, _num(1), _num(0))),
                     default=_fn("SLICE", a, lo, length))
    nulls = [_is_null(x) for x in (a, start, e.args.get("end")) if x is not None]
    return _case((_or(*nulls), exp.Null()), default=body)


def _concat(e: FlinkArrayConcat, dialect: str) -> exp.Expression:
    arrays = e.expressions
    if dialect != "duckdb":
        return _fn("CONCAT", *arrays)
    joined = arrays[0].copy()
    for a in arrays[1:]:
        joined = _fn("LIST_CONCAT", joined, a)
    return _case((_or(*[_is_null(a) for a in arrays]), exp.Null()), default=joined)


def _join(e: FlinkArrayJoin, dialect: str) -> exp.Expression:
    a, sep, null = e.this, e.expression, e.args.get("null")
    if dialect != "duckdb":
        return _fn("ARRAY_JOIN", a, sep, *([null] if null is not None else []))
    if null is not None:
        a = _fn("LIST_TRANSFORM", a, _lambda(exp.Coalesce(this=_x("__x"), expressions=[_c(null)]), "__x"))
    else:  # DuckDB joins an array of only NULLs into NULL; Flink into ''
        a = _fn("LIST_FILTER", a, _lambda(exp.Not(this=_is_null(_x("__x"))), "__x"))
    return _case((_or(_is_null(e.this), _is_null(sep)), exp.Null()), default=_fn("ARRAY_TO_STRING", a, sep))


def _contains(e: FlinkArrayContains, dialect: str) -> exp.Expression:
    a, x = e.this, e.expression
    if dialect == "duckdb":  # list_position finds NULL too
        found = exp.Not(this=_is_null(_fn("LIST_POSITION", a, x)))
    else:  # Spark's ARRAY_CONTAINS is NULL when the array holds a NULL and not x
        found = _fn("EXISTS", a, _lambda(exp.NullSafeEQ(this=_x("__x"), expression=_c(x)), "__x"))
    return _case((_is_null(a), exp.Null()), default=found)


def _reverse(e: FlinkArrayReverse, dialect: str) -> exp.Expression:
    return _fn("LIST_REVERSE" if dialect == "duckdb" else "REVERSE", e.this)


_RENDER = {
    FlinkArrayContains: _contains,
    FlinkArrayReverse: _reverse,
    Subscript: _subscript,
    Element: _element,
    FlinkArrayDistinct: _distinct,
    FlinkArrayRemove: _remove,
    FlinkArrayPosition: _position,
    FlinkArraySlice: _slice,
    FlinkArrayConcat: _concat,
    FlinkArrayJoin: _join,
}


def _register() -> None:
    """Teach sqlglot's DuckDB and Spark generators these classes (only dsms's own classes are added)."""
    for gen, dialect in ((DuckDB.Generator, "duckdb"), (Spark.Generator, "spark")):
        for cls, render in _RENDER.items():
            gen.TRANSFORMS[cls] = lambda self, e, r=render, d=dialect: self.sql(r(e, d))
        gen.TRANSFORMS[MapValues] = lambda self, e: self.sql(_fn("MAP_VALUES", e.this))
        gen.TRANSFORMS[MapEntries] = lambda self, e: self.sql(_fn("MAP_ENTRIES", e.this))


_register()


def sql_subscript(self, e: Subscript) -> str:
    """The dsms (Flink) spelling of ``x[k]``."""
    return f"{self.sql(e, 'this')}[{self.sql(e, 'expression')}]"


# -- builders -----------------------------------------------------------------------------

def _row(args):
    # Flink names the fields of ROW(...) EXPR$0, EXPR$1, ...
    return exp.Struct(expressions=[exp.PropertyEQ(this=exp.to_identifier(f"EXPR${i}", quoted=True), expression=a)
                                   for i, a in enumerate(args)])


def build_map(args: list[exp.Expression]) -> exp.Expression:
    """``MAP[k1, v1, k2, v2, ...]``."""
    if not args or len(args) % 2:
        return _refuse("MAP[...] takes an even number of arguments: MAP[key1, value1, key2, value2, ...]", args)
    return exp.Map(keys=exp.Array(expressions=args[0::2]), values=exp.Array(expressions=args[1::2]))


def _cardinality(x):
    # Spark's CARDINALITY(NULL) is -1 (spark.sql.legacy.sizeOfNull); Flink's is NULL.
    return _case((_is_null(x), exp.Null()), default=Cardinality(this=_c(x)))


NESTED_FUNCTIONS: dict = {
    "ROW": _row,
    "CARDINALITY": _arity("CARDINALITY", 1, 1, "(array or map)")(_cardinality),
    "ELEMENT": _arity("ELEMENT", 1, 1, "(array)")(lambda a: Element(this=a)),
    "ARRAY_CONTAINS": _arity("ARRAY_CONTAINS", 2, 2, "(array, value)")(
        lambda a, x: FlinkArrayContains(this=a, expression=x)),
    "ARRAY_DISTINCT": _arity("ARRAY_DISTINCT", 1, 1, "(array)")(lambda a: FlinkArrayDistinct(this=a)),
    "ARRAY_POSITION": _arity("ARRAY_POSITION", 2, 2, "(array, value)")(
        lambda a, x: FlinkArrayPosition(this=a, expression=x)),
    "ARRAY_REMOVE": _arity("ARRAY_REMOVE", 2, 2, "(array, value)")(
        lambda a, x: FlinkArrayRemove(this=a, expression=x)),
    "ARRAY_REVERSE": _arity("ARRAY_REVERSE", 1, 1, "(array)")(lambda a: FlinkArrayReverse(this=a)),
    "ARRAY_SLICE": _arity("ARRAY_SLICE", 2, 3, "(array, start [, end])")(
        lambda a, s, e=None: FlinkArraySlice(this=a, start=s, end=e)),
    "ARRAY_CONCAT": lambda args: (FlinkArrayConcat(expressions=args) if args
                                  else _refuse("ARRAY_CONCAT takes one or more arrays")),
    "ARRAY_JOIN": _arity("ARRAY_JOIN", 2, 3, "(array, separator [, null_replacement])")(
        lambda a, s, n=None: FlinkArrayJoin(this=a, expression=s, null=n)),
    "MAP_KEYS": _arity("MAP_KEYS", 1, 1, "(map)")(lambda m: exp.MapKeys(this=m)),
    "MAP_VALUES": _arity("MAP_VALUES", 1, 1, "(map)")(lambda m: MapValues(this=m)),
    "MAP_ENTRIES": _arity("MAP_ENTRIES", 1, 1, "(map)")(lambda m: MapEntries(this=m)),
}


# -- types of results -------------------------------------------------------------------

def _annotate_subscript(self, e: Subscript) -> Subscript:
    base = e.this.type
    dtype = None
    if element_type(base) is not None:
        e.set("kind", "array")
        dtype = element_type(base)
    elif map_types(base) is not None:
        e.set("kind", "map")
        dtype = map_types(base)[1]
    elif base is not None and base.this == _STRUCT and isinstance(e.expression, exp.Literal):
        e.set("kind", "row")
        dtype = _field_type(base, e.expression.name)
    self._set_type(e, dtype or DT.build("UNKNOWN"))
    return e


def _annotate_dot(self, e: exp.Dot) -> exp.Dot:
    self._set_type(e, _field_type(e.this.type, e.expression.name) or DT.build("UNKNOWN"))
    return e


def _annotate_as(fn):
    def annotate(self, e):
        self._set_type(e, fn(e) or DT.build("UNKNOWN"))
        return e
    return annotate


def _map_part(i: int):
    return _annotate_as(lambda e: _array_of(map_types(e.this.type)[i]) if map_types(e.this.type) else None)


def _entries(e):
    kv = map_types(e.this.type)
    if kv is None:
        return None
    row = exp.DataType(this=_STRUCT, nested=True, expressions=[
        exp.ColumnDef(this=exp.to_identifier("key", quoted=True), kind=kv[0].copy()),
        exp.ColumnDef(this=exp.to_identifier("value", quoted=True), kind=kv[1].copy())])
    return _array_of(row)


def _map_type(e: exp.Map):
    keys, values = e.args.get("keys"), e.args.get("values")
    k, v = element_type(keys.type) if keys else None, element_type(values.type) if values else None
    if k is None or v is None:
        return None
    return exp.DataType(this=_MAP, expressions=[k.copy(), v.copy()], nested=True)


NESTED_TYPES: dict = {
    Subscript: {"annotator": _annotate_subscript},
    exp.Dot: {"annotator": _annotate_dot},
    Element: {"annotator": _annotate_as(lambda e: element_type(e.this.type))},
    FlinkArrayDistinct: {"annotator": _annotate_as(lambda e: e.this.type)},
    FlinkArrayRemove: {"annotator": _annotate_as(lambda e: e.this.type)},
    FlinkArraySlice: {"annotator": _annotate_as(lambda e: e.this.type)},
    FlinkArrayConcat: {"annotator": _annotate_as(lambda e: e.expressions[0].type)},
    FlinkArrayReverse: {"annotator": _annotate_as(lambda e: e.this.type)},
    FlinkArrayPosition: {"returns": DT.Type.INT},
    FlinkArrayContains: {"returns": DT.Type.BOOLEAN},
    Cardinality: {"returns": DT.Type.INT},
    FlinkArrayJoin: {"returns": DT.Type.VARCHAR},
    exp.MapKeys: {"annotator": _map_part(0)},
    MapValues: {"annotator": _map_part(1)},
    MapEntries: {"annotator": _annotate_as(_entries)},
    exp.Map: {"annotator": _annotate_as(_map_type)},
}
