"""The code passes the project's lint rules (pyproject.toml [tool.ruff]): unused names, imports in order, bugbears."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_finds_nothing():
    ruff = os.path.join(os.path.dirname(sys.executable), "ruff")
    out = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
