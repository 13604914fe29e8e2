"""Variants built for several container platforms: validation, per-platform Plans, `arch` gates."""
from __future__ import annotations

import pytest

from pinwheel import manifest
from pinwheel.index.target import container_arch, container_platform, platform_for, platform_machine
from pinwheel.manifest import ManifestError
from pinwheel.plan import plan_platforms, plan_variant
from pinwheel.workspace import Workspace
from tests.support.manifests import CUDA_13_GATE, manifest_yaml, variant

STEPS = """\
  - name: torch
    why: "base"
    packages:
      - {requirement: "torch==2.13.0"}
  - name: arm-only
    why: "arm64 kernels"
    gate: ONLY_ARM
    packages:
      - {requirement: "arm-kern==1.0"}
  - name: cuda13
    why: "cuda 13"
    gate: ENABLE_CUDA_13
    packages:
      - {requirement: "kern13==1.0"}
"""
GATES = CUDA_13_GATE + '  ONLY_ARM: {when: "arch == arm64", why: "GB200 nodes"}\n'
BOTH = ["linux/amd64", "linux/arm64"]


def parse(variants=None, gates=GATES, steps=STEPS):
    return manifest.parse(manifest_yaml(steps=steps, variants=variants or [variant("cu130", platforms=BOTH)],
                                        gates=gates), "wheels_manifest.yaml")


def error(**kw) -> str:
    with pytest.raises(ManifestError) as exc:
        parse(**kw)
    return str(exc.value)


def test_platform_tag_helpers():
    assert platform_machine("manylinux_2_36_x86_64") == "x86_64"
    assert container_platform("manylinux_2_28_aarch64") == "linux/arm64"
    assert container_arch("musllinux_1_2_x86_64") == "amd64"
    assert platform_for("manylinux_2_36_x86_64", "linux/arm64") == "manylinux_2_36_aarch64"
    assert platform_for("manylinux_2_28_aarch64", "linux/amd64") == "manylinux_2_28_x86_64"
    with pytest.raises(ValueError):
        platform_for("manylinux_2_36_x86_64", "linux/s390x")


def test_platforms_default_is_the_platform_tag():
    m = parse(variants=[variant("cu130")])
    v = m.variant("cu130")
    assert v.platforms == () and v.container_platforms == ("linux/amd64",) and v.arch == "amd64"
    plans = plan_platforms(m, "cu130")
    assert len(plans) == 1 and plans[0].platform_arch is None and plans[0] == plan_variant(m, "cu130")


def test_each_platform_gets_its_target_gates_and_lock_dir():
    m = parse()
    amd, arm = plan_platforms(m, "cu130")
    assert (amd.target.platform, arm.target.platform) == ("manylinux_2_36_x86_64", "manylinux_2_36_aarch64")
    assert amd.target.marker_environment()["platform_machine"] == "x86_64"
    assert arm.target.marker_environment()["platform_machine"] == "aarch64"
    assert "manylinux_2_17_aarch64" in arm.target.platforms() and not any("x86_64" in p for p in arm.target.platforms())
    assert (amd.container_platform, arm.container_platform) == ("linux/amd64", "linux/arm64")
    assert (amd.platform_arch, arm.platform_arch) == (None, "arm64")
    assert (amd.label, arm.label) == ("cu130", "cu130 linux/arm64")
    # the arch gate holds on arm64 only; the CUDA gate on both
    assert amd.build_args == {"VARIANT": "cu130", "ENABLE_CUDA_13": "1", "ONLY_ARM": "0"}
    assert arm.build_args == {"VARIANT": "cu130", "ENABLE_CUDA_13": "1", "ONLY_ARM": "1"}
    assert [s.active for s in amd.steps] == [True, False, True]
    assert [s.active for s in arm.steps] == [True, True, True]
    ws = Workspace.of(m)
    assert ws.plan_lock_dir(amd) == ws.lock_dir("cu130") == ws.image_dir / "lock" / "cu130"
    assert ws.plan_lock_dir(arm) == ws.image_dir / "lock" / "cu130" / "arm64"
    assert plan_variant(m, "cu130", platform="linux/amd64") == amd
    assert plan_variant(m, "cu130", platform="linux/arm64") == arm


def test_an_aarch64_variant_builds_amd64_as_its_other_platform():
    m = parse(variants=[variant("arm", platform="manylinux_2_28_aarch64", platforms=["linux/arm64", "linux/amd64"])])
    own, other = plan_platforms(m, "arm")
    assert own.platform_arch is None and own.target.platform == "manylinux_2_28_aarch64"
    assert other.platform_arch == "amd64" and other.target.platform == "manylinux_2_28_x86_64"
    assert own.build_args["ONLY_ARM"] == "1" and other.build_args["ONLY_ARM"] == "0"


