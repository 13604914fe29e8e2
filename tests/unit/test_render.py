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

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "golden"
UPDATE = os.environ.get("PINWHEEL_UPDATE_GOLDEN") == "1"

POLICIES = """\
manifest_version: 1
image: {name: demo, repository: pinwheel/demo}
gates:
  ENABLE_CUDA_13: {when: "cuda >= 13", why: "CUDA 13 kernels only"}
variants:
  cu130: {cuda: "13.0", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu130-{date}"}
  cu129: {cuda: "12.9", torch: "2.13.0", python: "3.11", platform: manylinux_2_36_x86_64, base: "pinwheel/base:bookworm-py311", tag: "cu129-{date}"}
wheel_sets:
  - name: core
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
  - name: gated
    why: "CUDA 13 only"
    gate: ENABLE_CUDA_13
    packages:
      - {requirement: "idna==3.10", no_deps: true, why: "its extras would pull more"}
  - name: local
    why: "local wheels under every policy"
    packages:
      - requirement: "demo-fail==1.0"
        why: "must be present"
        local: {glob: "demo_fail-*.whl", if_missing: fail, how_to_provide: "run `make wheels` in ../demo"}
      - requirement: "demo-skip==1.0"
        why: "nice to have"
        gate: ENABLE_CUDA_13
        local: {glob: "demo_skip-*.whl", if_missing: skip}
      - requirement: "demo-fallback==1.0"
        why: "index build is fine too"
        local: {glob: "demo_fallback-1.?-*.whl", if_missing: fallback}
        fallback: {requirement: "certifi==2024.8.30", no_deps: true, why: "stand-in from the index"}
"""


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
        if "pip install" in run:
            assert "--mount=type=secret,id=ca" in run
            assert "--mount=type=cache,target=/root/.cache/pip" in run


def test_manifest_strings_cannot_inject_shell(tmp_path):
    evil = POLICIES.replace('run `make wheels` in ../demo', "it's here; $(touch /tmp/pwned) `id` \\\" done")
    text = render_text(evil, tmp_path)
    line = next(l for l in text.splitlines() if "demo_fail-*.whl is missing" in l)
    echoed = line.strip().removeprefix("echo ").removesuffix(" >&2; \\")
    assert shlex.split(echoed) == [
        "pinwheel: ERROR: wheels/demo_fail-*.whl is missing and demo-fail is required. "
        "it's here; $(touch /tmp/pwned) `id` \" done"
    ]


def test_glob_quoting_keeps_only_wildcards_active():
    assert shell_glob("flash_mla-*.whl") == "flash_mla-*.whl"
    assert shell_glob("a+b-1.?-*.whl") == "a+b-1.?-*.whl"
    assert shlex.split(shell_glob("x-*.whl")) == ["x-*.whl"]


def run_scripts(dockerfile: str) -> list[str]:
    """The shell of every RUN, with BuildKit's --mount flags removed."""
    scripts = []
    for run in re.findall(r"^RUN (.*?)(?<!\\)$", dockerfile, flags=re.M | re.S):
        body = run.replace("\\\n", " ")
        body = re.sub(r"--mount=\S+\s*", "", body)
        scripts.append(body.strip())
    return scripts


@pytest.mark.parametrize("source", ["shipped", "policies"])
def test_shellcheck_every_run_script(source, tmp_path):
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    text = (ROOT / "images" / "train" / "Dockerfile").read_text() if source == "shipped" else render_text(POLICIES, tmp_path)
    scripts = run_scripts(text)
    assert len(scripts) >= 4
    for script in scripts:
        proc = subprocess.run(["shellcheck", "-s", "sh", "-e", "SC2016", "-"], input=f"#!/bin/sh\n{script}\n",
                              capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}\n{proc.stdout}"
