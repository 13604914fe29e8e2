"""A variant built FROM another variant's image (base_variant), when variants list platforms.

Each platform starts FROM the base variant's image for the same platform, so the manifest refuses a
base variant that is not built for all of them (file:line: key, exit 2). The build order is checked
behind the engine's one adapter: the arm64 image of `top` is built FROM the arm64 image of `sys`.
"""
from __future__ import annotations

import re
import sys

import pytest

from tests.support.manifests import assert_refused_at, load_text
from pinwheel import cli
from pinwheel.commands.build import build_variant
from pinwheel.commands.publish import variant_tags
from pinwheel.image.build import base_variant_plan
from pinwheel.plan import plan_variant

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
BOTH = "[linux/amd64, linux/arm64]"


def manifest_text(sys_platforms: str | None = BOTH, top_platforms: str | None = BOTH,
                  top_platform: str = "manylinux_2_36_x86_64") -> str:
    def listed(p: str | None) -> str:
        return f"\n    platforms: {p}" if p else ""
    return f"""\
manifest_version: 1
image: {{name: demo, repository: pinwheel/demo, installer: pip}}  # the test index has the host's uv only
variants:
  sys:
    cuda: "13.0"
    torch: "2.0"
    python: "{PY}"
    platform: manylinux_2_36_x86_64{listed(sys_platforms)}
    base: "pinwheel/base:bookworm-py311"
    tag: "sys-{{date}}"
  top:
    cuda: "13.0"
    torch: "2.0"
    python: "{PY}"
    platform: {top_platform}{listed(top_platforms)}
    base_variant: sys
    tag: "top-{{date}}"
wheel_sets:
  - name: core
    why: "one pure wheel"
    packages:
      - {{requirement: "pwt-pure==1.0"}}
"""


def test_a_platform_the_base_variant_lacks_is_refused_at_the_platforms_line(tmp_path):
    text = manifest_text(sys_platforms=None)
    line = text.splitlines().index(f"    platforms: {BOTH}") + 1
    assert_refused_at(text, tmp_path, line, "variants.top.platforms",
                      "linux/arm64: variant top is built there FROM variant sys's image, which is built for "
                      "linux/amd64 only; add linux/arm64 to variants.sys.platforms, or build top without it")


def test_an_arm64_variant_on_an_amd64_base_variant_is_refused_at_base_variant(tmp_path):
    text = manifest_text(sys_platforms=None, top_platforms=None, top_platform="manylinux_2_36_aarch64")
    line = text.splitlines().index("    base_variant: sys") + 1
    assert_refused_at(text, tmp_path, line, "variants.top.base_variant",
                      "linux/arm64: variant top is built there FROM variant sys's image")


def test_the_cli_says_where_and_exits_2(tmp_path, capsys):
    (tmp_path / "wheels_manifest.yaml").write_text(manifest_text(sys_platforms=None))
    assert cli.main(["--manifest", str(tmp_path / "wheels_manifest.yaml"), "render", "--check"]) == 2
    err = capsys.readouterr().err
    assert "wheels_manifest.yaml:16: variants.top.platforms: linux/arm64: variant top is built there" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("sys_platforms,top_platforms", [(BOTH, BOTH), (BOTH, None), (None, None)])
def test_accepted_where_the_base_variant_has_every_platform(tmp_path, sys_platforms, top_platforms):
    m = load_text(manifest_text(sys_platforms, top_platforms), tmp_path)
    for platform in m.variant("top").container_platforms:
        base = base_variant_plan(m, plan_variant(m, "top", platform=platform))
        assert (base.variant.name, base.container_platform) == ("sys", platform)


def test_the_base_plan_is_the_platforms_own(tmp_path):
    m = load_text(manifest_text(), tmp_path)
    base = base_variant_plan(m, plan_variant(m, "top", platform="linux/arm64"))
    assert base.platform_arch == "arm64" and base.target.platform == "manylinux_2_36_aarch64"
    own = base_variant_plan(m, plan_variant(m, "top"))
    assert own.platform_arch is None and own.target.platform == "manylinux_2_36_x86_64"


class RecordingEngine:
    """The engine adapter's calls a build makes: builds recorded; every base image is there, with an id
    of its own (what the image's inputs name as the base's digest)."""

    def __init__(self):
        self.builds: list[dict] = []

    def image_exists(self, ref: str) -> bool:
        return True

    def repo_digest(self, ref: str) -> None:
        return None  # built here, never pushed

    def image_id(self, ref: str) -> str:
        import hashlib

        return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()

    def build(self, context, dockerfile, *, tags, labels, build_args, secrets, target, progress, platform):
        self.builds.append({"tags": list(tags), "base": build_args["BASE"], "platform": platform,
                            "dockerfile": dockerfile.read_text()})
        return f"sha256:{len(self.builds):064d}"


@pytest.fixture
def project(local_index, tmp_path, monkeypatch, local_project):
    local_index.add("pwt-pure", "1.0")
    root = local_project(local_index.serve())
    (root / "wheels_manifest.yaml").write_text(manifest_text())
    args = ["--manifest", str(root / "wheels_manifest.yaml")]
    assert cli.main([*args, "render"]) == 0
    assert cli.main([*args, "lock", "--resolver", "uv"]) == 0
    return root


@pytest.mark.parametrize("platform,arch", [("linux/arm64", "arm64"), ("linux/amd64", None)])
def test_each_platform_is_built_from_the_base_variants_image_for_it(project, platform, arch):
    from pinwheel import manifest

    m = manifest.load(project / "wheels_manifest.yaml")
    engine = RecordingEngine()
    built = build_variant(m, plan_variant(m, "top", platform=platform), engine, "image", progress="quiet")
    first, second = engine.builds
    assert (first["platform"], second["platform"]) == (platform, platform)
    suffix = f"-{arch}" if arch else ""
    assert first["base"] == f"pinwheel/base:bookworm-py311{suffix}"  # sys: the bootstrap base of that arch
    assert all(t.startswith("pinwheel/demo:sys-") and t.endswith(suffix) for t in first["tags"])
    immutable = first["tags"][1]
    assert re.fullmatch(rf"pinwheel/demo:sys-[0-9a-f]{{12}}{suffix}", immutable), immutable
    assert second["base"] == immutable  # top: FROM the image of sys just built, by its immutable tag
    assert all(t.startswith("pinwheel/demo:top-") and t.endswith(suffix) for t in second["tags"])
    assert built.image_id == "sha256:" + "2".zfill(64)


@pytest.mark.parametrize("platform", ["linux/arm64", "linux/amd64"])
def test_publish_names_the_tags_the_build_gave_each_platform(project, platform):
    """publish finds each platform's image by the tags its build gave it: the content tag of `top` hashes
    the base variant's image for that same platform, as the build started FROM it."""
    from pinwheel import manifest

    m = manifest.load(project / "wheels_manifest.yaml")
    plan = plan_variant(m, "top", platform=platform)
    built = build_variant(m, plan, RecordingEngine(), "image", progress="quiet")
    assert variant_tags(m, plan, RecordingEngine())[1] == built.tags[1]
