"""Fixtures for the bump tests: wheels of each ABI class, compiled here, served by the local test index.

``bump_world`` builds one repository root (manifest, wheels/, a lock) and one
index that together produce every verdict deterministically:

==========================  =====================================================
package                      why it is there
==========================  =====================================================
torch 2.13.0 / 2.14.x        the stand-in: its pins on nvidia-cudnn-cu13, triton and
                             cuda-bindings move between versions
cuda-bindings (shared pin)   torch 2.14.x needs >=13.5.0: the shared pin 13.4.4
                             becomes unsatisfiable
oldpin-ext 1.0 (manifest)    pins torch==2.13.0: blocked; 1.2 is the nearest fix
transitive-ext 2.0 (lock)    torch<2.14: a re-lock upgrades it to 2.1
fancy-ext (local wheel)      unstable C++ ABI, built against torch 2.13: rebuild
stable-local (local wheel)   stable ABI; its manifest provenance disagrees
unstable-kern (index)        unstable C++ ABI from the index: rebuild
stable-kern (index)          stable ABI from the index: ok
flash-fallback (fallback)    stable ABI, --no-deps, requires torch>=2.14.1: the bump
                             unblocks it; bumping only to 2.14.0 blocks it
multi-kern (index)           one unstable build per torch release (2.12, 2.13): no
                             build for 2.14, rebuild
==========================  =====================================================
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from pinwheel import manifest
from pinwheel.lock import lock_inputs_digest
from pinwheel.lock.format import with_resolution_digest
from pinwheel.plan import plan_variant
from tests.support.abi_builders import EMPTY_C, STABLE_CPP, UNSTABLE_CPP
from tests.support.local_index import LocalIndex, _Entry, metadata_text

LINUX = '; platform_system == "Linux"'

TORCH_213 = ["filelock", f"nvidia-cudnn-cu13==9.20.0.48{LINUX}", f"triton==3.7.1{LINUX}",
             f"cuda-bindings<14,>=13.0.3{LINUX}"]
TORCH_214 = ["filelock", f"nvidia-cudnn-cu13==9.24.0.43{LINUX}", f"triton~=3.8.0{LINUX}",
             f"cuda-bindings>=13.5.0{LINUX}"]

MANIFEST = """\
manifest_version: 1
image:
  name: train
  repository: test/train
shared_pins:
  - requirement: "cuda-bindings==13.4.4"
    needed_by: [consumer]
    why: "consumer's kernels were validated with 13.4.4"
gates:
  ENABLE_CUDA_13:
    when: "cuda >= 13"
    why: "test gate"
variants:
  cu130:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: test/base:1
    tag: "cu130-{date}"
wheel_sets:
  - name: torch
    why: "the base"
    packages:
      - requirement: "torch==2.13.0"
  - name: kernels
    why: "kernels"
    packages:
      - requirement: "oldpin-ext==1.0"
      - requirement: "consumer==1.0"
      - requirement: "stable-kern==1.0"
      - requirement: "unstable-kern==1.0"
      - requirement: "multi-kern==1.0"
  - name: local-kernels
    why: "built in-house"
    gate: ENABLE_CUDA_13
    packages:
      - requirement: "fancy-ext==1.0+cu130torch2.13"
        why: "unstable C++ ABI, built against torch 2.13"
        local:
          glob: "fancy_ext-*.whl"
          built_against: {torch: "2.13.0+cu130", cuda: "13.0"}
          if_missing: fail
      - requirement: "stable-local==1.0"
        why: "stable ABI"
        local:
          glob: "stable_local-*.whl"
          built_against: {torch: "2.12.0"}
          if_missing: skip
      - requirement: "flash-x==1.0"
        why: "missing on purpose: its fallback is used"
        local:
          glob: "flash_x-*.whl"
          if_missing: fallback
        fallback:
          requirement: "flash-fallback==1.0.0"
          no_deps: true
          why: "stable-ABI build; its torch>=2.14.1 would replace torch 2.13.0"
"""

CLEAN_MANIFEST = """\
manifest_version: 1
image:
  name: clean
  repository: test/clean
variants:
  cu130:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: test/base:1
    tag: "cu130-{date}"
wheel_sets:
  - name: torch
    why: "the base"
    packages:
      - requirement: "torch==2.13.0"
  - name: kernels
    why: "kernels"
    packages:
      - requirement: "stable-kern==1.0"
