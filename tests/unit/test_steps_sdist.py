"""The sdist kind and `needs`: an index sdist built in a builder stage, and builds without isolation that start
from the image as it is after the step installing what they compile against. Exact rendered text, shellcheck,
located errors, the host's reading of a source's static requirements and the lock part."""
from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile

import pytest

from pinwheel import manifest
from pinwheel.lock.inputs import lock_inputs
from pinwheel.manifest import ManifestError
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of
from pinwheel.steps.source_meta import Unreadable, from_pkg_info, from_pyproject, sdist_metadata

from tests.support.manifests import CUDA_13_GATE, manifest_yaml
from tests.support.render import run_scripts

SHA = "ab" * 32
REV = "0123456789abcdef0123456789abcdef01234567"

STEPS = f"""\
  - name: torch
    kind: wheels
    why: "what the kernels compile against"
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
    gate: ENABLE_CUDA_13
    package: "fast-hadamard-transform==1.0.4"
    sha256: "{SHA}"
    isolation: false
    needs: [torch]
    env: {{MAX_JOBS: "2", TORCH_CUDA_ARCH_LIST: "9.0;10.0"}}
  - name: ext
    kind: git
    why: "a kernel at a fixed commit"
    package: "pw-ext==0.1.0"
    url: "https://git.example.org/pw-ext.git"
    rev: "{REV}"
    isolation: false
    needs: [torch]
    builder: "pinwheel/builder:git"
  - name: plain
    kind: sdist
    why: "pure Python, isolated"
    package: "pw-plain==2.0"
    sha256: "{SHA}"
"""

FHT_BUILD = f"""\
# ---- sdist step 3/5, builder: fast-hadamard-transform==1.0.4 from its sdist, sha256 {SHA},
# built without isolation in the image as it is after step 1 (torch), which installs
# what it needs (torch). Only a change to that step or an earlier one, to the sdist or
# to the build settings rebuilds it; the wheel is all the image takes from this stage.
FROM image-torch AS sdist-fht
ARG ENABLE_CUDA_13=1
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \\
    set -eu; \\
    mkdir -p /tmp/pinwheel-sdist/src /tmp/pinwheel-sdist/wheel; \\
    if [ "${{ENABLE_CUDA_13}}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping sdist step fht'; exit 0; fi; \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \\
    pip download --no-deps --no-build-isolation --no-binary :all: --dest /tmp/pinwheel-sdist/src fast-hadamard-transform==1.0.4; \\
    set -- /tmp/pinwheel-sdist/src/*; \\
    if [ ! -e "$1" ] || [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: sdist step fht: not exactly one sdist of fast-hadamard-transform==1.0.4 was downloaded:' "$@" >&2; exit 1; fi; \\
    found=$(sha256sum "$1" | cut -d ' ' -f 1); \\
    if [ "$found" != {SHA} ]; then echo 'pinwheel: ERROR: sdist step fht: fast-hadamard-transform==1.0.4: sha256 mismatch: expected' {SHA}, found "$found" >&2; exit 1; fi; \\
    export MAX_JOBS=2; \\
    export TORCH_CUDA_ARCH_LIST='9.0;10.0'; \\
    pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/pinwheel-sdist/wheel "$1"

"""

EXT_BUILD = """\
# ---- git step 4/5, build: pw-ext==0.1.0 from the checkout of stage git-ext,
# without isolation, in the image as it is after step 1 (torch), which installs what it
# needs (torch). Only a change to that step or an earlier one, to the commit or to
# the build settings rebuilds it.
FROM image-torch AS build-ext
RUN --mount=type=bind,from=git-ext,source=/tmp/pinwheel-git/src,target=/tmp/pinwheel-git/src,rw \\
    set -eu; \\
    mkdir -p /tmp/pinwheel-git/wheel; \\
    pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/pinwheel-git/wheel /tmp/pinwheel-git/src

# ---- the image continues from stage image-torch, which the builds above start from.
FROM image-torch AS image

"""


def load(tmp_path, steps: str = STEPS):
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(manifest_yaml(steps=steps, gates=CUDA_13_GATE, key="steps"))
    return manifest.load(path)


def rendered(tmp_path, steps: str = STEPS) -> str:
    return render_dockerfile([plan_variant(load(tmp_path, steps), "cu130")])


