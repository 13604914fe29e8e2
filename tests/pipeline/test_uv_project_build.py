"""A uv project as a step on the real engine: a project with its own pyproject.toml and a uv.lock made by
`uv lock` against the test index; the build installs it with `uv sync --frozen` (hash-checked by the lock),
the report judges its locked packages like any other, and the invariant checks their versions.
"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from pinwheel.image.engine import Engine

from tests.support.manifests import as_steps
from tests.support.pipeline import Project, TLSIndex

pytestmark = pytest.mark.engine

PYPROJECT = """\
[project]
name = "pw-uvproj"
version = "0.2.0"
requires-python = ">=3.11"
dependencies = ["pw-core==1.0.0", "pw-uvdep>=1.0"]  # pw-core: the shared pin, as the image holds it

[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[tool.setuptools]
py-modules = ["pw_uvproj"]
"""


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def with_uv_project(manifest: str) -> str:
    return as_steps(manifest, last=(
        "  - name: app\n"
        "    kind: uv-project\n"
        '    why: "the trainer, installed from its own lock as its CI tests it"\n'
        "    project: app\n"
        "    install_project: false\n"))


def test_a_uv_project_is_installed_from_its_lock_and_judged(project_factory, engine: Engine, tls_index: TLSIndex):
    tls_index.add("pw-uvdep", "1.0.0", requires=["pw-core>=1.0"], payload_size=16)
    project: Project = project_factory("uvproject")
    app = project.root / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(PYPROJECT)
    (app / "pw_uvproj.py").write_text("VALUE = 1\n")
    env = {**os.environ, **project.env, "UV_NO_CONFIG": "1", "UV_INDEX_URL": tls_index.build_url,
           "UV_DEFAULT_INDEX": tls_index.build_url, "UV_CACHE_DIR": str(project.root / ".uv-cache")}
    made = subprocess.run([uv_bin(), "lock", "--python", "3.11", "--no-progress"], cwd=app, env=env,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-3000:]
    project.manifest.write_text(with_uv_project(project.manifest.read_text()))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)

    report = json.loads(project.cli("report", "--variant", "cu130", "--json").stdout)
    mine = {p["name"]: p for p in report["packages"] if p["step"] == "app"}
    assert (mine["pw-uvdep"]["version"], mine["pw-uvdep"]["source"], mine["pw-uvdep"]["no_deps"]) == \
        ("1.0.0", "uv-project", False)
    assert mine["pw-core"]["version"] == "1.0.0"
    [edge] = [e for e in report["edges"] if e["parent"] == "pw-uvdep"]
    assert (edge["requirement"], edge["verdict"]) == ("pw-core>=1.0", "satisfied")

    built = project.cli("build", "--variant", "cu130", "--quiet", "--json", check=True)
    tag = json.loads(built.stdout)["tags"][0]
    ran = engine.run(tag, ["python", "-c", "import importlib.metadata as m; print(m.version('pw-uvdep'))"])
    assert ran.ok and ran.stdout.strip() == "1.0.0", ran
    [entry] = json.loads(engine.labels(tag)["io.pinwheel.inputs"])["uv_projects"]
    assert entry["project"] == "app" and len(entry["uv_lock_sha256"]) == 64
