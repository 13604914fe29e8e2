"""Variants of one manifest share layers where their inputs agree, on the real engine.

A CUDA 12.9 variant of the pipeline image turns ENABLE_CUDA_13 off, so it parts from cu130 at the first step
that reads that gate (`nodeps`). Everything below it (the base, the venv, the `core` and `top` wheel sets, and
the uv installer stage) is one set of layers for both: the variant's name reaches no cache key, because the lock
files come from a stage of their own and each gate ARG is declared only where a step first reads it.
"""
from __future__ import annotations

import json
import re

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import LOCAL_WHEELS, Project

pytestmark = pytest.mark.engine

CU129 = """  cu129:
    cuda: "12.9"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: {base}
    tag: "cu129-pipe-{{date}}"

wheel_sets:"""


@pytest.fixture(scope="module")
def project(project_factory, base_image: str) -> Project:
    project = project_factory("variants")
    text = project.manifest.read_text()
    project.manifest.write_text(text.replace("\nwheel_sets:", CU129.format(base=base_image), 1))
    project.cli("render", check=True)
    project.cli("lock", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def test_two_variants_share_every_layer_before_their_first_differing_step(project: Project, engine: Engine,
                                                                          base_image: str) -> None:
    built = {}
    for variant in ("cu130", "cu129"):
        result = project.cli("build", "--variant", variant, "--json")
        assert result.returncode == 0, result.output[-3000:]
        built[variant] = (json.loads(result.stdout), result.output)
    a = engine.layers(built["cu130"][0]["image_id"])
    b = engine.layers(built["cu129"][0]["image_id"])
    shared = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    # the base, then one layer for the venv and two (slice COPY, install) for each of `core` and `top`
    assert shared == len(engine.layers(base_image)) + 1 + 2 + 2, (a, b)
    # the second variant's build ran none of those steps again: their lines are CACHED
    second = built["cu129"][1]
    for slice_name in ("01-core.txt", "02-top.txt"):
        step = re.search(rf"^(#\d+) \[image +\d+/\d+\] COPY --from=lock /{re.escape(slice_name)} ", second, re.M)
        assert step and re.search(rf"^{step.group(1)} CACHED$", second, re.M), second[-4000:]
        install = re.search(rf"^(#\d+) \[image +\d+/\d+\] RUN .*-r /tmp/pinwheel/lock/{re.escape(slice_name)}$",
                            second, re.M)
        assert install and re.search(rf"^{install.group(1)} CACHED$", second, re.M), second[-4000:]
    # and the slices the two variants share are the same bytes: no variant's name is written into them
    for slice_name in ("01-core.txt", "02-top.txt"):
        assert (project.lock_dir / slice_name).read_bytes() == \
               (project.lock_dir.parent / "cu129" / slice_name).read_bytes()
