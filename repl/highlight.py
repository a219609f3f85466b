"""Syntax colours for the shell: the shell's own tokenizer mapped to prompt-toolkit styles.

The same tokenizer drives completion, so what is coloured as a keyword is
what completion treats as one (dsms words such as WATERMARK, EMIT and
TUMBLE included).
"""

from __future__ import annotations

from prompt_toolkit.lexers import Lexer
from prompt_toolkit.styles import Style

from .completion import FUNCTIONS
from .tokens import tokenize

_FUNCTIONS = frozenset(FUNCTIONS)
_CLASSES = {"keyword": "class:sql.keyword", "type": "class:sql.type", "string": "class:sql.string",
            "quoted": "class:sql.name", "number": "class:sql.number", "comment": "class:sql.comment",
            "meta": "class:sql.meta"}

STYLE = Style.from_dict({
    "sql.keyword": "ansiblue bold",
    "sql.type": "ansicyan",
    "sql.function": "ansimagenta",
    "sql.string": "ansigreen",
    "sql.number": "ansiyellow",
    "sql.comment": "ansibrightblack italic",
    "sql.meta": "ansicyan bold",
    "prompt": "bold",
    "continuation": "ansibrightblack",
    "status": "reverse",
    "error": "ansired",
    "warning": "ansiyellow",
})


def highlight(text: str) -> list[tuple[str, str]]:
    """``text`` as (style, text) fragments."""
    out = []
    for t in tokenize(text):
        style = _CLASSES.get(t.kind, "")
        if t.kind == "word" and t.upper in _FUNCTIONS:
            style = "class:sql.function"
        out.append((style, t.text))
    return out


class SqlLexer(Lexer):
    """Colours the whole buffer at once, so a string or comment that spans lines stays one token."""

    def lex_document(self, document):
        lines: list[list[tuple[str, str]]] = [[]]
        for style, text in highlight(document.text):
            for i, part in enumerate(text.split("\n")):
                if i:
                    lines.append([])
                if part:
                    lines[-1].append((style, part))
        return lambda n: lines[n] if n < len(lines) else []
