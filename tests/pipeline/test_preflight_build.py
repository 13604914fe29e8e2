"""A missing required wheel fails the image's preflight stage, before any layer installs anything.

`build` already refuses on the host (exit 2, see test_pipeline_build and
tests/unit/test_build_host_check.py). This test goes around that check and
hands the engine the assembled context directly, as a CI job that builds the
committed Dockerfile with plain `docker buildx build` would: the Dockerfile's
own preflight must stop it there.
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from pinwheel.image.build import BuildError, BuildInputs, assemble_context, check_local_wheels, write_secrets
from pinwheel.image.engine import BuildFailed, Engine

from tests.support.pipeline import Project, steps_in

pytestmark = pytest.mark.engine

MISSING = ("pinwheel: ERROR: wheels/pw_kern_fail-*.whl is missing and pw-kern-fail is required. "
           "run `make wheel` in pw-kern-fail and copy the wheel into wheels/")


def test_missing_required_wheel_fails_in_the_preflight_before_any_install(project_factory, engine: Engine,
                                                                          capsys):
    project: Project = project_factory("preflight")
    project.set_wheels("pw-kern-skip", "pw-kern-fb")
    _, _, plan = project.load()
    inputs = BuildInputs.for_plan(plan, project.root)
    with pytest.raises(BuildError, match=re.escape(MISSING.removeprefix("pinwheel: ERROR: "))):
        check_local_wheels(plan, inputs)  # what `build` says on the host; the engine below never hears it

    with tempfile.TemporaryDirectory(prefix="pinwheel-test-context-") as ctx, \
            tempfile.TemporaryDirectory(prefix="pinwheel-test-secrets-") as sec:
        context = Path(ctx)
        assemble_context(plan, inputs, context)
        capsys.readouterr()
        with pytest.raises(BuildFailed):
            engine.build(context, context / "Dockerfile", tags=[f"{project.repository}:preflight"],
                         build_args={"BASE": plan.variant.base, **plan.build_args},
                         secrets=write_secrets(plan, Path(sec)), target="image", progress=True)
    log = capsys.readouterr().err

    # the preflight stage ran and printed the guard's message ("#<step> <seconds> <text>")
    assert re.search(r"^#\d+ \[preflight 2/2\] RUN --mount=type=bind,source=wheels,target=/tmp/wheels", log, re.M), log
    assert re.search(r"^#\d+ \d+\.\d+ " + re.escape(MISSING) + "$", log, re.M), log
    # and nothing of the image stage after its FROM started: no venv, no COPY of a lock slice, no pip
    started = re.findall(r"^#\d+ \[image +(\d+)/\d+\] (\S+)", log, re.M)
    assert {step for step, _ in started} <= {"1"}, started
    assert "01-core.txt" not in log and "pip install" not in log
    assert not re.search(r"Successfully installed|Collecting|Processing /tmp/wheels", log)  # pip's words
    assert not re.search(r"^#\d+ \[installer \d+/\d+\] RUN", log, re.M)  # uv's stage waits for the preflight too
    assert not re.search(r"^#\d+ \d+\.\d+ (Prepared|Installed) \d+ package|^#\d+ \d+\.\d+  \+ ", log, re.M)  # uv's
    assert not engine.image_exists(f"{project.repository}:preflight")


def test_a_changed_local_wheel_reruns_the_preflight_but_no_layer_below_it(project_factory, engine: Engine,
                                                                          local_wheel_files, tmp_path, capsys):
    """The preflight bind-mounts wheels/, so it re-runs when a wheel changes; the image stage reads only
    its marker, whose bytes never change, so the wheel sets below stay cached up to the local one."""
    from pinwheel.image.build import build_image

    from tests.support.pipeline import LOCAL_WHEELS, replace_local_wheel

    project: Project = project_factory("preflight-cache")
    project.set_wheels(*LOCAL_WHEELS)
    _, plans, plan = project.load()
    build_image(plans, plan, project.root, engine, progress=False)
    replace_local_wheel(project.root, "pw-kern-fail", local_wheel_files, tmp_path / "again")
    capsys.readouterr()
    build_image(plans, plan, project.root, engine, progress=True)
    steps = steps_in(capsys.readouterr().err)

    def step(pattern: str) -> bool:
        found = [cached for header, cached in steps.items() if re.search(pattern, header)]
        assert len(found) == 1, (pattern, sorted(steps))
        return found[0]

    assert step(r"^\[preflight 2/2\] RUN ") is False  # the check ran again
    assert step(r"^\[image +\d+/\d+\] RUN --mount=type=bind,from=preflight.* python3 -m venv") is True
    for lock_file in ("01-core.txt", "02-top.txt", "03-nodeps.txt"):
        assert step(rf"^\[image +\d+/\d+\] RUN .*pip install .*/{re.escape(lock_file)}") is True, lock_file
    assert step(r"^\[image +\d+/\d+\] RUN .*/tmp/wheels/pw_kern_fail") is False  # the local wheel set did re-run
