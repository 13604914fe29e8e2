"""A second engine as a remote build node (scripts/engine2-up), the layer cache through the registry,
and two engines' builds of the same inputs compared layer by layer. Real engines, real registry."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.support.engine import REPO_ROOT, second_engine
from pinwheel.commands.common import engine_for
from pinwheel.image.engine import CacheExport, Engine
from pinwheel.reports.layers import compare_layers

pytestmark = pytest.mark.engine

SCRIPT = REPO_ROOT / "scripts" / "engine2-up"

# A RUN step whose output differs on every run: equal bytes on two engines mean the step was not run twice.
DOCKERFILE = """\
ARG BASE
FROM ${BASE}
ARG TOKEN
RUN echo "${TOKEN}" > /token && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > /random
RUN mkdir -p /opt/app && echo fixed > /opt/app/data
"""


def _unique() -> str:
    return uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def engine2() -> Engine:
    return second_engine()


@pytest.fixture(scope="module")
def registry_base(engine: Engine, base_image: str, registry: str) -> str:
    """The bootstrap base pushed to the registry, named by digest: the same base on both engines."""
    ref = f"{registry}/pinwheel-test/base-{_unique()}:{base_image.rsplit(':', 1)[-1]}"
    engine.tag(base_image, ref)
    try:
        digest = engine.push(ref).digest
    finally:
        engine.remove(ref)
    return f"{ref.rsplit(':', 1)[0]}@{digest}"


@pytest.fixture
def context_dir(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    return tmp_path


def read(engine: Engine, ref: str, path: str) -> str:
    result = engine.run(ref, ["cat", path])
    assert result.returncode == 0, result.stderr
    return result.stdout


def empty(engine: Engine) -> None:
    """The second engine is this suite's own: every image and its whole build cache removed."""
    for image in engine.docker.image.list(all=True):
        engine.docker.image.remove(image.id, force=True)
    engine.docker.buildx.prune(all=True)


