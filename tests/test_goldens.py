"""The golden fixture itself: a golden file that is missing fails the test instead of being written."""

import os

import pytest
from conftest import GOLDENS


@pytest.fixture(autouse=True)
def not_when_updating(update_goldens):
    if update_goldens:
        pytest.skip("--update-goldens writes golden files: these tests check what happens without it")


def test_a_missing_golden_file_fails(golden):
    name = "explain/no_such_case.txt"
    assert not os.path.exists(os.path.join(GOLDENS, name))
    with pytest.raises(pytest.fail.Exception, match="--update-goldens"):
        golden(name, "anything\n")
    assert not os.path.exists(os.path.join(GOLDENS, name))


def test_a_golden_file_that_differs_fails(golden):
    with pytest.raises(AssertionError):
        golden("explain/group_aggregate.txt", "not the plan\n")
