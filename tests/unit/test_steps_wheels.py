"""The wheel set as a step kind: a `steps:` list of kind wheels renders and locks as `wheel_sets:` does; its
plan steps carry their kind and manifest entry; one rule says which steps have a lock slice."""
from __future__ import annotations

import re

from pinwheel.lock.inputs import lock_inputs_digest
from pinwheel.lock.slicing import units
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import KINDS, Effect, kind_of
from pinwheel.steps.wheels import WheelSet

from tests.support.manifests import as_steps, load_text
from tests.support.render import GOLDEN, POLICIES


def test_a_steps_list_of_wheel_sets_renders_and_locks_as_wheel_sets_do(tmp_path):
    old = load_text(POLICIES, tmp_path)
    new = load_text(as_steps(POLICIES), tmp_path)
    assert [type(s) for s in new.steps] == [WheelSet] * 3
    assert new.wheel_sets == new.steps and [s.name for s in new.steps] == [s.name for s in old.steps]
    plans = [plan_variant(new, v) for v in new.variants]
    assert render_dockerfile(plans) == (GOLDEN / "policies.Dockerfile").read_text()
    for v in old.variants:
        assert lock_inputs_digest(plan_variant(new, v)) == lock_inputs_digest(plan_variant(old, v))


def test_plan_steps_carry_their_kind_and_manifest_entry(tmp_path):
    m = load_text(POLICIES, tmp_path)
    plan = plan_variant(m, "cu129")
    assert [(s.index, s.name, s.kind) for s in plan.steps] == [(1, "core", "wheels"), (2, "gated", "wheels"),
                                                                (3, "local", "wheels")]
    assert [s.spec for s in plan.steps] == list(m.steps)
    assert all(kind_of(s) is KINDS["wheels"] for s in plan.steps)
    gated = plan.steps[1]
    assert not gated.active and kind_of(gated).effect(gated) == Effect()
    local = plan.steps[2]  # demo-skip is gated off in cu129
    assert [p.name for p in kind_of(local).effect(local).installs] == ["demo-fail", "demo-fallback"]


def test_one_rule_says_which_steps_have_a_slice_for_the_lock_and_the_dockerfile(tmp_path):
    """kind.slice_packages is asked by the lock (the slice files) and by render (the COPY of each)."""
    m = load_text(POLICIES, tmp_path)
    plan = plan_variant(m, "cu130")
    slices = [s.lock_file for s in plan.steps if kind_of(s).slice_packages(s)]
    assert slices == ["01-core.txt", "02-gated.txt"]  # 03-local holds only local wheels
    step_units, _ = units(plan)
    assert [u.file for u in step_units] == slices
    copied = re.findall(r"^COPY --from=lock /(\d\d-[a-z-]+\.txt) ", render_dockerfile([plan]), re.M)
    assert copied == slices
