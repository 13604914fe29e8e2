"""The shipped cu130 variant locked and reported for linux/arm64 on the real index (uv engine)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.index import IndexClient, IndexUnavailable
from pinwheel.lock import read_lock

pytestmark = pytest.mark.network

ROOT = Path(__file__).resolve().parents[2]
OWN = "    platform: manylinux_2_36_x86_64\n"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The shipped manifest with `platforms: [linux/amd64, linux/arm64]` on cu130, in its own directory."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(cache))
    client = IndexClient(cache_dir=cache / "probe", retries=2, timeout=20)
    try:
        client.files("torch")
    except IndexUnavailable as exc:
        pytest.skip(f"package index not reachable: {exc}")
    text = (ROOT / "wheels_manifest.yaml").read_text()
    assert OWN in text
    root = tmp_path / "project"
    root.mkdir()
    (root / "wheels_manifest.yaml").write_text(text.replace(OWN, OWN + "    platforms: [linux/amd64, linux/arm64]\n", 1))
    return root, client


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def test_cu130_locks_and_reports_clean_for_arm64(project, capsys):
    root, client = project
    assert run(root, "lock", "--variant", "cu130", "--platform", "linux/arm64", "--engine", "uv") == 0
    lock = read_lock(root / "images/train/lock/cu130/arm64")
    for name in ("torch", "nvidia-cudnn-frontend", "nvidia-cutlass-dsl-libs-cu13", "apache-tvm-ffi", "cuda-bindings",
                 "torch-c-dlpack-ext", "sgl-flash-mla", "flashinfer-python"):
        assert name in lock.packages, name
    assert lock.versions["torch"] == "2.13.0"
    # no x86_64 wheel in the arm64 hashes: every hash is an aarch64 wheel, a pure wheel or an sdist
    for name, pkg in lock.packages.items():
        files = {f"sha256:{f.sha256.lower()}": f.filename for f in client.files(name) if f.sha256}
        for h in pkg.hashes:
            filename = files.get(h, "")
            assert "x86_64" not in filename, (name, filename)
        assert any("aarch64" in files.get(h, "") or "-none-any" in files.get(h, "") or not files.get(h, "").endswith(".whl")
                   for h in pkg.hashes), name
    capsys.readouterr()
    code = run(root, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["target"]["platform"] == "manylinux_2_36_aarch64"
    assert data["summary"]["lock"] == "ok"
    assert (code, data["summary"]["verdict"]) == (0, "clean"), data["summary"]
