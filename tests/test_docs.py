"""Every docstring example in the package runs (the examples are documentation that must stay true)."""

import doctest
import importlib
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
