"""Fixtures for the pipeline tests: real engine, real registry, a TLS test index on the Docker bridge.

Without an engine (or registry, or base image) these tests are skipped with the
reason; with ``CI`` set they fail instead, because CI must provide them
(``scripts/engine-up``, ``scripts/registry-up``).
"""
from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from pinwheel.engine import Engine

from pipeline_support import (
    REPO_ROOT,
    Project,
    TLSIndex,
    bridge_address,
    build_local_wheels,
    make_ca,
    make_project,
    populate_index,
)

BASE_SUITE = "bookworm"
BASE_PYTHON = "3.11"
REGISTRY_ADDR = os.environ.get("PINWHEEL_TEST_REGISTRY_ADDR", "127.0.0.1:5000")


def unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"pipeline tests need a working engine and registry in CI: {reason}", pytrace=False)
    pytest.skip(f"SKIPPED (no engine): {reason}")


@pytest.fixture(scope="session")
def pipeline_engine() -> Engine:
    eng = Engine()
    try:
        reason = eng.unavailable_reason()
    except Exception as exc:  # e.g. no docker CLI at all: python-on-whales raises ClientNotFoundError
        reason = f"{type(exc).__name__}: {exc}"
    if reason is not None:
        unavailable(reason)
    return eng


@pytest.fixture(scope="session")
def pipeline_base(pipeline_engine: Engine) -> str:
    from pinwheel.base import BaseImageError, base_ref, ensure_base

    ref = base_ref(BASE_SUITE, BASE_PYTHON)
    try:
        ensure_base(ref, BASE_PYTHON, pipeline_engine, suite=BASE_SUITE, cache_dir=REPO_ROOT / ".cache" / "base")
    except BaseImageError as exc:
        unavailable(f"cannot make the bootstrap base {ref}: {exc}")
    return ref


def _registry_answers(addr: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://{addr}/v2/", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def pipeline_registry(pipeline_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A registry on loopback: reused when one answers, else started with scripts/registry-up and stopped after."""
    if _registry_answers(REGISTRY_ADDR):
        yield REGISTRY_ADDR
        return
    state = tmp_path_factory.mktemp("registry-state")
    storage = tmp_path_factory.mktemp("registry-storage")
    env = dict(os.environ, TMPDIR=str(state), PINWHEEL_REGISTRY_ADDR=REGISTRY_ADDR)
    proc = subprocess.run([str(REPO_ROOT / "scripts" / "registry-up"), str(storage)], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        unavailable(f"scripts/registry-up failed (exit {proc.returncode}): {proc.stderr.strip()}")
    pid_file = state / f"pinwheel-registry-{REGISTRY_ADDR.rsplit(':', 1)[1]}" / "registry.pid"
    try:
        yield REGISTRY_ADDR
    finally:
        if pid_file.is_file():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass


@pytest.fixture(scope="session")
def tls_index(pipeline_engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSIndex]:
    """The test index over HTTPS on the bridge address, with a CA made for this session."""
    host = bridge_address(pipeline_engine)
    ca = make_ca(tmp_path_factory.mktemp("test-ca"), host)
    index = TLSIndex(tmp_path_factory.mktemp("tls-index"), host, ca)
    populate_index(index)
    try:
        index.serve()
    except OSError as exc:
        unavailable(f"cannot serve the test index on the bridge address {host}: {exc}")
    try:
        yield index
    finally:
        index.close()


@pytest.fixture(scope="session")
def pipeline_env(tls_index: TLSIndex, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment pinwheel's build, smoke and publish run in (this process and the CLI's).

    PIP_INDEX_URL points default_index_url() (the build's pipconf secret) at
    the index's bridge address; PIP_CERT makes ca_bundle() the test CA (the
    `ca` secret). `lock` gets the loopback URL instead (see host_env).
    """
    env = {
        "PIP_INDEX_URL": tls_index.build_url,
        "PIP_CERT": str(tls_index.ca.ca_pem),
        "REQUESTS_CA_BUNDLE": str(tls_index.ca.ca_pem),
        "SSL_CERT_FILE": str(tls_index.ca.ca_pem),
        "PINWHEEL_CACHE_DIR": str(tmp_path_factory.mktemp("pinwheel-cache")),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("PIP_FIND_LINKS", raising=False)
        yield env


@pytest.fixture(scope="session")
def host_env(tls_index: TLSIndex) -> dict[str, str]:
    """What `build.py lock` runs with: the same index, on the host's loopback."""
    return {"PIP_INDEX_URL": tls_index.url}


@pytest.fixture(scope="session")
def local_wheel_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_local_wheels(tmp_path_factory.mktemp("local-wheels"))


@pytest.fixture(scope="session")
def project_factory(pipeline_engine: Engine, pipeline_base: str, pipeline_env: dict[str, str],
                    host_env: dict[str, str], local_wheel_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """make(label) -> a rendered, locked Project with its own repository; its images are removed afterwards."""
    made: list[Project] = []
    run = uuid.uuid4().hex[:10]

    def make(label: str) -> Project:
        repository = f"pinwheel-test/pipe-{run}-{label}"
        project = make_project(tmp_path_factory.mktemp(f"project-{label}") / "p", repository, pipeline_base,
                               local_wheel_files, pipeline_env, host_env)
        made.append(project)
        return project

    yield make
    # Every image a project built, tagged or left dangling by a later build: its labels name its manifest.
    import hashlib

    for project in made:
        sha = hashlib.sha256(project.manifest.read_bytes()).hexdigest()
        for image in pipeline_engine.docker.image.list(filters=[("label", f"io.pinwheel.manifest.sha256={sha}")], all=True):
            for tag in image.repo_tags:
                pipeline_engine.remove(tag, force=True)
            if pipeline_engine.image_exists(image.id):
                pipeline_engine.remove(image.id, force=True)
        for image in pipeline_engine.docker.image.list(repository_or_tag=f"{REGISTRY_ADDR}/{project.repository}"):
            for tag in image.repo_tags:
                pipeline_engine.remove(tag, force=True)
