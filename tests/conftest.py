import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", help="rewrite golden files from current output")


@pytest.fixture
def update_goldens(request):
    return request.config.getoption("--update-goldens")
