"""A variant on a base that already holds torch, flashinfer and an older tvm-ffi in its system python,
with the shipped cu130 wheel sets on top (`environment: base`), on real index packages.

The base's flashinfer brought CUTLASS DSL 4.8.1 with its CUDA 12 libs; the shipped sets pin the DSL at
4.6.2 and `exclude` the CUDA 12 libs. exclude removes nothing, so the base keeps its libs-cu12 4.8.1,
which requires libs-base 4.8.1: the lock and the report name it, and the report fails on the break.
A `remove` step is how the variant drops it; then it builds, and pip list is the inventory plus the
lock, less what was removed.

Run with `make e2e`: the base alone installs torch (several GB) from the index pip is configured for.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from pinwheel import manifest
from pinwheel.image.build import write_secrets
from pinwheel.image.engine import Engine
from pinwheel.image.inventory import history, save_and
from pinwheel.plan import plan_variant

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]
BASE_DOCKERFILE = """\
FROM {base}
RUN --mount=type=secret,id=ca,target=/run/secrets/ca --mount=type=secret,id=pipconf,target=/run/secrets/pipconf \\
    PIP_CONFIG_FILE=/run/secrets/pipconf PIP_CERT=/run/secrets/ca PIP_BREAK_SYSTEM_PACKAGES=1 \\
    python3 -m pip install --no-cache-dir torch==2.13.0 flashinfer-python==0.6.15.post1 apache-tvm-ffi==0.1.10 \\
    nvidia-cutlass-dsl==4.8.1
ENTRYPOINT ["/bin/bash", "-l"]
"""
VARIANT = "cu130-sglang-like"
LIBS_CU12 = "nvidia-cutlass-dsl-libs-cu12"
REMOVE_STEP = {"name": "drop-cu12-libs", "kind": "remove",
               "why": "the base's flashinfer brought CUDA 12 libs that the shipped sets exclude",
               "packages": [{"name": LIBS_CU12, "why": "excluded on nvidia-cutlass-dsl; the base installed it"}]}


def manifest_on_base(base: str, remove: bool) -> str:
    """The shipped manifest with one variant, on ``base`` (environment: base), in the steps form; with
    ``remove``, a first step takes the base's CUDA 12 libs out."""
    data = yaml.safe_load((ROOT / "wheels_manifest.yaml").read_text())
    data["variants"] = {VARIANT: {"cuda": "13.0", "torch": "2.13.0", "python": "3.11",
                                  "platform": "manylinux_2_36_x86_64", "base": base, "environment": "base",
                                  "tag": "cu130-on-base-{date}"}}
    data["steps"] = ([REMOVE_STEP] if remove else []) + [{**s, "kind": "wheels"} for s in data.pop("wheel_sets")]
    return yaml.safe_dump(data, sort_keys=False)


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(root / "wheels_manifest.yaml"),
                           *args], cwd=root, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})


