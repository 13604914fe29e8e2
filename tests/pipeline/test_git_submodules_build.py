"""A git step as source builds really are, on the real engine: a commit whose package sits partly in a
submodule (`submodules: true`), with a patch applied to the checkout before the build (its paths relative to
the source tree). Both repositories are served by `git daemon` on the Docker bridge address, as
test_git_build.py does.
"""
from __future__ import annotations

import json

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import engine_unavailable
from tests.support.git_daemon import git, serve_git
from tests.support.manifests import as_steps
from tests.support.pipeline import Project, bridge_address

pytestmark = pytest.mark.engine

PACKAGE = "pw-gitsuper"
SETUP = """\
from setuptools import setup

setup(name="pw-gitsuper", version="0.1.0", py_modules=["pw_gitsuper"], packages=["pw_gitsub"],
      package_dir={"pw_gitsub": "vendor/sub"})
"""
PATCH = """\
--- a/pw_gitsuper.py
+++ b/pw_gitsuper.py
@@ -1,2 +1,2 @@
 from pw_gitsub import VALUE
-PATCHED = False
+PATCHED = True
"""


@pytest.fixture(scope="module")
def served(engine: Engine, tmp_path_factory: pytest.TempPathFactory):
    """(url, commit) of pw-gitsuper, whose vendor/sub is a submodule; both served by git daemon."""
    root = tmp_path_factory.mktemp("git-submodules")
    sub, top = root / "sub.git", root / "pw-gitsuper.git"
    for repo in (sub, top):
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        git(repo, "config", "uploadpack.allowReachableSHA1InWant", "true")
    (sub / "__init__.py").write_text('VALUE = "from the submodule"\n')
    git(sub, "add", "-A")
    git(sub, "commit", "-q", "-m", "sub")
    with serve_git(root, bridge_address(engine), unavailable=engine_unavailable) as base:
        (top / "setup.py").write_text(SETUP)
        (top / "pw_gitsuper.py").write_text("from pw_gitsub import VALUE\nPATCHED = False\n")
        git(top, "submodule", "add", "-q", f"{base}/sub.git", "vendor/sub")
        git(top, "add", "-A")
        git(top, "commit", "-q", "-m", "super with a submodule")
        yield f"{base}/pw-gitsuper.git", git(top, "rev-parse", "HEAD")


def with_git_step(manifest: str, url: str, rev: str, builder: str) -> str:
    return as_steps(manifest, last=(
        "  - name: super\n"
        "    kind: git\n"
        '    why: "a commit whose package sits partly in a submodule, with a fix on top"\n'
        f'    package: "{PACKAGE}==0.1.0"\n'
        f'    url: "{url}"\n'
        f'    rev: "{rev}"\n'
        "    isolation: false\n"
        f'    builder: "{builder}"\n'
        "    submodules: true\n"
        "    patches:\n"
        '      - {file: patches/patched.patch, strip: 1, why: "the fix upstream has not merged"}\n'))


def test_a_commit_with_a_submodule_and_a_patch_builds_into_the_image(project_factory, engine: Engine, served,
                                                                     git_builder: str):
    url, rev = served
    project: Project = project_factory("git-submodules")
    (project.root / "patches").mkdir()
    (project.root / "patches" / "patched.patch").write_text(PATCH)
    project.manifest.write_text(with_git_step(project.manifest.read_text(), url, rev, git_builder))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    ran = engine.run(tag, ["python", "-c", "import pw_gitsuper as m; print(m.VALUE, m.PATCHED)"])
    assert ran.ok, ran.stderr
    assert ran.stdout.strip() == "from the submodule True"
    [entry] = json.loads(engine.labels(tag)["io.pinwheel.inputs"])["sources"]
    assert entry["commit"] == rev and [p["file"] for p in entry["patches"]] == ["patches/patched.patch"]
