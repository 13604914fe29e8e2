"""A variant on a base that already holds torch, flashinfer and an older tvm-ffi in its system python,
with the shipped cu130 wheel sets on top (`environment: base`), on real index packages.

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
    python3 -m pip install --no-cache-dir torch==2.13.0 flashinfer-python==0.6.15.post1 apache-tvm-ffi==0.1.10
ENTRYPOINT ["/bin/bash", "-l"]
"""
VARIANT = """\
  cu130-sglang-like:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: "{base}"
    environment: base
    tag: "cu130-on-base-{{date}}"
"""


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
        text = (ROOT / "wheels_manifest.yaml").read_text()
        text = text.replace("\nvariants:\n", "\nvariants:\n" + VARIANT.format(base=base_tag), 1)
        (root / "wheels_manifest.yaml").write_text(text)
        variant = "cu130-sglang-like"
        for step in (("render",), ("base", "inventory", "--variant", variant),
                     ("lock", "--variant", variant, "--resolver", "uv")):
            proc = cli(root, *step)
            assert proc.returncode == 0, (step, proc.stdout[-3000:], proc.stderr[-3000:])

        report = cli(root, "report", "--variant", variant, "--json")
        data = json.loads(report.stdout)
        moves = {(h["package"], h["before"], h["after"]) for h in data["replacements"]}
        assert ("apache-tvm-ffi", "0.1.10", "0.1.11") in moves, data["replacements"]  # intended: the shared pin
        # every other change to the base's packages is named, as a move of the base's package
        assert all(h["earlier_step"] == "base" for h in data["hazards"]), data["hazards"]
        assert report.returncode in (0, 1), report.stderr[-2000:]

        lock_dir = root / "images" / "train" / "lock" / variant
        sliced = "".join(p.read_text() for p in lock_dir.glob("0*.txt"))
        assert "\ntorch==" not in sliced and not sliced.startswith("torch==")  # the base's torch is kept, not sliced

        build = cli(root, "build", "--variant", variant, "--json")
        assert build.returncode == 0, build.stderr[-4000:]
        built_ref = json.loads(build.stdout)["tags"][0]

        base_history = save_and(engine, base_tag, None, history)
        image_history = save_and(engine, built_ref, None, history)
        torch_layers = {d.layer for d in image_history.final if d.name == "torch"}
        base_torch = {d.layer for d in base_history.final if d.name == "torch"}
        assert torch_layers == base_torch  # torch is not reinstalled: no second 5 GB layer
        inventory = json.loads((root / "images" / "train" / "inventory" / f"{variant}.json").read_text())
        expected = {d["name"]: d["version"] for d in inventory["distributions"]}
        expect = json.loads((lock_dir / "expect.json").read_text())
        expected.update(expect["pins"])
        expected.update(expect["fallbacks"])  # no local flash_mla wheel here: its index fallback is installed
        got = {d.name: d.version for d in image_history.final}
        assert got == expected  # pip list == inventory + lock
    finally:
        for ref in (built_ref, base_tag):
            if ref and engine.image_exists(ref):
                engine.remove(ref, force=True)
