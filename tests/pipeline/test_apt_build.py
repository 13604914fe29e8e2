"""apt steps on the real engine: a Debian package installed at its pin, and a wrong pin the build refuses.

The pipeline project's wheel sets become a `steps:` list with an apt step in
front. The Debian package comes from the archive the bootstrap base was made
from: the base's own apt sources, which a build step reaches like any other
address the engine's bridge routes. The package is figlet: 140 KB, it needs
only libc6, and its version holds a letter. That letter is what the wrong pin
changes: apt matches `name=VERSION` ignoring letter case, so it installs the
real version, and only the invariant after the last step can tell the image
is not what the manifest says.
"""
from __future__ import annotations

import json
import re

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import engine_unavailable
from tests.support.manifests import as_steps
from tests.support.pipeline import Project

pytestmark = pytest.mark.engine

PACKAGE = "figlet"


def archive_version(engine: Engine, base: str) -> str:
    """The version of PACKAGE the base's apt sources offer (what an unpinned install would get)."""
    probe = engine.run(base, ["sh", "-c", "apt-get update -qq >/dev/null 2>&1 && "
                                          f"apt-cache show --no-all-versions {PACKAGE} | sed -n 's/^Version: //p'"])
    version = probe.stdout.strip()
    if probe.returncode != 0 or not version:
        engine_unavailable(f"the Debian archive in {base}'s apt sources is out of reach from the engine "
                              f"(exit {probe.returncode}): {probe.stderr.strip()[-300:]}")
    return version


def with_apt_step(manifest: str, version: str) -> str:
    """The project's manifest as a steps: list, an apt step first and every wheel set marked as one."""
    apt = ("  - name: tools\n"
           "    kind: apt\n"
           '    why: "a banner printer, standing in for the RDMA and NCCL libraries of a real image"\n'
           "    packages:\n"
           f'      - {{name: {PACKAGE}, version: "{version}", why: "small, and only libc6 below it"}}\n'
           "\n")
    return as_steps(manifest, first=apt)


def printed(log: str, text: str) -> bool:
    """A line a build step printed ("#<step> <seconds> <text>"), not the step's command line."""
    return bool(re.search(r"^#\d+ \d+\.\d+ " + re.escape(text) + "$", log, re.M))


def test_an_apt_pin_is_installed_and_a_wrong_one_fails_the_build_naming_it(project_factory, engine: Engine,
                                                                           base_image: str):
    project: Project = project_factory("apt")
    version = archive_version(engine, base_image)
    wrong = version.upper()
    assert wrong != version, f"{PACKAGE} {version} has no letter to change"
    original = project.manifest.read_text()

    project.manifest.write_text(with_apt_step(original, version))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)  # the slices are renumbered: 02-core.txt, ...
    dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    assert "# ---- apt step 1/5: tools." in dockerfile and "# ---- wheel set 2/5: core." in dockerfile
    built = project.cli("build", "--variant", "cu130", "--json", check=True)
    image = json.loads(built.stdout)
    try:
        # installed at the pin, with the wheel sets after it, and every invariant passed (the apt
        # layer itself may come from the engine's cache: it depends only on the base and the pin)
        found = engine.run(image["image_id"], ["dpkg-query", "-W", "-f=${Version}", PACKAGE])
        assert (found.returncode, found.stdout) == (0, version), found
        pw = engine.run(image["image_id"], ["python", "-c",
                                            "import importlib.metadata as m; print(m.version('pw-top'))"])
        assert pw.stdout.strip() == "2.0.0", pw
        # nothing of apt's lists or downloads stays in the image
        left = engine.run(image["image_id"], ["sh", "-c", "ls /var/lib/apt/lists /var/cache/apt/archives"])
        assert not re.search(r"Packages|\.deb", left.stdout), left.stdout

        # A pin that differs in letter case only: apt installs the real version (the invariant finds it),
        # and the invariant refuses it.
        project.manifest.write_text(with_apt_step(original, wrong))
        project.cli("render", check=True)
        assert project.cli("lock", "--check").returncode == 0  # apt pins are not in the lock
        failed = project.cli("build", "--variant", "cu130", "--json")
        assert failed.returncode != 0, failed.output[-3000:]
        log = failed.stderr
        assert printed(log, f"pinwheel: ERROR: apt step tools: {PACKAGE}: expected {wrong}, found {version}"), \
            log[-3000:]
        assert not failed.stdout.strip(), failed.stdout  # no image was reported built
    finally:
        for tag in image["tags"]:
            engine.remove(tag, force=True)
        engine.remove(image["image_id"], force=True)
