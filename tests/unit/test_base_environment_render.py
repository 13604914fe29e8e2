"""Base environments in the manifest, the steps and the render: `override: true`, and the Dockerfiles of
`environment: base` and `system_site_packages`. Exact rendered text, shellcheck, located errors. The remove
kind's own tests are in test_steps_remove.py."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from pinwheel.plan import plan_variant
from pinwheel.render import dockerfile_groups, dockerfile_name, render_dockerfile, render_dockerfiles

from tests.support.base_environment import MANIFEST, edited, plans
from tests.support.manifests import assert_refused_at, load_text
from tests.support.render import run_scripts

# The whole Dockerfile of the environment-base group (variants sys and top).
BASE_DOCKERFILE = """\
# Rendered by pinwheel from wheels_manifest.yaml (image demo). Do not edit: run `make render`.
# One file serves every variant (sys, top): build with
# --build-arg VARIANT=<variant> and the gate values `build.py build` passes.
# Secrets (CA bundle, index configuration) arrive only as BuildKit secrets.
ARG BASE=lmsysorg/sglang:v0.5.9@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef

# ---- lock: the variant's lock files, alone in a stage. The stages below copy
# from it, so each COPY is keyed by the bytes it copies, not by the variant's
# name: variants share every layer up to their first differing step.
FROM scratch AS lock
ARG VARIANT=sys
COPY lock/${VARIANT}/ /

# ---- installer: uv, installed from the variant's lock (installer.txt, hash-checked) in a
# stage of its own. Every wheel set's step bind-mounts its binary, so uv is in no
# layer of the image; this stage stays cached until installer.txt changes. Each step
# unpacks into a uv cache in its own layer and hard-links from it (every file written
# once), and removes that cache before the layer is committed.
FROM ${BASE} AS installer
COPY --from=lock /installer.txt /tmp/pinwheel/lock/installer.txt
RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked \\
    --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \\
    set -eu; \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; /usr/bin/python3 -m pip install --no-deps --require-hashes --target /opt/pinwheel/uv -r /tmp/pinwheel/lock/installer.txt

FROM ${BASE} AS image

# environment: base: every step installs into the base's own python, /usr/bin/python3,
# with no venv; its pip is checked before the first step. Each pip RUN sets
# PIP_BREAK_SYSTEM_PACKAGES=1 for itself: Debian's and Ubuntu's pythons are
# marked EXTERNALLY-MANAGED (PEP 668), and pips older than 23.0.1 ignore it.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PIP_NO_INPUT=1 \\
    PIP_ROOT_USER_ACTION=ignore

RUN /usr/bin/python3 -m pip --version

# ---- remove step 1/3: drop-te. the base's transformer-engine is replaced by our own triplet
#   transformer-engine: built against another torch
#   flash-attn-4: its kernels clash with flashinfer's
RUN set -eu; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; \\
    /usr/bin/python3 -m pip uninstall -y transformer-engine flash-attn-4

# ---- wheel set 2/3: core. pure-python base
#   six==1.16.0: tiny and stable
#   nvidia-cudnn-cu13==9.22.0.52: over torch's exact pin: the fix for X
COPY --from=lock /02-core.txt /tmp/pinwheel/lock/02-core.txt
RUN --mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv \\
    --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf \\
    set -eu; \\
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; fi; \\
    export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1; \\
    trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; \\
    /tmp/pinwheel/bin/uv pip install --python /usr/bin/python3 --break-system-packages --no-deps --require-hashes -r /tmp/pinwheel/lock/02-core.txt

# Gate ENABLE_CUDA_13: on when cuda >= 13. CUDA 13 only
ARG ENABLE_CUDA_13=1

