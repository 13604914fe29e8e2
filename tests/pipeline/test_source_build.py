"""Source builds on the real engine: an sdist from the test index built without isolation, against the image.

The sdist pw-srcbuild has an in-tree build backend that records, in the wheel
it builds, the version of pw-core it finds installed: only a build that runs in
the image's own environment (no isolation, from the layer that installed
pw-core) can see it. Its PKG-INFO (Metadata-Version 2.2) declares its
requirement statically, so the report judges it before any build. A later
step changed afterwards leaves the builder stage CACHED in the build log.
A second sdist, pw-dynbuild, has a PKG-INFO that cannot say what it requires:
the report leaves it unchecked, and the build judges the wheel it built (its
requirement is unmet, so the invariant's `pip check` fails the build).
"""
from __future__ import annotations

import hashlib
import json
import re
import uuid

import pytest

from pinwheel.image.engine import Engine

from tests.support.manifests import as_steps
from tests.support.pipeline import Project, TLSIndex, without_nodeps

pytestmark = pytest.mark.engine

PACKAGE = "pw-srcbuild"
VERSION = "0.1.0"

BACKEND = '''\
"""An in-tree PEP 517 backend: the wheel records the pw-core the build environment holds; its METADATA is
METADATA.in (what the build decides, which PKG-INFO may not say)."""
import base64, hashlib, importlib.metadata, os, zipfile

NONCE = {nonce!r}


def _record(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{{name}},sha256={{digest}},{{len(data)}}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    seen = importlib.metadata.version("pw-core")  # not found in an isolated environment
    info = "{dist}-{version}.dist-info"
    files = {{
        "{dist}/__init__.py": f"BUILT_WITH_PW_CORE = {{seen!r}}\\nNONCE = {{NONCE!r}}\\n".encode(),
        f"{{info}}/METADATA": open("METADATA.in", "rb").read(),
        f"{{info}}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: pw_backend\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }}
    name = "{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
        zf.writestr(f"{{info}}/RECORD", "\\n".join([_record(p, d) for p, d in files.items()] + [f"{{info}}/RECORD,,"]))
    return name
'''

PKG_INFO = f"""\
Metadata-Version: 2.2
Name: {PACKAGE}
Version: {VERSION}
Requires-Dist: pw-core>=1.0
"""

PYPROJECT = """\
[build-system]
requires = []
build-backend = "pw_backend"
backend-path = ["."]
"""


# An sdist whose PKG-INFO cannot say what it requires (Metadata-Version 2.1); the wheel it builds requires a
# package nothing installs.
DYNAMIC = "pw-dynbuild"
DYNAMIC_PKG_INFO = f"Metadata-Version: 2.1\nName: {DYNAMIC}\nVersion: {VERSION}\n"
DYNAMIC_METADATA = f"Metadata-Version: 2.1\nName: {DYNAMIC}\nVersion: {VERSION}\nRequires-Dist: pw-absent>=1.0\n"


def publish(index: TLSIndex, name: str, pkg_info: str, metadata: str) -> str:
    """An sdist with the in-tree backend on the test index, unique to the session; its sha256."""
    path = index.add_sdist(name, VERSION, files={
        "PKG-INFO": pkg_info.encode(),
        "METADATA.in": metadata.encode(),
        "pyproject.toml": PYPROJECT.encode(),
        "pw_backend.py": BACKEND.format(nonce=uuid.uuid4().hex, version=VERSION, dist=name.replace("-", "_")).encode(),
    })
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def sdist_sha256(tls_index: TLSIndex) -> str:
    return publish(tls_index, PACKAGE, PKG_INFO, PKG_INFO)


@pytest.fixture(scope="module")
def dynamic_sha256(tls_index: TLSIndex) -> str:
    return publish(tls_index, DYNAMIC, DYNAMIC_PKG_INFO, DYNAMIC_METADATA)


def sdist_step(sha256: str, package: str = PACKAGE) -> str:
    return ("\n"
            "  - name: srcb\n"
            "    kind: sdist\n"
            '    why: "ships only an sdist"\n'
            f'    package: "{package}=={VERSION}"\n'
            f'    sha256: "{sha256}"\n'
            "    isolation: false\n"
            "    needs: [pw-core]\n"
            "    env:\n"
            '      MAX_JOBS: "1"\n')


def with_sdist_step(manifest: str, sha256: str, package: str = PACKAGE) -> str:
    return as_steps(without_nodeps(manifest)).rstrip("\n") + "\n" + sdist_step(sha256, package)


def stage_lines(log: str) -> str:
    """The build log's lines about the stages below the image (what a cache miss is read from)."""
    return "\n".join(line[:200] for line in log.splitlines()
                     if any(w in line for w in ("image-core", "sdist-srcb", "preflight", "CACHED")))


