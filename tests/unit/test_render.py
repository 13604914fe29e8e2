"""Rendering: exact text against golden files, determinism, quoting, shellcheck."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile, shell_glob

from tests.support.render import GOLDEN, POLICIES, run_scripts

ROOT = Path(__file__).resolve().parents[2]
UPDATE = os.environ.get("PINWHEEL_UPDATE_GOLDEN") == "1"


def render_text(text: str, tmp_path: Path) -> str:
    path = tmp_path / "wheels_manifest.yaml"
    path.write_text(text)
    m = manifest.load(path)
    return render_dockerfile([plan_variant(m, v) for v in m.variants])


def check_golden(name: str, text: str) -> None:
    golden = GOLDEN / name
    if UPDATE:
        golden.write_text(text)
    assert golden.exists(), f"no golden file {golden}; run with PINWHEEL_UPDATE_GOLDEN=1"
    assert text == golden.read_text()


def test_policies_golden(tmp_path):
    check_golden("policies.Dockerfile", render_text(POLICIES, tmp_path))


def test_policies_golden_with_the_pip_installer(tmp_path):
    """`installer: pip`: no installer stage, every step installs with pip from a pip cache mount."""
    text = render_text(POLICIES.replace("repository: pinwheel/demo}", "repository: pinwheel/demo, installer: pip}"),
                       tmp_path)
    check_golden("policies-pip.Dockerfile", text)
    assert "AS installer" not in text and "uv" not in text


def test_shipped_dockerfile_is_up_to_date(capsys):
    rc = cli.main(["--manifest", str(ROOT / "wheels_manifest.yaml"), "render", "--check"])
    assert rc == 0, capsys.readouterr().out


def test_stale_dockerfile_is_detected(tmp_path, capsys):
    (tmp_path / "wheels_manifest.yaml").write_text(POLICIES)
    target = tmp_path / "images" / "demo" / "Dockerfile"
    assert cli.main(["--manifest", str(tmp_path / "wheels_manifest.yaml"), "render"]) == 0
    target.write_text(target.read_text().replace("six==1.16.0", "six==1.15.0"))
    assert cli.main(["--manifest", str(tmp_path / "wheels_manifest.yaml"), "render", "--check"]) == 1
    assert "out of date" in capsys.readouterr().err


RENDER_IN_A_PROCESS = """\
import sys
from pinwheel import manifest
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
m = manifest.load(sys.argv[1])
sys.stdout.buffer.write(render_dockerfile([plan_variant(m, v) for v in m.variants]).encode("utf-8"))
"""

# Each process differs in what could leak into the text: hash seed (set and
# dict-of-set order), locale, time zone, working directory and umask.
PROCESS_ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "LANG": "C", "LC_ALL": "C", "TZ": "UTC"},
    {"PYTHONHASHSEED": "1", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "Pacific/Kiritimati"},
    {"PYTHONHASHSEED": "4242", "LANG": "POSIX", "LC_ALL": "POSIX", "TZ": "America/St_Johns"},
]


def render_in_subprocess(manifest_path: Path, env_extra: dict[str, str], cwd: Path, umask: int) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LC_", "PYTHONHASHSEED", "TZ", "LANG"))}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-c", RENDER_IN_A_PROCESS, str(manifest_path)], cwd=cwd, env=env,
                          capture_output=True, timeout=120, preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


@pytest.mark.parametrize("source", ["policies", "shipped"])
def test_rendering_is_deterministic(source, tmp_path):
    """Byte-identical text from separate processes that differ in hash seed, locale, TZ, cwd and umask."""
    if source == "policies":
        path = tmp_path / "wheels_manifest.yaml"
        path.write_text(POLICIES)
        expected = (GOLDEN / "policies.Dockerfile").read_bytes()
    else:
        path = ROOT / "wheels_manifest.yaml"
        expected = (ROOT / "images" / "train" / "Dockerfile").read_bytes()
    outputs = []
    for i, env_extra in enumerate(PROCESS_ENVIRONMENTS):
        cwd = tmp_path / f"cwd-{i}"
        cwd.mkdir()
        outputs.append(render_in_subprocess(path, env_extra, cwd, (0o022, 0o077, 0o002)[i]))
    assert outputs[0], "the subprocess rendered nothing"
    for env_extra, out in zip(PROCESS_ENVIRONMENTS[1:], outputs[1:]):
        assert out == outputs[0], f"render differs under {env_extra}"
    assert outputs[0] == expected


def test_every_local_wheel_has_a_guard_and_every_gated_step_a_gate():
    text = (ROOT / "images" / "train" / "Dockerfile").read_text()
    m = manifest.load(ROOT / "wheels_manifest.yaml")
    for ws, pkg in m.packages():
        if pkg.local:
            assert f"set -- /tmp/wheels/{shell_glob(pkg.local.glob)}; \\\n    if [ -e \"$1\" ]" in text, pkg.name
    gated = [ws for ws in m.wheel_sets if ws.gate] + [p for _, p in m.packages() if p.gate]
    for item in gated:
        gate = item.gate
        assert f'if [ "${{{gate}}}" ' in text
    assert text.count('"${ENABLE_CUDA_13}"') == len(gated)


def test_no_syntax_line_and_secrets_only_as_mounts():
    text = (ROOT / "images" / "train" / "Dockerfile").read_text()
    assert "# syntax=" not in text
    assert "<<" not in text  # no heredocs: BuildKit v0.8 frontends lack them
    assert "--link" not in text
    assert "ca-certificates.crt" not in text
    runs = re.findall(r"^RUN .*?(?<!\\)$", text, flags=re.M | re.S)
    assert runs
    for run in runs:
        if "uv pip install" in run:  # the wheel sets (image.installer: uv): uv's index configuration, uv's cache
            assert "--mount=type=secret,id=ca" in run and "--mount=type=secret,id=uvconf" in run
            assert "export UV_CACHE_DIR=/tmp/pinwheel/uv-cache UV_LINK_MODE=hardlink" in run
            assert "trap 'rm -rf /tmp/pinwheel/uv-cache' EXIT" in run  # the cache never reaches the layer
            assert "--mount=type=bind,from=installer,source=/opt/pinwheel/uv/bin/uv,target=/tmp/pinwheel/bin/uv" in run
        elif "pip install" in run:
            assert "--mount=type=secret,id=ca" in run and "--mount=type=secret,id=pipconf" in run
            assert "--mount=type=cache,target=/root/.cache/pip" in run


GATED_PREFLIGHT = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 kernels only"}
  ENABLE_TORCH_214: {when: "torch >= 2.14", why: "needs torch 2.14"}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
wheel_sets:
  - name: core
    why: "index and a required local wheel"
    packages:
      - {requirement: "six==1.16.0"}
      - requirement: "demo-a==1.0"
        why: "a"
        local: {glob: "demo_a-*.whl", if_missing: fail, how_to_provide: "make a"}
      - requirement: "demo-skip==1.0"
        why: "skip"
        local: {glob: "demo_skip-*.whl", if_missing: skip}
  - name: cuda13
    why: "CUDA 13 only"
    gate: ENABLE_CUDA_13
    packages:
      - requirement: "demo-b==1.0"
        why: "b"
        local: {glob: "demo_b-1.?-*.whl", if_missing: fail, how_to_provide: "make b"}
      - requirement: "demo-c==1.0"
        gate: ENABLE_TORCH_214
        why: "c"
        local: {glob: "demo_c-*.whl", if_missing: fail, how_to_provide: "make c"}
"""