# ---- remove step 3/3: cuda-only. CUDA 13 only
# Gated by ENABLE_CUDA_13.
#   old-kernels: it's $(replaced) `later`
RUN set -eu; \\
    if [ "${ENABLE_CUDA_13}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping remove step cuda-only'; exit 0; fi; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; \\
    /usr/bin/python3 -m pip uninstall -y old-kernels

# Invariants: every pin is still what the lock says after all steps (the build
# fails naming the package, the expected and the found version), and `pip check`
# finds nothing beyond the requirements --no-deps drops on purpose. Every base
# requirement a --no-deps install drops is met, or allowed by the manifest. The
# top-level modules of every installed distribution import on the CPU, except
# those the manifest marks `needs: driver` (the smoke imports them).
# On a base with packages: every base package the manifest leaves alone is still
# at its inventory version, every removed one is gone, and `pip check` may find
# only what the base already broke and what the manifest declares.
COPY --from=lock /expect.json /opt/pinwheel/expect.json
COPY smoke_payload.pyz /opt/pinwheel/smoke_payload.pyz
# A passing `pip check` or import check is reused while every input it read is
# unchanged (the payload's --cache-dir says how that is known); the results live
# in a BuildKit cache mount, in no layer. `build.py build --fresh-checks` sets
# PINWHEEL_FRESH_CHECKS=1: every check runs again.
ARG PINWHEEL_FRESH_CHECKS=0
RUN --mount=type=cache,id=pinwheel-invariant,target=/var/cache/pinwheel,sharing=locked \\
    /usr/bin/python3 /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json --level static --check-pip --check-imports --cache-dir /var/cache/pinwheel

# `docker run --gpus all <image>:...-smoke` on a GPU host: imports and the DSA
# forward, checked against references; a missing GPU fails it rather than passing.
FROM image AS smoke
CMD ["/usr/bin/python3", "/opt/pinwheel/smoke_payload.pyz", "--expect", "/opt/pinwheel/expect.json", "--level", "gpu", "--require", "gpu"]
"""

# The venv that sees the base's packages: made from the declared interpreter, removals run with it.
SEEN_DOCKERFILE = """\
# Rendered by pinwheel from wheels_manifest.yaml (image demo). Do not edit: run `make render`.
# One file serves every variant (seen): build with
# --build-arg VARIANT=<variant> and the gate values `build.py build` passes.
# Secrets (CA bundle, index configuration) arrive only as BuildKit secrets.
ARG BASE=pinwheel/base:bookworm-py311

# ---- lock: the variant's lock files, alone in a stage. The stages below copy
# from it, so each COPY is keyed by the bytes it copies, not by the variant's
# name: variants share every layer up to their first differing step.
FROM scratch AS lock
ARG VARIANT=seen
COPY lock/${VARIANT}/ /

# ---- installer: uv, installed from the variant's lock (installer.txt, hash-checked) in a
# stage of its own. Every wheel set's step bind-mounts its binary, so uv is in no
# layer of the image; this stage stays cached until installer.txt changes. Each step
# unpacks into a uv cache in its own layer and hard-links from it (every file written
# once), and removes that cache before the layer is committed.
FROM ${BASE} AS installer
COPY --from=lock /installer.txt /tmp/pinwheel/lock/installer.txt
RUN --mount=type=cache,target=/root/.cache/pip,sharing=locked \\
    --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \\
    set -eu; \\
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/pipconf ]; then export PIP_CONFIG_FILE=/run/secrets/pipconf; fi; \\
    python3 -m venv /opt/pinwheel/uv; /opt/pinwheel/uv/bin/pip install --no-deps --require-hashes -r /tmp/pinwheel/lock/installer.txt

FROM ${BASE} AS image

ENV VIRTUAL_ENV=/opt/venv \\
    PATH=/opt/venv/bin:${PATH} \\
    PIP_DISABLE_PIP_VERSION_CHECK=1 \\
    PIP_NO_INPUT=1 \\
    PIP_ROOT_USER_ACTION=ignore
# The venv is made from the base's python and sees its packages (system_site_packages).

RUN /usr/local/bin/python3.12 -m venv --system-site-packages /opt/venv

# ---- remove step 1/3: drop-te. the base's transformer-engine is replaced by our own triplet
#   transformer-engine: built against another torch
#   flash-attn-4: its kernels clash with flashinfer's
RUN set -eu; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; \\
    /usr/local/bin/python3.12 -m pip uninstall -y transformer-engine flash-attn-4

# ---- wheel set 2/3: core. pure-python base
#   six==1.16.0: tiny and stable
#   nvidia-cudnn-cu13==9.22.0.52: over torch's exact pin: the fix for X
COPY --from=lock /02-core.txt /tmp/pinwheel/lock/02-core.txt
RUN --mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv \\
    --mount=type=secret,id=ca,target=/run/secrets/ca \\
    --mount=type=secret,id=uvconf,target=/run/secrets/uvconf \\
    set -eu; \\
    if [ -s /run/secrets/ca ]; then export SSL_CERT_FILE=/run/secrets/ca; fi; \\
    if [ -s /run/secrets/uvconf ]; then export UV_CONFIG_FILE=/run/secrets/uvconf; fi; \\
    export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1; \\
    trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT; \\
    /tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python --no-deps --require-hashes -r /tmp/pinwheel/lock/02-core.txt