def test_script_is_idempotent_and_keeps_apart(engine: Engine, engine2: Engine) -> None:
    again = subprocess.run([str(SCRIPT)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stderr
    assert again.stdout.strip() == engine2.host
    info_a, info_b = engine.docker.system.info(), engine2.docker.system.info()
    assert info_a.docker_root_dir != info_b.docker_root_dir
    bridge_b = engine2.docker.network.inspect("bridge").options["com.docker.network.bridge.name"]
    bridge_a = engine.docker.network.inspect("bridge").options.get("com.docker.network.bridge.name", "docker0")
    assert bridge_b != bridge_a


def test_script_passes_shellcheck() -> None:
    if not shutil.which("shellcheck"):
        pytest.fail("shellcheck is not installed: `make tools` (Debian package shellcheck)")
    proc = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_build_on_the_second_engine_then_push(engine: Engine, engine2: Engine, registry_base: str,
                                              registry: str, context_dir: Path) -> None:
    token = _unique()
    tag = f"pinwheel-test/remote:{token}"
    image_id = engine2.build(context_dir, context_dir / "Dockerfile", tags=[tag],
                             build_args={"BASE": registry_base, "TOKEN": token})
    pushed = f"{registry}/pinwheel-test/remote:{token}"
    try:
        assert engine2.image_exists(tag) and not engine.image_exists(tag)  # built and loaded there only
        assert read(engine2, tag, "/token").strip() == token  # RUN had the build arg (and the network)
        engine2.tag(tag, pushed)
        result = engine2.push(pushed)
        assert result.digest.startswith("sha256:")
        engine.docker.image.pull(pushed, quiet=True)  # the result, on the local engine through the registry
        assert engine.image_id(pushed) == image_id
        assert read(engine, pushed, "/random") == read(engine2, tag, "/random")
    finally:
        for eng, ref in ((engine2, tag), (engine2, pushed), (engine, pushed)):
            eng.remove(ref, force=True)


def test_builder_and_context_name_the_second_engine(engine: Engine, engine2: Engine, registry_base: str,
                                                     context_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A docker context for the second engine is also a buildx builder (docker driver) of that name."""
    name = f"pinwheel-test-{_unique()}"
    made = subprocess.run(["docker", "context", "create", name, "--docker", f"host={engine2.host}"],
                          capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    try:
        monkeypatch.setenv("PINWHEEL_BUILDER", name)
        by_builder = engine_for(argparse.Namespace())
        assert by_builder.context == name and by_builder.builder_driver() == "docker"
        assert by_builder.unavailable_reason() is None
        assert by_builder.cache_kind() == "inline"  # docker driver, classic image store: BuildKit v0.8
        token = _unique()
        tag = f"pinwheel-test/by-builder:{token}"
        by_builder.build(context_dir, context_dir / "Dockerfile", tags=[tag],
                         build_args={"BASE": registry_base, "TOKEN": token})
        by_context = engine_for(argparse.Namespace(engine_context=name))
        try:
            assert by_context.image_exists(tag) and engine2.image_exists(tag)  # loaded into the builder's engine
            assert not engine.image_exists(tag)
        finally:
            engine2.remove(tag, force=True)
        monkeypatch.setenv("PINWHEEL_BUILDER", f"pinwheel-test-none-{_unique()}")
        reason = engine_for(argparse.Namespace()).unavailable_reason()
        assert reason is not None and "no buildx builder" in reason
    finally:
        subprocess.run(["docker", "context", "rm", "-f", name], capture_output=True)


def test_inline_cache_reaches_a_fresh_engine(engine: Engine, engine2: Engine, registry_base: str, registry: str,
                                             context_dir: Path) -> None:
    token = _unique()
    cache = f"{registry}/pinwheel-test/cache-{token}:cache-cu130"
    args = {"BASE": registry_base, "TOKEN": token}
    exports: list[CacheExport] = []
    seeded = engine.build(context_dir, context_dir / "Dockerfile", tags=[f"pinwheel-test/seed:{token}"],
                          build_args=args, cache_to=cache, on_cache_export=exports.append)
    try:
        assert [(e.ref, e.kind) for e in exports] == [(cache, "inline")]
        assert exports[0].digest and exports[0].digest.startswith("sha256:")
        random_a = read(engine, seeded, "/random")

        empty(engine2)  # a fresh engine: no image, no build cache
        log: list[str] = []
        warm = engine2.build(context_dir, context_dir / "Dockerfile", tags=[f"pinwheel-test/warm:{token}"],
                             build_args=args, cache_from=[cache], on_log=log.append)
        assert any(line.startswith("#") and "importing cache manifest from " + cache in line for line in log)
        assert sum(1 for line in log if line.rstrip().endswith(" CACHED")) >= 2  # both RUN steps
        assert read(engine2, warm, "/random") == random_a  # the step's output came from the cache, not a run

        empty(engine2)  # the control: without the cache the same step runs and writes other bytes
        cold = engine2.build(context_dir, context_dir / "Dockerfile", tags=[f"pinwheel-test/cold:{token}"],
                             build_args=args)
        assert read(engine2, cold, "/random") != random_a
    finally:
        engine.remove(f"pinwheel-test/seed:{token}", force=True)
        engine.remove(cache, force=True)
        empty(engine2)


def test_two_engines_same_inputs_layers_compared(engine: Engine, engine2: Engine, registry_base: str,
                                                 context_dir: Path) -> None:
    """BuildKit v0.8 stamps the time a step ran on what it touched: same contents, other mtimes.
    The comparison says so per layer, and the CLI lists it (exit 1: not the same bytes)."""
    token = _unique()
    tag = f"pinwheel-test/repro:{token}"
    args = {"BASE": registry_base, "TOKEN": token, "SOURCE_DATE_EPOCH": "1700000000"}
    engine.build(context_dir, context_dir / "Dockerfile", tags=[tag], build_args=args, cache=False)
    engine2.build(context_dir, context_dir / "Dockerfile", tags=[tag], build_args=args, cache=False)
    try:
        cmp = compare_layers(engine, tag, engine2, tag)
        assert len(cmp.layers) == 3
        base, random_step, data_step = cmp.layers
        assert base.same  # the base: the same blob on both
        assert not random_step.same and "random" in random_step.content  # random bytes: a content difference
        assert not data_step.same and "opt/app/data" in data_step.mtime_only
        assert data_step.content == () and data_step.only_a == () and data_step.only_b == ()
        cli = subprocess.run([sys.executable, str(REPO_ROOT / "build.py"), "layers", tag, tag,
                              "--b-engine-host", str(engine2.host), "--json"],
                             capture_output=True, text=True, env={**os.environ, "COLUMNS": "300"})
        assert cli.returncode == 1, cli.stderr
        report = json.loads(cli.stdout)
        assert report["schema"] == "pinwheel.layers/1" and report["same"] is False
        assert [layer["same"] for layer in report["layers"]] == [True, False, False]
        assert "opt/app/data" in report["layers"][2]["mtime_only"]
        same = compare_layers(engine2, tag, engine2, tag)  # an image against itself: every layer the same
        assert same.same
    finally:
        engine.remove(tag, force=True)
        engine2.remove(tag, force=True)