def test_builds_that_need_torch_start_from_its_layer_and_render_exactly(tmp_path):
    text = rendered(tmp_path)
    assert FHT_BUILD in text
    assert EXT_BUILD in text
    # the image stage is cut after `torch`: its first part is named, the builds start from it, the image goes on
    assert text.count("FROM ${BASE} AS image-torch\n") == 1
    assert ("# ---- the image continues from stage image-torch, which the builds above start from.\n"
            "FROM image-torch AS image\n\n# ---- wheel set 2/5") in text
    order = [text.index(s) for s in ("AS git-ext", "AS sdist-plain", "AS image-torch", "# ---- wheel set 1/5",
                                     "AS sdist-fht", "AS build-ext", "FROM image-torch AS image",
                                     "# ---- wheel set 2/5")]
    assert order == sorted(order)
    # the git fetch stage only fetches; the wheel comes from the build stage
    assert "pip wheel" not in text[text.index("AS git-ext"):text.index("AS sdist-plain")]
    assert "RUN --mount=type=bind,from=build-ext,source=/tmp/pinwheel-git/wheel," in text
    # an sdist build that needs nothing installed starts from the base, before the image
    assert "FROM ${BASE} AS sdist-plain\n" in text
    assert "    /usr/bin/python3 -m pip wheel --no-deps --wheel-dir /tmp/pinwheel-sdist/wheel \"$1\"\n" in text


def test_without_needs_the_image_is_one_stage(tmp_path):
    steps = STEPS.replace("    needs: [torch]\n", "")
    text = rendered(tmp_path, steps)
    assert "AS image-" not in text and text.count("FROM ${BASE} AS image\n") == 1