"""

LOCK = {
    "01-torch.txt": {"torch": "2.13.0", "filelock": "3.20.0", "nvidia-cudnn-cu13": "9.20.0.48",
                     "triton": "3.7.1", "cuda-bindings": "13.4.4"},
    "02-kernels.txt": {"oldpin-ext": "1.0", "consumer": "1.0", "transitive-ext": "2.0",
                       "stable-kern": "1.0", "unstable-kern": "1.0", "multi-kern": "1.0"},
    "03-local-kernels.fallback-flash-x.txt": {"flash-fallback": "1.0.0"},
}


# --------------------------------------------------------------------- wheels


@pytest.fixture(scope="session")
def bump_sos(tmp_path_factory) -> dict[str, Path]:
    """Shared objects of each ABI class (see tests/support/abi_builders.py), built once per session."""
    gcc, gxx = shutil.which("gcc"), shutil.which("g++")
    if not gcc or not gxx:
        pytest.skip("gcc/g++ not found: the bump tests compile their own shared objects")
    root = tmp_path_factory.mktemp("bump-so")

    def build(name: str, source: str, compiler: str, extra: list[str], soname: str | None = None) -> Path:
        src = root / (name + (".cpp" if compiler == gxx else ".c"))
        src.write_text(source)
        out = root / name
        cmd = [compiler, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)] + extra
        if soname:
            cmd.append(f"-Wl,-soname,{soname}")
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out

    build("libc10.so", EMPTY_C, gcc, [], "libc10.so")
    build("libtorch.so", EMPTY_C, gcc, [], "libtorch.so")
    link = ["-L" + str(root), "-Wl,--no-as-needed", "-lc10", "-ltorch"]
    return {"unstable": build("unstable.so", UNSTABLE_CPP, gxx, link),
            "stable": build("stable.so", STABLE_CPP, gxx, link)}


def compiled_wheel(directory: Path, name: str, version: str, so: Path | None, requires: list[str],
                   tag: str, files: dict[str, Path] | None = None) -> Path:
    """A wheel with one extension module (``<pkg>/_C.so``) holding ``so``'s bytes, or ``files`` instead."""
    dist = re.sub(r"[-_.]+", "_", name)
    dist_info = f"{dist}-{version}.dist-info"
    members = [(f"{dist}/__init__.py", b"")]
    if so is not None:
        members.append((f"{dist}/_C.so", so.read_bytes()))
    for arc, path in (files or {}).items():
        members.append((f"{dist}/{arc}", path.read_bytes()))
    members.append((f"{dist_info}/METADATA", metadata_text(name, version, requires).encode()))
    members.append((f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: pinwheel-tests\n"
                                          f"Root-Is-Purelib: false\nTag: {tag}\n".encode()))
    members.append((f"{dist_info}/RECORD", b""))
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for arc, data in members:
            zf.writestr(zipfile.ZipInfo(arc, date_time=(2024, 1, 1, 0, 0, 0)), data)
    return path


def publish(index: LocalIndex, wheel: Path) -> None:
    """Serve a wheel built elsewhere on the local index (with its PEP 658 metadata file)."""
    dest = index.files_dir / wheel.name
    shutil.copyfile(wheel, dest)
    data = dest.read_bytes()
    with zipfile.ZipFile(dest) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))
    (index.files_dir / (wheel.name + ".metadata")).write_bytes(meta)
    project = re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()
    index._publish(_Entry(project=project, filename=wheel.name, sha256=hashlib.sha256(data).hexdigest(),
                          size=len(data), requires_python=None, metadata_sha256=hashlib.sha256(meta).hexdigest(),
                          advertise_metadata=True, yanked=False, listed_sha256=None))


# ---------------------------------------------------------------------- world


@dataclass
class World:
    root: Path  # the repository root: manifest, wheels/, images/, .cache/
    manifest: Path
    clean_manifest: Path  # a second root whose bump blocks nothing
    index: LocalIndex
    url: str

    def argv(self, *args: str, manifest: Path | None = None) -> list[str]:
        return ["--manifest", str(manifest or self.manifest), "bump", *args, "--index-url", self.url]


