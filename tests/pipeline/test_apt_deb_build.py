"""A .deb from a URL on the real engine: a tiny package built here with dpkg-deb, served on loopback, pinned
by its sha256, installed and held by an apt step; the invariant finds it at its version and held.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.file_server import serve_files
from tests.support.manifests import as_steps
from tests.support.pipeline import Project

pytestmark = pytest.mark.engine

VERSION = "1.0-1"


def tiny_deb(directory: Path) -> Path:
    """pw-tinydeb 1.0-1 (Architecture: all, no dependencies), holding one file."""
    root = directory / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: pw-tinydeb\nVersion: {VERSION}\nArchitecture: all\nMaintainer: pinwheel tests <tests@invalid>\n"
        "Description: a package the apt step installs from a URL\n")
    (root / "usr" / "share" / "pw-tinydeb").mkdir(parents=True)
    (root / "usr" / "share" / "pw-tinydeb" / "hello").write_text("hello from a .deb\n")
    out = directory / f"pw-tinydeb_{VERSION}_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(out)], check=True,
                   capture_output=True, timeout=60)
    return out


@pytest.fixture(scope="module")
def deb_server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("deb-server")
    with serve_files(root) as url:
        yield root, url


def with_apt_step(manifest: str, url: str, sha256: str) -> str:
    apt = ("  - name: profiler\n"
           "    kind: apt\n"
           '    why: "a tool published as a .deb on no apt source"\n'
           "    debs:\n"
           f'      - {{name: pw-tinydeb, version: "{VERSION}", url: "{url}", sha256: "{sha256}", why: "the vendor\'s .deb"}}\n'
           "    hold: [pw-tinydeb]\n\n")
    return as_steps(manifest, first=apt)


def test_a_deb_from_a_url_is_installed_at_its_pin_and_held(project_factory, engine: Engine, deb_server):
    served, base_url = deb_server
    deb = tiny_deb(served)
    digest = hashlib.sha256(deb.read_bytes()).hexdigest()
    project: Project = project_factory("deb")
    project.manifest.write_text(with_apt_step(project.manifest.read_text(), f"{base_url}/{deb.name}", digest))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json")
    if built.returncode != 0 and "Temporary failure resolving" in built.stderr:
        pytest.skip("SKIPPED: the Debian archive in the base's apt sources is out of reach from the engine")
    assert built.returncode == 0, built.output[-4000:]
    tag = json.loads(built.stdout)["tags"][0]
    ran = engine.run(tag, ["sh", "-c", "dpkg-query -W -f='${Version}\\n' pw-tinydeb; apt-mark showhold; "
                                       "cat /usr/share/pw-tinydeb/hello; ls /tmp/pinwheel-debs/profiler | wc -l"])
    assert ran.ok, ran.stderr
    assert ran.stdout.split("\n")[:4] == [VERSION, "pw-tinydeb", "hello from a .deb", "0"], ran.stdout
    inputs = json.loads(engine.labels(tag)["io.pinwheel.inputs"])
    assert inputs["debs"] == [{"step": "profiler", "name": "pw-tinydeb", "version": VERSION,
                               "url": f"{base_url}/{deb.name}", "sha256": digest}]