def test_shellcheck_every_run_script_with_source_builds(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    scripts = run_scripts(rendered(tmp_path))
    assert sum("sha256sum" in s for s in scripts) == 2
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_an_sdist_step_has_no_slice_and_its_digest_and_settings_join_the_lock_inputs(tmp_path):
    plan = plan_variant(load(tmp_path), "cu130")
    fht = plan.steps[2]
    assert (fht.kind, fht.packages) == ("sdist", ())
    [direct] = kind_of(fht).effect(fht).direct
    assert (direct.name, direct.version, direct.source) == ("fast-hadamard-transform", "1.0.4", "sdist")
    layout = {s["name"]: s for s in lock_inputs(plan).layout}
    assert layout["fht"]["sdist"] == {"package": "fast-hadamard-transform", "version": "1.0.4", "sha256": SHA,
                                      "isolation": False, "env": [["MAX_JOBS", "2"], ["TORCH_CUDA_ARCH_LIST",
                                                                                     "9.0;10.0"]],
                                      "needs": ["torch"]}
    changed = plan_variant(load(tmp_path, STEPS.replace('MAX_JOBS: "2"', 'MAX_JOBS: "4"')), "cu130")
    assert lock_inputs(changed).digest() != lock_inputs(plan).digest()


@pytest.mark.parametrize("old, new, where, words", [
    ("    needs: [torch]\n    env:", "    needs: [numpy]\n    env:", "steps[2].needs[0]",
     "numpy is installed by no earlier step"),
    ("    isolation: false\n    needs: [torch]\n    env:", "    needs: [torch]\n    env:", "steps[2].needs",
     "only with isolation: false"),
    ('    sha256: "' + SHA + '"\n    isolation', '    sha256: "' + SHA[:10] + '"\n    isolation', "steps[2].sha256",
     "sha256 (64 lowercase hex digits"),
    ('package: "fast-hadamard-transform==1.0.4"', 'package: "six==1.16.0"', "steps[2].package",
     "six is in a wheel set (line"),
    ('package: "fast-hadamard-transform==1.0.4"', 'package: "fast-hadamard-transform>=1.0"', "steps[2].package",
     "must be an exact pin (name==version)"),
])
def test_a_bad_sdist_step_is_refused_at_its_line(tmp_path, old, new, where, words):
    assert old in STEPS
    with pytest.raises(ManifestError) as err:
        load(tmp_path, STEPS.replace(old, new, 1))
    assert f": {where}: " in str(err.value) and words in str(err.value), str(err.value)


def test_an_editable_git_step_cannot_need_installed_packages(tmp_path):
    steps = STEPS.replace('    builder: "pinwheel/builder:git"\n',
                          '    builder: "pinwheel/builder:git"\n    editable: true\n    checkout: /opt/src/pw-ext\n')
    with pytest.raises(ManifestError) as err:
        load(tmp_path, steps)
    assert "steps[3].needs: an editable install builds in the image itself" in str(err.value)


# ---------------------------------------------------------------- requirements read on the host

def sdist(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pw_x-1.0/{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_static_pkg_info_gives_the_requirements():
    meta = from_pkg_info("Metadata-Version: 2.2\nName: pw-x\nVersion: 1.0\nRequires-Dist: torch>=2.4\n"
                         "Provides-Extra: fast\nRequires-Dist: triton; extra == \"fast\"\n", "pw-x", "1.0")
    assert [str(r) for r in meta.requires_dist] == ["torch>=2.4", 'triton; extra == "fast"']
    assert meta.provides_extra == ("fast",)


@pytest.mark.parametrize("text, words", [
    ("Metadata-Version: 2.1\nName: pw-x\nVersion: 1.0\nRequires-Dist: torch\n", "Metadata-Version 2.1"),
    ("Metadata-Version: 2.2\nName: pw-x\nVersion: 1.0\nDynamic: Requires-Dist\n", "marks its requirements Dynamic"),
])
def test_pkg_info_that_cannot_say_is_unreadable(text, words):
    with pytest.raises(Unreadable, match=re.escape(words)):
        from_pkg_info(text, "pw-x", "1.0")


def test_a_static_pyproject_gives_the_requirements_and_its_extras():
    meta = from_pyproject('[project]\nname = "pw-x"\nversion = "1.0"\ndependencies = ["torch>=2.4"]\n'
                          '[project.optional-dependencies]\nfast = ["triton; sys_platform == \'linux\'"]\n',
                          "pw-x", "1.0")
    assert [str(r) for r in meta.requires_dist] == [
        "torch>=2.4", 'triton; sys_platform == "linux" and extra == "fast"']


@pytest.mark.parametrize("text, words", [
    ('[project]\nname = "pw-x"\ndynamic = ["dependencies", "version"]\n', "lists its requirements in `dynamic`"),
    ('[build-system]\nrequires = ["setuptools"]\n', "has no [project] table"),
])
def test_a_dynamic_pyproject_is_unreadable(text, words):
    with pytest.raises(Unreadable, match=re.escape(words)):
        from_pyproject(text, "pw-x", "1.0")


def test_an_sdist_is_read_from_pkg_info_else_pyproject_and_says_why_not():
    pyproject = '[project]\nname = "pw-x"\nversion = "1.0"\ndependencies = ["six"]\n'
    # an old PKG-INFO cannot say; the static pyproject can
    meta = sdist_metadata(sdist({"PKG-INFO": "Metadata-Version: 2.1\nName: pw-x\nVersion: 1.0\n",
                                 "pyproject.toml": pyproject}), "pw-x", "1.0")
    assert [str(r) for r in meta.requires_dist] == ["six"] and meta.source == "pyproject.toml"
    with pytest.raises(Unreadable, match="running setup.py"):
        sdist_metadata(sdist({"setup.py": "import setuptools\n"}), "pw-x", "1.0")


def test_a_need_met_only_by_a_debian_package_is_refused(tmp_path):
    apt = ('  - name: debs\n    kind: apt\n    why: "a compiler"\n    packages:\n'
           '      - {name: ninja-build, version: "1.11.1-1", why: "builds faster"}\n')
    steps = apt + STEPS.replace("    needs: [torch]\n    env:", "    needs: [ninja-build]\n    env:")
    with pytest.raises(ManifestError) as err:
        load(tmp_path, steps)
    assert "steps[3].needs[0]: ninja-build is installed by no earlier step" in str(err.value), str(err.value)


def test_a_later_stage_of_the_image_declares_again_the_gates_declared_before_it(tmp_path):
    """ARGs end with their stage: the image's next stage declares the gates its earlier steps declared,
    and only those (a gate is declared just before the first step that reads it)."""
    gated_torch = STEPS.replace('    why: "what the kernels compile against"\n',
                                '    why: "what the kernels compile against"\n    gate: ENABLE_CUDA_13\n', 1)
    text = rendered(tmp_path, gated_torch)
    image = text[text.index("FROM ${BASE} AS image-torch\n"):]
    assert image.index("ARG ENABLE_CUDA_13=1\n") < image.index("# ---- wheel set 1/5")
    assert "FROM image-torch AS image\nARG ENABLE_CUDA_13=1\n\n# ---- wheel set 2/5" in text
    assert text.count("# Gate ENABLE_CUDA_13:") == 1
    # without a gated step before the cut, the next stage declares nothing
    assert "FROM image-torch AS image\n\n# ---- wheel set 2/5" in rendered(tmp_path, STEPS)
