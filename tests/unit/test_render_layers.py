"""image.layers: parent-free renders each wheel set in a stage of its own, joined into the image with COPY
--link; where that cannot hold (no COPY --link, environment: base) the chained rendering, with a note."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from pinwheel import cli
from pinwheel.plan import plan_variant
from pinwheel.render import Layering, render_dockerfile, render_dockerfiles

from tests.support import base_environment
from tests.support.manifests import CUDA_13_GATE, assert_refused_at, load_text, manifest_yaml
from tests.support.render import GOLDEN, POLICIES, run_scripts

UPDATE = os.environ.get("PINWHEEL_UPDATE_GOLDEN") == "1"
PARENT_FREE = POLICIES.replace("repository: pinwheel/demo}", "repository: pinwheel/demo, layers: parent-free}", 1)


def plans(text: str, tmp_path):
    m = load_text(text, tmp_path)
    return [plan_variant(m, v) for v in m.variants]


def test_parent_free_golden(tmp_path):
    text = render_dockerfile(plans(PARENT_FREE, tmp_path))
    golden = GOLDEN / "policies-parent-free.Dockerfile"
    if UPDATE:
        golden.write_text(text)
    assert text == golden.read_text()


def test_each_set_has_its_stage_from_the_venv_and_one_join(tmp_path):
    text = render_dockerfile(plans(PARENT_FREE, tmp_path))
    assert "FROM ${BASE} AS venv\n" in text and "FROM venv AS image\n" in text
    for name in ("core", "gated", "local"):
        assert text.count(f"FROM venv AS wheel-set-{name}\n") == 1
        assert text.count(f"COPY --link --from=wheel-set-{name} /tmp/pinwheel/wheel-set/ /\n") == 1
    # a gated set's stage declares its gate: BuildKit scopes an ARG to its stage
    gated = text.split("FROM venv AS wheel-set-gated\n", 1)[1].split("\nFROM ", 1)[0]
    assert gated.startswith("ARG ENABLE_CUDA_13=1\n")
    # every stage is defined before the image copies from it, and the invariant runs once, in the image
    assert text.index("AS wheel-set-local") < text.index("FROM venv AS image")
    assert text.count("--check-pip --check-imports") == 1
    assert text.index("--check-pip") > text.index("COPY --link --from=wheel-set-local")


def test_an_engine_without_copy_link_gets_the_chained_rendering_and_a_note(tmp_path):
    chained = render_dockerfile(plans(POLICIES, tmp_path))
    degraded = render_dockerfile(plans(PARENT_FREE, tmp_path), copy_link=False)
    note = ("# image.layers is parent-free, but the layers are chained here: the engine has no COPY --link "
            "(BuildKit before v0.10): the wheel sets' layers are chained.\n")
    assert degraded.count(note) == 1
    assert degraded.replace(note, "") == chained
    assert Layering.of(plans(PARENT_FREE, tmp_path)[0], copy_link=False) == Layering(False, note.split("here: ", 1)[1][:-2])


def test_base_environment_stays_chained_and_says_so(tmp_path):
    text = base_environment.MANIFEST.replace("image: {name: demo, repository: pinwheel/demo}",
                                             "image: {name: demo, repository: pinwheel/demo, layers: parent-free}")
    files = render_dockerfiles(plans(text, tmp_path))
    base = files["Dockerfile"]  # sys and top: the base's own python
    assert "the layers are chained here: environment: base" in base and "COPY --link" not in base
    seen = files["Dockerfile.seen"]  # a venv that sees the base: parent-free, the remove steps chained
    assert "COPY --link --from=wheel-set-core" in seen and "chained here" not in seen


def test_chained_is_the_default_and_a_bad_value_is_refused(tmp_path):
    assert plans(POLICIES, tmp_path)[0].layers == "chained"
    bad = POLICIES.replace("repository: pinwheel/demo}", "repository: pinwheel/demo, layers: flat}", 1)
    assert_refused_at(bad, tmp_path, 2, "image.layers", "'flat' is not one of: chained, parent-free")
    (tmp_path / "wheels_manifest.yaml").write_text(bad)
    proc = subprocess.run([sys.executable, "-m", "pinwheel.cli", "--manifest", str(tmp_path / "wheels_manifest.yaml"),
                           "render"], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_shellcheck_every_parent_free_run_script(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = run_scripts(render_dockerfile(plans(PARENT_FREE, tmp_path)))
    assert sum("/tmp/pinwheel/wheel-set" in s for s in scripts) == 3
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_the_shipped_manifest_keeps_its_chained_dockerfile(capsys):
    from tests.support.engine import REPO_ROOT

    assert cli.main(["--manifest", str(REPO_ROOT / "wheels_manifest.yaml"), "render", "--check"]) == 0
    assert "COPY --link" not in (REPO_ROOT / "images" / "train" / "Dockerfile").read_text()


BUILD_STEPS = f"""\
  - name: torch
    kind: wheels
    why: "what the kernel compiles against"
    packages:
      - {{requirement: "torch==2.13.0", why: "the image's torch"}}
  - name: tools
    kind: wheels
    why: "later tools"
    packages:
      - {{requirement: "six==1.16.0", why: "tiny"}}
  - name: fht
    kind: sdist
    why: "ships only an sdist"
    package: "fast-hadamard-transform==1.0.4"
    sha256: "{'ab' * 32}"
    isolation: false
    needs: [torch]
"""


def test_a_build_that_needs_a_set_starts_from_the_image_stage_that_joined_it(tmp_path):
    """A source build compiling against torch starts from the image cut after torch's join; a step of another
    kind stays in the image stage, in its place."""
    text = manifest_yaml(steps=BUILD_STEPS, gates=CUDA_13_GATE, key="steps").replace(
        "repository: pinwheel/demo}", "repository: pinwheel/demo, layers: parent-free}", 1)
    out = render_dockerfile(plans(text, tmp_path))
    order = [out.index(s) for s in ("FROM venv AS wheel-set-torch", "FROM venv AS wheel-set-tools",
                                    "FROM venv AS image-torch", "COPY --link --from=wheel-set-torch",
                                    "FROM image-torch AS sdist-fht", "FROM image-torch AS image",
                                    "COPY --link --from=wheel-set-tools", "# ---- sdist step 3/3: fht")]
    assert order == sorted(order)