GATED_PREFLIGHT_STAGE = """\
ARG BASE=pinwheel/base:bookworm-py311

# ---- preflight: every wheel the manifest requires (if_missing: fail) is in
# wheels/, exactly once, before anything is installed. A stage of its own: the
# image stage reads only its marker, so a changed wheel re-runs this check and
# no layer below it. The build context holds each wheel set's own wheels in
# wheels/<set>/, which that set's step mounts.
FROM ${BASE} AS preflight
ARG ENABLE_CUDA_13=1
ARG ENABLE_TORCH_214=0
RUN --mount=type=bind,source=wheels,target=/tmp/wheels \\
    set -eu; \\
    missing=0; \\
    set -- /tmp/wheels/core/demo_a-*.whl; \\
    if [ ! -e "$1" ]; then echo 'pinwheel: ERROR: wheels/demo_a-*.whl is missing and demo-a is required. make a' >&2; missing=1; \\
    elif [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_a-*.whl; keep one:' "$@" >&2; missing=1; fi; \\
    if [ "${ENABLE_CUDA_13}" = "1" ]; then \\
    set -- /tmp/wheels/cuda13/demo_b-1.?-*.whl; \\
    if [ ! -e "$1" ]; then echo 'pinwheel: ERROR: wheels/demo_b-1.?-*.whl is missing and demo-b is required. make b' >&2; missing=1; \\
    elif [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_b-1.?-*.whl; keep one:' "$@" >&2; missing=1; fi; \\
    fi; \\
    if [ "${ENABLE_CUDA_13}" = "1" ] && [ "${ENABLE_TORCH_214}" = "1" ]; then \\
    set -- /tmp/wheels/cuda13/demo_c-*.whl; \\
    if [ ! -e "$1" ]; then echo 'pinwheel: ERROR: wheels/demo_c-*.whl is missing and demo-c is required. make c' >&2; missing=1; \\
    elif [ "$#" -gt 1 ]; then echo 'pinwheel: ERROR: more than one wheel in wheels/ matches demo_c-*.whl; keep one:' "$@" >&2; missing=1; fi; \\
    fi; \\
    if [ "$missing" != 0 ]; then exit 1; fi; \\
    mkdir -p /tmp/pinwheel; echo passed > /tmp/pinwheel/preflight

"""


