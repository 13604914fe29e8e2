"""The shipped cu130 variant, which lists linux/amd64 and linux/arm64, locked and reported for arm64 on the
real index; and the committed arm64 lock's hashes looked up there by file name."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pinwheel import cli
from pinwheel.index import IndexClient, IndexUnavailable, target_platforms
from pinwheel.lock import read_lock

pytestmark = pytest.mark.network

ROOT = Path(__file__).resolve().parents[2]
SHIPPED_ARM64 = ROOT / "images/train/lock/cu130/arm64"
CU130_SET = ("torch", "nvidia-cudnn-frontend", "nvidia-cutlass-dsl-libs-cu13", "apache-tvm-ffi", "cuda-bindings",
             "torch-c-dlpack-ext", "sgl-flash-mla", "flashinfer-python")


@pytest.fixture
def client(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(cache))
    client = IndexClient(cache_dir=cache / "probe", retries=2, timeout=20)
    try:
        client.files("torch")
    except IndexUnavailable as exc:
        pytest.fail(f"the package index is not reachable, so this test of it checked nothing: {exc}", pytrace=False)
    return client


@pytest.fixture
def project(tmp_path, client):
    """The shipped manifest, unchanged, in a directory of its own, with its committed arm64 lock: a relock
    keeps the pins it already has (a release since then moves nothing), so what it makes is comparable."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy2(ROOT / "wheels_manifest.yaml", root / "wheels_manifest.yaml")
    shutil.copytree(SHIPPED_ARM64, root / SHIPPED_ARM64.relative_to(ROOT))
    return root


def run(root: Path, *args: str) -> int:
    return cli.main(["--manifest", str(root / "wheels_manifest.yaml"), *args])


def assert_arm64_files_only(lock, client) -> None:
    """Every hash names an aarch64 wheel, a pure wheel or an sdist on the index; never an x86_64 wheel."""
    for name, pkg in lock.packages.items():
        files = {f"sha256:{f.sha256.lower()}": f.filename for f in client.files(name) if f.sha256}
        for h in pkg.hashes:
            filename = files.get(h)
            assert filename is not None, (name, h)  # every hash is a file of the index
            assert "x86_64" not in filename, (name, filename)
        assert any("aarch64" in files[h] or "-none-any" in files[h] or not files[h].endswith(".whl")
                   for h in pkg.hashes), name


@pytest.mark.parametrize("lock_dir,platform", [(SHIPPED_ARM64, "manylinux_2_36_aarch64"),
                                               (SHIPPED_ARM64.parent, "manylinux_2_36_x86_64")])
def test_the_wheel_pip_picks_on_each_platform_is_hashed_in_its_lock(client, lock_dir, platform):
    """What pip in that platform's image takes (its best wheel, else the sdist) is in its --require-hashes set."""
    lock = read_lock(lock_dir)
    platforms = target_platforms(platform)
    for name, pkg in lock.packages.items():
        best = client.best_wheel(name, pkg.version, "3.11", platforms)
        if best is None:  # no wheel for the target: pip builds the sdist, which the lock must name
            (best,) = [f for f in client.files(name) if str(f.version) == pkg.version and not f.is_wheel]
        assert f"sha256:{best.sha256.lower()}" in pkg.hashes, (name, best.filename)


def test_the_committed_arm64_lock_names_no_x86_wheel(client):
    lock = read_lock(SHIPPED_ARM64)
    for name in CU130_SET:
        assert name in lock.packages, name
    assert_arm64_files_only(lock, client)


def test_cu130_locks_and_reports_clean_for_arm64(project, client, capsys):
    # no --engine: a platform other than the host's is locked with uv (pip-compile resolves for the host only)
    assert run(project, "lock", "--variant", "cu130", "--platform", "linux/arm64") == 0
    lock = read_lock(project / "images/train/lock/cu130/arm64")
    assert "# pinwheel-engine: uv" in (lock.dir / "requirements.txt").read_text()
    for name in CU130_SET:
        assert name in lock.packages, name
    assert lock.versions["torch"] == "2.13.0"
    assert lock.versions == read_lock(SHIPPED_ARM64).versions  # the committed lock is what a relock makes now
    assert_arm64_files_only(lock, client)
    capsys.readouterr()
    code = run(project, "report", "--variant", "cu130", "--platform", "linux/arm64", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["target"]["platform"] == "manylinux_2_36_aarch64"
    assert data["summary"]["lock"] == "ok"
    assert data["missing_on_platform"] == []
    assert (code, data["summary"]["verdict"]) == (0, "clean"), data["summary"]
