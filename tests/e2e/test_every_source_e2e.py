"""One image from every source kind, on the real index and the real engine, with real torch.

The manifest holds: Debian packages (a compiler, Python headers, patch); torch
2.13.0+cpu as a local wheel (the one pip's configured find-links hold) with its
requirements from the index; a pure-Python package from git at a commit (the
branch has moved on); an editable checkout; an index sdist built without
isolation; a torch C++ extension (`CppExtension`) from git, built without
isolation against the image's torch in a builder stage that starts from
torch's layer; a release asset from a local HTTP server; a patch on the git
package. It renders, locks, reports (the git packages' static requirements
judged, the sdist's dynamic ones unchecked, the extension torch-tied), builds,
runs the extension, `inspect` classifies the built extension `unstable`, and
`bump torch==2.14.1` says rebuild.

Run with `make e2e` (pytest -m e2e): it installs torch and compiles against it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from packaging.utils import parse_sdist_filename
from packaging.version import Version

from pinwheel.image.engine import Engine
from pinwheel.index import IndexClient
from pinwheel.index.config import default_index_url

from tests.support.engine import engine_unavailable
from tests.support.file_server import serve_files
from tests.support.git_daemon import git, serve_git
from tests.support.local_index import build_wheel
from tests.support.pipeline import bridge_address

pytestmark = [pytest.mark.e2e, pytest.mark.engine, pytest.mark.network]

ROOT = Path(__file__).resolve().parents[2]
TORCH_WHEEL = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
SDIST = ("six", "1.17.0")  # small, pure Python, built here from its sdist (setup.py: requirements dynamic)

GITPKG = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "pw-gitpkg"\nversion = "{version}"\ndependencies = ["typing-extensions>=4"]\n',
    "pw_gitpkg/__init__.py": "MARK = {mark!r}\n",
}
EDITABLE = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "pw-edit"\nversion = "0.2.0"\ndependencies = ["filelock"]\n',
    "pw_edit/__init__.py": "WHERE = __file__\n",
}
TORCHEXT = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=77", "torch"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "pw-torchext"\nversion = "0.1.0"\ndependencies = ["torch>=2.13"]\n\n'
                      '[tool.setuptools]\npackages = ["pw_torchext"]\n',
    "setup.py": "from setuptools import setup\n"
                "from torch.utils.cpp_extension import BuildExtension, CppExtension\n\n"
                "setup(ext_modules=[CppExtension('pw_torchext._C', ['csrc/twice.cpp'])],\n"
                "      cmdclass={'build_ext': BuildExtension})\n",
    "csrc/twice.cpp": "#include <torch/extension.h>\n\n"
                      "torch::Tensor twice(const torch::Tensor& x) { return x * 2; }\n\n"
                      "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"twice\", &twice); }\n",
    "pw_torchext/__init__.py": "import torch  # noqa: F401  (loads libtorch before the extension)\n"
                               "from ._C import twice  # noqa: F401\n",
}
PATCH = """\
--- a/pw_gitpkg/__init__.py
+++ b/pw_gitpkg/__init__.py
@@ -1 +1,2 @@
 MARK = 'first'
+PATCHED = 'by pinwheel'
"""


def commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def new_repo(root: Path, name: str) -> Path:
    repo = root / f"{name}.git"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "uploadpack.allowReachableSHA1InWant", "true")
    return repo


def find_links_torch() -> Path:
    """The torch CPU wheel in the find-links directories pip is configured with."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    dirs = [d for line in listed.splitlines() if line.split("=", 1)[0].endswith("find-links")
            for d in line.split("=", 1)[1].strip().strip("'\"").split()]
    dirs += (os.environ.get("PIP_FIND_LINKS") or "").split()
    for d in dirs:
        path = Path(d.removeprefix("file://")) / TORCH_WHEEL
        if path.is_file():
            return path
    pytest.skip(f"SKIPPED: {TORCH_WHEEL} is in none of pip's find-links directories ({dirs or 'none configured'})")


def apt_version(engine: Engine, base: str, package: str) -> str:
    probe = engine.run(base, ["sh", "-c", "apt-get update -qq >/dev/null 2>&1 && "
                                          f"apt-cache show --no-all-versions {package} | sed -n 's/^Version: //p'"])
    if probe.returncode != 0 or not probe.stdout.strip():
        engine_unavailable(f"the Debian archive in {base}'s apt sources is out of reach: {probe.stderr[-300:]}")
    return probe.stdout.strip()


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "build.py"), "--manifest", str(root / "wheels_manifest.yaml"),
                           *args], cwd=root, capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})


