"""Connectors are descriptors in a registry: DDL checks, SHOW CONNECTORS, routing and the docs come from them."""

from __future__ import annotations

import os
import pkgutil
import re
from importlib.metadata import entry_points

import pytest

import dsms
from dsms.planner.connectors import GROUP, ConnectorDescriptor, connectors, find
from dsms.planner.connectors.reference import COMMAND, with_reference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONNECTORS_DIR = os.path.join(ROOT, "planner", "connectors")
NOT_DESCRIPTORS = {"descriptor", "registry", "reference"}


def test_every_builtin_descriptor_module_is_an_entry_point():
    modules = {m.name for m in pkgutil.iter_modules([CONNECTORS_DIR])} - NOT_DESCRIPTORS
    registered = {ep.value.split(":")[0].rsplit(".", 1)[1] for ep in entry_points(group=GROUP)
                  if ep.value.startswith("dsms.planner.connectors.")}
    assert modules == registered, ("pyproject.toml's [project.entry-points.\"dsms.connectors\"] and the installed "
                                   "metadata disagree with planner/connectors/: add the entry point and re-run "
                                   "`make setup` (or .venv/bin/pip install -e .)")
    assert {d.name for d in connectors()} >= {"file", "memory", "datagen", "print", "blackhole"}


def test_names_and_aliases_find_one_descriptor():
    assert find("filesystem") is find("file") is find("FILE")
    assert isinstance(find("datagen"), ConnectorDescriptor)
    assert find("kafkaa") is None


