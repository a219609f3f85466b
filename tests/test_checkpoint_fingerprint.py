"""A checkpoint is tied to its plan by a fingerprint that names operators by ``spec_kind``, not class name."""

import dataclasses

from dsms.planner import declare, plan_query
from dsms.planner.physical import join_specs, match_specs, sort_specs, specs, stream_specs  # noqa: F401 - every spec class
from dsms.planner.physical.specs import CalcSpec, OpSpec
from dsms.runtime.checkpoint import plan_fingerprint

CATALOG = declare("CREATE STREAM s (x INT, y INT) WITH (connector = 'memory')")


def _all_specs(cls=OpSpec):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_specs(sub)


def test_every_spec_names_its_own_kind_once():
    kinds = {}
    for cls in _all_specs():
        if "spec_kind" not in vars(cls):
            assert cls.__subclasses__(), f"{cls.__name__} sets no spec_kind of its own"
            continue
        assert cls.spec_kind not in kinds, f"{cls.__name__} and {kinds[cls.spec_kind]} share a spec_kind"
        kinds[cls.spec_kind] = cls.__name__
    assert len(kinds) >= 19


def _with_renamed_calc(plan):
    """``plan`` with its Calc specs of a class that is CalcSpec under another name."""
    renamed = dataclasses.make_dataclass("CalcSpecRenamed", [], bases=(CalcSpec,), frozen=True)
    ops = tuple(renamed(**{f.name: getattr(op, f.name) for f in dataclasses.fields(op)}) if isinstance(op, CalcSpec)
                else op for op in plan.ops)
    return dataclasses.replace(plan, ops=ops), renamed


def test_renaming_a_spec_class_keeps_the_fingerprint():
    plan = plan_query("SELECT x + 1 AS z FROM s WHERE y > 0", CATALOG).physical
    renamed_plan, renamed = _with_renamed_calc(plan)
    assert any(type(op) is renamed for op in renamed_plan.ops)
    assert plan_fingerprint(renamed_plan) == plan_fingerprint(plan)


def test_a_changed_plan_or_kind_changes_the_fingerprint():
    plan = plan_query("SELECT x + 1 AS z FROM s WHERE y > 0", CATALOG).physical
    other = plan_query("SELECT x + 1 AS z FROM s WHERE y > 1", CATALOG).physical
    assert plan_fingerprint(other) != plan_fingerprint(plan)
    renamed_plan, renamed = _with_renamed_calc(plan)
    renamed.spec_kind = "another_kind"
    assert plan_fingerprint(renamed_plan) != plan_fingerprint(plan)
