"""A dependency the index publishes only as an sdist (antlr4-python3-runtime 4.9.3, which hydra-core and
omegaconf pin) locks: uv resolves it by preparing its metadata, and the lock pins it by its sdist's sha256
(pip and uv build it under --require-hashes). The lock's slicing and the report read the metadata a wheel of
it would carry: its static PKG-INFO (Metadata-Version 2.2+, nothing Dynamic), else what its build backend's
metadata hook prepares. Real uv against the local HTTP index; the sdists carry an in-tree backend, so
nothing comes from outside.
"""
from __future__ import annotations

import hashlib
import sys

import pytest

from pinwheel import cli
from pinwheel.index import IndexClient, MetadataUnavailable
from pinwheel.lock import parse_requirements

from tests.support.manifests import manifest_yaml, variant

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

# A PEP 517 backend in the sdist itself (backend-path "."), with no build requirements: its metadata hook
# writes what a wheel of it would carry, and its wheel hook builds that wheel, so uv can resolve and install it.
BACKEND = '''\
import base64, hashlib, os, zipfile

NAME, VERSION, REQUIRES = "pws_old", "1.0", {requires!r}


def _metadata():
    lines = ["Metadata-Version: 2.1", "Name: pws-old", "Version: " + VERSION]
    return "\\n".join(lines + ["Requires-Dist: " + r for r in REQUIRES]) + "\\n"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(directory, config_settings=None):
    info = os.path.join(directory, NAME + "-" + VERSION + ".dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write(_metadata())
    return NAME + "-" + VERSION + ".dist-info"


def build_wheel(directory, config_settings=None, metadata_directory=None):
    name = NAME + "-" + VERSION + "-py3-none-any.whl"
    info = NAME + "-" + VERSION + ".dist-info/"
    files = {{"pws_old/__init__.py": b"", info + "METADATA": _metadata().encode(),
              info + "WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    record = "".join(p + ",sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
                     + "," + str(len(d)) + "\\n" for p, d in files.items()) + info + "RECORD,,\\n"
    with zipfile.ZipFile(os.path.join(directory, name), "w") as zf:
        for p, d in files.items():
            zf.writestr(p, d)
        zf.writestr(info + "RECORD", record)
    return name
'''

PYPROJECT = b'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
# What setuptools' old sdists carry: a PKG-INFO that cannot say whether its requirements are static
OLD_PKG_INFO = b"Metadata-Version: 1.0\nName: pws-old\nVersion: 1.0\n"

STEPS = """\
  - name: app
    kind: wheels
    why: "an app whose configuration library ships only an sdist"
    packages:
      - {requirement: "pws-app==1.0"}
"""


def old_sdist(index, requires=("pws-leaf>=1",)):
    return index.add_sdist("pws-old", "1.0", files={
        "PKG-INFO": OLD_PKG_INFO, "pyproject.toml": PYPROJECT,
        "backend.py": BACKEND.format(requires=list(requires)).encode()})


@pytest.fixture
def project(local_index, local_project):
    local_index.add("pws-app", "1.0", requires=["pws-old==1.0"])
    local_index.add("pws-leaf", "1.0")
    sdist = old_sdist(local_index)
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(steps=STEPS, variants=[variant("cu130", python=PY)],
                                                             key="steps"))
    return root, sdist


def test_an_sdist_only_dependency_locks_by_its_sdist_hash_and_its_requirements_slice(project):
    root, sdist = project
    assert cli.main(["--manifest", str(root / "wheels_manifest.yaml"), "lock", "--variant", "cu130"]) == 0
    lock = root / "images" / "demo" / "lock" / "cu130"
    full = parse_requirements((lock / "requirements.txt").read_text())
    assert {n: p.version for n, p in full.items()} == {"pws-app": "1.0", "pws-old": "1.0", "pws-leaf": "1.0"}
    assert full["pws-old"].hashes == (f"sha256:{hashlib.sha256(sdist.read_bytes()).hexdigest()}",)
    sliced = (lock / "01-app.txt").read_text()
    assert "pws-old==1.0" in sliced and "pws-leaf==1.0" in sliced  # its own requirement, read from its metadata


def test_the_report_judges_the_sdist_only_dependency_as_locked(project, capsys):
    root, _ = project
    manifest_arg = ["--manifest", str(root / "wheels_manifest.yaml")]
    assert cli.main([*manifest_arg, "lock", "--variant", "cu130"]) == 0
    capsys.readouterr()
    assert cli.main([*manifest_arg, "report", "--variant", "cu130"]) == 0
    out = capsys.readouterr().out
    assert "0 unchecked" in out and "0 violated" in out and out.rstrip().endswith("clean"), out[-2000:]


def test_its_metadata_is_prepared_by_its_backend_and_cached(local_index, tmp_path):
    old_sdist(local_index, requires=["pws-leaf>=2; python_version >= '3'"])
    client = IndexClient(index_url=local_index.serve(), cache_dir=tmp_path / "cache", retries=0)
    meta = client.metadata("pws-old", "1.0", PY, ["manylinux_2_28_x86_64"])
    assert [str(r) for r in meta.requires_dist] == ['pws-leaf>=2; python_version >= "3"']
    again = IndexClient(index_url=local_index.url, cache_dir=tmp_path / "cache", retries=0, offline=True)
    assert [str(r) for r in again.metadata("pws-old", "1.0").requires_dist] == ['pws-leaf>=2; python_version >= "3"']


def test_a_static_pkg_info_is_read_without_running_the_backend(local_index, tmp_path):
    static = b"Metadata-Version: 2.2\nName: pws-static\nVersion: 1.0\nRequires-Dist: pws-leaf>=1\n"
    local_index.add_sdist("pws-static", "1.0", files={
        "PKG-INFO": static, "pyproject.toml": PYPROJECT, "backend.py": b"raise SystemExit('never run')\n"})
    client = IndexClient(index_url=local_index.serve(), cache_dir=tmp_path / "cache", retries=0)
    assert [str(r) for r in client.metadata("pws-static", "1.0").requires_dist] == ["pws-leaf>=1"]


def test_a_backend_that_fails_is_metadata_unavailable_naming_the_sdist(local_index, tmp_path):
    local_index.add_sdist("pws-broken", "1.0", files={
        "PKG-INFO": OLD_PKG_INFO.replace(b"pws-old", b"pws-broken"), "pyproject.toml": PYPROJECT,
        "backend.py": b"raise SystemExit('this backend does not build')\n"})
    client = IndexClient(index_url=local_index.serve(), cache_dir=tmp_path / "cache", retries=0)
    with pytest.raises(MetadataUnavailable, match=r"'pws-broken' 1\.0 is published as an sdist only "
                                                  r"\(pws_broken-1\.0\.tar\.gz\), and its metadata: preparing"):
        client.metadata("pws-broken", "1.0", PY, ["manylinux_2_28_x86_64"])
