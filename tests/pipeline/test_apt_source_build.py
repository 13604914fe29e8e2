"""An extra apt source pinned by its signing key's fingerprint, on the real engine: a tiny signed apt repository
made here (a key made with gpg, a .deb with dpkg-deb, Packages by dpkg-scanpackages, Release written here and
signed as InRelease), served on the Docker bridge address as a flat repository like NVIDIA's CUDA one. The apt
step installs the package from it at its pin; a replaced key whose sha256 was updated but whose fingerprint is
not the pinned one fails the build before the engine, naming both fingerprints.
"""
from __future__ import annotations

import email.utils
import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, bridge_address

pytestmark = pytest.mark.engine

VERSION = "2.1-1"
PACKAGE = "pw-aptsrc"


def gpg(home: Path, *args: str, data: bytes | None = None) -> bytes:
    proc = subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), "--pinentry-mode", "loopback",
                           "--passphrase", "", *args], input=data, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout


def new_key(home: Path, uid: str) -> tuple[bytes, str]:
    """(the armored public key, its fingerprint) of a new signing key in the keyring at ``home``."""
    home.mkdir(mode=0o700)
    gpg(home, "--quick-gen-key", uid, "ed25519", "sign", "never")
    listing = gpg(home, "--with-colons", "--fingerprint").decode()
    fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    return gpg(home, "--armor", "--export"), fingerprint


def tiny_deb(directory: Path) -> Path:
    root = directory / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {PACKAGE}\nVersion: {VERSION}\nArchitecture: all\nMaintainer: pinwheel tests <tests@invalid>\n"
        "Description: a package only the extra apt source has\n")
    (root / "usr" / "share" / PACKAGE).mkdir(parents=True)
    (root / "usr" / "share" / PACKAGE / "hello").write_text("hello from a signed apt source\n")
    out = directory / f"{PACKAGE}_{VERSION}_all.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(out)], check=True,
                   capture_output=True, timeout=60)
    shutil.rmtree(root)
    return out


def signed_flat_repository(repo: Path, home: Path) -> None:
    """Packages, Release and InRelease of the .debs in ``repo`` (a flat repository: `Suites: /`)."""
    packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo, check=True,
                              capture_output=True, timeout=60).stdout
    (repo / "Packages").write_bytes(packages)
    release = (f"Origin: pinwheel-tests\nLabel: pinwheel-tests\nDate: {email.utils.formatdate(usegmt=True)}\n"
               "Architectures: all amd64 arm64\nSHA256:\n"
               f" {hashlib.sha256(packages).hexdigest()} {len(packages)} Packages\n")
    (repo / "Release").write_text(release)
    (repo / "InRelease").write_bytes(gpg(home, "--clearsign", "--output", "-", data=release.encode()))


