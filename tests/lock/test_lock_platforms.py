"""One lock and one report per container platform, against the local HTTP index (real uv runs).

The demo variant lists linux/amd64 and linux/arm64. Its torch stand-in has one
wheel per architecture, a kernel asks for a helper only on aarch64 (a marker),
and a step is gated on `arch == arm64`.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.lock import check_lock, read_lock
from pinwheel.plan import plan_platforms

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
CP = f"cp{sys.version_info.major}{sys.version_info.minor}"

MANIFEST = """\
manifest_version: 1
# installer: pip: the local index serves the host's own uv (x86_64) only, and an arm64 lock pins its own files
image: {{name: demo, repository: pinwheel/demo, installer: pip}}
gates:
  ONLY_ARM: {{when: "arch == arm64", why: "Grace nodes only"}}
variants:
  cu130: {{cuda: "13.0", torch: "2.0", python: "{py}", platform: manylinux_2_36_x86_64,{platforms}
          base: "pinwheel/base:bookworm-py311", tag: "cu130-{{date}}"}}
wheel_sets:
  - name: base
    why: "the torch stand-in"
    packages:
      - {{requirement: "pwt-torchy==2.0"}}
  - name: kernels
    why: "kernels"
    packages:
      - {{requirement: "pwt-kern==1.0"}}{extra}
  - name: grace
    why: "arm64 only"
    gate: ONLY_ARM
    packages:
      - {{requirement: "pwt-grace==1.0"}}
"""
BOTH = " platforms: [linux/amd64, linux/arm64],"


def write_manifest(root: Path, platforms: str = BOTH, extra: str = "") -> Path:
    path = root / "wheels_manifest.yaml"
    path.write_text(MANIFEST.format(py=PY, platforms=platforms, extra=extra))
    return path


def sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def wheels(local_index):
    ix = local_index
    w = {
        "x86": ix.add("pwt-torchy", "2.0", requires=["pwt-common"], tags=f"{CP}-{CP}-manylinux_2_28_x86_64"),
        "arm": ix.add("pwt-torchy", "2.0", requires=["pwt-common"], tags=f"{CP}-{CP}-manylinux_2_28_aarch64"),
        "x86only": ix.add("pwt-x86only", "1.0", tags=f"{CP}-{CP}-manylinux_2_28_x86_64"),
    }
    ix.add("pwt-common", "1.0")
    ix.add("pwt-kern", "1.0", requires=['pwt-armhelper; platform_machine == "aarch64"'])
    ix.add("pwt-armhelper", "1.0")
    ix.add("pwt-grace", "1.0")
    return w


@pytest.fixture
def project(local_index, wheels, tmp_path, monkeypatch, local_project):
    url = local_index.serve()
    root = local_project(url)
    write_manifest(root)
    return root


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def test_lock_writes_one_hashed_set_per_platform(project, wheels, local_index, capsys):
    assert run(project, "lock", "--resolver", "uv") == 0
    out = capsys.readouterr().out
    assert "cu130: locked" in out and "cu130 linux/arm64: locked" in out
    own = read_lock(project / "images/demo/lock/cu130")
    arm = read_lock(project / "images/demo/lock/cu130/arm64")
    # each platform's hashes name only its own wheels
    assert own.packages["pwt-torchy"].hashes == (sha(wheels["x86"]),)
    assert arm.packages["pwt-torchy"].hashes == (sha(wheels["arm"]),)
    # markers and gates are the platform's
    assert sorted(own.versions) == ["pwt-common", "pwt-kern", "pwt-torchy"]
    assert sorted(arm.versions) == ["pwt-armhelper", "pwt-common", "pwt-grace", "pwt-kern", "pwt-torchy"]
    assert [s.file for s in arm.slices] == ["01-base.txt", "02-kernels.txt", "03-grace.txt"]
    assert "manylinux_2_36_aarch64" in (arm.dir / "requirements.txt").read_text().splitlines()[0]
    assert json.loads((arm.dir / "expect.json").read_text())["pins"]["pwt-grace"] == "1.0"

    local_index.close()  # --check needs no network, and judges every platform
    assert run(project, "lock", "--check") == 0
    out = capsys.readouterr().out
    assert "cu130: up to date" in out and "cu130 linux/arm64: up to date" in out
    m = manifest.load(project / "wheels_manifest.yaml")
    assert [check_lock(p, project).status for p in plan_platforms(m, "cu130")] == ["ok", "ok"]


def test_lock_one_platform_and_staleness(project, capsys):
    assert run(project, "lock", "--resolver", "uv", "--platform", "linux/arm64") == 0
    assert (project / "images/demo/lock/cu130/arm64/requirements.txt").exists()
    assert not (project / "images/demo/lock/cu130/requirements.txt").exists()
    capsys.readouterr()
    assert run(project, "lock", "--check") == 1
    err = capsys.readouterr().err
    assert "cu130: missing" in err and "linux/arm64" not in err.split("stale lock(s)")[0].split("cu130: missing")[0]
    assert run(project, "lock", "--platform", "linux/s390x", "--check") == 2


def test_locking_the_own_platform_keeps_the_other_platforms_locks(project, capsys):
    """lock/<variant>/ holds the other platforms' lock dirs: re-locking amd64 alone must not drop arm64's."""
    assert run(project, "lock", "--resolver", "uv") == 0
    arm = project / "images/demo/lock/cu130/arm64"
    before = {p.name: p.read_bytes() for p in arm.iterdir()}
    assert run(project, "lock", "--resolver", "uv", "--platform", "linux/amd64") == 0
    assert {p.name: p.read_bytes() for p in arm.iterdir()} == before
    capsys.readouterr()
    assert run(project, "lock", "--check") == 0
    assert not [p for p in (project / "images/demo/lock").iterdir() if p.name.startswith(".")]


def test_a_variant_without_platforms_keeps_every_file(project, wheels):
    """Today's single-platform variant: one lock in lock/<variant>/, every file of a version hashed."""
    write_manifest(project, platforms="")
    assert run(project, "lock", "--resolver", "uv") == 0
    own = read_lock(project / "images/demo/lock/cu130")
    assert set(own.packages["pwt-torchy"].hashes) == {sha(wheels["x86"]), sha(wheels["arm"])}
    assert not (project / "images/demo/lock/cu130/arm64").exists()
    # adding platforms makes that lock stale: its hashes must shrink to the platform's files
    write_manifest(project)
    m = manifest.load(project / "wheels_manifest.yaml")
    assert check_lock(plan_platforms(m, "cu130")[0], project).status == "stale"


def test_report_judges_the_platform(project, capsys):
    assert run(project, "lock", "--resolver", "uv") == 0
    capsys.readouterr()
    assert run(project, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    names = {p["name"] for p in data["packages"]} if "packages" in data else None
    assert data["summary"]["verdict"] == "clean"
    if names is not None:
        assert {"pwt-armhelper", "pwt-grace"} <= names
    assert run(project, "report", "--variant", "cu130", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["verdict"] == "clean"


def test_a_package_missing_on_one_platform_is_named(project, capsys):
    write_manifest(project, extra='\n      - {requirement: "pwt-x86only==1.0"}')
    assert run(project, "lock", "--resolver", "uv", "--platform", "linux/amd64") == 0
    capsys.readouterr()
    assert run(project, "lock", "--resolver", "uv", "--platform", "linux/arm64") == 1
    err = capsys.readouterr().err
    assert "cu130 linux/arm64: lock failed" in err and "pwt-x86only" in err
    code = run(project, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json")
    captured = capsys.readouterr()
    assert code != 0
    assert "pwt-x86only" in captured.out + captured.err
