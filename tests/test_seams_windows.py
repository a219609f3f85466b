"""Design guards: window kinds are asked, never named; stateful SQL is built as trees, never joined strings.

A window kind is one class (planner/windows); code elsewhere that tests a
kind by its name would have to change for every new kind. The statements
of the stateful operators are sqlglot trees rendered per dialect; an
f-string that writes SQL would bypass that.
"""

from __future__ import annotations

import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("TUMBLE", "HOP", "SESSION", "CUMULATE")
SQL = re.compile(r"\b(SELECT|FROM|WHERE|JOIN|CREATE|INSERT|DELETE|UPDATE|CASE|CAST|GROUP BY|ORDER BY|UNION|"
                 r"IS NOT DISTINCT|OVER|AND|AS)\b")


def _python_files(*folders: str):
    for folder in folders:
        for base, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in names:
                if name.endswith(".py"):
                    yield os.path.join(base, name)


def test_window_kinds_are_not_tested_by_name_outside_their_classes():
    found = []
    for path in _python_files("planner", "runtime", "dsms", "repl"):
        if os.sep + "windows" + os.sep in path:
            continue  # the kinds themselves
        tree = ast.parse(open(path).read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in KINDS:
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.value!r}")
    assert not found, "window kinds named outside planner/windows (ask the kind's class instead):\n" + \
        "\n".join(found)


def test_stateful_sql_is_not_written_in_f_strings():
    modules = [p for p in _python_files(os.path.join("planner", "lower"), os.path.join("planner", "physical"))
               if os.path.basename(p).startswith("sqlgen_") or os.path.basename(p) in ("plan_window.py",
                                                                                       "sqltree.py")]
    assert len(modules) >= 10
    found = []
    for path in modules:
        source = open(path).read()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                if SQL.search(text):
                    found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {ast.get_source_segment(source, node)}")
    assert not found, "SQL joined from strings (build a sqlglot tree, planner/lower/sqltree.py):\n" + "\n".join(found)
