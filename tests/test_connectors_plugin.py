"""A connector from another package: installed into this venv, found through the ``dsms.connectors`` entry point.

The package is built here (a descriptor module and a runtime module, as
docs/development.md's recipe says), installed without network, used from
a ``dsms run`` script in a fresh process, and uninstalled afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

DSMS = os.path.join(os.path.dirname(sys.executable), "dsms")
DIST = "dsms-tiny-connector"

PYPROJECT = """
[build-system]
requires = ["setuptools>=70.1"]
build-backend = "setuptools.build_meta"

[project]
name = "dsms-tiny-connector"
version = "0.1.0"

[project.entry-points."dsms.connectors"]
tiny = "tiny_connector:DESCRIPTOR"

[tool.setuptools]
py-modules = ["tiny_connector", "tiny_connector_runtime"]
"""

DESCRIPTOR = '''
from dsms.planner.connectors import ConnectorDescriptor, Option

DESCRIPTOR = ConnectorDescriptor(
    name="tiny", help="the numbers 0..count-1; a sink writing one number a line",
    module="tiny_connector_runtime", source=True, sink=True,
    options=(Option("count", "int", required=True, help="how many numbers", scope="source"),
             Option("path", required=True, help="the output file", scope="sink")),
    bounded=lambda options: True, bounded_note="yes", accepts_changes=False,
)
'''

RUNTIME = '''
import pyarrow as pa


class Numbers:
    def __init__(self, req):
        self.count, self.done, self.name = int(req.options["count"]), 0, req.schema.names[0]

    def read(self):
        if self.done >= self.count:
            return None
        table = pa.table({self.name: pa.array(range(self.done, self.count), pa.int64())})
        self.done = self.count
        return table

    @property
    def position(self):
        return {"done": self.done}

    def seek(self, position):
        self.done = position["done"]

    @property
    def skipped(self):
        return 0

    def close(self):
        pass


class Lines:
    def __init__(self, req):
        self.file, self.column, self.rows = open(req.path, "w"), req.schema.names[0], 0

    def write(self, table):
        self.file.write("".join(f"{v}\\n" for v in table.column(self.column).to_pylist()))
        self.rows += table.num_rows

    def flush(self):
        self.file.flush()

    @property
    def position(self):
        return {"rows": self.rows}

    def truncate(self, position):
        raise OSError("not restartable")

    def close(self):
        self.file.close()


def open_source(req, ctx):
    return Numbers(req)


def open_sink(req):
    return Lines(req)
'''


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def tiny_connector(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "tiny_connector.py").write_text(DESCRIPTOR)
    (pkg / "tiny_connector_runtime.py").write_text(RUNTIME)
    done = _pip("install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", str(pkg))
    assert done.returncode == 0, done.stderr
    try:
        yield
    finally:
        _pip("uninstall", "--yes", "--quiet", DIST)


def test_a_connector_package_registers_through_the_entry_point(tiny_connector, tmp_path):
    script = tmp_path / "tiny.sql"
    script.write_text(textwrap.dedent("""
        SHOW CONNECTORS;
        CREATE STREAM numbers (n BIGINT) WITH (connector = 'tiny', count = '5');
        CREATE SINK tens WITH (connector = 'tiny', path = 'tens.txt') AS SELECT n * 10 AS n FROM numbers WHERE n > 1;
    """))
    out = subprocess.run([DSMS, "run", str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "the numbers 0..count-1" in out.stdout  # SHOW CONNECTORS
    assert (tmp_path / "tens.txt").read_text().split() == ["20", "30", "40"]

    # Its options are checked like any connector's, from its descriptor.
    script.write_text("CREATE STREAM numbers (n BIGINT) WITH (connector = 'tiny', cont = '5');")
    out = subprocess.run([DSMS, "run", str(script)], capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert "unknown option 'cont' for connector 'tiny'" in out.stderr and "did you mean 'count'" in out.stderr
