"""`build.py lock` also writes pylock.<variant>.toml (PEP 751), from a real lock against the local index:
parsed with tomllib, validated with packaging's own Pylock, every locked hash a file with its URL, and
the pins' reasons in [packages.tool.pinwheel]."""
from __future__ import annotations

import hashlib
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.pylock import Pylock, is_valid_pylock_path

from pinwheel import cli, manifest
from pinwheel.lock import read_lock
from pinwheel.plan import plan_variant
from pinwheel.workspace import Workspace

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

MANIFEST = f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo}}
variants:
  cu130: {{cuda: "13.0", torch: "2.0", python: "{PY}", platform: manylinux_2_36_x86_64,
          base: "pinwheel/base:bookworm-py311", tag: "cu130-{{date}}"}}
wheel_sets:
  - name: base
    why: "the torch stand-in"
    packages:
      - {{requirement: "pyl-torchy==2.0", why: "the one torch of the image"}}
  - name: frontend
    why: "the frontend, without its pins"
    packages:
      - {{requirement: "pyl-frontend==1.26", no_deps: true, why: "its extra pins an older pyl-torchy"}}
"""


@pytest.fixture
def project(local_index, tmp_path, monkeypatch):
    local_index.add("pyl-util", "1.0")
    local_index.add("pyl-torchy", "2.0", requires=["pyl-util"])
    local_index.add("pyl-torchy", "2.0", requires=["pyl-util"], tags="cp311-cp311-manylinux_2_28_x86_64")
    local_index.add("pyl-frontend", "1.26", requires=["pyl-torchy==1.0"])
    monkeypatch.setenv("PIP_INDEX_URL", local_index.serve())
    monkeypatch.setenv("PINWHEEL_CACHE_DIR", str(tmp_path / "pinwheel-cache"))
    monkeypatch.setenv("PIP_TOOLS_CACHE_DIR", str(tmp_path / "pip-tools-cache"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "wheels_manifest.yaml").write_text(MANIFEST)
    return root


def test_lock_writes_a_valid_pylock_with_the_reasons(project: Path, local_index):
    assert cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "lock", "--variant", "cu130"]) == 0
    m = manifest.load(project / "wheels_manifest.yaml")
    plan = plan_variant(m, "cu130")
    path = Workspace.of(m).pylock_file("cu130")
    assert path.name == "pylock.cu130.toml" and is_valid_pylock_path(path)
    data = tomllib.loads(path.read_text())
    pylock = Pylock.from_dict(data)  # packaging's validation against the specification
    assert str(pylock.lock_version) == "1.0" and pylock.created_by == "pinwheel"
    assert [str(e) for e in pylock.environments] == [
        f'sys_platform == "linux" and platform_machine == "x86_64" and python_version == "{PY}"']

    lock = read_lock(Workspace.of(m).plan_lock_dir(plan))
    by_name = {p.name: p for p in pylock.packages}
    assert set(by_name) == set(lock.packages) == {"pyl-util", "pyl-torchy", "pyl-frontend"}
    for name, locked in lock.packages.items():
        package = by_name[name]
        assert str(package.version) == locked.version
        # every hash the committed lock accepts is one file of the index, with its URL
        assert sorted(f"sha256:{w.hashes['sha256']}" for w in package.wheels) == sorted(locked.hashes)
        for wheel in package.wheels:  # the URL the index serves, and the bytes there hash as written
            assert wheel.url.startswith("http://127.0.0.1:") and wheel.url.endswith(f"/files/{wheel.name}")
            served = local_index.files_dir / wheel.name
            assert hashlib.sha256(served.read_bytes()).hexdigest() == wheel.hashes["sha256"]
    assert len(by_name["pyl-torchy"].wheels) == 2

    # the reasons travel in [packages.tool.pinwheel]
    assert data["tool"]["pinwheel"] == {"image": "demo", "variant": "cu130", "platform": "linux/amd64",
                                        "lock-inputs": lock.inputs_digest, "engine": lock.engine}
    tools = {p["name"]: p["tool"]["pinwheel"] for p in data["packages"]}
    assert tools["pyl-torchy"] == {"step": "base", "lock-file": "01-base.txt", "why": "the one torch of the image"}
    assert tools["pyl-util"] == {"step": "base", "lock-file": "01-base.txt", "reason": "reached from pyl-torchy"}
    assert tools["pyl-frontend"] == {"step": "frontend", "lock-file": "02-frontend.txt",
                                     "reason": "--no-deps: its extra pins an older pyl-torchy",
                                     "why": "its extra pins an older pyl-torchy"}



@pytest.mark.parametrize("resolver, earlier_lock", [("uv", "kept"), ("uv", "gone"), ("pip-compile", "kept"),
                                                     ("pip-compile", "gone")])
def test_a_version_uploaded_again_is_locked_with_its_new_hash_though_the_resolver_cached_the_page(
        project: Path, local_index, tmp_path, monkeypatch, capsys, resolver, earlier_lock):
    """An index that lets a version be uploaded again (devpi, a private mirror) serves pages a resolver caches
    for minutes. Locking again, the resolver answers with the old hash, from the earlier lock's hash lines
    ("kept") or from its cached page (a fresh checkout: "gone"). The pylock step finds that hash on no file,
    and `lock` makes the lock again with --refresh by itself, with the new hash."""
    local_index.page_max_age = 600  # what a real index sends for its pages
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("PIP_CACHE_DIR", str(tmp_path / "pip-cache"))
    args = ["--manifest", str(project / "wheels_manifest.yaml"), "lock", "--variant", "cu130", "--resolver", resolver]
    assert cli.main(args) == 0
    workspace = Workspace.of(manifest.load(project / "wheels_manifest.yaml"))
    old = read_lock(workspace.lock_dir("cu130")).packages["pyl-util"].hashes
    wheel = local_index.add("pyl-util", "1.0", payload_size=64)  # the same file name, other bytes
    new = f"sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"
    assert new not in old
    if earlier_lock == "gone":
        shutil.rmtree(workspace.lock_dir("cu130"))
        shutil.rmtree(tmp_path / "pinwheel-cache")
    capsys.readouterr()
    assert cli.main(args) == 0
    retried = "locking again with --refresh" in " ".join(capsys.readouterr().err.split())
    assert retried == ((resolver, earlier_lock) != ("pip-compile", "gone"))  # pip revalidates every index page
    assert read_lock(workspace.lock_dir("cu130")).packages["pyl-util"].hashes == (new,)
    util = next(p for p in tomllib.loads(workspace.pylock_file("cu130").read_text())["packages"]
                if p["name"] == "pyl-util")
    assert [w["hashes"]["sha256"] for w in util["wheels"]] == [new.removeprefix("sha256:")]
