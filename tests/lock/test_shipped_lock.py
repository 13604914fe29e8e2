"""The committed lock of the shipped manifest: up to date, and sliced consistently (no network)."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.lock import check_lock, lock_installs, lock_sha256, locked_versions, read_lock
from pinwheel.plan import plan_platforms, plan_variant
from pinwheel.steps.wheels import KIND as WHEEL_SETS

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "wheels_manifest.yaml"
CU130 = ROOT / "images" / "train" / "lock" / "cu130"
CU130_ARM64 = CU130 / "arm64"


def slice_of(lock, name: str):
    """The one file of the lock that installs `name`."""
    (found,) = [s for s in lock.slices + lock.fallbacks if name in s.versions]
    return found


def test_lock_check_exits_0(capsys):
    assert cli.main(["--manifest", str(MANIFEST), "lock", "--check"]) == 0
    out = capsys.readouterr().out
    assert "cu130: up to date" in out
    assert "PINWHEEL_TORCH_CU129_INDEX" in out  # cu129 cannot be locked without its extra index


def test_cu130_lock_is_current():
    m = manifest.load(MANIFEST)
    assert check_lock(plan_variant(m, "cu130"), ROOT).status == "ok"


def test_every_package_in_exactly_one_slice():
    lock = read_lock(CU130)
    files = lock.slices + lock.fallbacks
    seen: dict[str, str] = {}
    for s in files:
        for p in s.packages:
            assert p.name not in seen, f"{p.name} in {seen.get(p.name)} and {s.file}"
            seen[p.name] = s.file
            assert p.hashes == lock.packages[p.name].hashes and p.version == lock.packages[p.name].version
    assert sorted(seen) == sorted(lock.packages)


def test_slices_match_the_dockerfile_and_the_design():
    m = manifest.load(MANIFEST)
    plan = plan_variant(m, "cu130")
    lock = read_lock(CU130)
    wanted = [s.lock_file for s in plan.steps if WHEEL_SETS.slice_packages(s)]
    assert [s.file for s in lock.slices] == wanted
    dockerfile = (ROOT / "images" / "train" / "Dockerfile").read_text()
    copied = re.findall(r"^COPY --from=lock /(\S+) ", dockerfile, re.M)
    assert set(wanted) <= set(copied) and "expect.json" in copied
    for f in copied:
        assert (CU130 / f).exists(), f
    assert slice_of(lock, "torch").file == "01-torch.txt" and lock.versions["torch"] == "2.13.0"
    assert slice_of(lock, "nvidia-cutlass-dsl").file == "02-kernels.txt"
    assert lock.versions["nvidia-cutlass-dsl"] == "4.6.2" and lock.versions["apache-tvm-ffi"] == "0.1.11"
    # the --no-deps step's 1.26.0, not the newer release flashinfer alone would pull
    assert list(slice_of(lock, "nvidia-cudnn-frontend").versions) == ["nvidia-cudnn-frontend"]
    assert lock.versions["nvidia-cudnn-frontend"] == "1.26.0"
    # one cuda-bindings for torch and cuda-python, installed with torch
    assert slice_of(lock, "cuda-bindings").file == "01-torch.txt" and lock.versions["cuda-bindings"].startswith("13.4.")
    assert [f.file for f in lock.fallbacks] == ["04-local-kernels.fallback-flash-mla.txt"]
    assert lock.fallbacks[0].versions == {"sgl-flash-mla": "1.0.0"}


def test_expect_json():
    plan = plan_variant(manifest.load(MANIFEST), "cu130")
    expect = json.loads((CU130 / "expect.json").read_text())
    assert expect["schema"] == 1 and expect["variant"] == "cu130"
    assert expect["pins"] == locked_versions(plan, CU130)  # what the image installs with every local wheel
    assert "sgl-flash-mla" not in expect["pins"] and expect["fallbacks"] == {"sgl-flash-mla": "1.0.0"}
    assert 'nvidia-cutlass-dsl[cu13]==4.5.0; extra == "cutedsl"' in expect["suppressed"]["nvidia-cudnn-frontend"]
    assert expect["suppressed"]["sgl-flash-mla"] == ["torch>=2.14.1"]
    # the CUDA 12 DSL libs are left out on purpose: suppressed (pip check accepts it), and in no slice
    assert expect["suppressed"]["nvidia-cutlass-dsl"] == ["nvidia-cutlass-dsl-libs-cu12==4.6.2"]
    assert list(expect["excluded"]) == ["nvidia-cutlass-dsl"]
    assert "nvidia-cutlass-dsl-libs-cu12" not in read_lock(CU130).packages


def test_what_the_lock_installs_step_by_step(tmp_path):
    """The one reader: each step's slice, and a fallback file only where its local wheel is missing."""
    plan = plan_variant(manifest.load(MANIFEST), "cu130")
    lock = read_lock(CU130)
    with_wheels = lock_installs(plan, CU130)
    assert list(with_wheels) == [s.name for s in plan.steps]
    assert with_wheels == {s.name: {} for s in plan.steps} | {s.step: s.versions for s in lock.slices}
    assert "sgl-flash-mla" not in locked_versions(plan, CU130)

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    without = lock_installs(plan, CU130, wheels)  # no flash_mla wheel: its fallback is installed
    assert without["local-kernels"] == {"sgl-flash-mla": "1.0.0"}
    assert {k: v for k, v in without.items() if k != "local-kernels"} == \
        {k: v for k, v in with_wheels.items() if k != "local-kernels"}
    (wheels / "flash_mla-1.0.0+cu130torch2.13-cp39-abi3-linux_x86_64.whl").write_bytes(b"")
    assert lock_installs(plan, CU130, wheels) == with_wheels

    assert lock_installs(plan, tmp_path / "no-lock") is None
    assert locked_versions(plan, tmp_path / "no-lock") == {}


