"""One distribution from a prebuilt local wheel, else built from its git commit or sdist (`prebuilt:` on a git or
sdist step). Exact guard lines and shellcheck, staging, the resolver's and the identity's choice, and located
errors; tests/pipeline/test_prebuilt_build.py builds both choices on the real engine."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pinwheel.image.build import stage_steps
from pinwheel.image.identity import step_sections
from pinwheel.index.metadata import local_metadata
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.resolve import resolve
from pinwheel.steps.base import StagingError

from tests.support.local_index import build_wheel
from tests.support.manifests import assert_refused_at, load_text, manifest_yaml
from tests.support.render import run_scripts

REV = "0123456789abcdef0123456789abcdef01234567"
SHA = "ab" * 32
GIT = f"""\
  - name: mla
    kind: git
    why: "FlashMLA at the commit the kernels need"
    package: "pw-mla==1.0.0"
    url: "https://git.example.org/team/pw-mla.git"
    rev: "{REV}"
    prebuilt: {{glob: "pw_mla-1.0.0-*.whl", why: "CI builds it once per torch; the commit is the fallback"}}
"""
SDIST = f"""\
  - name: fht
    kind: sdist
    why: "ships only an sdist"
    package: "pw-fht==1.0.1"
    sha256: "{SHA}"
    prebuilt: {{glob: "pw_fht-*.whl", why: "a wheel built on the GPU runner"}}
