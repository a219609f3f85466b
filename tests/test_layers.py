"""The architecture holds: the import-linter contracts of pyproject.toml, and ``import dsms`` stays light.

The sub-packages live in their own folders (``grammar/``, ``planner/``, ...;
pyproject.toml maps them into ``dsms``), so the checks run over a tree of
links laid out as the installed package is.
"""

import os
import subprocess
import sys

import pytest

tomllib = pytest.importorskip("tomllib")  # (Python 3.11 and later)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT_IMPORTS = os.path.join(os.path.dirname(sys.executable), "lint-imports")


def package_tree(where, probe: tuple[str, str] | None = None) -> str:
    """``where/dsms``: links to the package's modules and sub-packages (``probe``: one more module
    (sub-package, source) written into a copy of that sub-package)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        folders = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    top = os.path.join(where, "dsms")
    os.makedirs(top)
    for name in os.listdir(os.path.join(ROOT, "dsms")):
        if name.endswith(".py"):
            os.symlink(os.path.join(ROOT, "dsms", name), os.path.join(top, name))
    for package, folder in folders.items():
        parts = package.split(".")
        if len(parts) != 2:
            continue  # (sub-sub-packages sit inside their folders)
        target = os.path.join(top, parts[1])
        if probe is not None and probe[0] == parts[1]:
            os.makedirs(target)
            for name in os.listdir(os.path.join(ROOT, folder)):
                os.symlink(os.path.join(ROOT, folder, name), os.path.join(target, name))
            with open(os.path.join(target, "_probe.py"), "w") as f:
                f.write(probe[1])
        else:
            os.symlink(os.path.join(ROOT, folder), target)
    return str(where)


def lint_imports(tree: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": tree}
    return subprocess.run([LINT_IMPORTS, "--no-cache", "--no-logo", "--config", os.path.join(ROOT, "pyproject.toml")],
                          cwd=tree, env=env, capture_output=True, text=True)


def test_every_layer_imports_only_its_own_or_lower_layers(tmp_path):
    out = lint_imports(package_tree(tmp_path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 kept, 0 broken" in out.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    out = lint_imports(package_tree(tmp_path, probe=("runtime", "from dsms.engine import Engine  # noqa\n")))
    assert out.returncode != 0 and "dsms.runtime._probe -> dsms.engine" in out.stdout, out.stdout


def test_the_planner_may_not_import_duckdb(tmp_path):
    out = lint_imports(package_tree(tmp_path, probe=("planner", "import duckdb  # noqa\n")))
    assert out.returncode != 0 and "dsms.planner._probe -> duckdb" in out.stdout, out.stdout


def test_every_facade_module_has_its_layer():
    """A new module in dsms/ must be named in the facade's layer, or the contract would not look at it."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        layers = tomllib.load(f)["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {m.strip() for layer in layers for m in layer.replace("|", ":").split(":")}
    modules = {f"dsms.{name[:-3]}" for name in os.listdir(os.path.join(ROOT, "dsms"))
               if name.endswith(".py") and name != "__init__.py"}
    assert modules <= named, sorted(modules - named)


def test_import_dsms_loads_neither_the_shell_nor_spark():
    code = "import sys, dsms; print(sorted(m for m in sys.modules if m.split('.')[0] in ('prompt_toolkit', 'pyspark')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_check_that_loads_them_would_see_it():
    code = "import sys, dsms, dsms.repl.app; print('prompt_toolkit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "True", out.stderr


def test_every_error_class_is_defined_in_its_layers_errors_module():
    """One error tree: each DsmsError subclass lives in grammar/, planner/ or runtime/errors.py."""
    import importlib
    import inspect
    import pkgutil

    import dsms

    found = {}
    for package in ("dsms", "dsms.grammar", "dsms.planner", "dsms.runtime", "dsms.repl"):
        module = importlib.import_module(package)
        names = [package] + [m.name for m in pkgutil.walk_packages(module.__path__, package + ".")]
        for name in names:
            for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass):
                if issubclass(cls, dsms.DsmsError) and cls.__module__.startswith("dsms"):
                    found[cls.__qualname__] = cls.__module__
    assert {"DsmsError", "SqlError", "UnsupportedPlan", "SourceError", "EvaluationError"} <= set(found)
    elsewhere = {name: module for name, module in found.items()
                 if module not in ("dsms.grammar.errors", "dsms.planner.errors", "dsms.runtime.errors")}
    assert not elsewhere, elsewhere
