"""A variant built FROM another variant's image (base_variant), for linux/arm64, on the real engine.

The pipeline test image (`cu130`) and a variant on top of it (`top`) both list linux/amd64 and
linux/arm64. `build --variant top --platform linux/arm64` builds cu130's arm64 image first, through
QEMU, and top's arm64 image FROM it: both are arm64, and top's base is that image.
"""
from __future__ import annotations

import json

import pytest

from pinwheel.image.engine import Engine

from tests.support.pipeline import Project, require_qemu

OWN = "    platform: manylinux_2_36_x86_64\n"
BOTH = "    platforms: [linux/amd64, linux/arm64]\n"
TOP = """\
  top:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    platforms: [linux/amd64, linux/arm64]
    base_variant: cu130
    tag: "top-pipe-{date}"

wheel_sets:
"""


@pytest.fixture(scope="module")
def project(project_factory, engine: Engine) -> Project:
    require_qemu()
    p = project_factory("basevar")
    text = p.manifest.read_text()
    assert OWN in text and "\nwheel_sets:\n" in text
    text = text.replace(OWN, OWN + BOTH, 1).replace("\nwheel_sets:\n", "\n" + TOP, 1)
    # installer: pip: the test index serves the host's own uv (x86_64) only, and an arm64 lock pins its own files
    p.manifest.write_text(text.replace("  name: tiny\n", "  name: tiny\n  installer: pip\n", 1))
    p.cli("render", check=True)
    p.cli("lock", "--resolver", "uv", check=True)
    return p


def test_top_arm64_is_built_from_the_arm64_image_of_its_base_variant(project: Project, engine: Engine):
    built = json.loads(project.cli("build", "--variant", "top", "--platform", "linux/arm64", "--quiet", "--json",
                                   check=True).stdout)
    tags = built["tags"]
    assert all(t.split(":", 1)[1].startswith("top-") and t.endswith("-arm64") for t in tags), tags
    assert engine.platform(tags[0]) == "linux/arm64"
    base = built["labels"]["org.opencontainers.image.base.name"]
    assert base.split(":", 1)[1].startswith("cu130-") and base.endswith("-arm64")  # cu130's immutable arm64 tag
    assert engine.platform(base) == "linux/arm64"  # the base variant's image for the same platform
    assert engine.labels(base)["io.pinwheel.variant"] == "cu130"
    got = engine.run(tags[0], ["-m"], entrypoint="uname")
    assert got.stdout.strip() == "aarch64", got
