"""SQL text -> statements: the lark statement grammar and the sqlglot dsms dialect."""

from .diagnostics import Diagnostic, Span, render
from .errors import DsmsError, SqlError, SqlSyntaxError
from .parse import parse_script, parse_statement
from .statements import *  # noqa: F401,F403  (the statement dataclasses are this layer's output)
