"""No function in the dsms package grows past a cyclomatic complexity of 20 (radon's measure).

The package is every layer: grammar/, planner/, runtime/, the dsms/ facade
and repl/. A function that branches that much does several jobs; split it
into functions whose names say each one. Every function is within the
limit now, so ``ALLOWED`` (a function allowed above it, with the reason it
is not split yet) is empty; keep it that way. Were an entry ever needed, it
must leave the list once its function comes down to the limit.
"""

import os

import pytest

radon_complexity = pytest.importorskip("radon.complexity")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_FOLDERS = ("grammar", "planner", "runtime", "dsms", "repl")
LIMIT = 20

# "path::function" (methods as Class.method): the reason each is still above the limit.
ALLOWED: dict[str, str] = {}


def package_functions():
    """(path::name, complexity) of every function and method in the package."""
    for top in PACKAGE_FOLDERS:
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                with open(path) as f:
                    blocks = radon_complexity.cc_visit(f.read())
                rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
                for block in blocks:
                    for fn in getattr(block, "methods", None) or ([] if hasattr(block, "methods") else [block]):
                        yield f"{rel}::{fn.fullname}", fn.complexity


def test_no_package_function_is_more_complex_than_the_limit():
    found = dict(package_functions())
    too_complex = {name: cc for name, cc in found.items() if cc > LIMIT and name not in ALLOWED}
    assert not too_complex, f"split these into smaller functions (cyclomatic complexity > {LIMIT}): {too_complex}"


def test_the_allowed_list_only_names_package_functions_still_above_the_limit():
    found = dict(package_functions())
    stale = sorted(name for name in ALLOWED if found.get(name, 0) <= LIMIT)
    assert not stale, f"below the limit now (or gone): remove from ALLOWED: {stale}"


def test_every_package_folder_is_measured():
    measured = {name.split("/", 1)[0] for name, _ in package_functions()}
    assert measured == set(PACKAGE_FOLDERS)


def test_the_measure_sees_a_complex_function():
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(LIMIT + 1))
    (block,) = radon_complexity.cc_visit(f"def f(x):\n{branches}    return -1\n")
    assert block.complexity > LIMIT
