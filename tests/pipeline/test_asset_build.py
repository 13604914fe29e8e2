"""asset steps on the real engine: a release wheel from a local HTTP server, pinned by the digest `asset add`
printed, installed and named in the image's labels; a tampered download fails before the engine, naming both
digests.

The host downloads the asset (into the content-addressed cache) and the build
reads it from its context, so the server listens on loopback only.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.file_server import serve_files
from tests.support.local_index import build_wheel
from tests.support.manifests import as_steps
from tests.support.pipeline import Project, without_nodeps

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def asset_server(tmp_path_factory: pytest.TempPathFactory):
    """(directory served, its base URL): a plain HTTP file server on loopback."""
    root = tmp_path_factory.mktemp("asset-server")
    with serve_files(root) as url:
        yield root, f"{url}/releases"


def with_asset_step(manifest: str, entry: str) -> str:
    """The project's manifest as a steps: list, with the asset entry after the wheel sets (less the --no-deps
    one, whose dropped requirements have tests of their own)."""
    return as_steps(without_nodeps(manifest), last=entry)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_release_asset_is_installed_by_digest_and_a_tampered_one_fails_naming_both(
        project_factory, engine: Engine, asset_server, tmp_path):
    served, base_url = asset_server
    (served / "releases").mkdir()
    good = build_wheel(tmp_path / "good", "pw-asset", "1.0.0", payload_size=64)
    shutil.copy2(good, served / "releases" / good.name)
    url = f"{base_url}/{good.name}"
    project: Project = project_factory("asset")
    original = project.manifest.read_text()

    # `asset add` downloads it and prints the entry with its digest
    added = project.cli("asset", "add", url, check=True)
    assert f'url: {{url: "{url}", sha256: "{sha256(good)}"}}' in added.stdout, added.stdout
    assert 'package: "pw-asset==1.0.0"' in added.stdout
    entry = added.stdout.replace("TODO: why this wheel comes from a release and not the index", "a release build")
    project.manifest.write_text(with_asset_step(original, entry))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    assert "# ---- asset step 4/4: pw-asset." in dockerfile
    built = project.cli("build", "--variant", "cu130", "--json", check=True)
    image = json.loads(built.stdout)
    try:
        found = engine.run(image["image_id"], ["python", "-c", "import importlib.metadata as m; "
                                                               "print(m.version('pw-asset'))"])
        assert (found.returncode, found.stdout.strip()) == (0, "1.0.0"), found
        labels = engine.labels(image["image_id"])
        assert json.loads(labels["io.pinwheel.assets"]) == {
            "pw-asset": {"package": "pw-asset==1.0.0", "url": url, "sha256": sha256(good)}}
        # the wheel was mounted, never copied into a layer
        left = engine.run(image["image_id"], ["sh", "-c", "find /tmp/pinwheel-assets -name '*.whl' 2>/dev/null"])
        assert not left.stdout.strip(), left.stdout

        # A release whose bytes changed under the same name: the host refuses it before the engine.
        pinned = build_wheel(tmp_path / "pinned", "pw-asset", "1.0.1", payload_size=64)
        tampered = build_wheel(tmp_path / "tampered", "pw-asset", "1.0.1", payload_size=64)
        assert sha256(pinned) != sha256(tampered)
        shutil.copy2(tampered, served / "releases" / tampered.name)
        entry2 = (entry.replace("pw-asset==1.0.0", "pw-asset==1.0.1").replace(good.name, pinned.name)
                  .replace(sha256(good), sha256(pinned)))
        project.manifest.write_text(with_asset_step(original, entry2))
        project.cli("render", check=True)
        project.cli("lock", "--variant", "cu130", check=True)
        failed = project.cli("build", "--variant", "cu130", "--json")
        assert failed.returncode == 2, failed.output[-3000:]
        assert (f"{base_url}/{pinned.name}: sha256 mismatch: expected {sha256(pinned)}, found {sha256(tampered)}"
                in failed.stderr), failed.stderr[-3000:]
        assert not failed.stdout.strip(), failed.stdout
    finally:
        for tag in image["tags"]:
            engine.remove(tag, force=True)
        engine.remove(image["image_id"], force=True)
