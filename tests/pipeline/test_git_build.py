"""git steps on the real engine: a pure-Python package installed at a commit, and a wrong commit the build refuses.

A local repository holds the package pw-gitpkg in two commits; its branch
points at the second. `git daemon` serves it on the Docker bridge address (a
build step reaches the host there, as it reaches the test index). The step
pins the first commit: the image holds that commit's code, not the branch's.
The bootstrap base has no git, so the builder stage starts from an image made
from the base with Debian's git (the step's `builder`, the pipeline tests' git_builder); the package is
built there without isolation, with the base's own setuptools.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import engine_unavailable
from tests.support.git_daemon import git, serve_git
from tests.support.manifests import as_steps
from tests.support.pipeline import Project, bridge_address, without_nodeps

pytestmark = pytest.mark.engine

PACKAGE = "pw-gitpkg"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "pw-gitpkg"
version = "{version}"
dependencies = ["pw-core>=1.0"]
"""


def commit(repo: Path, version: str, mark: str) -> str:
    (repo / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (repo / "pw_gitpkg").mkdir(exist_ok=True)
    (repo / "pw_gitpkg" / "__init__.py").write_text(f"MARK = {mark!r}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"pw-gitpkg {version}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def served_repo(engine: Engine, tmp_path_factory: pytest.TempPathFactory):
    """(url, first commit, second commit): pw-gitpkg served by git daemon on the bridge address."""
    root = tmp_path_factory.mktemp("git-served")
    repo = root / "pw-gitpkg.git"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    first = commit(repo, "0.3.0", "first")
    second = commit(repo, "0.4.0", "second")  # where the branch points: what a floating rev would get
    git(repo, "config", "uploadpack.allowReachableSHA1InWant", "true")
    with serve_git(root, bridge_address(engine), unavailable=engine_unavailable) as base:
        yield f"{base}/pw-gitpkg.git", first, second


def with_git_step(manifest: str, url: str, rev: str, builder: str) -> str:
    """The project's manifest as a steps: list, with a git step after the wheel sets (less the --no-deps one,
    whose dropped requirements have tests of their own)."""
    return as_steps(without_nodeps(manifest), last=(
        "  - name: src\n"
        "    kind: git\n"
        '    why: "a fix that is on no release yet"\n'
        f'    package: "{PACKAGE}==0.3.0"\n'
        f'    url: "{url}"\n'
        f'    rev: "{rev}"\n'
        "    isolation: false\n"
        f'    builder: "{builder}"\n'))


def printed(log: str, text: str) -> bool:
    """A line a build step printed ("#<step> <seconds> <text>"), not the step's command line."""
    return bool(re.search(r"^#\d+ \d+\.\d+ " + re.escape(text) + "$", log, re.M))


def test_a_git_commit_is_installed_and_a_wrong_one_fails_the_build_naming_it(project_factory, engine: Engine,
                                                                            served_repo, git_builder: str):
    url, first, second = served_repo
    project: Project = project_factory("git")
    original = project.manifest.read_text()

    project.manifest.write_text(with_git_step(original, url, first, git_builder))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    dockerfile = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    assert f"FROM {git_builder} AS git-src" in dockerfile
    assert "# ---- git step 4/4: src." in dockerfile
    report = project.cli("report", "--variant", "cu130", "--json")
    data = json.loads(report.stdout)
    # the commit's pyproject.toml declares its requirements statically: the host fetched the commit and read
    # them, so they are judged (--no-deps, met by the shared pw-core), not unchecked
    assert data["summary"]["unchecked"] == 0, data["summary"]
    edges = [e for e in data["edges"] if e["parent"] == PACKAGE]
    assert [(e["requirement"], e["verdict"], e["found"]) for e in edges] == [("pw-core>=1.0", "suppressed", "1.0.0")], \
        edges
    assert {"name": PACKAGE, "version": "0.3.0", "source": "git"}.items() <= \
        next(p for p in data["packages"] if p["name"] == PACKAGE).items()
    built = project.cli("build", "--variant", "cu130", "--json", check=True)
    image = json.loads(built.stdout)
    try:
        # the first commit's code and version, though the branch has moved on
        found = engine.run(image["image_id"], ["python", "-c", "import importlib.metadata as m, pw_gitpkg; "
                                                               "print(m.version('pw-gitpkg'), pw_gitpkg.MARK)"])
        assert (found.returncode, found.stdout.strip()) == (0, "0.3.0 first"), found
        # neither the builder's checkout nor its wheel reaches the image (only the empty mount point)
        left = engine.run(image["image_id"], ["sh", "-c", "find /tmp/pinwheel-git -mindepth 1 2>/dev/null || true"])
        assert left.stdout.split() in ([], ["/tmp/pinwheel-git/wheel"]), left.stdout

        # an earlier step changes (the `top` wheel set is gone): the image's layers above it are built again,
        # but the builder stage is not; its key is the builder image, the commit and the build settings
        without_top, removed = re.subn(r"^  - name: top\n.*?(?=^  - name: )", "", original, flags=re.M | re.S)
        assert removed == 1
        project.manifest.write_text(with_git_step(without_top, url, first, git_builder))
        project.cli("render", check=True)
        project.cli("lock", "--variant", "cu130", check=True)
        rebuilt = project.cli("build", "--variant", "cu130", "--json", check=True)
        assert re.search(r"^#(\d+) \[git-src \d+/\d+\] RUN .*\n#\1 CACHED$", rebuilt.stderr, re.M), \
            rebuilt.stderr[-3000:]
        assert not re.search(r"^#\d+ \d+\.\d+ Cloning|^#\d+ \d+\.\d+ Processing /tmp/pinwheel-git/src",
                             rebuilt.stderr, re.M)
        again = json.loads(rebuilt.stdout)
        image["tags"] = list(image["tags"]) + list(again["tags"])
        assert engine.run(again["image_id"], ["python", "-c", "import pw_gitpkg; print(pw_gitpkg.MARK)"]
                          ).stdout.strip() == "first"

        # a commit the repository does not hold: the build fails naming the commit and the URL
        wrong = "0" * 40
        project.manifest.write_text(with_git_step(without_top, url, wrong, git_builder))
        project.cli("render", check=True)
        assert project.cli("lock", "--check").returncode == 0  # a commit is in no lock
        failed = project.cli("build", "--variant", "cu130", "--json")
        assert failed.returncode != 0, failed.output[-3000:]
        assert printed(failed.stderr, f"pinwheel: ERROR: git step src: cannot fetch commit {wrong} from {url}"), \
            failed.stderr[-3000:]
        assert not failed.stdout.strip(), failed.stdout
    finally:
        for tag in image["tags"]:
            engine.remove(tag, force=True)
        engine.remove(image["image_id"], force=True)


def test_a_branch_rev_is_refused_at_its_line(project_factory, served_repo, git_builder: str):
    url, _, _ = served_repo
    project: Project = project_factory("git-branch")
    project.manifest.write_text(with_git_step(project.manifest.read_text(), url, "main", git_builder))
    refused = project.cli("render")
    assert refused.returncode != 0
    line = next(i for i, text in enumerate(project.manifest.read_text().splitlines(), 1) if "rev:" in text)
    assert f"wheels_manifest.yaml:{line}: steps[3].rev: 'main' is not a full commit id" in refused.stderr, \
        refused.stderr
    assert "git ls-remote" in refused.stderr