# Gate ENABLE_CUDA_13: on when cuda >= 13. CUDA 13 only
ARG ENABLE_CUDA_13=1

# ---- remove step 3/3: cuda-only. CUDA 13 only
# Gated by ENABLE_CUDA_13.
#   old-kernels: it's $(replaced) `later`
RUN set -eu; \\
    if [ "${ENABLE_CUDA_13}" != "1" ]; then echo 'pinwheel: ENABLE_CUDA_13=0: skipping remove step cuda-only'; exit 0; fi; \\
    export PIP_BREAK_SYSTEM_PACKAGES=1; \\
    /usr/local/bin/python3.12 -m pip uninstall -y old-kernels

# Invariants: every pin is still what the lock says after all steps (the build
# fails naming the package, the expected and the found version), and `pip check`
# finds nothing beyond the requirements --no-deps drops on purpose. Every base
# requirement a --no-deps install drops is met, or allowed by the manifest. The
# top-level modules of every installed distribution import on the CPU, except
# those the manifest marks `needs: driver` (the smoke imports them).
# On a base with packages: every base package the manifest leaves alone is still
# at its inventory version, every removed one is gone, and `pip check` may find
# only what the base already broke and what the manifest declares.
COPY --from=lock /expect.json /opt/pinwheel/expect.json
COPY smoke_payload.pyz /opt/pinwheel/smoke_payload.pyz
# A passing `pip check` or import check is reused while every input it read is
# unchanged (the payload's --cache-dir says how that is known); the results live
# in a BuildKit cache mount, in no layer. `build.py build --fresh-checks` sets
# PINWHEEL_FRESH_CHECKS=1: every check runs again.
ARG PINWHEEL_FRESH_CHECKS=0
RUN --mount=type=cache,id=pinwheel-invariant,target=/var/cache/pinwheel,sharing=locked \\
    python /opt/pinwheel/smoke_payload.pyz --expect /opt/pinwheel/expect.json --level static --check-pip --check-imports --cache-dir /var/cache/pinwheel

