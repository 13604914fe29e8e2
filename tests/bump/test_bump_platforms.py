"""bump judges each platform a variant lists (local HTTP index, locks made by uv for both platforms).

pwt-kern 1.0 has a wheel per architecture; 2.0 only an x86_64 one. Bumping it is fine on linux/amd64 and
blocked on linux/arm64, where the report names the package and the platform.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pinwheel import cli

from tests.support.manifests import two_platform_manifest

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"
X86 = f"{CP}-{CP}-manylinux_2_28_x86_64"
ARM = f"{CP}-{CP}-manylinux_2_28_aarch64"

MANIFEST = two_platform_manifest("pwt-kern==1.0", base_why="the torch stand-in", kernel_why="a kernel")


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    ix = local_index
    for tags in (X86, ARM):
        ix.add("pwt-torchy", "2.0", tags=tags)
        ix.add("pwt-kern", "1.0", requires=["pwt-torchy==2.0"], tags=tags)
    ix.add("pwt-kern", "2.0", requires=["pwt-torchy==2.0"], tags=X86)  # no aarch64 wheel of 2.0
    root = local_project(ix.serve())
    (root / "wheels_manifest.yaml").write_text(MANIFEST)
    assert run(root, "lock", "--resolver", "uv") == 0
    return root


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def bump_json(root: Path, capsys, *args: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = run(root, "bump", "pwt-kern==2.0", "--variant", "cu130", "--json", *args)
    return code, json.loads(capsys.readouterr().out)


def test_one_platform_at_a_time(project, capsys):
    code, amd = bump_json(project, capsys, "--platform", "linux/amd64")
    assert code == 0 and amd["platform"] == "linux/amd64"
    assert amd["lock_dir"] == "images/demo/lock/cu130" and amd["installed_from"] == "lock"
    assert (amd["summary"]["blocked"], amd["missing_on_platform"]) == (0, [])
    assert {p["name"]: p["verdict"] for p in amd["packages"]} == {"pwt-kern": "ok"}

    code, arm = bump_json(project, capsys, "--platform", "linux/arm64")
    assert code == 1 and arm["platform"] == "linux/arm64"
    assert arm["target"]["platform"] == "manylinux_2_36_aarch64"
    assert arm["lock_dir"] == "images/demo/lock/cu130/arm64"  # today's arm64 image, from its own lock
    assert arm["missing_on_platform"] == [{
        "package": "pwt-kern", "version": "2.0", "platform": "linux/arm64", "target": "manylinux_2_36_aarch64",
        "python": PY, "wheels_for": ["x86_64"], "wheels": [f"pwt_kern-2.0-{X86}.whl"]}]
    (row,) = [p for p in arm["packages"] if p["name"] == "pwt-kern"]
    assert row["verdict"] == "blocked"
    assert f"pwt-kern 2.0 is missing on linux/arm64: no wheel for Python {PY} on manylinux_2_36_aarch64 (the index " \
           "has wheels for x86_64 only)" in " ".join(row["reasons"])
    assert row["fix"]["action"] == "keep" and row["fix"]["text"] == (
        "keep pwt-kern at 1.0 until 2.0 has a linux/arm64 wheel, or take linux/arm64 out of the variant's platforms")
    assert arm["summary"]["missing_on_platform"] == 1 and arm["summary"]["exit_code"] == 1
    # its requirements are unknown there: nothing is said to move or drop because of them
    assert arm["moves"] == [] and arm["requirements"] == []
    assert not any("metadata not available" in n for n in arm["notes"])


def test_every_platform_without_platform(project, capsys):
    code, doc = bump_json(project, capsys)
    assert code == 1  # blocked on one of them
    assert doc["platform"] == "linux/amd64" and doc["summary"]["blocked"] == 0
    (arm,) = doc["other_platforms"]
    assert arm["platform"] == "linux/arm64" and arm["summary"]["blocked"] == 1
    capsys.readouterr()
    assert run(project, "bump", "pwt-kern==2.0", "--variant", "cu130") == 1
    out = capsys.readouterr().out
    assert out.startswith("== linux/amd64 ==\nbump pwt-kern 1.0 → 2.0 in demo:cu130 (Python " + PY +
                          ", manylinux_2_36_x86_64, CUDA 13.0)")
    assert "\n== linux/arm64 ==\nbump pwt-kern 1.0 → 2.0 in demo:cu130 (Python " + PY + \
           ", manylinux_2_36_aarch64, CUDA 13.0)" in out
    assert f"missing on linux/arm64: pwt-kern 2.0 has no wheel for Python {PY} on manylinux_2_36_aarch64; " \
           f"the index has: pwt_kern-2.0-{X86}.whl\n" in out
    assert out.rstrip().endswith("linux/amd64: nothing blocks; linux/arm64: blocked")


def test_a_platform_the_variant_does_not_list_is_bad_input(project, capsys):
    capsys.readouterr()
    assert run(project, "bump", "pwt-kern==2.0", "--variant", "cu130", "--platform", "linux/s390x") == 2
    assert "--platform linux/s390x: variant cu130 is built for linux/amd64, linux/arm64" in capsys.readouterr().err
