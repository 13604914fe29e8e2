"""A distribution from its prebuilt local wheel, else built from its git commit (`prebuilt:` on a git step), on the
real engine: without the wheel in wheels/ the image holds the commit's build; with it, the wheel, and the builder
stage fetches nothing. The commit is served by `git daemon` on the Docker bridge address, as test_git_build.py
does; the identity label names the choice each time.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import engine_unavailable
from tests.support.local_index import build_wheel
from tests.support.pipeline import Project, bridge_address

pytestmark = pytest.mark.engine

PACKAGE = "pw-gitpre"
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "pw-gitpre"
version = "0.2.0"
"""


def git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "pinwheel", "GIT_AUTHOR_EMAIL": "pinwheel@invalid", "GIT_COMMITTER_NAME": "pinwheel",
           "GIT_COMMITTER_EMAIL": "pinwheel@invalid", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env,
                          timeout=60).stdout.strip()


def free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(engine: Engine, tmp_path_factory: pytest.TempPathFactory):
    """(url, commit) of pw-gitpre 0.2.0, served by git daemon on the bridge address."""
    root = tmp_path_factory.mktemp("git-prebuilt")
    repo = root / "pw-gitpre.git"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "uploadpack.allowReachableSHA1InWant", "true")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "pw_gitpre").mkdir()
    (repo / "pw_gitpre" / "__init__.py").write_text('MARK = "built from the commit"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "pw-gitpre 0.2.0")
    host = bridge_address(engine)
    port = free_port(host)
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--informative-errors",
                               f"--base-path={root}", f"--listen={host}", f"--port={port}", str(root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"git://{host}:{port}/pw-gitpre.git"
    try:
        for _ in range(50):
            probe = subprocess.run(["git", "ls-remote", url], capture_output=True, text=True, timeout=30)
            if probe.returncode == 0:
                break
            time.sleep(0.1)
        else:
            engine_unavailable(f"git daemon on the bridge address {host} does not answer: {probe.stderr.strip()}")
        yield url, git(repo, "rev-parse", "HEAD")
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


@pytest.fixture(scope="module")
def git_builder(engine: Engine, base_image: str, tmp_path_factory: pytest.TempPathFactory):
    """The base with Debian's git: the builder stage's image."""
    ref = f"pinwheel-test/git-prebuilt-builder-{uuid.uuid4().hex[:8]}:1"
    ctx = tmp_path_factory.mktemp("git-builder")
    (ctx / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends git "
        "&& rm -rf /var/lib/apt/lists/*\n")
    proc = subprocess.run(["docker", "build", "-q", "-t", ref, str(ctx)], capture_output=True, text=True)
    if proc.returncode != 0:
        engine_unavailable(f"cannot install git into {base_image} from its apt sources: {proc.stderr.strip()[-300:]}")
    try:
        yield ref
    finally:
        engine.remove(ref, force=True)


def with_git_step(manifest: str, url: str, rev: str, builder: str) -> str:
    steps = re.sub(r"^  - name: (\S+)\n", r"  - name: \1\n    kind: wheels\n", manifest, flags=re.M)
    assert steps.count("wheel_sets:\n") == 1
    return steps.replace("wheel_sets:\n", "steps:\n").rstrip("\n") + (
        "\n\n"
        "  - name: pre\n"
        "    kind: git\n"
        '    why: "the kernels at the commit they need"\n'
        f'    package: "{PACKAGE}==0.2.0"\n'
        f'    url: "{url}"\n'
        f'    rev: "{rev}"\n'
        "    isolation: false\n"
        f'    builder: "{builder}"\n'
        '    prebuilt: {glob: "pw_gitpre-0.2.0-*.whl", why: "CI builds it once; the commit is the fallback"}\n')


def built(project: Project, engine: Engine) -> tuple[str, dict, str]:
    """(what the image's pw_gitpre says, the identity's sources entry, the build's log) of one build."""
    out = project.cli("build", "--variant", "cu130", "--json", check=True)
    tag = json.loads(out.stdout)["tags"][0]
    ran = engine.run(tag, ["python", "-c", "import pw_gitpre as m, importlib.metadata as md; "
                                           "print(m.MARK, md.version('pw-gitpre'))"])
    assert ran.ok, ran.stderr
    [entry] = json.loads(engine.labels(tag)["io.pinwheel.inputs"])["sources"]
    return ran.stdout.strip(), entry, out.stderr


def test_the_prebuilt_wheel_is_used_when_there_else_the_commit_is_built(project_factory, engine: Engine, served,
                                                                        git_builder: str):
    url, rev = served
    project: Project = project_factory("git-prebuilt")
    project.manifest.write_text(with_git_step(project.manifest.read_text(), url, rev, git_builder))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)

    mark, entry, log = built(project, engine)
    assert mark == "built from the commit 0.2.0"
    assert entry["commit"] == rev and entry["prebuilt"] == {"glob": "pw_gitpre-0.2.0-*.whl",
                                                            "missing": f"built from commit {rev}"}
    assert "pw_gitpre-0.2.0-*.whl is missing: building commit" in log, log[-3000:]
    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    [row] = [i for i in report["packages"] if i["name"] == PACKAGE]
    assert row["source"] == "git" and "no wheel matches wheels/pw_gitpre-0.2.0-*.whl" in row["why"]

    wheel = build_wheel(project.root / "wheels", PACKAGE, "0.2.0", module_source='MARK = "the prebuilt wheel"\n')
    project.cli("lock", "--variant", "cu130", "--check", check=True)  # the lock holds no choice: still current
    mark, entry, log = built(project, engine)
    assert mark == "the prebuilt wheel 0.2.0"
    assert entry["prebuilt"]["wheel"] == wheel.name and len(entry["prebuilt"]["sha256"]) == 64
    assert "pw_gitpre-0.2.0-*.whl is in the context: installing it instead of building commit" in log, log[-3000:]
    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    [row] = [i for i in report["packages"] if i["name"] == PACKAGE]
    assert row["source"] == "local" and f"prebuilt: {wheel.name} matches" in row["why"]
