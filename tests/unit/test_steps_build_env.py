"""A source build's environment per architecture and per CUDA line (`build_env:` on git and sdist steps): the
exact case the builder stage renders, that it picks the right row when run (sh, with each VARIANT/TARGETARCH),
the identity and the lock inputs, and located errors."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pinwheel.image.identity import step_sections
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of

from tests.support.manifests import assert_refused_at, load_text, manifest_yaml, variant
from tests.support.render import run_scripts

REV = "0123456789abcdef0123456789abcdef01234567"
VARIANTS = [variant("cu130"), variant("cu129", cuda="12.9")]
GIT = f"""\
  - name: te
    kind: git
    why: "TransformerEngine at a commit"
    package: "pw-te==2.17.0"
    url: "https://git.example.org/team/pw-te.git"
    rev: "{REV}"
    env: {{MAX_JOBS: "8", TORCH_CUDA_ARCH_LIST: "9.0;10.0"}}
    build_env:
      - {{cuda: "12", env: {{TORCH_CUDA_ARCH_LIST: "8.0;9.0"}}, why: "CUDA 12 has no sm_100 in our fleet"}}
      - {{arch: arm64, env: {{TORCH_CUDA_ARCH_LIST: "9.0a", NVTE_FRAMEWORK: pytorch}}, why: "GH200 nodes"}}