@pytest.fixture()
def served(engine: Engine, tmp_path: Path):
    """Serves a git root with git daemon on the bridge address, and an asset directory over HTTP on loopback."""
    root = tmp_path / "git"
    root.mkdir()
    assets = tmp_path / "assets"
    assets.mkdir()
    with serve_git(root, bridge_address(engine), unavailable=engine_unavailable) as git_url, \
            serve_files(assets) as asset_url:
        yield root, git_url, assets, asset_url


def test_every_source_kind_in_one_image(engine: Engine, base_image: str, served, tmp_path: Path):
    git_root, git_url, asset_dir, asset_url = served
    torch_wheel = find_links_torch()

    # the git repositories: pw-gitpkg's branch moves on after the pinned commit
    repo = new_repo(git_root, "pw-gitpkg")
    first = commit(repo, {k: v.format(version="0.3.0", mark="first") for k, v in GITPKG.items()}, "0.3.0")
    commit(repo, {k: v.format(version="0.4.0", mark="second") for k, v in GITPKG.items()}, "0.4.0")
    edit_rev = commit(new_repo(git_root, "pw-edit"), EDITABLE, "0.2.0")
    ext_rev = commit(new_repo(git_root, "pw-torchext"), TORCHEXT, "0.1.0")

    # the release asset, and the sdist's digest as the index lists it
    asset = build_wheel(tmp_path / "asset-build", "pw-asset", "1.0.0", payload_size=64)
    shutil.copy2(asset, asset_dir / asset.name)
    client = IndexClient(default_index_url(), cache_dir=tmp_path / "index-cache")
    sdist = next(f for f in client.files(SDIST[0]) if f.filename.endswith(".tar.gz")
                 and parse_sdist_filename(f.filename)[1] == Version(SDIST[1]))

    # the git builder: the base with Debian's git
    builder = f"pinwheel-e2e/git-builder-{uuid.uuid4().hex[:8]}:1"
    ctx = tmp_path / "builder"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\nRUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
        "--no-install-recommends git && rm -rf /var/lib/apt/lists/*\n")
    made = subprocess.run(["docker", "build", "-q", "-t", builder, str(ctx)], capture_output=True, text=True)
    if made.returncode != 0:
        engine_unavailable(f"cannot install git into {base_image}: {made.stderr[-300:]}")

    root = tmp_path / "repo"
    (root / "wheels").mkdir(parents=True)
    shutil.copy2(torch_wheel, root / "wheels" / torch_wheel.name)
    (root / "patches").mkdir()
    (root / "patches" / "gitpkg.patch").write_text(PATCH)
    versions = {p: apt_version(engine, base_image, p) for p in ("g++", "python3-dev", "patch")}
    repository = f"pinwheel-e2e/every-source-{uuid.uuid4().hex[:8]}"
    (root / "wheels_manifest.yaml").write_text(f"""\
manifest_version: 1

image:
  name: every
  repository: {repository}
  title: "every source kind"
  venv: /opt/venv

variants:
  cpu:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: {base_image}
    tag: "cpu-every-{{date}}"

steps:
  - name: tools
    kind: apt
    why: "a compiler and Python headers for the extension; patch for the patch step"
    packages:
      - {{name: g++, version: "{versions['g++']}", why: "compiles the C++ extension"}}
      - {{name: python3-dev, version: "{versions['python3-dev']}", why: "Python.h"}}
      - {{name: patch, version: "{versions['patch']}", why: "applies the patch step"}}

  - name: torch
    kind: wheels
    why: "the image's torch and what it requires"
    packages:
      - requirement: "torch==2.13.0+cpu"
        why: "the CPU build, a local wheel"
        local: {{glob: "torch-2.13.0+cpu-*.whl", if_missing: fail, how_to_provide: "copy the torch CPU wheel into wheels/"}}
      - {{requirement: "setuptools==84.2.1", why: "torch requires it; builds without isolation use it"}}
      - {{requirement: "filelock==4.3.1", why: "torch"}}
      - {{requirement: "typing-extensions==4.16.0", why: "torch"}}
      - {{requirement: "sympy==1.14.0", why: "torch"}}
      - {{requirement: "networkx==3.6.1", why: "torch"}}
      - {{requirement: "jinja2==3.1.6", why: "torch"}}
      - {{requirement: "fsspec==2026.9.0", why: "torch"}}

  - name: gitpkg
    kind: git
    why: "pinned to a commit; the branch has moved on"
    package: "pw-gitpkg==0.3.0"
    url: "{git_url}/pw-gitpkg.git"
    rev: "{first}"
    isolation: false
    builder: "{builder}"

  - name: edit
    kind: git
    why: "edited in place"
    package: "pw-edit==0.2.0"
    url: "{git_url}/pw-edit.git"
    rev: "{edit_rev}"
    isolation: false
    builder: "{builder}"
    editable: true
    checkout: /opt/src/pw-edit

  - name: six
    kind: sdist
    why: "built from its sdist"
    package: "{SDIST[0]}=={SDIST[1]}"
    sha256: "{sdist.sha256}"
    isolation: false
    needs: [setuptools]

  - name: ext
    kind: git
    why: "a torch C++ extension built against the image's torch"
    package: "pw-torchext==0.1.0"
    url: "{git_url}/pw-torchext.git"
    rev: "{ext_rev}"
    isolation: false
    needs: [torch, setuptools]
    builder: "{builder}"
    env: {{MAX_JOBS: "1"}}

  - name: release
    kind: asset
    why: "a release asset"
    package: "pw-asset==1.0.0"
    url: {{url: "{asset_url}/{asset.name}", sha256: "{hashlib.sha256(asset.read_bytes()).hexdigest()}"}}

  - name: fixes
    kind: patch
    why: "a fix upstream has not released"
    patches:
      - {{file: patches/gitpkg.patch, applies_to: "pw-gitpkg==0.3.0", strip: 1, why: "marks the module"}}
""")
    built_ref = None
    try:
        for step in (("render",), ("lock", "--variant", "cpu")):
            proc = cli(root, *step)
            assert proc.returncode == 0, (step, proc.stdout[-3000:], proc.stderr[-3000:])
        dockerfile = (root / "images" / "every" / "Dockerfile").read_text()
        assert "FROM image-torch AS build-ext\n" in dockerfile and "FROM image-torch AS sdist-six\n" in dockerfile

        report = cli(root, "report", "--variant", "cpu", "--json")
        data = json.loads(report.stdout)
        verdicts = {(e["parent"], e["name"]): e["verdict"] for e in data["edges"]}
        # static requirements read from the commits' pyproject.toml: judged (--no-deps, and met)
        assert verdicts[("pw-gitpkg", "typing-extensions")] == "suppressed"
        assert verdicts[("pw-edit", "filelock")] == "suppressed"
        assert verdicts[("pw-torchext", "torch")] == "suppressed"
        # six's sdist says nothing static (setup.py): unchecked, never clean; so is the asset's
        assert verdicts[("six", "*")] == "unchecked" and verdicts[("pw-asset", "*")] == "unchecked"
        assert not data["summary"]["clean"]
        [ext_abi] = [r for r in data["torch_abi"] if r["name"] == "pw-torchext"]
        assert (ext_abi["source"], ext_abi["abi_class"], ext_abi["how"]) == ("git", "unknown", "source-build")

        built = cli(root, "build", "--variant", "cpu", "--json")
        assert built.returncode == 0, built.stderr[-5000:]
        image = json.loads(built.stdout)
        built_ref = image["image_id"]
        run = engine.run(built_ref, ["python", "-c",
                                     "import torch, pw_torchext, pw_gitpkg, pw_edit, six, pw_asset; "
                                     "print(pw_torchext.twice(torch.arange(3)).tolist(), pw_gitpkg.MARK, "
                                     "pw_gitpkg.PATCHED, pw_edit.WHERE, six.__version__)"])
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split() == ["[0,", "2,", "4]", "first", "by", "pinwheel",
                                      "/opt/src/pw-edit/pw_edit/__init__.py", SDIST[1]], run.stdout

        inspected = cli(root, "inspect", built_ref, "--json")
        assert inspected.returncode in (0, 1), inspected.stderr[-2000:]
        rows = {r["name"]: r for r in json.loads(inspected.stdout)["torch_abi"]}
        assert rows["pw-torchext"]["abi_class"] == "unstable", rows

        bump = cli(root, "bump", "torch==2.14.1", "--variant", "cpu", "--json")
        findings = {f["name"]: f for f in json.loads(bump.stdout)["abi"]}
        assert findings["pw-torchext"]["verdict"] == "rebuild", findings
    finally:
        engine.remove(builder, force=True)
        if built_ref:
            for tag in image.get("tags", []):
                engine.remove(tag, force=True)
            engine.remove(built_ref, force=True)