def test_preflight_checks_every_fail_wheel_under_its_gates_before_any_install(tmp_path):
    text = render_text(GATED_PREFLIGHT, tmp_path)
    start = text.index("ARG BASE=")
    end = text.index("# ---- lock:")  # the lock stage, then the installer's (uv), follow the preflight's
    assert text[start:end] == GATED_PREFLIGHT_STAGE
    # the image stage's first RUN waits for the preflight's marker; every install comes after it
    image = text[text.index("FROM ${BASE} AS image\n"):]
    first_run = image.index("\nRUN ")
    assert image[first_run:].startswith(
        "\nRUN --mount=type=bind,from=preflight,source=/tmp/pinwheel/preflight,target=/tmp/pinwheel/preflight \\\n"
        "    python3 -m venv /opt/venv\n")
    assert "pip install" not in text[:end] and "pip install" not in image[:first_run]
    # skip and fallback wheels are not the preflight's business
    assert "demo_skip" not in text[:end]


def test_each_wheel_set_mounts_only_its_own_local_wheels(tmp_path):
    """Gated or not, each set with local wheels mounts its own directory of the build context (which holds only
    the active ones); the whole wheels/ directory is mounted by the preflight alone, so a changed wheel re-runs
    no other set."""
    text = render_text(GATED_PREFLIGHT, tmp_path)
    runs = re.findall(r"^RUN .*?(?<!\\)$", text, flags=re.M | re.S)
    mounts = [re.findall(r"--mount=type=bind,source=wheels\S*,target=/tmp/wheels", r) for r in runs]
    assert [m for m in mounts if m] == [["--mount=type=bind,source=wheels,target=/tmp/wheels"],  # the preflight
                                        ["--mount=type=bind,source=wheels/core,target=/tmp/wheels"],
                                        ["--mount=type=bind,source=wheels/cuda13,target=/tmp/wheels"]]


def test_a_wheel_set_without_local_wheels_mounts_none(tmp_path):
    text = render_text(POLICIES, tmp_path)
    shared = text[text.index("# ---- wheel set 1/3: core."):text.index("# ---- wheel set 3/3: local.")]
    assert "wheels" not in shared
    assert text.count("--mount=type=bind,source=wheels/local,target=/tmp/wheels \\\n") == 1


def test_no_fail_policy_no_preflight():
    text = (ROOT / "images" / "train" / "Dockerfile").read_text()
    assert "preflight" not in text
    assert "\nRUN python3 -m venv /opt/venv\n" in text


def test_manifest_strings_cannot_inject_shell(tmp_path):
    evil = POLICIES.replace('run `make wheels` in ../demo', "it's here; $(touch /tmp/pwned) `id` \\\" done")
    text = render_text(evil, tmp_path)
    lines = [l for l in text.splitlines() if "demo_fail-*.whl is missing" in l]
    assert len(lines) == 2  # the preflight's guard and the install step's
    for line in lines:
        echoed = re.search(r"echo (.*) >&2;", line).group(1)
        assert shlex.split(echoed) == [
            "pinwheel: ERROR: wheels/demo_fail-*.whl is missing and demo-fail is required. "
            "it's here; $(touch /tmp/pwned) `id` \" done"
        ]


def test_glob_quoting_keeps_only_wildcards_active():
    assert shell_glob("flash_mla-*.whl") == "flash_mla-*.whl"
    assert shell_glob("a+b-1.?-*.whl") == "a+b-1.?-*.whl"
    assert shlex.split(shell_glob("x-*.whl")) == ["x-*.whl"]


@pytest.mark.parametrize("source", ["shipped", "policies", "gated-preflight"])
def test_shellcheck_every_run_script(source, tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    if source == "shipped":
        text = (ROOT / "images" / "train" / "Dockerfile").read_text()
    else:
        text = render_text(POLICIES if source == "policies" else GATED_PREFLIGHT, tmp_path)
    scripts = run_scripts(text)
    assert len(scripts) >= 4
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"