"""
CASE = """\
ARG VARIANT
ARG TARGETARCH
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \\
"""
ROWS = """\
    case "${VARIANT}/${TARGETARCH:-}" in \\
      cu130/arm64) export MAX_JOBS=8 TORCH_CUDA_ARCH_LIST=9.0a NVTE_FRAMEWORK=pytorch ;; \\
      cu130/*) export MAX_JOBS=8 TORCH_CUDA_ARCH_LIST='9.0;10.0' ;; \\
      cu129/arm64) export MAX_JOBS=8 TORCH_CUDA_ARCH_LIST=9.0a NVTE_FRAMEWORK=pytorch ;; \\
      cu129/*) export MAX_JOBS=8 TORCH_CUDA_ARCH_LIST='8.0;9.0' ;; \\
      *) echo 'pinwheel: ERROR: git step te: no build environment for variant/architecture' "${VARIANT}/${TARGETARCH:-}" >&2; exit 1 ;; \\
    esac; \\
    /usr/bin/python3 -m pip wheel --no-deps --wheel-dir /tmp/pinwheel-git/wheel /tmp/pinwheel-git/src
"""


def load(tmp_path, steps=GIT):
    return load_text(manifest_yaml(steps=steps, variants=VARIANTS, key="steps"), tmp_path)


def test_the_stage_renders_one_row_per_variant_and_architecture(tmp_path):
    m = load(tmp_path)
    text = render_dockerfile([plan_variant(m, "cu130"), plan_variant(m, "cu129")])
    assert "FROM ${BASE} AS git-te\n" + CASE in text
    assert ROWS in text


def test_the_rows_export_what_each_build_sees(tmp_path):
    if not shutil.which("sh"):
        pytest.skip("no sh")
    m = load(tmp_path)
    [script] = [s for s in run_scripts(render_dockerfile([plan_variant(m, "cu130")])) if "git-te" in s or
                "TORCH_CUDA" in s]
    case = script[script.index("case "):script.index("esac;") + len("esac;")]
    seen = {}
    for target in ("cu130/amd64", "cu130/arm64", "cu129/amd64", "cu129/arm64", "cu128/amd64"):
        v, arch = target.split("/")
        proc = subprocess.run(["sh", "-c", f"set -eu; {case} echo \"$TORCH_CUDA_ARCH_LIST|${{NVTE_FRAMEWORK:-}}\""],
                              env={"VARIANT": v, "TARGETARCH": arch, "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True)
        seen[target] = proc.stdout.strip() if proc.returncode == 0 else f"exit {proc.returncode}: {proc.stderr}"
    assert seen["cu130/amd64"] == "9.0;10.0|" and seen["cu129/amd64"] == "8.0;9.0|"
    assert seen["cu130/arm64"] == seen["cu129/arm64"] == "9.0a|pytorch"
    assert seen["cu128/amd64"].startswith("exit 1: pinwheel: ERROR: git step te: no build environment") \
        and "cu128/amd64" in seen["cu128/amd64"]


def test_the_identity_holds_the_environment_of_the_plans_build(tmp_path):
    m = load(tmp_path)
    [entry] = dict(step_sections(plan_variant(m, "cu129"), tmp_path))["sources"]
    assert entry["build_env"] == [["MAX_JOBS", "8"], ["TORCH_CUDA_ARCH_LIST", "8.0;9.0"]]
    [entry] = dict(step_sections(plan_variant(m, "cu130"), tmp_path))["sources"]
    assert entry["build_env"] == [["MAX_JOBS", "8"], ["TORCH_CUDA_ARCH_LIST", "9.0;10.0"]]
    plain = load(tmp_path, GIT.split("    build_env:")[0])
    [entry] = dict(step_sections(plan_variant(plain, "cu130"), tmp_path))["sources"]
    assert "build_env" not in entry  # as before: older identities hold
    text = render_dockerfile([plan_variant(plain, "cu130")])
    assert "ARG TARGETARCH" not in text and "    export MAX_JOBS=8; \\\n" in text


def test_an_sdist_step_renders_its_rows_and_its_lock_inputs_hold_the_overrides(tmp_path):
    sdist = ("  - name: fht\n    kind: sdist\n    why: \"ships only an sdist\"\n    package: \"pw-fht==1.0.1\"\n"
             f"    sha256: \"{'ab' * 32}\"\n" + GIT.split("    rev:")[1].split("\n", 1)[1])
    m = load(tmp_path, sdist)
    plan = plan_variant(m, "cu129")
    text = render_dockerfile([plan_variant(m, "cu130"), plan])
    assert "FROM ${BASE} AS sdist-fht\n" + CASE in text
    assert "      cu129/*) export MAX_JOBS=8 TORCH_CUDA_ARCH_LIST='8.0;9.0' ;; \\\n" in text
    part = kind_of(plan.steps[0]).lock_part(plan.steps[0])["sdist"]
    assert part["build_env"] == [
        [None, "12", [["TORCH_CUDA_ARCH_LIST", "8.0;9.0"]]],
        ["arm64", None, [["TORCH_CUDA_ARCH_LIST", "9.0a"], ["NVTE_FRAMEWORK", "pytorch"]]]]
    [entry] = dict(step_sections(plan, tmp_path))["sources"]
    assert entry["build_env"] == [["MAX_JOBS", "8"], ["TORCH_CUDA_ARCH_LIST", "8.0;9.0"]]
    if shutil.which("shellcheck"):
        for script in [s for s in run_scripts(text) if "case " in s]:
            proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{script}\n{proc.stdout}"


@pytest.mark.parametrize("entry, key, fragment", [
    ('{arch: riscv64, env: {A: "1"}, why: w}', "steps[0].build_env[0].arch", "is not one of: amd64, arm64"),
    ('{cuda: "11", env: {A: "1"}, why: w}', "steps[0].build_env[0].cuda", "no variant is on CUDA line 11"),
    ('{cuda: "13.x", env: {A: "1"}, why: w}', "steps[0].build_env[0].cuda", 'CUDA line like "13"'),
    ('{env: {A: "1"}, why: w}', "steps[0].build_env[0]", "say where it applies"),
    ('{arch: arm64, env: {A: "1"}}', "steps[0].build_env[0].why", "required key is missing"),
    ('{arch: arm64, env: {lower: "1"}, why: w}', "steps[0].build_env[0].env.lower", "UPPER_CASE"),
])
def test_bad_overrides_are_refused_at_their_line(tmp_path, entry, key, fragment):
    step = GIT.split("    build_env:")[0] + f"    build_env:\n      - {entry}\n"
    assert_refused_at(manifest_yaml(steps=step, variants=VARIANTS, key="steps"), tmp_path, 15, key, fragment)
