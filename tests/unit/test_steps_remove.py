"""The remove kind: distributions taken out of the base's environment, with no lock slice; its manifest errors
located; a gated remove step on a fresh venv allowed where its gate is off. (The rendered text of remove steps
is in test_base_environment_render.py's whole Dockerfiles.)"""
from __future__ import annotations

import pytest

from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfiles
from pinwheel.steps import kind_of
from pinwheel.steps.remove import RemovedPackage, RemoveStep

from tests.support.base_environment import MANIFEST, VENV_ONLY, edited, plans
from tests.support.manifests import assert_refused_at, load_text


def test_manifest_strings_cannot_inject_shell_through_a_remove_step(tmp_path):
    text = render_dockerfiles(plans(MANIFEST, tmp_path))["Dockerfile"]
    line = next(l for l in text.splitlines() if "$(replaced)" in l)
    assert line == "#   old-kernels: it's $(replaced) `later`"


def test_a_remove_step_removes_its_packages_and_has_no_lock_slice(tmp_path):
    m = load_text(MANIFEST, tmp_path)
    assert [s.kind for s in m.steps] == ["remove", "wheels", "remove"]
    assert m.steps[0] == RemoveStep("drop-te", "the base's transformer-engine is replaced by our own triplet", None, (
        RemovedPackage("transformer-engine", "built against another torch", 36),
        RemovedPackage("flash-attn-4", "its kernels clash with flashinfer's", 37)), 32)
    for variant, gated_on in (("sys", True), ("top", False), ("seen", True)):
        plan = plan_variant(m, variant)
        first, _, gated = plan.steps
        assert first.packages == () and kind_of(first).slice_packages(first) == ()
        assert kind_of(first).effect(first).removes == ("transformer-engine", "flash-attn-4")
        assert kind_of(gated).effect(gated).removes == (("old-kernels",) if gated_on else ())
        assert not kind_of(first).effect(first).installs


def test_a_gated_remove_step_is_allowed_where_its_gate_is_off_on_a_fresh_venv(tmp_path):
    # cuda-only is gated on CUDA 13; a CUDA 12 variant on a fresh venv never runs it
    text = VENV_ONLY.replace("  - name: drop-te\n    kind: remove\n    why: \"the base's transformer-engine is replaced by our own triplet\"\n    packages:\n      - {name: Transformer_Engine, why: \"built against another torch\"}\n      - {name: flash-attn-4, why: \"its kernels clash with flashinfer's\"}\n", "")
    text = text.replace('  seen:\n    cuda: "13.0"', '  seen:\n    cuda: "12.9"')
    m = load_text(text, tmp_path)
    assert [s.kind for s in m.steps] == ["wheels", "remove"]


