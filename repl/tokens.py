"""A small, forgiving SQL tokenizer for the shell: highlighting, completion, and where a statement ends.

Unlike the engine's parser it never fails: half-typed text (an unclosed
string, a comment still open) becomes tokens too, so the shell can
colour and complete whatever is in the buffer.

Example:
    >>> [(t.kind, t.text) for t in tokenize("SELECT 'a;b' -- c") if t.kind != "space"]
    [('keyword', 'SELECT'), ('string', "'a;b'"), ('comment', '-- c')]
    >>> statement_complete("SELECT 1"), statement_complete("SELECT ';' ;"), statement_complete("\\\\d")
    (False, True, True)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Words the shell treats as keywords (coloured, completed, never taken for an alias).
KEYWORDS = frozenset("""
ALL ALLOWED ALTER ANALYZE AND AS ASC BETWEEN BY CASE CAST CHANGES CLOSE CONNECTORS CREATE CROSS CURRENT DAY DESC DESCRIBE
DESCRIPTOR DISTINCT DROP DSTREAM ELSE EMIT END ENFORCED EVERY EXISTS EXPLAIN FALSE FINAL FIRST FOLLOWING FOR FROM
FLUSH FULL FUNCTIONS GROUP HAVING HOUR IF IN INNER INSERT INTERVAL INTO IS ISTREAM JOIN KEY LAST LATENESS LEFT LIKE LIMIT
LOCAL LOGICAL LOWERED MATERIALIZED MINUTE MONTH NOT NULL NULLS OF OFFSET ON OR ORDER OUTER OVER PARTITION PAUSE
PHYSICAL PRECEDING PRIMARY PROGRESS QUERIES QUERY RANGE REPLACE RESET RESUME RIGHT ROW ROWS RSTREAM SECOND SELECT
SET SHOW SINK SINKS SLIDE STREAM STREAMS SYSTEM_TIME TABLE TABLES THEN TIME TO TRUE UNBOUNDED UNION UNNEST USING
VALUES VIEW VIEWS WATERMARK WHEN WHERE WINDOW WITH WITHOUT YEAR ZONE
""".split())

TYPES = frozenset("""
BIGINT BOOLEAN BYTES CHAR DATE DECIMAL DOUBLE FLOAT INT INTEGER SMALLINT STRING TIMESTAMP TINYINT VARBINARY VARCHAR
""".split())

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--[^\n]*|/\*(?:[\s\S]*?\*/|[\s\S]*$))
  | (?P<string>'(?:[^']|'')*(?:'|$))
  | (?P<quoted>"(?:[^"]|"")*(?:"|$)|`[^`]*(?:`|$))
  | (?P<number>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<meta>\\[A-Za-z?]*)
  | (?P<punct>[(),;.\[\]]|<>|<=|>=|!=|\|\||[-+*/%<>=])
  | (?P<other>.)
""", re.VERBOSE)


@dataclass(frozen=True)
class Token:
    kind: str  # space, comment, string, quoted, number, word, keyword, type, meta, punct, other
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)

    @property
    def upper(self) -> str:
        return self.text.upper()

    @property
    def name(self) -> str:
        """The identifier a word or quoted name spells."""
        return self.text[1:-1] if self.kind == "quoted" and len(self.text) > 1 else self.text

    @property
    def closed(self) -> bool:
        """False for a string, quoted name or block comment that is still open."""
        if self.kind == "string":
            return len(self.text) > 1 and self.text.endswith("'") and _closes(self.text, "'")
        if self.kind == "quoted":
            q = self.text[0]
            return len(self.text) > 1 and self.text.endswith("`" if q == "`" else '"') and (
                q == "`" or _closes(self.text, '"'))
        if self.kind == "comment" and self.text.startswith("/*"):
            return len(self.text) >= 4 and self.text.endswith("*/")
        return True


def _closes(text: str, quote: str) -> bool:
    """Whether a quoted literal ends with its closing quote (doubled quotes are escapes)."""
    body = text[1:]
    return (len(body) - len(body.rstrip(quote))) % 2 == 1


def tokenize(text: str) -> list[Token]:
    out = []
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        value = m.group()
        if kind == "word":
            upper = value.upper()
            kind = "keyword" if upper in KEYWORDS else "type" if upper in TYPES else "word"
        out.append(Token(kind, value, m.start()))
    return out


def significant(tokens: list[Token]) -> list[Token]:
    return [t for t in tokens if t.kind not in ("space", "comment")]


def statement_complete(text: str) -> bool:
    """Whether Enter should run the buffer: it ends with ``;``, is a backslash command, or is empty."""
    stripped = text.strip()
    if not stripped or stripped.startswith("\\") or stripped.lower().rstrip(";") in ("quit", "exit", "help"):
        return True
    tokens = tokenize(text)
    if tokens and not tokens[-1].closed:
        return False
    sig = significant(tokens)
    return bool(sig) and sig[-1].text == ";" and not _in_statement_set(sig)


def _in_statement_set(sig: list[Token]) -> bool:
    """Inside ``EXECUTE STATEMENT SET BEGIN …`` (or ``BEGIN STATEMENT SET; …``) before its END: a ``;``
    ends one INSERT of the set, not the statement."""
    words = [t.text.upper() for t in sig]
    for i in range(len(words) - 1, 0, -1):
        if words[i] == "SET" and words[i - 1] == "STATEMENT":
            return "END" not in words[i + 1:]
    return False
