"""The uv-project kind: a project installed from its own pyproject.toml and uv.lock. What it reads of the
uv.lock (the packages the project's dependencies reach, markers for Linux, no dev groups), its effect as a
fixed set, rendered text, staging, identity and located errors; tests/pipeline/test_uv_project_build.py runs
`uv lock` and builds one on the real engine."""
from __future__ import annotations

import hashlib

import pytest

from pinwheel.image.build import stage_steps
from pinwheel.image.identity import step_sections
from pinwheel.lock.inputs import lock_inputs
from pinwheel.plan import plan_variant
from pinwheel.render import render_dockerfile
from pinwheel.steps import kind_of
from pinwheel.steps.base import StagingError

from tests.support.manifests import assert_refused_at, load_text, manifest_yaml, variant

UV_LOCK = """\
version = 1
requires-python = ">=3.11"

[[package]]
name = "pw-app"
version = "0.2.0"
source = { virtual = "." }
dependencies = [
    { name = "pw-dep" },
    { name = "pw-winonly", marker = "sys_platform == 'win32'" },
]

[package.dev-dependencies]
dev = [{ name = "pw-devtool" }]

[[package]]
name = "pw-dep"
version = "1.0.0"
source = { registry = "https://index.example/simple" }
dependencies = [{ name = "pw-core" }]

[[package]]
name = "pw-core"
version = "1.0.0"
source = { registry = "https://index.example/simple" }

[[package]]
name = "pw-winonly"
version = "3.0"
source = { registry = "https://index.example/simple" }

[[package]]
name = "pw-devtool"
version = "9.0"
source = { registry = "https://index.example/simple" }
"""
STEP = """\
  - name: app
    kind: uv-project
    why: "the trainer, from its own lock"
    project: app
"""


def project(tmp_path, lock=UV_LOCK, **kw):
    (tmp_path / "app").mkdir(exist_ok=True)
    (tmp_path / "app" / "pyproject.toml").write_text('[project]\nname = "pw-app"\nversion = "0.2.0"\n')
    (tmp_path / "app" / "uv.lock").write_text(lock)
    return load_text(manifest_yaml(steps=STEP, key="steps", **kw), tmp_path)


def test_the_set_is_what_the_project_reaches_for_linux_without_dev_groups(tmp_path):
    plan = plan_variant(project(tmp_path), "cu130")
    step = plan.steps[0]
    assert step.spec.packages == (("pw-core", "1.0.0"), ("pw-dep", "1.0.0"))
    effect = kind_of(step).effect(step)
    assert [(d.name, d.version, d.source, d.no_deps) for d in effect.direct] == [
        ("pw-core", "1.0.0", "uv-project", False), ("pw-dep", "1.0.0", "uv-project", False)]
    layout = lock_inputs(plan).layout[0]
    assert layout["uv_lock"] == hashlib.sha256(UV_LOCK.encode()).hexdigest()  # a new uv.lock: the lock is stale


def test_it_renders_uv_sync_frozen_into_the_venv_and_checks_the_versions(tmp_path):
    text = render_dockerfile([plan_variant(project(tmp_path), "cu130")])
    digest = hashlib.sha256(UV_LOCK.encode()).hexdigest()
    assert "    --mount=type=bind,source=uv-projects/app,target=/tmp/pinwheel-uv-project/app,rw \\\n" in text
    assert f"    if [ \"$found\" != {digest} ]; then echo" in text
    assert ("    UV_PROJECT_ENVIRONMENT=/opt/venv /tmp/pinwheel/bin/uv sync --frozen --inexact --no-dev --no-editable "
            "--python /opt/venv/bin/python\n") in text
    assert """'{"pw-core":"1.0.0","pw-dep":"1.0.0"}'""" in text


def test_staging_identity_and_a_changed_lock(tmp_path):
    plan = plan_variant(project(tmp_path), "cu130")
    [entry] = dict(step_sections(plan, tmp_path))["uv_projects"]
    assert entry["uv_lock_sha256"] == hashlib.sha256(UV_LOCK.encode()).hexdigest()
    before = entry["files_sha256"]
    stage_steps(plan, tmp_path, tmp_path / "context")
    assert (tmp_path / "context" / "uv-projects" / "app" / "uv.lock").read_text() == UV_LOCK
    (tmp_path / "app" / "pw_app.py").write_text("X = 1\n")  # a source file joins the identity
    assert dict(step_sections(plan, tmp_path))["uv_projects"][0]["files_sha256"] != before
    (tmp_path / "app" / "uv.lock").write_text(UV_LOCK + "\n")
    with pytest.raises(StagingError, match="uv.lock changed while building"):
        stage_steps(plan, tmp_path, tmp_path / "context2")


def test_a_project_without_a_lock_or_on_a_base_environment_is_refused(tmp_path):
    project(tmp_path)
    (tmp_path / "app" / "uv.lock").unlink()
    assert_refused_at(manifest_yaml(steps=STEP, key="steps"), tmp_path, 9, "steps[0].project",
                      "holds no pyproject.toml and uv.lock")
    (tmp_path / "app" / "uv.lock").write_text(UV_LOCK.replace('source = { virtual = "." }', 'source = { registry = "x" }'))
    assert_refused_at(manifest_yaml(steps=STEP, key="steps"), tmp_path, 9, "steps[0].project",
                      "holds no project at '.'")
    (tmp_path / "app" / "uv.lock").write_text("version = [")
    assert_refused_at(manifest_yaml(steps=STEP, key="steps"), tmp_path, 9, "steps[0].project", "cannot be read")
    assert_refused_at(manifest_yaml(steps=STEP.replace("project: app", "project: ../app"), key="steps"), tmp_path, 9,
                      "steps[0].project", "is not a relative path")