# (id, manifest text, expected line, expected key, expected message fragment)
CASES = [
    ("remove-name-not-pep508", edited("name: flash-attn-4,", 'name: "flash attn",'), 37, "steps[0].packages[1].name",
     "'flash attn' is not a package name (PEP 508"),
    ("remove-name-shell", edited("name: flash-attn-4,", 'name: "x;id",'), 37, "steps[0].packages[1].name",
     "is not a package name"),
    ("remove-name-trailing-dash", edited("name: flash-attn-4,", 'name: "flash-",'), 37, "steps[0].packages[1].name",
     "is not a package name"),
    ("remove-missing-why", edited(', why: "built against another torch"', ""), 36, "steps[0].packages[0].why",
     "required key is missing"),
    ("remove-empty-why", edited('why: "built against another torch"', 'why: ""'), 36, "steps[0].packages[0].why",
     "must not be empty"),
    ("remove-unknown-key", edited('why: "built against another torch"}', 'why: "x", version: "1.0"}'), 36,
     "steps[0].packages[0].version", "unknown key"),
    ("remove-not-mapping",
     edited('- {name: flash-attn-4, why: "its kernels clash with flashinfer\'s"}', "- flash-attn-4"),
     37, "steps[0].packages[1]", "must be a mapping"),
    ("remove-twice-in-step", edited("name: flash-attn-4,", "name: transformer-engine,"), 37,
     "steps[0].packages[1].name", "transformer-engine is removed twice (first on line 36)"),
    ("remove-twice-canonical", edited("name: flash-attn-4,", "name: transformer.ENGINE,"), 37,
     "steps[0].packages[1].name", "transformer-engine is removed twice (first on line 36)"),
    ("remove-twice-across-steps", edited('name: "old-kernels"', 'name: "Flash_Attn_4"'), 49,
     "steps[2].packages[0].name", "flash-attn-4 is removed twice (first on line 37)"),
    ("remove-empty-list", edited('    packages:\n      - {name: "old-kernels", why: "it\'s $(replaced) `later`"}\n',
                              "    packages: []\n"), 48, "steps[2].packages", "needs at least 1 item"),
    ("remove-step-missing-why", edited('    why: "CUDA 13 only"\n', ""), 44, "steps[2].why", "required key is missing"),
    ("remove-on-a-fresh-venv", VENV_ONLY, 30, "steps[0]",
     "variant seen installs into a fresh venv, which holds nothing to remove: remove steps need environment: base, "
     "or a venv with system_site_packages: true"),
    ("remove-breaks-itself", edited('why: "built against another torch"}',
                                    'why: "x", breaks: [{name: transformer_engine, why: "y"}]}'), 36,
     "steps[0].packages[0].breaks[0].name", "is named twice, or is the removed package"),
    ("remove-breaks-missing-why", edited('why: "built against another torch"}',
                                         'why: "x", breaks: [{name: te-user}]}'), 36,
     "steps[0].packages[0].breaks[0].why", "required key is missing"),
    ("remove-breaks-empty", edited('why: "built against another torch"}', 'why: "x", breaks: []}'), 36,
     "steps[0].packages[0].breaks", "needs at least 1 item"),
    ("remove-in-wheel-sets", MANIFEST.replace("steps:\n", "wheel_sets:\n"), 33, "wheel_sets[0].kind", "unknown key"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_remove_steps_are_refused_with_file_line_and_key(case, tmp_path):
    _, text, line, key, fragment = case
    assert_refused_at(text, tmp_path, line, key, fragment)


def test_breaks_names_the_packages_a_removal_leaves_unmet(tmp_path):
    text = edited('- {name: Transformer_Engine, why: "built against another torch"}',
                  '- {name: Transformer_Engine, why: "built against another torch",\n'
                  '         breaks: [{name: TE_User, why: "its TE path is unused here"}]}')
    m = load_text(text, tmp_path)
    (te, _fa4) = m.steps[0].packages
    assert [(b.name, b.why) for b in te.breaks] == [("te-user", "its TE path is unused here")]


GIT_THEN_REMOVE = """\
  - name: tool
    kind: git
    why: "installed for its requirements only"
    package: "pwtool==1.0"
    url: "https://git.example.org/pwtool.git"
    rev: "0123456789abcdef0123456789abcdef01234567"
  - name: drop-tool
    kind: remove
    why: "the tool itself goes again"
    packages:
      - {name: pwtool, why: "only its requirements stay"}
"""


def test_no_after_the_last_step_invariant_for_what_a_later_step_removes(tmp_path):
    text = MANIFEST.replace("steps:\n", "steps:\n" + GIT_THEN_REMOVE, 1)
    dockerfile = render_dockerfiles(plans(text, tmp_path)[:1])["Dockerfile"]
    assert "RUN --mount=type=bind,from=git-tool" in dockerfile  # it is still installed by its step
    assert "Invariant of git step tool" not in dockerfile
    kept = render_dockerfiles(plans(MANIFEST.replace("steps:\n", "steps:\n" + GIT_THEN_REMOVE.split("  - name: drop")[0], 1),
                                    tmp_path)[:1])["Dockerfile"]
    assert "Invariant of git step tool" in kept


def test_the_lock_names_each_removal_breaks_for_the_build_pip_check(tmp_path):
    from pinwheel.lock.expect import removal_breaks

    text = edited('- {name: Transformer_Engine, why: "built against another torch"}',
                  '- {name: Transformer_Engine, why: "built against another torch",\n'
                  '         breaks: [{name: TE_User, why: "its TE path is unused here"}]}')
    plan = plans(text, tmp_path)[0]
    assert removal_breaks(plan, ["transformer-engine", "flash-attn-4"]) == {"transformer-engine": ["te-user"]}
    assert removal_breaks(plan, ["flash-attn-4"]) == {}  # installed again later: not in expect.json
    assert removal_breaks(plans(MANIFEST, tmp_path)[0], ["transformer-engine"]) == {}
