"""A changed local wheel re-runs only the wheel set that installs it, on the real engine.

Each wheel set with local wheels bind-mounts the build context's wheels/<set>/, which holds only its own
wheels, not all of wheels/. Here the pipeline image's local wheels are split over two sets: `local`
(pw-kern-fail, pw-kern-skip) and, after it, `late` (pw-kern-fb, by a glob with '+' and '?', which COPY and
the guard's sh must read alike). New bytes for late's wheel re-run late's step and leave local's cached; a
wheel that no glob matches, in the context of a plain build of the committed Dockerfile, re-runs no install
step. Both hold under uv and under `installer: pip`.
"""
from __future__ import annotations

import hashlib
import re
import tempfile
import zipfile
from pathlib import Path

import pytest

from pinwheel.image.build import BuildInputs, assemble_context, build_image, write_secrets
from pinwheel.image.engine import Engine

from tests.support.local_index import build_wheel
from tests.support.pipeline import LOCAL_WHEELS, Project, replace_local_wheel, steps_in

pytestmark = pytest.mark.engine

LATE_SET = """\
  - name: late
    why: "a second set of local wheels, after the first"
    packages:
      - requirement: "pw-kern-fb==1.0.0+inhouse"
"""

PAYLOAD = ("import hashlib, pathlib, pw_kern_fb; "
           "print(hashlib.sha256(pathlib.Path(pw_kern_fb.__file__).with_name('payload.bin').read_bytes()).hexdigest())")


@pytest.fixture(scope="module", params=["uv", "pip"])
def project(request, project_factory) -> Project:
    project = project_factory(f"wheel-mounts-{request.param}")
    text = project.manifest.read_text()
    text = text.replace('      - requirement: "pw-kern-fb==1.0.0+inhouse"\n', LATE_SET, 1)
    # a glob with '+' and '?', which COPY (Go's filepath.Match) and the guard's sh must read alike
    text = text.replace('glob: "pw_kern_fb-*.whl"', 'glob: "pw_kern_fb-1.0.?+inhouse-*.whl"', 1)
    if request.param == "pip":
        text = text.replace("  name: tiny\n", "  name: tiny\n  installer: pip\n", 1)
    project.manifest.write_text(text)
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def step(steps: dict[str, bool], pattern: str) -> bool:
    """Whether the one build step whose header matches was CACHED."""
    found = [cached for header, cached in steps.items() if re.search(pattern, header)]
    assert len(found) == 1, (pattern, sorted(steps))
    return found[0]


def install_steps(steps: dict[str, bool]) -> dict[str, bool]:
    """The image stage's RUNs that install a wheel set (every one names the installer's `--no-deps`)."""
    return {h: c for h, c in steps.items() if re.match(r"\[image +\d+/\d+\] RUN ", h) and "--no-deps" in h}


def test_a_changed_wheel_of_a_later_set_leaves_the_earlier_sets_step_cached(project: Project, engine: Engine,
                                                                            local_wheel_files, tmp_path, capsys):
    text = (project.root / "images" / "tiny" / "Dockerfile").read_text()
    assert "--mount=type=bind,source=wheels/local,target=/tmp/wheels" in text
    assert "--mount=type=bind,source=wheels/late,target=/tmp/wheels" in text
    assert "    set -- /tmp/wheels/pw_kern_fb-1.0.?+inhouse-*.whl; \\\n" in text
    _, plans, plan = project.load()
    build_image(plans, plan, project.root, engine, progress=False)
    rebuilt = replace_local_wheel(project.root, "pw-kern-fb", local_wheel_files, tmp_path / "again")
    capsys.readouterr()
    built = build_image(plans, plan, project.root, engine, progress=True)
    steps = steps_in(capsys.readouterr().err)

    # the earlier set's step mounts only its own wheels, which did not change: taken from the cache
    assert step(steps, r"^\[image +\d+/\d+\] RUN .*/tmp/wheels/pw_kern_fail") is True
    assert step(steps, r"^\[image +\d+/\d+\] RUN .*/tmp/wheels/pw_kern_fb") is False  # the set that installs it
    for lock_file in ("01-core.txt", "02-top.txt", "03-nodeps.txt"):
        assert step(steps, rf"^\[image +\d+/\d+\] RUN .*install .*/{re.escape(lock_file)}") is True, lock_file
    assert step(steps, r"^\[preflight 2/2\] RUN ") is False  # it checks all of wheels/; the image reads its marker
    # and the re-run installed the new bytes
    result = engine.run(built.image_id, ["python", "-c", PAYLOAD])
    assert result.ok, result.stderr
    with zipfile.ZipFile(rebuilt) as zf:
        assert result.stdout.strip() == hashlib.sha256(zf.read("pw_kern_fb/payload.bin")).hexdigest()


