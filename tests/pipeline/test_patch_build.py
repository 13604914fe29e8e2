"""patch steps on the real engine: a patch that applies, one with a hunk that does not, one aimed at another version.

The project's pw-core 1.0.0 (from the test index) holds pw_core/__init__.py
with one line, `__version__ = "1.0.0"`; the patches are written against it.
The bootstrap base has no `patch`, so the variant's base is made here from it
with Debian's patch package.
"""
from __future__ import annotations

import json
import re

import pytest

from pinwheel.image.engine import Engine

from tests.support.manifests import as_steps
from tests.support.pipeline import Project, base_with_debian_packages, without_nodeps

pytestmark = pytest.mark.engine

GOOD = """\
--- a/pw_core/__init__.py
+++ b/pw_core/__init__.py
@@ -1 +1,2 @@
 __version__ = "1.0.0"
+PATCHED = "by pinwheel"
"""
BAD_HUNK = """\
--- a/pw_core/__init__.py
+++ b/pw_core/__init__.py
@@ -1 +1,2 @@
 __version__ = "9.9.9"
+PATCHED = "never"
"""


@pytest.fixture(scope="module")
def patch_base(engine: Engine, base_image: str, tmp_path_factory: pytest.TempPathFactory):
    """The base with Debian's patch."""
    with base_with_debian_packages(engine, base_image, tmp_path_factory.mktemp("patch-base"), "patch-base",
                                   "patch") as ref:
        yield ref


def with_patch_step(manifest: str, base: str, applies_to: str) -> str:
    """The project's manifest on the patch base, as a steps: list with a patch step after the wheel sets (less
    the --no-deps one, whose dropped requirements have tests of their own)."""
    manifest, based = re.subn(r"^    base: .*$", f"    base: {base}", without_nodeps(manifest), flags=re.M)
    assert based == 1
    return as_steps(manifest, last=(
        "  - name: fixes\n"
        "    kind: patch\n"
        '    why: "a fix upstream has not released"\n'
        "    patches:\n"
        f'      - {{file: patches/core.patch, applies_to: "{applies_to}", strip: 1, why: "marks the module"}}\n'))


def printed(log: str, text: str) -> bool:
    """A line a build step printed ("#<step> <seconds> <text>"), not the step's command line."""
    return bool(re.search(r"^#\d+ \d+\.\d+ " + re.escape(text) + "$", log, re.M))


def build(project: Project, patch: str, base: str, applies_to: str):
    (project.root / "patches").mkdir(exist_ok=True)
    (project.root / "patches" / "core.patch").write_text(patch)
    project.manifest.write_text(with_patch_step(project.original, base, applies_to))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)  # the patch's digest is an input of the lock
    return project.cli("build", "--variant", "cu130", "--json")


def test_a_patch_applies_a_failing_hunk_or_another_version_fails_the_build(project_factory, engine: Engine,
                                                                           patch_base: str):
    project: Project = project_factory("patch")
    project.original = project.manifest.read_text()

    built = build(project, GOOD, patch_base, "pw-core==1.0.0")
    assert built.returncode == 0, built.output[-3000:]
    image = json.loads(built.stdout)
    try:
        assert printed(built.stderr, "pinwheel: patch step fixes: patches/core.patch applied to pw-core==1.0.0"), \
            built.stderr[-3000:]
        found = engine.run(image["image_id"], ["python", "-c", "import pw_core; print(pw_core.PATCHED)"])
        assert (found.returncode, found.stdout.strip()) == (0, "by pinwheel"), found
        left = engine.run(image["image_id"], ["sh", "-c", "find / -xdev -name '*.rej' -o -xdev -name '*.orig' "
                                                          "| grep pw_core || true"])
        assert not left.stdout.strip(), left.stdout
        digest = json.loads(engine.labels(image["image_id"])["io.pinwheel.patches"])["patches/core.patch"]
        assert digest["applies_to"] == "pw-core==1.0.0" and len(digest["sha256"]) == 64

        failed = build(project, BAD_HUNK, patch_base, "pw-core==1.0.0")
        assert failed.returncode != 0 and not failed.stdout.strip(), failed.output[-3000:]
        assert printed(failed.stderr, "pinwheel: ERROR: patch step fixes: patches/core.patch does not apply to "
                                      "pw-core==1.0.0 (every hunk must apply)"), failed.stderr[-3000:]

        wrong = build(project, GOOD, patch_base, "pw-core==1.1.0")
        assert wrong.returncode != 0 and not wrong.stdout.strip(), wrong.output[-3000:]
        assert printed(wrong.stderr, "pinwheel: ERROR: patch step fixes: patches/core.patch applies to "
                                     "pw-core==1.1.0, found 1.0.0"), wrong.stderr[-3000:]
    finally:
        for tag in image["tags"]:
            engine.remove(tag, force=True)
        engine.remove(image["image_id"], force=True)