def test_no_index_url_or_machine_path():
    for f in (p for p in CU130.rglob("*") if p.is_file()):
        text = f.read_text()
        assert not re.search(r"https?://", text), f.name
        assert not re.search(r"--(extra-)?index-url|--find-links", text), f.name
        assert not re.search(r"(?<![\w.])/(tmp|root|home|work|opt|etc)/", text), f.name


def recipe_sha256(directory: Path) -> str:
    """lock_sha256's documented recipe, written out again: for each file under the
    directory (but not under another platform's amd64/ or arm64/ in it) in order of its relative POSIX path, the path, a NUL byte, and the raw
    SHA-256 of its bytes; the hex SHA-256 of all that."""
    files = []
    for dirpath, _, names in os.walk(directory):
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(directory)
            if rel.parts[0] in ("amd64", "arm64"):  # another platform's lock, inside the variant's own
                continue
            files.append((rel.as_posix(), path.read_bytes()))
    stream = b"".join(rel.encode() + b"\0" + hashlib.sha256(data).digest() for rel, data in sorted(files))
    return hashlib.sha256(stream).hexdigest()


# A known answer, computed with coreutils outside Python:
#   { for f in 01-torch.txt expect.json sub/z.txt; do printf '%s\0' "$f";
#     sha256sum "$f" | cut -c1-64 | xxd -r -p; done; } | sha256sum
# Images are labelled and tagged with this digest, so the recipe must not drift.
KNOWN_FILES = {
    "01-torch.txt": b"torch==2.13.0 \\\n    --hash=sha256:00\n",
    "expect.json": b'{"pins": {}}\n',
    "sub/z.txt": b"x",
}
KNOWN_SHA256 = "f7b31d104104775533ed26ec6f7607c0a29ce55778b104a0cef71be5878ceeab"


def write_files(directory: Path, files: dict[str, bytes], order=None) -> Path:
    for rel in order or files:
        (directory / rel).parent.mkdir(parents=True, exist_ok=True)
        (directory / rel).write_bytes(files[rel])
    return directory


def test_lock_sha256_is_stable(tmp_path):
    """A known answer: the digest of a fixed directory is the same on every machine and run."""
    assert lock_sha256(write_files(tmp_path / "a", KNOWN_FILES)) == KNOWN_SHA256
    # neither creation order nor timestamps nor the directory's own path enter it
    other = write_files(tmp_path / "elsewhere" / "b", KNOWN_FILES, order=sorted(KNOWN_FILES, reverse=True))
    os.utime(other / "expect.json", (0, 0))
    assert lock_sha256(other) == KNOWN_SHA256


