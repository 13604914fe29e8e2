"""Fixtures for the pipeline tests: real engine, real registry, a TLS test index on the Docker bridge.

Without an engine (or registry, or base image) these tests are skipped with the
reason; with ``CI`` set they fail instead, because CI must provide them
(``scripts/engine-up``, ``scripts/registry-up``).
"""
from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from pinwheel.image.engine import Engine

from tests.support.engine import REGISTRY_ADDR, carry_base, engine_unavailable
from tests.support.pipeline import (
    Project,
    TLSIndex,
    base_with_debian_packages,
    bridge_address,
    build_local_wheels,
    make_ca,
    make_project,
    populate_index,
)

# The engine, base_image and registry fixtures come from tests/conftest.py. The ones
# here are module-scoped: pipeline_env points pip's variables at the test index,
# and that must end with these tests, not leak into the rest of the session.
unavailable = engine_unavailable
MODERN_HOST = os.environ.get("PINWHEEL_MODERN_ENGINE_HOST", "unix:///run/pinwheel-engine-modern.sock")


@pytest.fixture(scope="module")
def tls_index(engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSIndex]:
    """The test index over HTTPS on the bridge address, with a CA made for this session."""
    host = bridge_address(engine)
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


@pytest.fixture(scope="module")
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
        # the module's own: a page another module's index served at the same loopback port is no answer here
        "UV_CACHE_DIR": str(tmp_path_factory.mktemp("uv-cache")),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("PIP_FIND_LINKS", raising=False)
        yield env


@pytest.fixture(scope="module")
def host_env(tls_index: TLSIndex) -> dict[str, str]:
    """What `build.py lock` runs with: the same index, on the host's loopback."""
    return {"PIP_INDEX_URL": tls_index.url}


@pytest.fixture(scope="module")
def local_wheel_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_local_wheels(tmp_path_factory.mktemp("local-wheels"))


@pytest.fixture(scope="module")
def git_builder(engine: Engine, base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base with Debian's git: the image a git step's builder stage starts from (the base has no git)."""
    with base_with_debian_packages(engine, base_image, tmp_path_factory.mktemp("git-builder"), "git-builder",
                                   "git") as ref:
        yield ref


@pytest.fixture(scope="module")
def project_factory(engine: Engine, base_image: str, pipeline_env: dict[str, str],
                    host_env: dict[str, str], local_wheel_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """make(label) -> a rendered, locked Project with its own repository; its images are removed afterwards."""
    made: list[Project] = []
    run = uuid.uuid4().hex[:10]

    def make(label: str) -> Project:
        repository = f"pinwheel-test/pipe-{run}-{label}"
        project = make_project(tmp_path_factory.mktemp(f"project-{label}") / "p", repository, base_image,
                               local_wheel_files, pipeline_env, host_env)
        made.append(project)
        return project

    yield make
    # Every image a project built, tagged or left dangling by a later build: its labels name its manifest.
    import hashlib

    for project in made:
        sha = hashlib.sha256(project.manifest.read_bytes()).hexdigest()
        for image in engine.docker.image.list(filters=[("label", f"io.pinwheel.manifest.sha256={sha}")], all=True):
            for tag in image.repo_tags:
                engine.remove(tag, force=True)
            if engine.image_exists(image.id):
                engine.remove(image.id, force=True)
        for image in engine.docker.image.list(repository_or_tag=f"{REGISTRY_ADDR}/{project.repository}"):
            for tag in image.repo_tags:
                engine.remove(tag, force=True)


@pytest.fixture(scope="module")
def modern(engine: Engine, base_image: str, registry: str) -> Engine:
    """The modern engine, holding the bootstrap base (through the registry: the same image as here)."""
    remote = Engine(host=MODERN_HOST)
    reason = remote.unavailable_reason()
    if reason:
        engine_unavailable(f"the modern engine at {MODERN_HOST} is not up (`make engine-modern` starts it): "
                           f"{reason}")
    if not remote.copy_link():
        engine_unavailable(f"the engine at {MODERN_HOST} has no COPY --link: it is not the modern engine")
    carry_base(engine, remote, base_image, registry)
    return remote