def test_the_shipped_wheel_sets_on_a_base_with_torch(engine: Engine, base_image: str, tmp_path: Path):
    base_tag = f"pinwheel-e2e/torch-base:{uuid.uuid4().hex[:8]}"
    ctx = tmp_path / "base"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(BASE_DOCKERFILE.format(base=base_image))
    (tmp_path / "secrets").mkdir()
    secrets = write_secrets(plan_variant(manifest.load(ROOT / "wheels_manifest.yaml"), "cu130"), tmp_path / "secrets")
    engine.build(ctx, ctx / "Dockerfile", tags=[base_tag], secrets=secrets)
    built_ref = None
    try:
        root = tmp_path / "repo"
        root.mkdir()
        shutil.copytree(ROOT / "images", root / "images")
        (root / "wheels_manifest.yaml").write_text(manifest_on_base(base_tag, remove=False))
        for step in (("render",), ("base", "inventory", "--variant", VARIANT)):
            proc = cli(root, *step)
            assert proc.returncode == 0, (step, proc.stdout[-3000:], proc.stderr[-3000:])
        inventory = json.loads((root / "images" / "train" / "inventory" / f"{VARIANT}.json").read_text())
        in_base = {d["name"]: d["version"] for d in inventory["distributions"]}
        assert in_base[LIBS_CU12] == "4.8.1", in_base.get(LIBS_CU12)

        # exclude alone: the base keeps its libs-cu12, and both the lock and the report say so
        lock = cli(root, "lock", "--variant", VARIANT, "--engine", "uv")
        assert lock.returncode == 0, lock.stderr[-3000:]
        assert f"the base keeps {LIBS_CU12} 4.8.1" in lock.stderr, lock.stderr[-3000:]
        lock_dir = root / "images" / "train" / "lock" / VARIANT
        expect = json.loads((lock_dir / "expect.json").read_text())
        assert expect["base_kept_excluded"] == {LIBS_CU12: {"version": "4.8.1", "excluded_on": ["nvidia-cutlass-dsl"]}}
        report = cli(root, "report", "--variant", VARIANT, "--json")
        data = json.loads(report.stdout)
        kept = data["base"]["kept_excluded"]
        assert [(k["package"], k["version"]) for k in kept] == [(LIBS_CU12, "4.8.1")], kept
        broken = [e for e in data["edges"] if e["verdict"] == "violated" and e["parent"] == LIBS_CU12]
        assert broken, "the base's libs-cu12 4.8.1 needs libs-base 4.8.1, and the pin moves it to 4.6.2"
        assert report.returncode == 1, report.stderr[-2000:]

        # a remove step drops it: the lock lists it as removed, the report no longer names it
        (root / "wheels_manifest.yaml").write_text(manifest_on_base(base_tag, remove=True))
        for step in (("render",), ("lock", "--variant", VARIANT, "--engine", "uv")):
            proc = cli(root, *step)
            assert proc.returncode == 0, (step, proc.stdout[-3000:], proc.stderr[-3000:])
        expect = json.loads((lock_dir / "expect.json").read_text())
        assert "base_kept_excluded" not in expect and LIBS_CU12 in expect["removed"]
        report = cli(root, "report", "--variant", VARIANT, "--json")
        data = json.loads(report.stdout)
        assert data["base"]["kept_excluded"] == []
        assert not [e for e in data["edges"] if e["verdict"] == "violated"], report.stdout[-3000:]
        moves = {(h["package"], h["before"], h["after"]) for h in data["replacements"]}
        assert ("apache-tvm-ffi", "0.1.10", "0.1.11") in moves, data["replacements"]  # intended: the shared pin
        # every other change to the base's packages is named, as a move of the base's package
        assert all(h["earlier_step"] == "base" for h in data["hazards"]), data["hazards"]

        sliced = "".join(p.read_text() for p in lock_dir.glob("0*.txt"))
        assert "\ntorch==" not in sliced and not sliced.startswith("torch==")  # the base's torch is kept, not sliced

        build = cli(root, "build", "--variant", VARIANT, "--json")
        assert build.returncode == 0, build.stderr[-4000:]
        built_ref = json.loads(build.stdout)["tags"][0]

        base_history = save_and(engine, base_tag, None, history)
        image_history = save_and(engine, built_ref, None, history)
        torch_layers = {d.layer for d in image_history.final if d.name == "torch"}
        base_torch = {d.layer for d in base_history.final if d.name == "torch"}
        assert torch_layers == base_torch  # torch is not reinstalled: no second 5 GB layer
        expected = {n: v for n, v in in_base.items() if n not in expect["removed"]}
        expected.update(expect["pins"])
        expected.update(expect["fallbacks"])  # no local flash_mla wheel here: its index fallback is installed
        got = {d.name: d.version for d in image_history.final}
        assert got == expected  # pip list == inventory + lock - removed
    finally:
        for ref in (built_ref, base_tag):
            if ref and engine.image_exists(ref):
                engine.remove(ref, force=True)