"""

GUARD = """\
    --mount=type=bind,source=wheels/mla,target=/tmp/wheels-prebuilt \\
    set -eu; \\
    mkdir -p /tmp/pinwheel-git/src /tmp/pinwheel-git/wheel; \\
    set -- /tmp/wheels-prebuilt/pw_mla-1.0.0-*.whl; \\
    if [ -e "$1" ]; then \\
      if [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: git step mla: more than one wheel matches wheels/pw_mla-1.0.0-*.whl; keep one:' "$@" >&2; exit 1; fi; \\
      echo 'pinwheel: git step mla: wheels/pw_mla-1.0.0-*.whl is in the context: installing it instead of building commit {rev}'; \\
      cp "$1" /tmp/pinwheel-git/wheel/; exit 0; \\
    fi; \\
    echo 'pinwheel: git step mla: wheels/pw_mla-1.0.0-*.whl is missing: building commit {rev}'; \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca GIT_SSL_CAINFO=/run/secrets/ca; fi; \\
""".format(rev=REV)


def load(tmp_path, steps=GIT):
    return load_text(manifest_yaml(steps=steps, key="steps"), tmp_path)


def test_the_builder_stage_takes_the_wheel_when_the_context_holds_it_else_builds(tmp_path):
    text = render_dockerfile([plan_variant(load(tmp_path), "cu130")])
    assert GUARD in text
    assert ("#   pw-mla==1.0.0 --no-deps: commit " + REV + "\n#     or the prebuilt wheels/pw_mla-1.0.0-*.whl when the "
            "context holds it: CI builds it once per torch; the commit is the fallback\n") in text
    sdist = render_dockerfile([plan_variant(load(tmp_path, SDIST), "cu130")])
    assert ("    set -- /tmp/wheels-prebuilt/pw_fht-*.whl; \\\n    if [ -e \"$1\" ]; then \\\n" in sdist and
            f"installing it instead of building its sdist (sha256 {SHA})'; \\\n      cp \"$1\" "
            "/tmp/pinwheel-sdist/wheel/; exit 0; \\\n" in sdist)
    if shutil.which("shellcheck"):
        for script in [s for s in run_scripts(text + sdist) if "prebuilt" in s]:
            proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_without_prebuilt_nothing_is_mounted_or_guarded(tmp_path):
    text = render_dockerfile([plan_variant(load(tmp_path, GIT.split("    prebuilt:")[0]), "cu130")])
    assert "wheels-prebuilt" not in text and "wheels/mla" not in text


class LocalOnly:
    """Reads local wheels; the index knows nothing (the commit cannot be read either: its URL answers nothing)."""

    def local_metadata(self, path):
        return local_metadata(path)

    def _none(self, *args, **kwargs):
        raise LookupError("no index here")

    versions = best_wheel = metadata = _none


def test_the_resolver_and_the_identity_name_the_choice(tmp_path):
    plan = plan_variant(load(tmp_path), "cu130")
    wheels = tmp_path / "wheels"
    [absent] = resolve(plan, LocalOnly(), wheels).resolution.installed
    assert (absent.source, absent.version) == ("git", "1.0.0")
    assert "no wheel matches wheels/pw_mla-1.0.0-*.whl: built from git" in absent.why
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert entry["prebuilt"] == {"glob": "pw_mla-1.0.0-*.whl", "missing": f"built from commit {REV}"}
    stage_steps(plan, tmp_path, tmp_path / "context")
    assert list((tmp_path / "context" / "wheels" / "mla").iterdir()) == []  # mounted, empty: the stage builds

    wheels.mkdir()
    wheel = build_wheel(wheels, "pw-mla", "1.0.0", requires=["pw-torch>=2"])
    [present] = resolve(plan, LocalOnly(), wheels).resolution.installed
    assert (present.source, present.version, present.no_deps) == ("local", "1.0.0", True)
    assert f"prebuilt: {wheel.name} matches wheels/pw_mla-1.0.0-*.whl, installed instead of the build" in present.why
    [edge] = resolve(plan, LocalOnly(), wheels).resolution.edges  # the wheel's own metadata is judged, not unchecked
    assert (edge.name, edge.verdict) == ("pw-torch", "suppressed")
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert entry["prebuilt"]["wheel"] == wheel.name and len(entry["prebuilt"]["sha256"]) == 64
    stage_steps(plan, tmp_path, tmp_path / "context2")
    assert [p.name for p in (tmp_path / "context2" / "wheels" / "mla").iterdir()] == [wheel.name]


def test_a_wheel_of_another_version_or_two_wheels_are_refused(tmp_path):
    plan = plan_variant(load(tmp_path, GIT.replace("pw_mla-1.0.0-*.whl", "pw_mla-*.whl")), "cu130")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "pw-mla", "0.9.0")
    with pytest.raises(Exception, match="prebuilt wheel pw_mla-0.9.0-py3-none-any.whl is pw-mla 0.9.0, but the step "
                                        "pins pw-mla==1.0.0"):
        resolve(plan, LocalOnly(), wheels)
    build_wheel(wheels, "pw-mla", "1.0.0")
    with pytest.raises(StagingError, match="git step mla: more than one wheel in wheels/ matches pw_mla-\\*.whl"):
        stage_steps(plan, tmp_path, tmp_path / "context")


def test_the_sdist_step_names_its_choice_and_its_lock_inputs_name_the_glob(tmp_path):
    from pinwheel.steps import kind_of

    plan = plan_variant(load(tmp_path, SDIST), "cu130")
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert entry == {"step": "fht", "sdist": SHA,
                     "prebuilt": {"glob": "pw_fht-*.whl", "missing": f"built from its sdist (sha256 {SHA})"}}
    assert kind_of(plan.steps[0]).lock_part(plan.steps[0])["sdist"]["prebuilt"] == "pw_fht-*.whl"
    without = plan_variant(load(tmp_path, SDIST.split("    prebuilt:")[0]), "cu130")
    assert dict(step_sections(without, tmp_path))["sources"] == ()  # as before: older identities hold
    assert "prebuilt" not in kind_of(without.steps[0]).lock_part(without.steps[0])["sdist"]


@pytest.mark.parametrize("value, key, fragment", [
    ('{glob: "flash_mla-*.whl", why: w}', "steps[0].prebuilt.glob", "cannot match wheels of pw-mla"),
    ('{glob: "../pw_mla-*.whl", why: w}', "steps[0].prebuilt.glob", "is not a safe wheel glob"),
    ('{glob: "pw_mla-*.whl"}', "steps[0].prebuilt.why", "required key is missing"),
])
def test_bad_prebuilt_entries_are_refused_at_their_line(tmp_path, value, key, fragment):
    step = GIT.split("    prebuilt:")[0] + f"    prebuilt: {value}\n"
    assert_refused_at(manifest_yaml(steps=step, key="steps"), tmp_path, 12, key, fragment)


def test_an_editable_git_step_cannot_have_a_prebuilt_wheel(tmp_path):
    step = GIT + "    editable: true\n    checkout: /opt/src/pw-mla\n"
    assert_refused_at(manifest_yaml(steps=step, key="steps"), tmp_path, 12, "steps[0].prebuilt", "editable install")


def test_a_build_against_the_images_torch_takes_the_wheel_in_its_build_stage_too(tmp_path):
    """With `needs`, the fetching stage and the build stage (from the image's own layer) both guard: neither
    fetches nor builds when the wheel is there."""
    torch = ('  - name: torch\n    kind: wheels\n    why: "torch"\n    packages:\n'
             '      - {requirement: "torch==2.13.0"}\n')
    step = GIT.replace('    rev:', '    isolation: false\n    needs: [torch]\n    rev:')
    text = render_dockerfile([plan_variant(load(tmp_path, torch + step), "cu130")])
    build = text[text.index("AS build-mla\n"):]
    assert build.startswith("AS build-mla\nRUN --mount=type=bind,from=git-mla,source=/tmp/pinwheel-git/src,"
                            "target=/tmp/pinwheel-git/src,rw \\\n"
                            "    --mount=type=bind,source=wheels/mla,target=/tmp/wheels-prebuilt \\\n")
    assert "      cp \"$1\" /tmp/pinwheel-git/wheel/; exit 0; \\\n" in build.split("\nFROM ")[0]
    assert text.count("set -- /tmp/wheels-prebuilt/pw_mla-1.0.0-*.whl; \\\n") == 2


def test_a_source_steps_allow_missing_is_allowed_in_the_report_and_the_build_s_pip_check(tmp_path):
    """A git step installs --no-deps: its prebuilt wheel's unmet requirement is a conflict until the step
    declares it, then the report lists it as allowed with its why and expect.json names it for pip check."""
    from pinwheel.lock.expect import derived_expect
    from pinwheel.reports.report import dropped_requirements
    declared = GIT + '    allow_missing: [{name: pw-torch, why: "the stable ABI loads on the image\'s torch"}]\n'
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    build_wheel(wheels, "pw-mla", "1.0.0", requires=["pw-torch>=2"])
    plans = {}
    for name, steps in (("bare", GIT), ("declared", declared)):
        (tmp_path / name).mkdir()
        plans[name] = resolve(plan_variant(load(tmp_path / name, steps), "cu130"), LocalOnly(), wheels)
    [bare] = dropped_requirements(plans["bare"])
    assert (bare["package"], bare["name"], bare["allowed"]) == ("pw-mla", "pw-torch", False)
    assert "allowed_unmet" not in derived_expect(plans["bare"], {}, {})
    [declared] = dropped_requirements(plans["declared"])
    assert declared["allowed"] and declared["why"] == "the stable ABI loads on the image's torch"
    assert derived_expect(plans["declared"], {}, {})["allowed_unmet"] == {
        "pw-mla": {"pw-torch": "the stable ABI loads on the image's torch"}}


def test_allow_missing_on_a_source_step_is_checked_at_its_line(tmp_path):
    bad = GIT + "    allow_missing: [{name: pw-torch}]\n"
    assert_refused_at(manifest_yaml(steps=bad, key="steps"), tmp_path, 13, "steps[0].allow_missing[0].why", "required")
