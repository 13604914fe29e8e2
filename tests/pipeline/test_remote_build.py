"""`build --engine-host` on the second engine (scripts/engine2-up), and `--cache-to`/`--cache-from` through
the registry: the CLI as a user runs it, on the real engines, registry and test index."""
from __future__ import annotations

import json
import re
import uuid

import pytest

from tests.support.engine import carry_base, second_engine
from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, registry_get

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def engine2(engine: Engine, base_image: str, registry: str) -> Engine:
    """The second engine, holding the bootstrap base (through the registry: the same image as here)."""
    remote = second_engine()
    carry_base(engine, remote, base_image, registry)
    return remote


@pytest.fixture(scope="module")
def project(project_factory) -> Project:
    return project_factory("remote")


def test_build_on_engine_host_writes_and_reads_the_registry_cache(
        project: Project, engine: Engine, engine2: Engine, registry: str) -> None:
    ns = f"{registry}/cache-{uuid.uuid4().hex[:10]}"
    first = project.cli("--engine-host", str(engine2.host), "build", "--variant", "cu130", "--quiet", "--json",
                        "--cache-to", "--registry", ns)
    assert first.returncode == 0, first.output[-3000:]
    built = json.loads(first.stdout)
    cache = f"{ns}/{project.repository}:cache-cu130"
    try:
        for tag in built["tags"]:  # built and loaded on the second engine, not here
            assert engine2.image_exists(tag) and not engine.image_exists(tag)
        assert engine2.image_id(built["tags"][0]) == built["image_id"]
        layers = engine2.layers(built["image_id"])
        written = re.search(r"cache: inline cache of engine (\S+) written to (\S+) \(the image, (sha256:[0-9a-f]{64})\)",
                            first.stderr)
        assert written and written.groups()[:2] == (engine2.host, cache), first.stderr[-2000:]
        repository, tag = cache.split("/", 1)[1].rsplit(":", 1)
        status, headers, _ = registry_get(registry, f"/v2/{repository}/manifests/{tag}",
                                          ("application/vnd.docker.distribution.manifest.v2+json",))
        assert status == 200 and headers["Docker-Content-Digest"] == written.group(3)

        # The second engine forgets its build and its cache; the bare --cache-from reads the variant's ref.
        for image_tag in [*built["tags"], cache]:
            engine2.remove(image_tag, force=True)
        engine2.docker.buildx.prune(all=True)
        again = project.cli("--engine-host", str(engine2.host), "build", "--variant", "cu130", "--quiet", "--json",
                            "--cache-from", "--registry", ns)
        assert again.returncode == 0, again.output[-3000:]
        # Every step came from the cache: the same layers. A step that ran again would stamp new times
        # into its layer (BuildKit v0.8) and give it another digest.
        assert engine2.layers(json.loads(again.stdout)["image_id"]) == layers
    finally:
        for image_tag in [*built["tags"], cache]:
            engine2.remove(image_tag, force=True)


def test_a_missing_builder_is_bad_input(project: Project) -> None:
    result = project.cli("--builder", f"pinwheel-test-none-{uuid.uuid4().hex[:8]}", "build", "--variant", "cu130")
    assert result.returncode == 2
    assert "no buildx builder" in result.stderr and "Traceback" not in result.output
