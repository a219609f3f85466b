"""Small builders of sqlglot expressions, shared by the Flink function modules.

Arithmetic helpers wrap their operands in parentheses so the rendered SQL
keeps the intended precedence in every dialect; :class:`InvalidCall`
stands for a call dsms refuses, with the reason the planner reports.
"""

from __future__ import annotations

from sqlglot import exp

L = exp.Literal
DT = exp.DataType


class InvalidCall(exp.Expression, exp.Func):
    """A function call dsms refuses; ``this`` is the reason (a string literal)."""

    arg_types = {"this": True, "expressions": False}
    is_var_len_args = True


def _refuse(reason: str, args=()) -> InvalidCall:
    return InvalidCall(this=L.string(reason), expressions=list(args))


# -- small builders --------------------------------------------------------------

def _num(v: int) -> exp.Expression:
    return L.number(v)


def _str(v: str) -> exp.Expression:
    return L.string(v)


def _cast(e: exp.Expression, to: str) -> exp.Cast:
    return exp.Cast(this=e, to=DT.build(to))


def _case(*whens: tuple[exp.Expression, exp.Expression], default: exp.Expression | None = None) -> exp.Case:
    c = exp.Case()
    for cond, value in whens:
        c = c.when(cond, value, copy=False)
    return c.else_(default, copy=False) if default is not None else c


def _or(*conds: exp.Expression) -> exp.Expression:
    return exp.or_(*conds, copy=False)


def _p(e: exp.Expression) -> exp.Expression:
    return e if isinstance(e, (exp.Column, exp.Literal, exp.Paren, exp.Func)) else exp.Paren(this=e)


def _c(e: exp.Expression) -> exp.Expression:
    return e.copy()


def _lt(a, b): return exp.LT(this=_p(_c(a)), expression=_p(_c(b)))
def _le(a, b): return exp.LTE(this=_p(_c(a)), expression=_p(_c(b)))
def _eq(a, b): return exp.EQ(this=_p(_c(a)), expression=_p(_c(b)))
def _add(a, b): return exp.Add(this=_p(_c(a)), expression=_p(_c(b)))
def _sub(a, b): return exp.Sub(this=_p(_c(a)), expression=_p(_c(b)))
def _mul(a, b): return exp.Mul(this=_p(_c(a)), expression=_p(_c(b)))
def _mod(a, b): return exp.Mod(this=_p(_c(a)), expression=_p(_c(b)))
def _div(a, b): return exp.IntDiv(this=_p(_c(a)), expression=_p(_c(b)))  # truncates toward zero
def _is_null(a): return exp.Is(this=_p(_c(a)), expression=exp.Null())
def _concat(*parts: exp.Expression) -> exp.Expression:
    return exp.Concat(expressions=[_c(p) for p in parts], safe=True, coalesce=False)


def _floor_mod(a: exp.Expression, n: int) -> exp.Expression:
    return _mod(_add(_mod(a, _num(n)), _num(n)), _num(n))


def _int_literal(e: exp.Expression) -> int | None:
    if isinstance(e, exp.Neg):
        v = _int_literal(e.this)
        return -v if v is not None else None
    if isinstance(e, exp.Paren):
        return _int_literal(e.this)
    if isinstance(e, exp.Literal) and e.is_int:
        return int(e.name)
    return None


def _str_literal(e: exp.Expression) -> str | None:
    return e.name if isinstance(e, exp.Literal) and e.is_string else None


def _arity(name: str, lo: int, hi: int, usage: str):
    """Decorator: check the argument count before building."""
    def wrap(build):
        def builder(args):
            if not lo <= len(args) <= hi:
                return _refuse(f"{name} takes {usage}", args)
            return build(*args)
        return builder
    return wrap
