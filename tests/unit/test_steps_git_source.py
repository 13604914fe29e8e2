"""The git kind as source builds really are: submodules, config settings, and patches applied to the checkout
before the build (paths relative to the source tree). Exact rendered lines, shellcheck, staging, identity and
located errors; tests/pipeline/test_git_submodules_build.py builds one on the real engine."""
from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from pinwheel.image.build import stage_steps
from pinwheel.image.identity import step_sections
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps.base import StagingError

from tests.support.manifests import assert_refused_at, load_text, manifest_yaml

from tests.support.render import run_scripts

REV = "0123456789abcdef0123456789abcdef01234567"
PATCH = "--- a/csrc/kernel.cu\n+++ b/csrc/kernel.cu\n@@ -1 +1 @@\n-int x = 1;\n+int x = 2;\n"
STEP = f"""\
  - name: te
    kind: git
    why: "a commit with the fix, built with its submodules"
    package: "pw-te==2.17.0"
    url: "https://git.example.org/team/pw-te.git"
    rev: "{REV}"
    submodules: true
    config_settings: {{"--build-option": "--cpp_ext", editable_mode: compat}}
    patches:
      - {{file: patches/kernel.patch, strip: 1, why: "the kernel fix from upstream's main"}}
"""


def load(tmp_path, step=STEP, patch=PATCH):
    (tmp_path / "patches").mkdir(exist_ok=True)
    (tmp_path / "patches" / "kernel.patch").write_text(patch)
    return load_text(manifest_yaml(steps=step, key="steps"), tmp_path)


def test_the_stage_fetches_submodules_applies_the_patches_and_passes_the_settings(tmp_path):
    text = render_dockerfile([plan_variant(load(tmp_path), "cu130")])
    digest = hashlib.sha256(PATCH.encode()).hexdigest()
    assert "    --mount=type=bind,source=git-patches/te,target=/tmp/pinwheel-git/patches \\\n" in text
    assert ("    if ! git -C /tmp/pinwheel-git/src submodule update -q --init --recursive; then \\\n"
            "      echo 'pinwheel: ERROR: git step te: cannot fetch the submodules of commit "
            f"{REV}' >&2; exit 1; \\\n    fi; \\\n") in text
    assert (f"    if [ \"$found\" != {digest} ]; then echo 'pinwheel: ERROR: git step te: patches/kernel.patch: sha256 "
            f"mismatch: expected {digest}, found' \"$found\" >&2; exit 1; fi; \\\n"
            "    if ! git -C /tmp/pinwheel-git/src apply -p1 /tmp/pinwheel-git/patches/00.patch; then echo "
            f"'pinwheel: ERROR: git step te: patches/kernel.patch does not apply to commit {REV} (every hunk must "
            "apply)' >&2; exit 1; fi; \\\n") in text
    assert ("pip wheel --no-deps --config-settings --build-option=--cpp_ext --config-settings editable_mode=compat "
            "--wheel-dir") in text
    for script in [s for s in run_scripts(text) if "pinwheel-git" in s]:
        if shutil.which("shellcheck"):
            proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_the_patch_is_staged_checked_and_in_the_identity(tmp_path):
    plan = plan_variant(load(tmp_path), "cu130")
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert entry["patches"] == [{"file": "patches/kernel.patch", "sha256": hashlib.sha256(PATCH.encode()).hexdigest()}]
    stage_steps(plan, tmp_path, tmp_path / "context")
    assert (tmp_path / "context" / "git-patches" / "te" / "00.patch").read_text() == PATCH
    (tmp_path / "patches" / "kernel.patch").write_text(PATCH + "\n")
    with pytest.raises(StagingError, match="changed while building: expected sha256 [0-9a-f]{64}, found [0-9a-f]{64}"):
        stage_steps(plan, tmp_path, tmp_path / "context2")


def test_a_git_step_without_them_has_no_patches_in_its_identity(tmp_path):
    step = STEP.split("    submodules: true\n")[0]
    plan = plan_variant(load(tmp_path, step), "cu130")
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert sorted(entry) == ["commit", "step", "url"]  # as before: older identities hold


@pytest.mark.parametrize("extra,line,key,fragment", [
    ("    submodules: yes-please\n", 12, "steps[0].submodules", "must be true or false"),
    ("    config_settings: {\"a b\": x}\n", 12, "steps[0].config_settings.a b", "is not a config setting name"),
    ("    patches: [{file: ../x.patch, why: w}]\n", 12, "steps[0].patches[0].file", "is not a relative path"),
    ("    patches: [{file: patches/missing.patch, why: w}]\n", 12, "steps[0].patches[0].file", "is not a regular file"),
    ("    patches: [{file: patches/kernel.patch, strip: 12, why: w}]\n", 12, "steps[0].patches[0].strip",
     "must be an integer from 0 to 9"),
])
def test_bad_entries_are_refused_at_their_line(tmp_path, extra, line, key, fragment):
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "kernel.patch").write_text(PATCH)
    step = STEP.split("    submodules: true\n")[0] + extra
    assert_refused_at(manifest_yaml(steps=step, key="steps"), tmp_path, line, key, fragment)