# `docker run --gpus all <image>:...-smoke` on a GPU host: imports and the DSA
# forward, checked against references; a missing GPU fails it rather than passing.
FROM image AS smoke
CMD ["python", "/opt/pinwheel/smoke_payload.pyz", "--expect", "/opt/pinwheel/expect.json", "--level", "gpu", "--require", "gpu"]
"""


def test_environment_base_and_system_site_packages_render_exactly(tmp_path):
    rendered = render_dockerfiles(plans(MANIFEST, tmp_path))
    assert list(rendered) == ["Dockerfile", "Dockerfile.seen"]
    assert rendered["Dockerfile"] == BASE_DOCKERFILE
    assert rendered["Dockerfile.seen"] == SEEN_DOCKERFILE


def test_variants_are_grouped_by_where_they_install(tmp_path):
    ps = plans(MANIFEST, tmp_path)
    groups = dockerfile_groups(ps)
    assert {name: [p.variant.name for p in members] for name, members in groups.items()} == {
        "Dockerfile": ["sys", "top"], "Dockerfile.seen": ["seen"]}
    assert [dockerfile_name(ps, v) for v in ("sys", "top", "seen")] == ["Dockerfile", "Dockerfile", "Dockerfile.seen"]
    with pytest.raises(ValueError, match="render_dockerfiles"):
        render_dockerfile(ps)


def test_the_digest_of_a_pinned_base_is_kept_and_a_base_variant_has_no_default(tmp_path):
    ps = plans(MANIFEST, tmp_path)
    assert "ARG BASE=lmsysorg/sglang:v0.5.9@sha256:0123456789abcdef" in render_dockerfile(ps[:2])
    top = render_dockerfile([ps[1]])
    assert "# The base is variant sys's image: `build.py build` builds it first and passes it as BASE.\n" \
           "ARG BASE\n\n# ---- lock:" in top
    assert top.count("FROM ${BASE} AS ") == 2  # the installer stage and the image, both on that base


def test_an_interpreter_of_its_own_is_quoted_and_used_everywhere(tmp_path):
    text = MANIFEST.replace("    environment: base\n  top:", "    environment: base\n    interpreter: /opt/conda/bin/python\n  top:")
    rendered = render_dockerfiles(plans(text, tmp_path))
    assert list(rendered) == ["Dockerfile", "Dockerfile.top", "Dockerfile.seen"]
    sys_file = rendered["Dockerfile"]
    assert "RUN /opt/conda/bin/python -m pip --version\n" in sys_file
    assert "    /tmp/pinwheel/bin/uv pip install --python /opt/conda/bin/python --break-system-packages --no-deps " \
           "--require-hashes -r" in sys_file
    assert "/opt/conda/bin/python -m pip install --no-deps --require-hashes --target /opt/pinwheel/uv -r" in sys_file
    assert "    /opt/conda/bin/python -m pip uninstall -y transformer-engine flash-attn-4\n" in sys_file
    assert 'CMD ["/opt/conda/bin/python", "/opt/pinwheel/smoke_payload.pyz"' in sys_file
    assert "/usr/bin/python3" not in sys_file


def test_shellcheck_every_run_script_on_a_base(tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    for text in render_dockerfiles(plans(MANIFEST, tmp_path)).values():
        scripts = run_scripts(text)
        assert len(scripts) == 6  # with the installer stage's
        for script in scripts:
            proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                                  capture_output=True, text=True)
            assert proc.returncode == 0, f"{script}\n{proc.stdout}"


def test_override_is_in_the_model_and_the_plan_and_changes_no_text(tmp_path):
    m = load_text(MANIFEST, tmp_path)
    six, cudnn = m.steps[1].packages
    assert (six.override, cudnn.override) == (False, True)
    plan = plan_variant(m, "sys")
    assert [p.override for p in plan.steps[1].packages] == [False, True]
    plain = MANIFEST.replace("override: true, ", "")
    assert render_dockerfiles(plans(plain, tmp_path)) == render_dockerfiles(plans(MANIFEST, tmp_path))


# (id, manifest text, expected line, expected key, expected message fragment); the remove kind's own are in
# test_steps_remove.py
CASES = [
    ("override-without-why",
     edited(', override: true, why: "over torch\'s exact pin: the fix for X"', ", override: true"),
     43, "steps[1].packages[1].why", "every override must say why"),
    ("override-not-boolean", edited("override: true", 'override: "yes"'), 43, "steps[1].packages[1].override",
     "must be true or false"),
    ("interpreter-on-a-fresh-venv", edited("    system_site_packages: true\n", ""), 29, "variants.seen.interpreter",
     "only with environment: base, or a venv with system_site_packages"),
    ("interpreter-relative", edited("interpreter: /usr/local/bin/python3.12", "interpreter: python3"), 30,
     "variants.seen.interpreter", "is not a valid absolute path"),
    ("system-site-packages-on-base", edited("    tag: \"sys-{date}\"\n    environment: base\n",
                                         "    tag: \"sys-{date}\"\n    environment: base\n    system_site_packages: true\n"),
     14, "variants.sys.system_site_packages", "only with environment: venv"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_base_environment_keys_are_refused_with_file_line_and_key(case, tmp_path):
    _, text, line, key, fragment = case
    assert_refused_at(text, tmp_path, line, key, fragment)


def test_a_local_wheel_on_a_base_is_mounted_from_its_sets_own_directory(tmp_path):
    """Installing into the base's python (or a venv that sees it) changes only the words that install: the
    wheel set's step mounts the context's directory of its own wheels in every environment."""
    text = MANIFEST.replace('      - {requirement: "six==1.16.0", why: "tiny and stable"}\n',
                            '      - {requirement: "six==1.16.0", why: "tiny and stable"}\n'
                            '      - requirement: "demo-k==1.0"\n'
                            '        why: "in-house"\n'
                            '        local: {glob: "demo_k-1.0+cu13-*.whl", if_missing: skip}\n', 1)
    rendered = render_dockerfiles(plans(text, tmp_path))
    install = {"Dockerfile": "/tmp/pinwheel/bin/uv pip install --python /usr/bin/python3 --break-system-packages",
               "Dockerfile.seen": "/tmp/pinwheel/bin/uv pip install --python /opt/venv/bin/python"}
    assert list(rendered) == list(install)
    for name, dockerfile in rendered.items():
        assert dockerfile.count("/tmp/wheels") == 2, name  # the mount, and the glob its guard expands
        assert "    --mount=type=bind,source=wheels/core,target=/tmp/wheels \\\n" in dockerfile, name
        assert "    set -- /tmp/wheels/demo_k-1.0+cu13-*.whl; \\\n" in dockerfile, name
        assert f"      {install[name]} --no-deps \"$1\"; \\\n" in dockerfile, name
        assert "source=wheels," not in dockerfile, name  # no preflight: nothing mounts all of wheels/