def test_a_wheel_no_glob_matches_reruns_no_install_step(project: Project, engine: Engine, tmp_path, capsys):
    """A plain build of the committed Dockerfile from a context whose wheels/ holds a stray wheel as well:
    no set mounts it, so every install step is cached (only the preflight, which checks all of wheels/,
    runs again)."""
    _, _, plan = project.load()
    inputs = BuildInputs.for_plan(plan, project.root)
    stray = build_wheel(tmp_path / "stray", "pw-stray", "1.0.0", payload_size=16)
    with tempfile.TemporaryDirectory(prefix="pinwheel-test-context-") as ctx, \
            tempfile.TemporaryDirectory(prefix="pinwheel-test-secrets-") as sec:
        context = Path(ctx)
        assemble_context(plan, inputs, context)
        secrets = write_secrets(plan, Path(sec))

        def build(tag: str) -> dict[str, bool]:
            capsys.readouterr()
            engine.build(context, context / "Dockerfile", tags=[f"{project.repository}:{tag}"],
                         build_args={"BASE": plan.variant.base, **plan.build_args}, secrets=secrets,
                         target="image", progress=True)
            return steps_in(capsys.readouterr().err)

        try:
            build("context")
            (context / "wheels" / stray.name).write_bytes(stray.read_bytes())
            steps = build("context-stray")
        finally:
            for tag in ("context", "context-stray"):
                if engine.image_exists(f"{project.repository}:{tag}"):
                    engine.remove(f"{project.repository}:{tag}", force=True)
    installs = install_steps(steps)
    assert len(installs) == 5, sorted(steps)  # core, top, nodeps, local, late
    assert all(installs.values()), installs
    assert step(steps, r"^\[preflight 2/2\] RUN ") is False


def test_a_set_with_none_of_its_wheels_mounts_its_empty_directory_and_follows_its_policy(project: Project,
                                                                                         engine: Engine, capsys):
    """late's only wheel is missing: its directory in the context is empty, the mount still works, and the
    fallback is installed (the image without any of wheels/ a set mounts is a normal case: flash-mla's)."""
    project.set_wheels("pw-kern-fail", "pw-kern-skip")
    try:
        _, plans, plan = project.load()
        capsys.readouterr()
        built = build_image(plans, plan, project.root, engine, progress=True)
        log = capsys.readouterr().err
    finally:
        project.set_wheels(*LOCAL_WHEELS)
    assert re.search(r"^#\d+ \d+\.\d+ " + re.escape("pinwheel: WARNING: wheels/pw_kern_fb-1.0.?+inhouse-*.whl is "
                                                    "missing; installing fallback pw-kern-fb-stable==1.0.0 --no-deps"),
                     log, re.M), log[-3000:]
    result = engine.run(built.image_id, ["python", "-c", "import pw_kern_fb_stable, importlib.util; "
                                                       "print(importlib.util.find_spec('pw_kern_fb') is None)"])
    assert result.ok and result.stdout.strip() == "True", (result.stdout, result.stderr)