@pytest.fixture(scope="module")
def apt_repository(engine: Engine, tmp_path_factory: pytest.TempPathFactory):
    """(base URL, the repository's key, its fingerprint, another key, its fingerprint), served on the bridge."""
    if not (shutil.which("gpg") and shutil.which("dpkg-scanpackages") and shutil.which("dpkg-deb")):
        pytest.skip("SKIPPED: needs gpg, dpkg-deb and dpkg-scanpackages on the host")
    root = tmp_path_factory.mktemp("apt-source")
    key, fpr = new_key(root / "gnupg", "pinwheel test repository <repo@invalid>")
    other, other_fpr = new_key(root / "gnupg-other", "somebody else <other@invalid>")
    repo = root / "www" / "repo" / "debian12" / "x86_64"
    repo.mkdir(parents=True)
    tiny_deb(repo)
    signed_flat_repository(repo, root / "gnupg")
    forged = root / "www" / "forged" / "debian12" / "x86_64"  # the same packages, signed by somebody else
    shutil.copytree(repo, forged)
    signed_flat_repository(forged, root / "gnupg-other")
    (root / "www" / "keys").mkdir()
    (root / "www" / "keys" / "repo.pub").write_bytes(key)
    (root / "www" / "keys" / "other.pub").write_bytes(other)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root / "www"))
    server = http.server.ThreadingHTTPServer((bridge_address(engine), 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield (f"http://{server.server_address[0]}:{server.server_address[1]}", key, fpr, other, other_fpr)
    finally:
        server.shutdown()
        server.server_close()


def with_apt_source(manifest: str, base_url: str, key_file: str, key: bytes, fingerprint: str,
                    repository: str = "repo") -> str:
    steps = re.sub(r"^  - name: (\S+)\n", r"  - name: \1\n    kind: wheels\n", manifest, flags=re.M)
    assert steps.count("wheel_sets:\n") == 1
    spaced = " ".join(fingerprint[i:i + 4] for i in range(0, len(fingerprint), 4))  # as gpg prints it
    apt = ("steps:\n"
           "  - name: vendor\n"
           "    kind: apt\n"
           '    why: "a package from the vendor\'s own apt repository"\n'
           "    sources:\n"
           "      - name: pwtest\n"
           f'        uris: "{base_url}/{repository}/debian12/x86_64/"\n'
           '        suites: "/"\n'
           f'        key: {{url: "{base_url}/keys/{key_file}", sha256: "{hashlib.sha256(key).hexdigest()}", '
           f'fingerprint: "{spaced}"}}\n'
           '        why: "the vendor signs its repository with this key"\n'
           "    packages:\n"
           f'      - {{name: {PACKAGE}, version: "{VERSION}", why: "only the vendor\'s repository has it"}}\n\n')
    return steps.replace("wheel_sets:\n", apt)


def test_a_package_from_a_signed_extra_source_is_installed_at_its_pin(project_factory, engine: Engine,
                                                                      apt_repository):
    base_url, key, fpr, _other, _other_fpr = apt_repository
    project: Project = project_factory("apt-source")
    project.manifest.write_text(with_apt_source(project.manifest.read_text(), base_url, "repo.pub", key, fpr))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json")
    if built.returncode != 0 and "Temporary failure resolving" in built.stderr:
        pytest.skip("SKIPPED: the Debian archive in the base's apt sources is out of reach from the engine")
    assert built.returncode == 0, built.output[-4000:]
    tag = json.loads(built.stdout)["tags"][0]
    ran = engine.run(tag, ["sh", "-c", f"dpkg-query -W -f='${{Version}}\\n' {PACKAGE}; cat /usr/share/{PACKAGE}/hello; "
                                       "cat /etc/apt/sources.list.d/pinwheel-pwtest.sources"])
    assert ran.ok, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[:2] == [VERSION, "hello from a signed apt source"], ran.stdout
    assert "Signed-By: /etc/apt/keyrings/pinwheel-pwtest.asc" in lines, ran.stdout
    [entry] = json.loads(engine.labels(tag)["io.pinwheel.inputs"])["debs"]
    assert entry == {"step": "vendor", "source": "pwtest", "url": f"{base_url}/keys/repo.pub",
                     "sha256": hashlib.sha256(key).hexdigest(), "fingerprint": fpr}


def test_a_replaced_key_fails_the_build_naming_both_fingerprints(project_factory, engine: Engine, apt_repository):
    """The key file was swapped and its new sha256 written into the manifest, but the fingerprint pinned is the
    vendor's: the build stops before the engine, naming the one expected and the one found."""
    base_url, _key, fpr, other, other_fpr = apt_repository
    assert fpr != other_fpr
    project: Project = project_factory("apt-source-tampered")
    project.manifest.write_text(with_apt_source(project.manifest.read_text(), base_url, "other.pub", other, fpr))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet")
    assert built.returncode != 0
    assert (f"apt step vendor: {base_url}/keys/other.pub: fingerprint mismatch: expected {fpr}, found {other_fpr}"
            in built.stderr), built.output[-3000:]
    assert "Traceback" not in built.output


def test_a_repository_signed_by_another_key_is_refused_by_apt(project_factory, engine: Engine, apt_repository):
    """Signed-By names only the pinned key: the same packages signed by another key fail `apt-get update`."""
    base_url, key, fpr, _other, _other_fpr = apt_repository
    project: Project = project_factory("apt-source-forged")
    project.manifest.write_text(with_apt_source(project.manifest.read_text(), base_url, "repo.pub", key, fpr,
                                                repository="forged"))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet")
    if built.returncode != 0 and "Temporary failure resolving" in built.stderr:
        pytest.skip("SKIPPED: the Debian archive in the base's apt sources is out of reach from the engine")
    assert built.returncode != 0
    assert "NO_PUBKEY" in built.output or "not signed" in built.output, built.output[-3000:]