def write_lock(lock_dir: Path, slices: dict[str, dict[str, str]], manifest_path: Path) -> None:
    """A lock made by hand, without hashes, that records the manifest's real inputs digest and whose every
    file is what `lock` writes from these slices (pinwheel's own writers), so it is not stale."""
    import json

    from pinwheel.lock.expect import derived_expect
    from pinwheel.lock.format import LockedPackage, entry_text
    from pinwheel.lock.slicing import slice_text, units

    plan = plan_variant(manifest.load(manifest_path), "cu130")
    steps, fallbacks = units(plan)
    assert set(slices) <= {u.file for u in steps + fallbacks}, sorted(slices)
    lock_dir.mkdir(parents=True, exist_ok=True)
    locked, installed = {}, ({}, {})  # (pins, fallbacks)
    for unit in steps + fallbacks:
        entries = [LockedPackage(n, v, (), entry_text(n, v, ())) for n, v in slices.get(unit.file, {}).items()]
        (lock_dir / unit.file).write_text(slice_text(plan, unit, entries, {}))
        for e in entries:
            locked[e.name] = e
            installed[unit in fallbacks][e.name] = e.version
    digest = lock_inputs_digest(plan, "pip-compile")
    (lock_dir / "requirements.txt").write_text(with_resolution_digest(
        f"# pinwheel-inputs: {digest}\n# pinwheel-engine: pip-compile\n" + "".join(e.text + "\n" for e in locked.values())))
    expect = derived_expect(plan, *installed)
    expect["suppressed"] = {p.name: [] for u in steps + fallbacks for p in u.roots if p.no_deps}
    (lock_dir / "expect.json").write_text(json.dumps(expect, indent=2, sort_keys=True) + "\n")


@pytest.fixture
def bump_world(tmp_path, local_index, bump_sos) -> World:
    ix = local_index
    ix.add("torch", "2.13.0", TORCH_213)
    ix.add("torch", "2.14.0", TORCH_214)
    ix.add("torch", "2.14.1", TORCH_214)
    ix.add("torch", "2.15.0", TORCH_214)
    ix.add("filelock", "3.20.0")
    for v in ("9.20.0.48", "9.24.0.43"):
        ix.add("nvidia-cudnn-cu13", v)
    for v in ("3.7.1", "3.8.0", "3.8.1"):
        ix.add("triton", v)
    for v in ("13.4.4", "13.5.0"):
        ix.add("cuda-bindings", v)
    for v, pin in (("1.0", "==2.13.0"), ("1.1", "==2.13.0"), ("1.2", "==2.14.1"), ("1.3", "==2.15.0")):
        ix.add("oldpin-ext", v, [f"torch{pin}"])
    ix.add("consumer", "1.0", ["transitive-ext", "cuda-bindings~=13.4.4"])
    for v, bound in (("2.0", "<2.14"), ("2.1", "<2.15"), ("2.2", "<2.16")):
        ix.add("transitive-ext", v, [f"torch{bound}"])
    build = tmp_path / "built"
    publish(ix, compiled_wheel(build, "stable-kern", "1.0", bump_sos["stable"], ["torch>=2.12"],
                               "cp311-abi3-manylinux_2_28_x86_64"))
    publish(ix, compiled_wheel(build, "unstable-kern", "1.0", bump_sos["unstable"], ["torch"],
                               "cp311-cp311-manylinux_2_28_x86_64"))
    publish(ix, compiled_wheel(build, "multi-kern", "1.0", None, ["torch>=2.12"], "cp311-cp311-manylinux_2_28_x86_64",
                               files={"addon_torch212.so": bump_sos["unstable"],
                                      "addon_torch213.so": bump_sos["unstable"]}))
    publish(ix, compiled_wheel(build, "flash-fallback", "1.0.0", bump_sos["stable"], ["torch>=2.14.1"],
                               "cp310-abi3-manylinux2014_x86_64"))
    url = ix.serve()

    root = tmp_path / "repo"
    root.mkdir()
    (root / "wheels_manifest.yaml").write_text(MANIFEST)
    compiled_wheel(root / "wheels", "fancy-ext", "1.0+cu130torch2.13", bump_sos["unstable"], ["torch>=2.13"],
                   "cp311-cp311-linux_x86_64")
    compiled_wheel(root / "wheels", "stable-local", "1.0", bump_sos["stable"], ["torch>=2.13"],
                   "cp311-abi3-linux_x86_64")
    write_lock(root / "images" / "train" / "lock" / "cu130", LOCK, root / "wheels_manifest.yaml")

    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "wheels_manifest.yaml").write_text(CLEAN_MANIFEST)
    return World(root, root / "wheels_manifest.yaml", clean / "wheels_manifest.yaml", ix, url)