@pytest.mark.parametrize("change", ["content", "rename", "add", "remove", "move-into-subdir"])
def test_lock_sha256_sees_every_change(tmp_path, change):
    d = write_files(tmp_path / "lock", KNOWN_FILES)
    if change == "content":
        (d / "expect.json").write_bytes(b'{"pins": {} }\n')
    elif change == "rename":
        (d / "01-torch.txt").rename(d / "01-torch.txt.orig")
    elif change == "add":
        (d / "02-kernels.txt").write_bytes(b"")
    elif change == "remove":
        (d / "sub" / "z.txt").unlink()
    else:
        (d / "sub" / "expect.json").write_bytes((d / "expect.json").read_bytes())
        (d / "expect.json").unlink()
    assert lock_sha256(d) != KNOWN_SHA256
    assert lock_sha256(d) == recipe_sha256(d)


def test_lock_sha256_of_the_shipped_lock_follows_the_recipe():
    digest = lock_sha256(CU130)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert digest == recipe_sha256(CU130)


def test_the_other_platforms_lock_is_not_part_of_the_amd64_digest(tmp_path):
    """The arm64 lock sits inside cu130/, but re-locking it leaves the amd64 image's digest (its tags) alone."""
    import shutil
    copy = tmp_path / "cu130"
    shutil.copytree(CU130, copy)
    assert lock_sha256(copy) == lock_sha256(CU130) == recipe_sha256(CU130)
    (copy / "arm64" / "requirements.txt").write_text("changed\n")
    (copy / "arm64" / "extra.txt").write_text("new\n")
    assert lock_sha256(copy) == lock_sha256(CU130)
    assert lock_sha256(copy / "arm64") != lock_sha256(CU130_ARM64)
    (copy / "01-torch.txt").write_text("changed\n")
    assert lock_sha256(copy) != lock_sha256(CU130)


def test_cu130_is_locked_for_both_platforms():
    m = manifest.load(MANIFEST)
    assert m.variant("cu130").container_platforms == ("linux/amd64", "linux/arm64")
    plans = plan_platforms(m, "cu130")
    assert [check_lock(p, ROOT).status for p in plans] == ["ok", "ok"]
    amd, arm = read_lock(CU130), read_lock(CU130_ARM64)
    assert "manylinux_2_36_aarch64" in (CU130_ARM64 / "requirements.txt").read_text().splitlines()[0]
    assert arm.versions == amd.versions  # the same set on both, each with its own files
    assert [s.file for s in arm.slices] == [s.file for s in amd.slices]
    assert json.loads((CU130_ARM64 / "expect.json").read_text())["pins"] == \
        json.loads((CU130 / "expect.json").read_text())["pins"]


# compiled wheels for both architectures and no sdist on the index: the two locks hash disjoint files
COMPILED = ("torch", "cuda-bindings", "nvidia-cudnn-frontend", "nvidia-cutlass-dsl-libs-cu13", "sgl-flash-mla",
            "nvidia-nccl-cu13", "triton")
# compiled wheels and an sdist: the sdist (either platform may build it) is the one file both locks name
WITH_SDIST = ("apache-tvm-ffi", "torch-c-dlpack-ext")


def test_no_x86_wheel_in_the_arm64_hashes():
    """Without the network: a compiled package shares no file between the two locks (the amd64 lock
    names only x86_64 wheels, the arm64 lock only aarch64 ones); tests/lock/test_platforms_network.py
    checks each arm64 hash's file name on the index."""
    amd, arm = read_lock(CU130), read_lock(CU130_ARM64)
    for name in COMPILED:
        assert arm.packages[name].hashes and amd.packages[name].hashes, name
        assert not set(arm.packages[name].hashes) & set(amd.packages[name].hashes), name
    for name in WITH_SDIST:
        assert len(set(arm.packages[name].hashes) & set(amd.packages[name].hashes)) == 1, name
        assert len(arm.packages[name].hashes) > 1 and len(amd.packages[name].hashes) > 1, name
    # a pure-Python package (flashinfer) has the same one wheel on both
    assert arm.packages["flashinfer-python"].hashes == amd.packages["flashinfer-python"].hashes
