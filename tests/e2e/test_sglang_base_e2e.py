"""The sglang-base stand-in from its own manifest (images/sglang-base/): built into a bootstrap base's system
Python, its static smoke and CPU imports passed, the findings its manifest settles held; and an image that
names it as its base makes it first when the engine lacks it.

Run with `make e2e`: it installs sglang 0.5.16's 212 packages (about 10 GB, torch among them) from the index
pip is configured for.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from .examples import STAND_IN_BASES

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.network, pytest.mark.holds(STAND_IN_BASES)]

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "images" / "sglang-base" / "wheels_manifest.yaml"
TAG = "pinwheel/sglang-base:v0.5.16-cu130"


def cli(manifest: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(manifest), *args],
                          cwd=manifest.parent, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})


def tail(proc: subprocess.CompletedProcess) -> str:
    return f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def built(engine: Engine) -> dict:
    proc = cli(MANIFEST, "build", "--variant", "cu130", "--quiet", "--json")
    assert proc.returncode == 0, tail(proc)
    return json.loads(proc.stdout)


def run_in(image: str, code: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "--entrypoint", "/usr/bin/python3", image, "-c", code],
                          capture_output=True, text=True, timeout=300)


def test_the_stand_in_holds_the_release_set_in_the_system_python(built: dict) -> None:
    assert TAG in built["tags"], built["tags"]
    probe = run_in(TAG, "import sys, sglang, torch, flashinfer, sentencepiece.sentencepiece_model_pb2, "
                        "matplotlib_inline, torchcodec; "
                        "print(sys.prefix, sglang.__version__, torch.__version__, flashinfer.__version__)")
    assert probe.returncode == 0, probe.stderr[-3000:]
    prefix, sglang, torch, flashinfer = probe.stdout.split()
    assert prefix == "/usr" and sglang == "0.5.16" and flashinfer == "0.6.14", probe.stdout
    assert torch.startswith("2.11.0"), torch


def test_its_smoke_passes_static_and_leaves_the_driver_bound_imports_to_a_gpu_host(built: dict) -> None:
    expect = json.loads((MANIFEST.parent / "lock" / "cu130" / "expect.json").read_text())
    assert set(expect["import_skip"]) == {"sgl-deep-gemm", "sglang-kernel", "torch-memory-saver"}
    smoke = cli(MANIFEST, "smoke", "--variant", "cu130", TAG, "--level", "import", "--gpus", "no")
    assert smoke.returncode == 0, tail(smoke)
    assert "static: PASSED" in smoke.stdout and "import: SKIPPED" in smoke.stdout, tail(smoke)
    assert "A skip is NOT a pass" in smoke.stdout, tail(smoke)


def test_an_image_on_the_stand_in_builds_it_first_when_the_engine_lacks_it(built: dict, engine: Engine,
                                                                           tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "images" / "sglang-base", repo / "images" / "sglang-base",
                    ignore=shutil.ignore_patterns(".cache", ".pinwheel"))
    example = repo / "images" / "on-sglang" / "wheels_manifest.yaml"
    example.parent.mkdir(parents=True)
    example.write_text(
        "manifest_version: 1\nimage: {name: on-sglang, repository: pinwheel-e2e/on-sglang}\n"
        "variants:\n  cu130: {cuda: '13.0', torch: '2.11.0', python: '3.11', platform: manylinux_2_36_x86_64,\n"
        f"          base: '{TAG}', environment: base, tag: 'cu130-{{date}}'}}\n"
        "steps:\n  - name: extra\n    kind: wheels\n    why: one package over the stand-in's set\n"
        "    packages:\n      - {requirement: 'six==1.17.0', why: 'tiny'}\n")
    subprocess.run(["docker", "rmi", TAG], capture_output=True, check=True)  # its other tag keeps the layers
    assert not engine.image_exists(TAG)
    ready = cli(example, "base", "--variant", "cu130")
    assert ready.returncode == 0, tail(ready)
    assert "building it from images/sglang-base/wheels_manifest.yaml (variant cu130)" in ready.stderr, tail(ready)
    assert engine.image_exists(TAG)
    for step in (("base", "inventory", "--variant", "cu130"), ("lock", "--variant", "cu130"), ("render",)):
        proc = cli(example, *step)
        assert proc.returncode == 0, (step, tail(proc))
    inventory = json.loads((example.parent / "inventory" / "cu130.json").read_text())
    assert {"sglang", "torch"} <= {d["name"] for d in inventory["distributions"]}
    build = cli(example, "build", "--variant", "cu130", "--quiet", "--json")
    assert build.returncode == 0, tail(build)
    probe = run_in(json.loads(build.stdout)["tags"][0], "import six, sglang; print(six.__version__, sglang.__version__)")
    assert probe.stdout.split() == ["1.17.0", "0.5.16"], probe.stderr[-2000:]
