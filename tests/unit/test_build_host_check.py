"""`build` checks the local wheels on the host before it touches the engine (no engine needed here)."""
from __future__ import annotations

from pathlib import Path

import pytest

from pinwheel import cli, manifest
from pinwheel.image.build import BuildError, BuildInputs, check_local_wheels
from pinwheel.plan import plan_variant

from tests.support.manifests import CUDA_13_GATE, manifest_yaml, variant

MANIFEST = manifest_yaml(variants=[variant("cu130"), variant("cu129", cuda="12.9")], gates=CUDA_13_GATE, steps="""\
  - name: core
    why: "pure-python base"
    packages:
      - {requirement: "six==1.16.0", why: "tiny and stable"}
  - name: local
    why: "local wheels under every policy"
    packages:
      - requirement: "demo-fail==1.0"
        why: "must be present"
        local: {glob: "demo_fail-*.whl", if_missing: fail, how_to_provide: "run `make wheels` in ../demo"}
      - requirement: "demo-cuda==1.0"
        why: "must be present where CUDA 13 is"
        gate: ENABLE_CUDA_13
        local: {glob: "demo_cuda-*.whl", if_missing: fail, how_to_provide: "build it in ../cuda"}
      - requirement: "demo-skip==1.0"
        why: "nice to have"
        local: {glob: "demo_skip-*.whl", if_missing: skip}
      - requirement: "demo-fallback==1.0"
        why: "index build is fine too"
        local: {glob: "demo_fallback-*.whl", if_missing: fallback}
        fallback: {requirement: "certifi==2024.8.30", no_deps: true, why: "stand-in from the index"}
""")

FAIL_MESSAGE = "wheels/demo_fail-*.whl is missing and demo-fail is required. run `make wheels` in ../demo"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "wheels_manifest.yaml").write_text(MANIFEST)
    (tmp_path / "wheels").mkdir()
    return tmp_path


def check(project: Path, variant: str) -> list[str]:
    m = manifest.load(project / "wheels_manifest.yaml")
    plan = plan_variant(m, variant)
    return check_local_wheels(plan, BuildInputs.for_plan(plan, project))


def put(project: Path, *names: str) -> None:
    for name in names:
        (project / "wheels" / name).write_bytes(b"")


def test_all_present_passes_without_warnings(project):
    put(project, "demo_fail-1.0-py3-none-any.whl", "demo_cuda-1.0-py3-none-any.whl",
        "demo_skip-1.0-py3-none-any.whl", "demo_fallback-1.0-py3-none-any.whl")
    assert check(project, "cu130") == []


def test_missing_skip_and_fallback_wheels_are_warnings(project):
    put(project, "demo_fail-1.0-py3-none-any.whl", "demo_cuda-1.0-py3-none-any.whl")
    assert check(project, "cu130") == [
        "wheels/demo_skip-*.whl is missing; skipping demo-skip. To include it: "
        "copy a wheel matching demo_skip-*.whl into wheels/",
        "wheels/demo_fallback-*.whl is missing; installing fallback certifi==2024.8.30 --no-deps",
    ]


def test_missing_required_wheel_is_an_error_naming_glob_and_how_to_provide(project):
    put(project, "demo_cuda-1.0-py3-none-any.whl", "demo_skip-1.0-py3-none-any.whl",
        "demo_fallback-1.0-py3-none-any.whl")
    with pytest.raises(BuildError) as exc:
        check(project, "cu130")
    assert str(exc.value) == f"{FAIL_MESSAGE} (wheels/ is {project / 'wheels'})"


def test_every_problem_is_named_at_once(project):
    (project / "wheels").rmdir()  # no wheels/ at all is the same as an empty one
    with pytest.raises(BuildError) as exc:
        check(project, "cu130")
    lines = str(exc.value).splitlines()
    assert lines[0] == f"2 local wheels are not usable (wheels/ is {project / 'wheels'}):"
    assert lines[1:] == [
        f"  {FAIL_MESSAGE}",
        "  wheels/demo_cuda-*.whl is missing and demo-cuda is required. build it in ../cuda",
    ]


def test_a_gated_off_wheel_is_not_required(project):
    put(project, "demo_fail-1.0-py3-none-any.whl", "demo_skip-1.0-py3-none-any.whl",
        "demo_fallback-1.0-py3-none-any.whl")
    assert check(project, "cu129") == []  # ENABLE_CUDA_13=0: demo-cuda is not installed there
    with pytest.raises(BuildError, match=r"demo_cuda-\*\.whl is missing"):
        check(project, "cu130")