def test_filesystem_is_the_file_connector(tmp_path):
    (tmp_path / "in.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    engine = dsms.Engine(base_dir=str(tmp_path))
    engine.execute("CREATE STREAM s (a BIGINT) WITH (connector = 'filesystem', path = 'in.jsonl', format = 'json')")
    assert engine.catalog.get("s").connector == "file" and engine.catalog.get("s").bounded
    q = engine.query("SELECT a FROM s")
    engine.run_until_idle()
    assert sorted(q.snapshot().column("a").to_pylist()) == [1, 2]


@pytest.mark.parametrize("ddl, message, help_text", [
    ("CREATE STREAM s (a INT) WITH (connector = 'fil', path = 'x', format = 'json')",
     "unknown connector 'fil'", "did you mean 'file'"),
    ("CREATE STREAM s (a INT) WITH (connector = 'datagen', 'rows-per-secnd' = '5')",
     "unknown option 'rows-per-secnd' for connector 'datagen'", "did you mean 'rows-per-second'"),
    ("CREATE STREAM s (a INT) WITH (connector = 'file', format = 'json')",
     "the file connector needs 'path'", "add 'path'"),
    ("CREATE STREAM s (a INT) WITH (connector = 'datagen', 'number-of-rows' = 'ten')",
     "option 'number-of-rows' needs a whole number, not 'ten'", None),
    ("CREATE STREAM s (a INT) WITH (connector = 'file', path = 'x', format = 'avro')",
     "invalid value 'avro' for option 'format': the file connector reads json, csv, parquet, raw, "
     "debezium-json", None),
    ("CREATE STREAM s (a INT) WITH (connector = 'file', path = 'x', format = 'json', watch = 'yes')",
     "option 'watch' is 'true' or 'false', not 'yes'", None),
    ("CREATE STREAM s (a INT) WITH (connector = 'print', path = 'x')",
     "unknown option 'path' for connector 'print'", None),
    ("CREATE SINK k WITH (connector = 'datagen') AS SELECT 1 AS x",
     "connector 'datagen' cannot be a sink (it is a source)", "'blackhole'"),
    ("CREATE SINK k WITH (connector = 'file', path = 'o.jsonl', format = 'json', watch = 'true') AS SELECT 1 AS x",
     "option 'watch' of connector 'file' is for sources only", None),
    ("CREATE STREAM s (a INT) WITH (connector = 'datagen', 'fields.b.kind' = 'sequence')",
     "option 'fields.b.kind' names no column of this source", None),
    ("CREATE STREAM s (a INT) WITH (connector = 'datagen', 'fields.a.kind' = 'sequence', 'fields.a.start' = '1')",
     "the sequence of 'a' needs 'fields.a.end'", None),
    ("CREATE STREAM s (a TINYINT) WITH (connector = 'datagen', 'fields.a.max' = '300')",
     "the range of 'a' does not fit TINYINT", None),
    ("CREATE STREAM s (a DATE) WITH (connector = 'datagen')",
     "datagen cannot generate column 'a' of type DATE", "it generates numbers"),
    ("CREATE TABLE t (a INT, PRIMARY KEY (a) NOT ENFORCED) WITH (connector = 'datagen')",
     "connector 'datagen' reads append-only streams, not tables with a PRIMARY KEY", None),
])
def test_ddl_is_checked_against_the_descriptor(ddl, message, help_text):
    engine = dsms.Engine()
    with pytest.raises(dsms.SqlError) as info:
        engine.execute(ddl)
    assert info.value.diagnostic.message == message
    if help_text is not None:
        assert help_text in (info.value.diagnostic.help or "")


def test_option_keys_may_be_quoted_or_not():
    for key in ("fields.a.kind", "'fields.a.kind'"):
        engine = dsms.Engine()
        engine.execute(f"CREATE STREAM s (a INT) WITH (connector = 'datagen', 'number-of-rows' = '3', "
                       f"{key} = 'sequence', fields.a.start = '5', 'fields.a.end' = '9')")
        q = engine.query("SELECT a FROM s")
        engine.run_until_idle()
        assert q.snapshot().column("a").to_pylist() == [5, 6, 7]


def test_an_updating_result_needs_a_sink_that_takes_changes():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM s (k INT, v INT) WITH (connector = 'memory')")
    with pytest.raises(dsms.SqlError, match="uses format 'json', which can only hold an append-only result") as info:
        engine.execute("CREATE SINK k WITH (connector = 'file', path = 'o.jsonl', format = 'json') AS "
                       "SELECT k, SUM(v) AS t FROM s GROUP BY k")
    assert "'changelog-json'" in info.value.diagnostic.help
    engine.execute("CREATE SINK p WITH (connector = 'blackhole') AS SELECT k, SUM(v) AS t FROM s GROUP BY k")


def test_show_connectors_lists_the_descriptors():
    rows = {r["name"]: r for r in dsms.Engine().execute("SHOW CONNECTORS").table.to_pylist()}
    assert rows["file (filesystem)"] == {
        "name": "file (filesystem)", "kind": "source, sink", "bounded": "unless watch = 'true'",
        "formats": "json, csv, parquet, raw, debezium-json, changelog-json", "routes": "all",
        "description": find("file").help}
    assert rows["datagen"]["kind"] == "source" and rows["datagen"]["routes"] == "runtime"
    assert rows["print"]["kind"] == "sink" and rows["print"]["routes"] == "all"
    assert {d.name for d in connectors()} == {n.split(" ")[0] for n in rows}


def test_a_batch_route_refuses_a_source_it_cannot_read_naming_the_route_that_can():
    engine = dsms.Engine()
    engine.execute("CREATE STREAM g (a INT) WITH (connector = 'datagen', 'number-of-rows' = '3')")
    engine.execute("SET 'engine' = 'duckdb'")
    with pytest.raises(dsms.DsmsError, match=r"cannot read 'g' \(connector 'datagen'\): the batch routes read files "
                                             "only; the runtime can"):
        engine.query("SELECT a FROM g")
    engine.execute("SET 'engine' = 'auto'")
    assert "route: runtime" in engine.execute("EXPLAIN SELECT a FROM g").message


def test_the_docs_reference_is_generated_from_the_descriptors():
    path = os.path.join(ROOT, "docs", "connectors.md")
    page = open(path, encoding="utf-8").read()
    assert page == with_reference(page), f"docs/connectors.md is out of date: run `{COMMAND}`"
    for d in connectors():
        assert re.search(rf"^### `{re.escape(d.name)}`", page, re.M), d.name
