"""Every docstring example in the package runs, and every example in docs/ (documentation that must stay true)."""

import doctest
import importlib
import os
import pkgutil

import pytest

# The sub-packages live in their own folders, so each is walked from its own path.
PACKAGES = ["dsms", "dsms.grammar", "dsms.planner", "dsms.runtime", "dsms.repl"]
MODULES = sorted({p for p in PACKAGES} | {
    m.name for p in PACKAGES for m in pkgutil.walk_packages(importlib.import_module(p).__path__, p + ".")})


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(os.path.join("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
               if name.endswith(".md") and ">>>" in open(os.path.join(ROOT, "docs", name)).read())


def test_the_user_guide_has_tested_examples():
    assert {"docs/concepts.md", "docs/python.md", "docs/embedding.md", "docs/standing.md", "docs/state.md"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_examples_in_docs(page, tmp_path, monkeypatch):
    """The ``>>>`` examples of a docs page, run in order in a fresh folder (as doctests)."""
    monkeypatch.chdir(tmp_path)
    result = doctest.testfile(os.path.join(ROOT, page), module_relative=False, globs={"__name__": "__docs__"},
                              optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} example(s) failed in {page}"
    assert result.attempted > 0