@pytest.mark.parametrize("glob_owner", ["demo_fail", "demo_skip"])
def test_more_than_one_match_is_an_error_under_any_policy(project, glob_owner):
    put(project, "demo_fail-1.0-py3-none-any.whl", "demo_cuda-1.0-py3-none-any.whl",
        "demo_skip-1.0-py3-none-any.whl", "demo_fallback-1.0-py3-none-any.whl",
        f"{glob_owner}-1.1-py3-none-any.whl")
    with pytest.raises(BuildError) as exc:
        check(project, "cu130")
    assert str(exc.value).startswith(
        f"more than one wheel in wheels/ matches {glob_owner}-*.whl; keep one: "
        f"{glob_owner}-1.0-py3-none-any.whl {glob_owner}-1.1-py3-none-any.whl")


def test_build_exits_2_before_any_engine_call(project, monkeypatch, capsys):
    """The CLI refuses on the host: no Engine is ever made, so nothing reaches docker."""
    import pinwheel.commands.build
    import pinwheel.image.engine

    def no_engine(*args, **kwargs):
        raise AssertionError("the engine was touched before the local wheels were checked")

    monkeypatch.setattr(pinwheel.image.engine.Engine, "__init__", no_engine)
    monkeypatch.setattr(pinwheel.commands.build, "engine_or_fail", no_engine)
    assert cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "render"]) == 0
    rc = cli.main(["--manifest", str(project / "wheels_manifest.yaml"), "build", "--variant", "cu129"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "demo_fail-*.whl" in err and "run `make wheels` in ../demo" in err
    assert "Traceback" not in err


def test_the_context_holds_each_sets_active_wheels_in_a_directory_of_its_own(project, tmp_path_factory):
    """What each wheel set's step mounts (wheels/<set>/): only its own active wheels; a set without local
    wheels has no directory, and a wheel no glob matches stays out of the context."""
    from pinwheel.image.build import assemble_context

    put(project, "demo_fail-1.0-py3-none-any.whl", "demo_cuda-1.0-py3-none-any.whl",
        "demo_skip-1.0-py3-none-any.whl", "stray-1.0-py3-none-any.whl")
    m = manifest.load(project / "wheels_manifest.yaml")
    image_dir = project / "images" / m.image.name
    image_dir.mkdir(parents=True)
    (image_dir / "Dockerfile").write_text("FROM scratch\n")
    found = {}
    for variant in ("cu130", "cu129"):  # cu129: ENABLE_CUDA_13 is off, so demo-cuda is not installed
        plan = plan_variant(m, variant)
        context = tmp_path_factory.mktemp(f"context-{variant}")
        assemble_context(plan, BuildInputs.for_plan(plan, project), context)
        found[variant] = sorted(p.relative_to(context).as_posix() for p in (context / "wheels").rglob("*"))
    assert found["cu130"] == ["wheels/local", "wheels/local/demo_cuda-1.0-py3-none-any.whl",
                              "wheels/local/demo_fail-1.0-py3-none-any.whl",
                              "wheels/local/demo_skip-1.0-py3-none-any.whl"]
    assert found["cu129"] == ["wheels/local", "wheels/local/demo_fail-1.0-py3-none-any.whl",
                              "wheels/local/demo_skip-1.0-py3-none-any.whl"]


def test_a_gated_off_set_still_has_its_directory_for_the_mount(tmp_path_factory):
    """One Dockerfile serves every variant, so a set whose gate is off still mounts wheels/<set>/: it is there,
    empty (the step then says it skips the set)."""
    from pinwheel.image.build import assemble_context

    root = tmp_path_factory.mktemp("gated-set")
    (root / "wheels_manifest.yaml").write_text(manifest_yaml(
        variants=[variant("cu130"), variant("cu129", cuda="12.9")], gates=CUDA_13_GATE, steps="""\
  - name: cuda13
    why: "CUDA 13 kernels"
    gate: ENABLE_CUDA_13
    packages:
      - requirement: "demo-skip==1.0"
        why: "nice to have"
        local: {glob: "demo_skip-*.whl", if_missing: skip}
"""))
    (root / "wheels").mkdir()
    put(root, "demo_skip-1.0-py3-none-any.whl")
    m = manifest.load(root / "wheels_manifest.yaml")
    (root / "images" / m.image.name).mkdir(parents=True)
    (root / "images" / m.image.name / "Dockerfile").write_text("FROM scratch\n")
    found = {}
    for name in ("cu130", "cu129"):
        plan = plan_variant(m, name)
        context = tmp_path_factory.mktemp(f"context-{name}")
        assemble_context(plan, BuildInputs.for_plan(plan, root), context)
        found[name] = sorted(p.relative_to(context).as_posix() for p in (context / "wheels").rglob("*"))
    assert found == {"cu130": ["wheels/cuda13", "wheels/cuda13/demo_skip-1.0-py3-none-any.whl"],
                     "cu129": ["wheels/cuda13"]}
