"""MATCH_RECOGNIZE syntax: the clause after a FROM relation, and its PATTERN.

sqlglot parses ``MATCH_RECOGNIZE (...)`` into ``exp.MatchRecognize`` but
keeps the pattern as raw text and does not know Flink's ``WITHIN INTERVAL``.
:func:`parse_match_recognize` is the dialect's parser for the clause (it
adds ``within``), and :func:`parse_pattern` turns the pattern text into
:class:`PatternTerm` items: a pattern variable with a quantifier.

Example:
    >>> [t.describe() for t in parse_pattern("A B+ C*? D{2,3}")]
    ['A', 'B+', 'C*?', 'D{2,3}']
    >>> parse_pattern("A B{2}")[1].min, parse_pattern("A B{2}")[1].max
    (2, 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import TokenType


@dataclass(frozen=True)
class PatternTerm:
    """One pattern variable and how many consecutive rows it takes (``max`` None: no bound)."""

    var: str
    min: int
    max: int | None
    greedy: bool = True

    def describe(self) -> str:
        if (self.min, self.max) == (1, 1):
            q = ""
        elif (self.min, self.max) == (0, None):
            q = "*"
        elif (self.min, self.max) == (1, None):
            q = "+"
        elif (self.min, self.max) == (0, 1):
            q = "?"
        elif self.min == self.max:
            q = f"{{{self.min}}}"
        else:
            q = f"{{{self.min},{'' if self.max is None else self.max}}}"
        return self.var + q + ("" if self.greedy else "?")


class PatternError(ValueError):
    """A pattern dsms cannot read; the message says what to write instead."""


_TOKEN = re.compile(r"\s*(?:(?P<var>[A-Za-z_][A-Za-z0-9_]*|`[^`]+`|\"[^\"]+\")"
                    r"(?P<q>\*|\+|\?|\{\s*\d*\s*(?:,\s*\d*\s*)?\})?(?P<lazy>\?)?)")


def parse_pattern(text: str) -> list[PatternTerm]:
    """The terms of a pattern: variables in sequence, each with ``*``, ``+``, ``?``, ``{n}``, ``{n,}``,
    ``{n,m}`` or ``{,m}``, and a trailing ``?`` for a reluctant quantifier.

    Raises:
        PatternError: groups, alternation, PERMUTE, anchors and exclusions (which Flink does not support
            either), or a malformed quantifier.
    """
    terms: list[PatternTerm] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            rest = text[pos:].strip()
            what = {"(": "pattern groups", "|": "alternation", "^": "anchors", "$": "anchors",
                    "{": "exclusions"}.get(rest[:1], f"'{rest[:12]}'")
            raise PatternError(f"{what} in PATTERN are not supported (as in Flink); write a sequence of pattern "
                               "variables with quantifiers, e.g. PATTERN (A B+ C? D{2,3})")
        var = m.group("var").strip('`"')
        if var.upper() == "PERMUTE":
            raise PatternError("PERMUTE in PATTERN is not supported (as in Flink)")
        lo, hi = _quantifier(m.group("q"))
        lazy = m.group("lazy") is not None
        if lazy and (lo, hi) == (0, 1):
            raise PatternError(f"the reluctant optional quantifier {var}?? is not supported (as in Flink); "
                               f"use {var}?")
        terms.append(PatternTerm(var, lo, hi, not lazy))
        pos = m.end()
    if not terms:
        raise PatternError("PATTERN needs at least one pattern variable")
    return terms


def _quantifier(q: str | None) -> tuple[int, int | None]:
    if q is None:
        return 1, 1
    if q in ("*", "+", "?"):
        return {"*": (0, None), "+": (1, None), "?": (0, 1)}[q]
    body = q[1:-1].replace(" ", "")
    if "," not in body:
        if not body or int(body) < 1:
            raise PatternError(f"{{n}} needs n > 0, not {q}")
        return int(body), int(body)
    lo_s, hi_s = body.split(",")
    lo = int(lo_s) if lo_s else 0
    hi = int(hi_s) if hi_s else None
    if hi is not None and (hi < 1 or hi < lo):
        raise PatternError(f"the quantifier {q} needs 0 <= n <= m and m > 0")
    return lo, hi


def parse_match_recognize(self) -> exp.MatchRecognize | None:
    """The dialect's parser for ``MATCH_RECOGNIZE (...) [AS alias]`` (``self`` is the sqlglot parser).

    As sqlglot's own, plus ``WITHIN INTERVAL ...`` after the PATTERN (Flink's time constraint).
    """
    if not self._match(TokenType.MATCH_RECOGNIZE):
        return None
    start_token = self._prev
    self._match_l_paren()
    partition = self._parse_partition_by()
    order = self._parse_order()
    measures = self._parse_csv(self._parse_match_recognize_measure) if self._match_text_seq("MEASURES") else None
    rows = None
    if self._match_text_seq("ONE", "ROW", "PER", "MATCH"):
        rows = exp.var("ONE ROW PER MATCH")
    elif self._match_text_seq("ALL", "ROWS", "PER", "MATCH"):
        rows = exp.var("ALL ROWS PER MATCH")
    after = None
    if self._match_text_seq("AFTER", "MATCH", "SKIP"):
        if self._match_text_seq("PAST", "LAST", "ROW"):
            after = exp.var("PAST LAST ROW")
        elif self._match_text_seq("TO", "NEXT", "ROW"):
            after = exp.var("TO NEXT ROW")
        elif self._match_text_seq("TO", "FIRST") or self._match_text_seq("TO", "LAST"):
            direction = self._prev.text.upper()
            var = self._advance_any()
            if not var:
                self.raise_error(f"expected a pattern variable after AFTER MATCH SKIP TO {direction}")
            after = exp.var(f"TO {direction} {var.text}")
        else:
            self.raise_error("expected PAST LAST ROW, TO NEXT ROW, TO FIRST var or TO LAST var after AFTER MATCH SKIP")
    pattern = None
    if self._match_text_seq("PATTERN"):
        self._match_l_paren()
        depth, first, last = 1, self._curr, None
        while self._curr and depth > 0:
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(self._curr.token_type, 0)
            if depth > 0:
                last = self._curr
            self._advance()
        if depth > 0 or last is None:
            self.raise_error("expected a pattern and ) after PATTERN (")
        pattern = exp.var(self._find_sql(first, last))
    within = self._parse_interval() if self._match_text_seq("WITHIN") else None
    define = self._parse_csv(self._parse_name_as_expression) if self._match_text_seq("DEFINE") else None
    self._match_r_paren()
    node = self.expression(exp.MatchRecognize(partition_by=partition, order=order, measures=measures, rows=rows,
                                              after=after, pattern=pattern, define=define,
                                              alias=self._parse_table_alias()))
    node.set("within", within)
    node.meta["start"], node.meta["end"] = start_token.start, start_token.end
    return node