def test_arch_not_equal_gate():
    m = parse(gates=CUDA_13_GATE + '  ONLY_ARM: {when: "arch != amd64", why: "not x86"}\n')
    amd, arm = plan_platforms(m, "cu130")
    assert (amd.build_args["ONLY_ARM"], arm.build_args["ONLY_ARM"]) == ("0", "1")


def test_a_platform_the_variant_does_not_list_is_refused():
    m = parse(variants=[variant("cu130")])
    with pytest.raises(ManifestError, match=r"wheels_manifest.yaml:\d+: variants.cu130.platforms: .*linux/arm64"):
        plan_variant(m, "cu130", platform="linux/arm64")


@pytest.mark.parametrize("platforms, message", [
    (["linux/arm64"], r":\d+: variants.cu130.platforms: must list linux/amd64, the platform of variants.cu130.platform"),
    (["linux/amd64", "linux/s390x"], r":\d+: variants.cu130.platforms\[1\]: 'linux/s390x' is not a container platform"),
    (["linux/amd64", "linux/amd64"], r":\d+: variants.cu130.platforms\[1\]: linux/amd64 is listed twice"),
    ([], r":\d+: variants.cu130.platforms: needs at least 1 item"),
    ("linux/amd64", r":\d+: variants.cu130.platforms: must be a list"),
])
def test_platforms_errors_carry_file_and_line(platforms, message):
    assert pytest.raises(ManifestError, parse, variants=[variant("cu130", platforms=platforms)]).match(
        r"^wheels_manifest.yaml" + message)


@pytest.mark.parametrize("when", ["arch >= arm64", "arch == riscv64", "arch == 13"])
def test_bad_arch_gate(when):
    msg = error(gates=CUDA_13_GATE + f'  ONLY_ARM: {{when: "{when}", why: "x"}}\n')
    assert msg.startswith("wheels_manifest.yaml:") and "gates.ONLY_ARM.when: arch gates read" in msg


def test_unknown_gate_variable_lists_arch():
    msg = error(gates=CUDA_13_GATE + '  ONLY_ARM: {when: "os == linux", why: "x"}\n')
    assert "variables: cuda, python, torch, arch" in msg


LOCAL_STEPS = """\
  - name: local-kernels
    why: "in-house"
    packages:
      - requirement: "flash-mla==1.0.0"
        why: "built here"
        local: {glob: "flash_mla-*.whl", if_missing: fail}
"""


def wheels_side_by_side(tmp_path):
    d = tmp_path / "wheels"
    d.mkdir()
    for arch in ("x86_64", "aarch64"):
        (d / f"flash_mla-1.0.0-cp311-cp311-linux_{arch}.whl").write_bytes(b"x")
    return d


def test_per_arch_local_wheels_are_one_match_per_platform(tmp_path):
    from pinwheel.image.build import BuildInputs, assemble_context, check_local_wheels
    from pinwheel.lock.read import missing_local_wheels

    wheels = wheels_side_by_side(tmp_path)
    m = parse(steps=LOCAL_STEPS, gates="")
    amd, arm = plan_platforms(m, "cu130")
    assert [w.name for w in amd.local_wheels(wheels, "flash_mla-*.whl")] == ["flash_mla-1.0.0-cp311-cp311-linux_x86_64.whl"]
    assert [w.name for w in arm.local_wheels(wheels, "flash_mla-*.whl")] == ["flash_mla-1.0.0-cp311-cp311-linux_aarch64.whl"]
    for plan in (amd, arm):
        inputs = BuildInputs(tmp_path, tmp_path / "images", tmp_path / "lock", wheels)
        assert check_local_wheels(plan, inputs) == []  # the "more than one wheel" guard counts this arch only
        assert missing_local_wheels(plan, wheels) == set()
    # the build context of each platform holds only its own wheel
    image_dir = tmp_path / "images"
    (image_dir).mkdir()
    (image_dir / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "lock").mkdir()
    context = tmp_path / "ctx"
    context.mkdir()
    assemble_context(arm, BuildInputs(tmp_path, image_dir, tmp_path / "lock", wheels), context)
    assert sorted(p.relative_to(context).as_posix() for p in (context / "wheels").rglob("*")) == [
        "wheels/local-kernels", "wheels/local-kernels/flash_mla-1.0.0-cp311-cp311-linux_aarch64.whl"]
    # a variant without platforms counts every match, as before
    single = plan_variant(parse(variants=[variant("cu130")], steps=LOCAL_STEPS, gates=""), "cu130")
    assert len(single.local_wheels(wheels, "flash_mla-*.whl")) == 2
    from pinwheel.image.build import BuildError
    with pytest.raises(BuildError, match="more than one wheel"):
        check_local_wheels(single, BuildInputs(tmp_path, image_dir, tmp_path / "lock", wheels))