def test_an_sdist_is_built_without_isolation_against_the_image_and_cached_across_a_later_change(
        project_factory, engine: Engine, sdist_sha256: str):
    project: Project = project_factory("sdist")
    original = project.manifest.read_text()
    project.manifest.write_text(with_sdist_step(original, sdist_sha256))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    # the image stage is cut after `core`, which installs what the build needs; the build starts there
    assert "FROM ${BASE} AS image-core\n" in dockerfile
    assert "FROM image-core AS sdist-srcb\n" in dockerfile
    assert "FROM image-core AS image\n" in dockerfile
    assert dockerfile.index("AS sdist-srcb") < dockerfile.index("FROM image-core AS image")

    report = project.cli("report", "--variant", "cu130", "--json")
    data = json.loads(report.stdout)
    # its PKG-INFO is static: the requirement is judged before the build, not unchecked
    edges = [e for e in data["edges"] if e["parent"] == PACKAGE]
    assert [(e["requirement"], e["verdict"], e["found"]) for e in edges] == [("pw-core>=1.0", "suppressed", "1.0.0")], \
        edges
    assert {"name": PACKAGE, "version": VERSION, "source": "sdist"}.items() <= \
        next(p for p in data["packages"] if p["name"] == PACKAGE).items()

    built = project.cli("build", "--variant", "cu130", "--json", check=True)
    image = json.loads(built.stdout)
    tags = list(image["tags"])
    try:
        found = engine.run(image["image_id"], ["python", "-c", "import importlib.metadata as m, pw_srcbuild; "
                                                               "print(m.version('pw-srcbuild'), "
                                                               "pw_srcbuild.BUILT_WITH_PW_CORE)"])
        # built against the pw-core the image installed in step `core`
        assert (found.returncode, found.stdout.strip()) == (0, f"{VERSION} 1.0.0"), found

        # a step after `core` changes (the `top` wheel set installs pw-util 0.5.0 instead of pw-top): the image
        # above `core` is built again, the builder stage is not
        changed = original.replace('      - requirement: "pw-top==2.0.0"\n', '      - requirement: "pw-util==0.5.0"\n')
        assert changed != original
        project.manifest.write_text(with_sdist_step(changed, sdist_sha256))
        project.cli("render", check=True)
        project.cli("lock", "--variant", "cu130", check=True)
        rebuilt = project.cli("build", "--variant", "cu130", "--json", check=True)
        again = json.loads(rebuilt.stdout)
        tags += list(again["tags"])
        assert again["image_id"] != image["image_id"]
        assert re.search(r"^#(\d+) \[sdist-srcb( \d+/\d+)?\] RUN .*\n#\1 CACHED$", rebuilt.stderr, re.M), \
            stage_lines(rebuilt.stderr)
        assert not re.search(r"^#\d+ \d+\.\d+ Saved \S*pw_srcbuild", rebuilt.stderr, re.M), rebuilt.stderr[-3000:]
        assert re.search(r"^#\d+ \d+\.\d+ Processing \S*pw_srcbuild-0.1.0-py3-none-any.whl$", rebuilt.stderr, re.M)

        # a wrong sha256: the builder fails naming both digests, and nothing is tagged
        wrong = "0" * 64
        project.manifest.write_text(with_sdist_step(changed, wrong))
        project.cli("render", check=True)
        project.cli("lock", "--variant", "cu130", check=True)
        failed = project.cli("build", "--variant", "cu130", "--json")
        assert failed.returncode != 0
        assert (f"pinwheel: ERROR: sdist step srcb: {PACKAGE}=={VERSION}: sha256 mismatch: expected {wrong}, "
                f"found {sdist_sha256}") in failed.stderr, failed.stderr[-3000:]
        assert not failed.stdout.strip()
    finally:
        for tag in tags:
            engine.remove(tag, force=True)
        engine.remove(image["image_id"], force=True)


def test_dynamic_requirements_are_unchecked_then_the_built_wheel_is_judged_in_the_build(
        project_factory, dynamic_sha256: str):
    project: Project = project_factory("sdist-dynamic")
    project.manifest.write_text(with_sdist_step(project.manifest.read_text(), dynamic_sha256, DYNAMIC))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    report = project.cli("report", "--variant", "cu130", "--json")
    data = json.loads(report.stdout)
    [edge] = [e for e in data["edges"] if e["parent"] == DYNAMIC]
    assert edge["verdict"] == "unchecked" and "Metadata-Version 2.1" in edge["detail"], edge
    assert report.returncode != 0 and not data["summary"]["clean"]
    # the build judges the wheel it built: its requirement is unmet, so the invariant fails and nothing is tagged
    failed = project.cli("build", "--variant", "cu130", "--json")
    assert failed.returncode != 0
    assert re.search(r"^#\d+ \d+\.\d+ .*pw-dynbuild 0\.1\.0 requires pw-absent, which is not installed", failed.stderr,
                     re.M), failed.stderr[-3000:]
    assert not failed.stdout.strip()
