"""The patch kind: patches applied to an installed package at an exact version. Exact rendered text, shellcheck,
located errors, the lock inputs (a changed patch makes the lock stale), staging and labels."""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import pytest

from pinwheel import manifest
from pinwheel.image.build import stage_steps, step_labels
from pinwheel.steps.patch import PatchError
from pinwheel.lock.inputs import lock_inputs_digest
from pinwheel.manifest import ManifestError
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of

from tests.support.manifests import CUDA_13_GATE, manifest_yaml
from tests.support.render import run_scripts

PATCH = "--- a/six.py\n+++ b/six.py\n@@ -1 +1 @@\n-x\n+y\n"
STEPS = """\
  - name: core
    kind: wheels
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
  - name: six-fixes
    kind: patch
    why: "a fix upstream has not released"
    gate: ENABLE_CUDA_13
    patches:
      - {file: patches/six-fix.patch, applies_to: "six==1.16.0", strip: 1, why: "the x is a y"}
      - {file: "patches/second+fix.patch", applies_to: "six==1.16.0", strip: 0, why: "a plus in its name"}
"""


def load(tmp_path, steps: str = STEPS, patch: str = PATCH):
    (tmp_path / "patches").mkdir(exist_ok=True)
    (tmp_path / "patches" / "six-fix.patch").write_text(patch)
    (tmp_path / "patches" / "second+fix.patch").write_text(PATCH)
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(steps=steps, gates=CUDA_13_GATE, key="steps"))
    return manifest.load(path)


def test_patch_steps_render_exactly(tmp_path):
    digest = hashlib.sha256(PATCH.encode()).hexdigest()
    text = render_dockerfile([plan_variant(load(tmp_path), "cu130")])
    assert f"""\

# ---- patch step 2/2: six-fixes. a fix upstream has not released
# Gated by ENABLE_CUDA_13.
#   patches/six-fix.patch on six==1.16.0 (-p1): the x is a y
#     sha256 {digest}
#   patches/second+fix.patch on six==1.16.0 (-p0): a plus in its name
#     sha256 {digest}
RUN --mount=type=bind,source=patches/six-fixes,target=/tmp/pinwheel-patches/six-fixes \\
    set -eu; \\
    if [ "${{ENABLE_CUDA_13}}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping patch step six-fixes'; exit 0; fi; \\
    found=$(python -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' six 2>/dev/null || true); \\
    if [ "$found" != 1.16.0 ]; then echo 'pinwheel: ERROR: patch step six-fixes: patches/six-fix.patch applies to six==1.16.0, found' "${{found:-nothing installed}}" >&2; exit 1; fi; \\
    dir=$(python -c 'import importlib.metadata as m, sys; print(m.distribution(sys.argv[1]).locate_file(""))' six); \\
    if ! patch --forward --batch --fuzz=0 --no-backup-if-mismatch --reject-file=- -p1 -d "$dir" -i /tmp/pinwheel-patches/six-fixes/00.patch; then \\
      echo 'pinwheel: ERROR: patch step six-fixes: patches/six-fix.patch does not apply to six==1.16.0 (every hunk must apply)' >&2; exit 1; \\
    fi; \\
    echo 'pinwheel: patch step six-fixes: patches/six-fix.patch applied to six==1.16.0'; \\
""" in text
    assert "-p0 -d \"$dir\" -i /tmp/pinwheel-patches/six-fixes/01.patch; then" in text


def test_shellcheck_every_run_script_with_patch_steps(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = run_scripts(render_dockerfile([plan_variant(load(tmp_path), "cu130")]))
    assert sum("patch --forward" in s for s in scripts) == 1
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_a_changed_patch_makes_the_lock_stale_and_is_labelled(tmp_path):
    plan = plan_variant(load(tmp_path), "cu130")
    (tmp_path / "other").mkdir()
    changed = plan_variant(load(tmp_path / "other", patch=PATCH.replace("+y", "+z")), "cu130")
    assert lock_inputs_digest(plan) != lock_inputs_digest(changed)
    step = plan.steps[1]
    assert kind_of(step).effect(step).outside[0].startswith("patch patches/six-fix.patch (sha256 ")
    labels = json.loads(step_labels(plan)["io.pinwheel.patches"])
    assert labels["patches/six-fix.patch"] == {"applies_to": "six==1.16.0",
                                               "sha256": hashlib.sha256(PATCH.encode()).hexdigest()}
    context = tmp_path / "context"
    stage_steps(plan, tmp_path, context)
    assert (context / "patches" / "six-fixes" / "00.patch").read_text() == PATCH
    # a patch edited after the manifest was read is refused, naming both digests
    (tmp_path / "patches" / "six-fix.patch").write_text(PATCH + "\n")
    with pytest.raises(PatchError, match="changed while building: expected sha256 [0-9a-f]{64}, found [0-9a-f]{64}"):
        stage_steps(plan, tmp_path, tmp_path / "context2")


@pytest.mark.parametrize("old, new, where, words", [
    ("file: patches/six-fix.patch,", "file: patches/missing.patch,", "18: steps[1].patches[0].file",
     "is not a regular file next to the manifest"),
    ("file: patches/six-fix.patch,", "file: ../six-fix.patch,", "18: steps[1].patches[0].file",
     "is not a relative path inside the manifest's directory"),
    ('applies_to: "six==1.16.0", strip: 1', 'applies_to: "six>=1.16", strip: 1', "18: steps[1].patches[0].applies_to",
     "must be an exact pin"),
    ("strip: 1,", "strip: one,", "18: steps[1].patches[0].strip", "must be an integer from 0 to 9"),
    (', why: "the x is a y"', "", "18: steps[1].patches[0].why", "required key is missing"),
])
def test_a_bad_patch_step_is_refused_at_its_line(tmp_path, old, new, where, words):
    assert old in STEPS
    with pytest.raises(ManifestError) as err:
        load(tmp_path, STEPS.replace(old, new, 1))
    assert f"wheels_manifest.yaml:{where}: " in str(err.value) and words in str(err.value), str(err.value)
