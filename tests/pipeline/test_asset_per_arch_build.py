"""A release asset chosen per architecture, on the real engine: one manifest entry names an amd64 and an arm64
wheel of the same version; the amd64 image installs the amd64 one, the arm64 image (built through QEMU) the
arm64 one, and each image's labels name the asset it holds.

The two wheels differ only in what their module says (ARCH), so a build that took the wrong file, or the same
file for both, fails here. The host downloads each platform's asset (the server listens on loopback only).
"""
from __future__ import annotations

import hashlib
import json

import pytest

from pinwheel.image.engine import Engine

from tests.support.file_server import serve_files
from tests.support.local_index import build_wheel
from tests.support.pipeline import Project, require_qemu

pytestmark = pytest.mark.engine


MANIFEST = """\
manifest_version: 1
image: {{name: tiny, repository: {repository}, venv: /opt/venv, installer: pip}}
variants:
  cu130:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    platforms: [linux/amd64, linux/arm64]
    base: {base}
    tag: "cu130-pipe-{{date}}"
steps:
  - name: core
    kind: wheels
    why: "the base everything below needs"
    packages:
      - requirement: "pw-core==1.0.0"
  - name: kernel
    kind: asset
    why: "a release build, one wheel per architecture"
    package: "pw-archasset==1.0.0"
    url:
      amd64: {{url: "{url}/amd64/{name}", sha256: "{amd64}"}}
      arm64: {{url: "{url}/arm64/{name}", sha256: "{arm64}"}}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """(the wheel of each architecture, the server's base URL)."""
    root = tmp_path_factory.mktemp("asset-arch")
    wheels = {}
    for arch in ("amd64", "arm64"):
        (root / arch).mkdir()
        wheels[arch] = build_wheel(root / arch, "pw-archasset", "1.0.0", module_source=f'ARCH = "{arch}"\n')
    assert wheels["amd64"].name == wheels["arm64"].name
    with serve_files(root) as url:
        yield wheels, url


@pytest.fixture(scope="module")
def project(project_factory, base_image: str, served) -> Project:
    require_qemu()
    wheels, url = served
    p = project_factory("assetarch")
    p.manifest.write_text(MANIFEST.format(
        repository=p.repository, base=base_image, url=url, name=wheels["amd64"].name,
        amd64=hashlib.sha256(wheels["amd64"].read_bytes()).hexdigest(),
        arm64=hashlib.sha256(wheels["arm64"].read_bytes()).hexdigest()))
    p.cli("render", check=True)
    p.cli("lock", "--resolver", "uv", check=True)
    p.set_wheels()
    return p


@pytest.mark.parametrize("platform", ["linux/amd64", "linux/arm64"])
def test_each_platform_installs_its_own_asset(project: Project, engine: Engine, served, platform: str):
    wheels, url = served
    arch = platform.split("/")[1]
    built = json.loads(project.cli("build", "--platform", platform, "--quiet", "--json", check=True).stdout)
    image = built["image_id"]
    assert engine.platform(image) == platform
    got = engine.run(image, ["python", "-c", "import pw_archasset; print(pw_archasset.ARCH)"])
    assert (got.returncode, got.stdout.strip()) == (0, arch), got
    labels = json.loads(engine.labels(image)["io.pinwheel.assets"])  # by step
    assert labels["kernel"]["sha256"] == hashlib.sha256(wheels[arch].read_bytes()).hexdigest()
    assert labels["kernel"]["url"] == f"{url}/{arch}/{wheels[arch].name}"
